"""The by-hand routes the tool is measured against ((a), (c), (f), (i), (l)) and `--plan`, which
resolves every route without building."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from orchestrator.cache import Cache
from orchestrator.patchset.render import rendered_for_target
from orchestrator.run.cmake import cmake_exe, jobs, ninja_exe

from .common import CHECK_MODULES, NEWCOMER_NOX, NO_CCACHE, ONE_TOPIC, ROOT, sh

# The by-hand route builds what upstream builds (test-opt, changed by the series) and the gate the
# way a contributor adds it by hand: native_tests/extra-programs.cmake as CMAKE_PROJECT_INCLUDE,
# as the tool does for the ggml layout (the gate is not part of the upstream series).
GATE_CMAKE = ROOT / "native_tests" / "extra-programs.cmake"
BY_HAND_TESTS = ("test-opt", "test-opt-dynamic-accum")
BY_HAND_TARGETS = ("llama.cpp", "ggml")  # matrix.yaml's targets the bench measures
LOADED_RERUN_ARGS = ("--parallel", "1")  # the loaded per-variant measure: one cell at a time


def by_hand_configure(layout: str, tree: Path, build: Path) -> list[str]:
    """cmake's configure of the by-hand route: the layout's own test build, Release, no ccache."""
    if layout == "llama.cpp":
        flags = ["-DLLAMA_BUILD_TESTS=ON", "-DLLAMA_CURL=OFF"]
    else:
        flags = ["-DGGML_BUILD_TESTS=ON"]
    return [
        cmake_exe(),
        "-G",
        "Ninja",
        "-S",
        str(tree),
        "-B",
        str(build),
        f"-DCMAKE_MAKE_PROGRAM={ninja_exe()}",
        "-DCMAKE_BUILD_TYPE=Release",
        "-DGGML_CCACHE=OFF",
        f"-DCMAKE_PROJECT_INCLUDE={GATE_CMAKE}",
        *flags,
    ]


def by_hand_build(build: Path, tests: tuple[str, ...] = BY_HAND_TESTS) -> list[str]:
    return [cmake_exe(), "--build", str(build), "-j", str(jobs()), "--target", *tests]


def by_hand(
    work: Path,
    matrix,
    cache: Cache,
    target_name: str,
    variants: tuple[str, ...] = ("patched", "control"),
    tests: tuple[str, ...] = BY_HAND_TESTS,
) -> dict:
    """Clone the base, git am the series, configure/build/run the standard way; then the same
    again for a control tree with the fix reverted by hand, in its own build directory."""
    target = matrix.target(target_name)
    rendered, snap = rendered_for_target(matrix, cache, target)
    series_dir = work / f"{target_name}-series"
    series_dir.mkdir(parents=True)
    files = []
    for p in rendered.patches:
        (series_dir / p.name).write_text(p.text())
        files.append(str(series_dir / p.name))
    result = {}
    for variant in variants:
        tree = work / f"{target_name}-{variant}"
        sh(["git", "clone", "-q", "--no-checkout", str(cache.snapshots_git), str(tree)])
        sh(["git", "-C", str(tree), "checkout", "-q", "--detach", snap.commit])
        env = {"GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost"}
        sh(["git", "-C", str(tree), "am", "-q", *files], env=env)
        if variant == "control":
            diff = subprocess.run(
                ["git", "-C", str(tree), "diff", snap.commit, "HEAD", "--", *rendered.fix_paths()],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            subprocess.run(
                ["git", "-C", str(tree), "apply", "-R"], input=diff, text=True, check=True
            )
        build = work / f"{target_name}-{variant}-build"
        t_cfg = sh(
            by_hand_configure(target.layout, tree, build),
            env=NO_CCACHE,
            log=work / f"{target_name}-{variant}-configure.log",
        )
        t_build = sh(
            by_hand_build(build, tests),
            env=NO_CCACHE,
            log=work / f"{target_name}-{variant}-build.log",
        )
        t_run = 0.0
        for test in tests:
            t0 = time.monotonic()
            subprocess.run([str(build / "bin" / test)], capture_output=True, timeout=600)
            t_run += time.monotonic() - t0
        result[variant] = {
            "configure_s": round(t_cfg, 2),
            "build_s": round(t_build, 2),
            "tests_s": round(t_run, 2),
        }
    result["total_s"] = round(sum(sum(v.values()) for v in result.values()), 2)
    return result


def one_file_recompile(cache_dir: Path, cell: dict) -> float:
    """The floor for a control: touch the fix file, rebuild the same tree, run both tests."""
    cell_dir = cache_dir / "cells" / cell["cell"].replace("/", "-")
    src, build = cell_dir / "src", cell_dir / "build"
    fix = "ggml/src/ggml-opt.cpp" if cell["layout"] != "ggml" else "src/ggml-opt.cpp"
    (src / fix).touch()
    t = sh(by_hand_build(build), env=NO_CCACHE)
    for test in BY_HAND_TESTS:
        t0 = time.monotonic()
        subprocess.run([str(build / "bin" / test)], capture_output=True, timeout=600)
        t += time.monotonic() - t0
    return t


def mutants_by_hand(cache_dir: Path, cell: dict, matrix) -> dict:
    """Each mutant by hand in the cell's own tree (the bench's cache; a copied CMake tree would
    still build the original's absolute paths): `git apply` it, ninja the two tests (the tool
    judges a mutant by each test separately), run both; the file is put back afterwards, not timed.
    Seconds per mutant, and each mutant's split."""
    from orchestrator.model.layout import GATE_TEST, UPSTREAM_TEST, get_layout
    from orchestrator.verdicts.mutants import load_mutants

    cell_dir = cache_dir / "cells" / cell["cell"].replace("/", "-")
    src, build = cell_dir / "src", cell_dir / "build"
    series_layout, layout = get_layout(matrix.series_layout), get_layout(cell["layout"])
    each = []
    for m in load_mutants(matrix):
        patch = cell_dir / f"bench-{m.name}.patch"
        patch.write_text(m.rendered(series_layout, layout))
        t_apply = sh(["git", "-C", str(src), "apply", "--", str(patch)])
        try:
            t_build = sh([ninja_exe(), "-C", str(build), UPSTREAM_TEST, GATE_TEST], env=NO_CCACHE)
            t0 = time.monotonic()
            for test in (UPSTREAM_TEST, GATE_TEST):
                subprocess.run([str(build / "bin" / test)], capture_output=True, timeout=600)
            t_gate = time.monotonic() - t0
        finally:
            subprocess.run(
                ["git", "-C", str(src), "checkout", "HEAD", "--", *m.paths(series_layout, layout)],
                check=True,
            )
            patch.unlink()
        each.append(
            {
                "mutant": m.name,
                "topic": m.topic,
                "apply_s": round(t_apply, 3),
                "build_s": round(t_build, 3),
                "gate_s": round(t_gate, 3),
            }
        )
    total = sum(e["apply_s"] + e["build_s"] + e["gate_s"] for e in each)
    return {"per_mutant_s": round(total / len(each), 3) if each else None, "mutants": each}


