"""The tree's shape, checked: every git command line in orchestrator/vcs/ (nowhere else runs
git), and no import cycle among orchestrator's modules."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "orchestrator"
_RUNNERS = {"git", "git_bytes", "succeeds"}  # vcs/runner.py: what runs git


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _git_lines(tree: ast.AST) -> list[int]:
    """Lines that build or run a git command: a call of the git runner, a method `.git(...)`,
    an argv list starting with "git", or subprocess given one."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = ""
            if isinstance(f, ast.Name):
                name = f.id
            elif isinstance(f, ast.Attribute):
                name = f.attr
            if (
                name in _RUNNERS
                and node.args
                and isinstance(node.args[0], (ast.Constant, ast.Starred))
            ):
                found.append(node.lineno)
        if (
            isinstance(node, ast.List)
            and node.elts
            and isinstance(node.elts[0], ast.Constant)
            and node.elts[0].value == "git"
        ):
            found.append(node.lineno)
    return found


def test_every_git_command_line_is_in_vcs():
    outside = {
        f"{path.relative_to(ROOT.parent)}:{line}"
        for name, path in _modules().items()
        if not name.startswith("orchestrator.vcs")
        for line in _git_lines(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert not outside, f"git command lines outside orchestrator/vcs/: {sorted(outside)}"


def test_the_git_check_finds_one():
    """The check itself can fail: each form it looks for is found."""
    code = 'git("log")\nrepo.git("show", x)\nsubprocess.run(["git", "config"])\ngit_bytes(*args)\n'
    assert sorted(_git_lines(ast.parse(code))) == [1, 2, 3, 4]
    assert _git_lines(ast.parse("run(argv)\nrepo.read_blob(c, p)\n")) == []


def test_vcs_runs_every_git_command_with_a_timeout():
    runner = (ROOT / "vcs" / "runner.py").read_text()
    assert re.search(r"timeout = LOCAL_TIMEOUT_S if timeout is None else timeout", runner)
    user = (ROOT / "vcs" / "user.py").read_text()
    assert "timeout=USER_TIMEOUT_S" in user and user.count("subprocess.run(") == 1


def _resolve(module: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _type_checking_only(tree: ast.AST) -> set[int]:
    """Lines of imports under `if TYPE_CHECKING:` (annotations only: no import at run time)."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            lines |= {
                n.lineno for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))
            }
    return lines


def import_graph(type_checking: bool = False) -> dict[str, set[str]]:
    """module -> the orchestrator modules it imports at run time (at the top or inside a
    function); with `type_checking`, those imported under `if TYPE_CHECKING:` too."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = set() if type_checking else _type_checking_only(tree)
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, path.name == "__init__.py", node)
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names
                ]
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != name:
                    graph[name].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles (including imports inside functions): " + "; ".join(
        " <-> ".join(c) for c in found
    )


def test_the_cycle_check_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def package_of(module: str) -> str:
    """A module's node in the package graph: orchestrator.X for anything in subpackage X; a
    top-level module (orchestrator.config) is its own node."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph folded into packages: X -> Y when a module of X imports one of Y."""
    out: dict[str, set[str]] = {package_of(m): set() for m in graph}
    for module, imported in graph.items():
        for target in imported:
            if package_of(target) != package_of(module):
                out[package_of(module)].add(package_of(target))
    return out


def test_no_package_import_cycles():
    """Packages form layers: no two import each other, even through other packages or only for
    the type checker (a cycle of packages needs no cycle of files)."""
    found = cycles(package_graph(import_graph(type_checking=True)))
    assert not found, "package import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_no_file_import_cycles_even_for_the_type_checker():
    found = cycles(import_graph(type_checking=True))
    assert not found, "import cycles (TYPE_CHECKING imports included): " + "; ".join(
        " <-> ".join(c) for c in found
    )


def test_the_package_check_finds_a_cycle_no_file_cycle_shows():
    graph = {
        "orchestrator.a.x": {"orchestrator.b.y"},
        "orchestrator.b.y": set(),
        "orchestrator.b.z": {"orchestrator.a.w"},
        "orchestrator.a.w": set(),
        "orchestrator.top": {"orchestrator.a"},
        "orchestrator.a": set(),
    }
    assert cycles(graph) == []
    assert cycles(package_graph(graph)) == [["orchestrator.a", "orchestrator.b"]]
    assert package_graph(graph)["orchestrator.top"] == {"orchestrator.a"}
    del graph["orchestrator.b.z"]
    assert cycles(package_graph(graph)) == []


# the base modules the model may build on: they import only one another (checked below)
_MODEL_BASE = {
    "orchestrator.errors",
    "orchestrator.publish",
    "orchestrator.records",
    "orchestrator.redact",
    "orchestrator.untrusted",
}


