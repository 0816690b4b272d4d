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
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name in _RUNNERS and node.args and isinstance(node.args[0], (ast.Constant, ast.Starred)):
                found.append(node.lineno)
        if isinstance(node, ast.List) and node.elts and isinstance(node.elts[0], ast.Constant) \
                and node.elts[0].value == "git":
            found.append(node.lineno)
    return found


def test_every_git_command_line_is_in_vcs():
    outside = {
        f"{path.relative_to(ROOT.parent)}:{line}"
        for name, path in _modules().items() if not name.startswith("orchestrator.vcs")
        for line in _git_lines(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert not outside, f"git command lines outside orchestrator/vcs/: {sorted(outside)}"


def test_the_git_check_finds_one():
    """The check itself can fail: each form it looks for is found."""
    code = 'git("log")\nrepo.git("show", x)\nsubprocess.run(["git", "config"])\ngit_bytes(*args)\n'
    assert sorted(_git_lines(ast.parse(code))) == [1, 2, 3, 4]
    assert _git_lines(ast.parse('run(argv)\nrepo.read_blob(c, p)\n')) == []


def test_vcs_runs_every_git_command_with_a_timeout():
    runner = (ROOT / "vcs" / "runner.py").read_text()
    assert re.search(r"timeout = LOCAL_TIMEOUT_S if timeout is None else timeout", runner)
    user = (ROOT / "vcs" / "user.py").read_text()
    assert "timeout=USER_TIMEOUT_S" in user and user.count("subprocess.run(") == 1