def competing_by_hand(cache_dir: Path, cell: dict, matrix) -> dict:
    """Each competing fix by hand in the cell's own tree: the fix's files put back to the unfixed
    commit (not timed), `git apply` of the competing fix, ninja of both tests, both run (timed); the
    patched files put back afterwards (not timed). Seconds per competing fix."""
    from orchestrator.model.layout import GATE_TEST, UPSTREAM_TEST, get_layout
    from orchestrator.verdicts.competing import load_competing

    cell_dir = cache_dir / "cells" / cell["cell"].replace("/", "-")
    src, build = cell_dir / "src", cell_dir / "build"
    series_layout, layout = get_layout(matrix.series_layout), get_layout(cell["layout"])
    rendered, _ = rendered_for_target(matrix, Cache(cache_dir), matrix.target(cell["target"]))
    each = []
    for c in load_competing(matrix):
        # the whole queue with only the fix's own topic reverted, as the tool judges it
        topic = c.topic or rendered.topics[0]
        fix = topic_fix_patch(cell_dir, rendered, topic)
        paths = sorted({*c.paths(series_layout, layout), *topic_paths(rendered, topic)})
        subprocess.run(["git", "-C", str(src), "apply", "-R", "--", str(fix)], check=True)
        patch = cell_dir / f"bench-{c.name}.patch"
        patch.write_text(c.rendered(series_layout, layout))
        try:
            t_apply = sh(["git", "-C", str(src), "apply", "--", str(patch)])
            t_build = sh([ninja_exe(), "-C", str(build), UPSTREAM_TEST, GATE_TEST], env=NO_CCACHE)
            t0 = time.monotonic()
            for test in (UPSTREAM_TEST, GATE_TEST):
                subprocess.run([str(build / "bin" / test)], capture_output=True, timeout=600)
            t_tests = time.monotonic() - t0
        finally:
            subprocess.run(["git", "-C", str(src), "checkout", "HEAD", "--", *paths], check=True)
            patch.unlink()
        each.append(
            {
                "competing": c.name,
                "topic": topic,
                "apply_s": round(t_apply, 3),
                "build_s": round(t_build, 3),
                "tests_s": round(t_tests, 3),
            }
        )
    total = sum(e["apply_s"] + e["build_s"] + e["tests_s"] for e in each)
    return {"per_fix_s": round(total / len(each), 3) if each else None, "fixes": each}