def test_the_model_is_a_leaf():
    """orchestrator/model/ (the results records, the value types, the layouts) imports no package
    of the tool, only the base modules; report/, verdicts/, backends/, upstream/ and progress.py
    build on it."""
    graph = import_graph(type_checking=True)
    for module, imported in graph.items():
        if package_of(module) == "orchestrator.model":
            outside = {t for t in imported if package_of(t) != "orchestrator.model"}
            assert outside <= _MODEL_BASE, f"{module} imports {sorted(outside - _MODEL_BASE)}"
    for base in _MODEL_BASE:
        assert graph[base] <= _MODEL_BASE, f"{base} imports {sorted(graph[base] - _MODEL_BASE)}"
    users = {
        package_of(m) for m, imported in graph.items() if "orchestrator.model.results" in imported
    }
    for user in ("report", "verdicts", "backends", "upstream", "progress"):
        assert f"orchestrator.{user}" in users


def _function_imports(tree: ast.AST) -> list[ast.stmt]:
    return [
        n
        for f in ast.walk(tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
        for n in ast.walk(f)
        if isinstance(n, (ast.Import, ast.ImportFrom))
    ]


def test_an_import_inside_a_function_says_why():
    """Only an optional or heavy dependency, or start-up time, puts an import inside a function,
    and the line (or the one above) says so. commands/ and cli.py import their work inside
    run()/main() by rule (commands/__init__.py: `--help` loads every command module)."""
    silent = []
    for name, path in _modules().items():
        if name.startswith("orchestrator.commands") or name == "orchestrator.cli":
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in _function_imports(ast.parse("\n".join(lines))):
            here, above = lines[node.lineno - 1], lines[node.lineno - 2].strip()
            if "#" not in here and not above.startswith("#"):
                silent.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    assert not silent, f"imports inside functions without a reason: {silent}"


MATRIX_ORDER = [
    "fetch",
    "apply",
    "plan",
    "configure",
    "early controls",
    "build",
    "test",
    "control",
    "mutants",
    "competing",
    "training",
    "conclude",
    "store",
]


def test_a_step_that_returns_stop_ends_the_pipeline():
    """A cache hit ends the cell's steps by apply's return value (a Stop, no flag on the context);
    otherwise every step runs in the declared order, each result recorded (in ctx.results and by
    the step's own `record`) before the next step runs, so a later step reads it."""
    from types import SimpleNamespace

    from orchestrator.run import cell
    from orchestrator.run.pipeline import Step, Stop, run_steps

    assert [s.name for s in cell.MATRIX_STEPS] == MATRIX_ORDER
    assert [s.name for s in cell.BUNDLE_STEPS] == ["plan", "configure", "build", "test"]

    def fake(name, returns):
        def run(ctx):
            ran.append((name, dict(ctx.results)))
            return returns

        def record(ctx, result):
            recorded.append((name, result))

        return Step(name, run, record)

    ran, recorded = [], []
    steps = [
        fake(s.name, Stop("cached") if s.name == "apply" else s.name) for s in cell.MATRIX_STEPS
    ]

    def context():
        """Enough of a CellContext: its results, and its one timing channel."""
        timings: dict = {}
        return SimpleNamespace(
            results={}, timings=timings, took=lambda name, s: timings.__setitem__(name, s)
        )

    ctx = context()
    assert run_steps(ctx, steps) == Stop("cached")
    assert [n for n, _ in ran] == ["fetch", "apply"]
    assert ctx.results == {"fetch": "fetch"} and recorded == [("fetch", "fetch")]
    ran, recorded = [], []
    steps = [fake(s.name, f"{s.name} result") for s in cell.MATRIX_STEPS]
    ctx = context()
    assert run_steps(ctx, steps) is None
    assert [n for n, _ in ran] == MATRIX_ORDER
    # each step saw every earlier step's result and none of the later ones
    for i, (name, seen) in enumerate(ran):
        assert seen == {n: f"{n} result" for n in MATRIX_ORDER[:i]}, name
    assert recorded == [(n, f"{n} result") for n in MATRIX_ORDER]
    assert set(ctx.timings) == {f"step {n}" for n in MATRIX_ORDER}


def option_asserts(source: str) -> list[int]:
    """Lines of `source` with an `assert X is not None` on an option (an attribute of ctx,
    options or opts, or a field of CellOptions or RunOptions), or with `**vars(`."""
    from dataclasses import fields

    from orchestrator.run.options import CellOptions, RunOptions

    names = {f.name for f in (*fields(CellOptions), *fields(RunOptions))}
    found = [n for n, line in enumerate(source.splitlines(), 1) if "**vars(" in line]
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Assert):
            continue
        for test in ast.walk(node.test):
            if not isinstance(test, ast.Compare) or not isinstance(test.ops[0], ast.IsNot):
                continue
            subject = test.left
            if not isinstance(subject, ast.Attribute):
                continue
            base = subject.value
            while isinstance(base, ast.Attribute):
                base = base.value
            on_options = isinstance(base, ast.Name) and base.id in ("ctx", "options", "opts")
            if subject.attr in names or on_options:
                found.append(node.lineno)
    return sorted(found)


def test_no_assert_on_options_and_no_vars_spread():
    """Options are derived whole, once per cell (RunOptions.for_cell): nothing asserts an option
    into being, and no record is filled from another's fields with **vars()."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        lines = option_asserts(path.read_text(encoding="utf-8"))
        found += [f"{path.relative_to(ROOT.parent)}:{n}" for n in lines]
    assert not found, f"asserts on options or **vars(...): {found}"


def test_the_option_assert_check_finds_them():
    source = (
        "def f(ctx, options):\n"
        "    assert ctx.repo is not None\n"
        "    assert options.n_jobs is not None and True\n"
        "    assert rec.series is not None\n"
        "    assert rec.build is not None\n"
        "    return C(**vars(options))\n"
    )
    assert option_asserts(source) == [2, 3, 4, 6]


def test_the_training_evidence_has_no_configure_or_cache_of_its_own():
    """finetune/ runs the cell's configure step and keeps its results in run/resultcache.py: no
    cmake configure, no result-cache writer, no atomic write of its own."""
    own = []
    for path in sorted((ROOT / "finetune").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        for needle in ("cmake.configure(", "def store(", "def _write_atomic(", "mkstemp("):
            if needle in text:
                own.append(f"{path.name}: {needle}")
    assert not own, f"finetune/ has its own configure or cache: {own}"


def test_help_imports_no_record_library():
    """`ggml-patch --help` builds every command's arguments: none of them may pull in pydantic (the
    records load where documents are read or written), which doubled the start-up's CPU time."""
    import subprocess
    import sys

    code = (
        "import sys; from orchestrator import cli; cli._parser(); print(sorted(m for m in "
        "sys.modules if m.split('.')[0] == 'pydantic'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


# a module still imported under an abbreviation: debt, never added to (empty since finetune's
# readers import its concern modules' names)
_ALIAS_DEBT: dict[str, set[str]] = {}


def short_aliases(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The aliases under which `name` imports one of the tool's modules that abbreviate it
    (shorter than 4 characters: `views as B`, `results as ft`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = _resolve(name, path.name == "__init__.py", node)
            aliased = [(f"{base}.{a.name}", a.asname) for a in node.names]
        elif isinstance(node, ast.Import):
            aliased = [(a.name, a.asname) for a in node.names]
        else:
            continue
        for module, alias in aliased:
            if alias and module in mods and len(alias) < 4:
                found.add(alias)
    return found


def test_no_module_is_imported_under_an_abbreviation():
    mods = _modules()
    found = {}
    for name, path in mods.items():
        aliases = short_aliases(name, path, mods) - _ALIAS_DEBT.get(name, set())
        if aliases:
            found[name] = sorted(aliases)
    assert not found, f"modules imported under one- or two-letter aliases: {found}"
    for name, debt in _ALIAS_DEBT.items():
        assert short_aliases(name, mods[name], mods) == debt, f"{name}: remove it from _ALIAS_DEBT"


def test_the_alias_check_finds_one(tmp_path):
    mods = {"orchestrator.upstream.views": tmp_path, "orchestrator.upstream.cover": tmp_path}
    code = tmp_path / "x.py"
    code.write_text("from . import views as B\nfrom . import cover\nimport numpy as np\n")
    assert short_aliases("orchestrator.upstream.x", code, mods) == {"B"}
    code.write_text("from orchestrator.upstream import cover as C\n")
    assert short_aliases("orchestrator.upstream.x", code, mods) == {"C"}


# a name that still means two things: debt, never added to (finetune.json's SeriesInfo keeps its
# name while it names the definition in that file's schema)
_NAME_DEBT = {"SeriesInfo"}


def declared_types(tree: ast.Module) -> set[str]:
    """The classes and `Annotated` type aliases a module declares at its top level."""
    found = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            found.add(node.name)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Subscript):
            if ast.unparse(node.value.value) == "Annotated":
                found |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return found


def test_a_type_name_names_one_thing():
    """`Commit` (the 40-hex type, not the series' commit: upstream/views.SeriesCommit), `Series`
    (the patch series, not matrix.yaml's key: config.SeriesConfig), `Name`, `Sha256`: each type
    name is declared in one module."""
    where: dict[str, list[str]] = {}
    for name, path in _modules().items():
        for declared in declared_types(ast.parse(path.read_text(encoding="utf-8"))):
            where.setdefault(declared, []).append(name)
    twice = {n: sorted(m) for n, m in where.items() if len(m) > 1 and n not in _NAME_DEBT}
    assert not twice, f"one type name, several declarations: {twice}"
    assert where["Commit"] == ["orchestrator.model.values"]
    assert where["Series"] == ["orchestrator.patchset.series"]
    for name in _NAME_DEBT:
        assert len(where.get(name, [])) > 1, (
            f"{name} names one thing now: remove it from _NAME_DEBT"
        )


def test_the_name_check_finds_a_type_alias_and_a_class():
    code = (
        "Name = Annotated[str, X]\n"
        "class Commit:\n    pass\n"
        "Other = dict[str, int]\n"
        "if T:\n    A = 1\n"
    )
    assert declared_types(ast.parse(code)) == {"Name", "Commit"}