def topic_fix_patch(cell_dir: Path, rendered, topic: str) -> Path:
    """The topic's own source hunks as one patch file (what its control reverts)."""
    patch = cell_dir / f"bench-control-{topic}.patch"
    patch.write_text("".join(f.text for f in rendered.topic_fix_diffs(topic)), encoding="utf-8")
    return patch


def topic_paths(rendered, topic: str) -> list[str]:
    return sorted({f.path for f in rendered.topic_fix_diffs(topic)})


def topic_controls_by_hand(cache_dir: Path, cell: dict, matrix) -> dict:
    """(l) each topic's control by hand in the cell's own tree (the whole queue applied): `git
    apply -R` of the topic's source hunks, ninja of both tests, both run (timed); the files put
    back afterwards (not timed). Seconds per topic."""
    cell_dir = cache_dir / "cells" / cell["cell"].replace("/", "-")
    src, build = cell_dir / "src", cell_dir / "build"
    rendered, _ = rendered_for_target(matrix, Cache(cache_dir), matrix.target(cell["target"]))
    out = {}
    for topic in rendered.topics:
        patch = topic_fix_patch(cell_dir, rendered, topic)
        try:
            t = sh(["git", "-C", str(src), "apply", "-R", "--", str(patch)])
            t += sh(by_hand_build(build), env=NO_CCACHE)
            for test in BY_HAND_TESTS:
                t0 = time.monotonic()
                subprocess.run([str(build / "bin" / test)], capture_output=True, timeout=600)
                t += time.monotonic() - t0
        finally:
            paths = topic_paths(rendered, topic)
            subprocess.run(["git", "-C", str(src), "checkout", "HEAD", "--", *paths], check=True)
            patch.unlink()
        out[topic] = round(t, 3)
    return out


def _defines(cmake_file: Path, target: str) -> bool:
    """Whether `cmake_file` builds the executable `target` (read, not configured): named, or
    one of the native_tests/ sources its globs take."""
    text = cmake_file.read_text(encoding="utf-8")
    if f"add_executable({target} " in text:
        return True
    return any(p.stem == target for p in _sources(cmake_file))


def _sources(cmake_file: Path) -> list[Path]:
    """The native_tests/ sources `cmake_file` compiles (its `${GGML_PATCH_NATIVE_TESTS}/x`,
    globs expanded)."""
    text = cmake_file.read_text(encoding="utf-8")
    found = re.findall(r"\$\{GGML_PATCH_NATIVE_TESTS\}/([\w.*-]+)", text)
    return sorted({f for pattern in found for f in cmake_file.parent.glob(pattern)})


def _named_sources(cmake_file: Path) -> list[str]:
    """The native_tests/ sources `cmake_file` names without a glob."""
    text = cmake_file.read_text(encoding="utf-8")
    found = re.findall(r"\$\{GGML_PATCH_NATIVE_TESTS\}/([\w.*-]+)", text)
    return sorted({n for n in found if "*" not in n})


def _plan_series(matrix, lines: list[str], need, topics: Optional[list[str]] = None) -> None:
    """`plan`'s routes that follow the series: the files it changes, each topic's control (l),
    the queue against one topic (m)."""
    from orchestrator.errors import ConfigError
    from orchestrator.model.layout import get_layout
    from orchestrator.patchset.files import load_series

    try:
        series = load_series(matrix, topics)
    except ConfigError as e:
        need(False, f"the series: {e}")
        return
    series_layout = get_layout(series.layout)
    upstream_test = f"{series_layout.tests_dir()}/test-opt.cpp"
    need(upstream_test in series.paths(), f"the series no longer changes {upstream_test}")
    fixes = [series_layout.to_ggml(f) for f in series.fix_paths()]
    # (c) touches this file in the tool's trees: the series must still change it
    need("src/ggml-opt.cpp" in fixes, "the series no longer changes ggml-opt.cpp")
    # (l): each topic's control by hand reverts its own source hunks
    for topic in series.topics:
        paths = sorted({f.path for f in series.topic_fix_diffs(topic)})
        need(bool(paths), f"(l) topic {topic!r}: no source hunks for its control to revert")
        lines.append(
            f"(l) {topic}: git apply -R of its hunks in {', '.join(paths)}; "
            f"ninja {' '.join(BY_HAND_TESTS)}; run both"
        )
    # (m): the one-topic run names a topic the default run applies, among others
    need(ONE_TOPIC in series.topics, f"(m) --topic {ONE_TOPIC}: not a topic the default runs")
    need(len(series.topics) > 1, "(m) the default run applies one topic: nothing to compare")
    lines.append(
        f"(m) ggml-patch matrix --backend cpu (topics {', '.join(series.topics)}) "
        f"against --topic {ONE_TOPIC}"
    )


def plan(matrix, out: Path, topics: Optional[list[str]] = None) -> tuple[list[str], list[str]]:
    """Every route's commands, targets and paths, resolved without building or configuring:
    (what each route will run, what no longer exists). Checks the targets against the files
    that define them and the files against this tree."""
    from orchestrator.errors import ConfigError
    from orchestrator.patchset.files import load_series
    from orchestrator.run.tree import native_programs
    from orchestrator.verdicts.competing import load_competing
    from orchestrator.verdicts.mutants import load_mutants

    lines: list[str] = []
    missing: list[str] = []

    def need(ok: bool, what: str) -> None:
        if not ok:
            missing.append(what)

    # the tests and training programs the queue's topics declare (topic.yaml)
    try:
        series = load_series(matrix, topics)
        tests, training = series.programs(), series.training_programs()
    except ConfigError:
        tests, training = BY_HAND_TESTS, ()  # _plan_series names the error
    # (a) by hand: upstream's test-opt (the series changes it) and the gate from native_tests/
    need(GATE_CMAKE.is_file(), f"{GATE_CMAKE}: the by-hand route's CMAKE_PROJECT_INCLUDE")
    if GATE_CMAKE.is_file():
        natives = native_programs(matrix.native_tests_dir)
        for program in (*(t for t in tests if t in natives), *training):
            need(_defines(GATE_CMAKE, program), f"{GATE_CMAKE}: no add_executable({program} ...)")
        for name in _named_sources(GATE_CMAKE):
            need((GATE_CMAKE.parent / name).is_file(), f"{GATE_CMAKE.parent / name}: missing")
    need(set(BY_HAND_TESTS) == set(tests), f"by-hand tests {BY_HAND_TESTS} != the tool's {tests}")
    _plan_series(matrix, lines, need, topics)
    for name in BY_HAND_TARGETS:
        target = matrix.target(name)
        tree, build = Path(f"<{name}-tree>"), Path(f"<{name}-build>")
        lines.append(f"(a) {name}: {' '.join(by_hand_configure(target.layout, tree, build))}")
        lines.append(f"(a) {name}: {' '.join(by_hand_build(build))}")
    # (h)'s reference: the by-hand first answer, test-opt only, in the patched ggml tree
    build = Path("<ggml-build>")
    lines.append(f"(h) by hand: {' '.join(by_hand_build(build, ('test-opt',)))}, run test-opt")
    lines.append(f"(h) newcomer: pip install {NEWCOMER_NOX} && nox -s matrix")
    for exe in (cmake_exe(), ninja_exe()):
        need(shutil.which(exe) is not None or Path(exe).is_file(), f"{exe}: not found")
    # (f) and (i): the variants the tool runs, each rebuilt by hand with the tool's two tests
    loaders = (("mutant", load_mutants), ("competing fix", load_competing))
    for kind, load in loaders:
        try:
            found = load(matrix)
        except ConfigError as e:
            missing.append(f"{kind}s: {e}")
            continue
        lines.append(f"(f/i) {len(found)} {kind}(s): git apply, ninja {' '.join(tests)}, run")
    # (j), (k), (h), (g): the files and sessions they name
    for rel in (*CHECK_MODULES, "tests/helpers/act.py", "tests/integration/test_drift_issue.py"):
        need((ROOT / rel).is_file(), f"{ROOT / rel}: missing")
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    for session in ("matrix", "evidence", "bundle", "bench"):
        need(f"def {session}(session" in noxfile, f"noxfile.py: no session {session!r}")
    # the tool refuses a results folder holding files it did not make: the bench stays out
    results = (ROOT / "results").resolve()
    inside = out.resolve() == results or results in out.resolve().parents
    need(not inside, f"--out {out}: inside {results}, which the tool's commands must own")
    lines.append(f"out: {out}")
    return lines, missing


def main_plan(matrix, out: Path) -> int:
    """`--plan`: print every route; exit 1 naming what no longer exists."""
    lines, missing = plan(matrix, out)
    print("\n".join(lines))
    for m in missing:
        print(f"bench: --plan: {m}", file=sys.stderr)
    return 1 if missing else 0
