"""Shared by the security and reliability tests (issue 16): an isolated environment (HOME, the
cache and pip's index all under tmp_path, no network), a tiny `local` target the series renders
into without any download, and the tool run as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]  # the checkout
# nothing listens on port 9 (discard): never the internet
CLOSED_INDEX = "http://127.0.0.1:9/simple"

# ggml's own tests/CMakeLists.txt shape around test-opt:
# the series' registration hunk renders into it
TESTS_CMAKE = (
    "    #\n    # test-opt\n    set(TEST_TARGET test-opt)\n"
    "    add_executable(${TEST_TARGET} ${TEST_TARGET}.cpp)\n"
    '    set_property(TEST ${TEST_TARGET} PROPERTY ENVIRONMENT "X")\n'
)


def isolated_env(tmp: Path, **extra: str) -> dict[str, str]:
    """The environment a test runs the tool in: nothing of
    the real user's home, cache or pip index."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "GITHUB_TOKEN",
            "GH_TOKEN",
            "GGML_PATCH_CACHE",
            "PIP_INDEX_URL",
            "PIP_EXTRA_INDEX_URL",
            "PIP_CONFIG_FILE",
            "XDG_CONFIG_HOME",
            "XDG_CACHE_HOME",
            "GGML_PATCH_DEBUG",
        )
    }
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        GGML_PATCH_CACHE=str(tmp / "default-cache"),
        PIP_INDEX_URL=CLOSED_INDEX,
        PIP_CONFIG_FILE=os.devnull,
        PYTHONPATH=str(ROOT),
    )
    env.update(extra)
    return env


@pytest.fixture
def isolated(tmp_path, monkeypatch) -> dict[str, str]:
    """The same isolation for in-process calls: HOME,
    GGML_PATCH_CACHE and pip's index under tmp_path."""
    env = isolated_env(tmp_path)
    for k in (
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "PIP_EXTRA_INDEX_URL",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
    ):
        monkeypatch.delenv(k, raising=False)
    for k in ("HOME", "GGML_PATCH_CACHE", "PIP_INDEX_URL", "PIP_CONFIG_FILE"):
        monkeypatch.setenv(k, env[k])
    return env


@dataclass
class Proc:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def error_line(self, code: int) -> str:
        """The one stderr line of a refused command (exit `code`)."""
        assert self.returncode == code, (self.returncode, self.stdout[-2000:], self.stderr[-3000:])
        lines = self.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ggml-patch: error: "), self.stderr
        assert "internal error" not in self.stderr and "Traceback" not in self.stderr
        return lines[0]


def tool(*args: str, env: dict[str, str], cwd: Optional[Path] = None, timeout: float = 120) -> Proc:
    """`python -m orchestrator ARGS` in a child process, as a user runs it."""
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "orchestrator", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )
    return Proc(p.returncode, p.stdout, p.stderr, time.monotonic() - t0)


def tiny_tree(path: Path) -> Path:
    """A ggml-layout tree with just what rendering the series needs (no per-step API: `status`
    says "not applicable", quickly and offline)."""
    (path / "src").mkdir(parents=True)
    (path / "tests").mkdir()
    (path / "src" / "ggml-opt.cpp").write_text("// ggml-opt\n")
    (path / "tests" / "CMakeLists.txt").write_text(TESTS_CMAKE)
    return path


def tiny_matrix(
    tmp: Path,
    source: Optional[str] = None,
    backends: str = "  cpu: {}\n",
    name: str = "matrix.yaml",
) -> Path:
    """A matrix with one target `tiny` (a `local` source by default) and the repository's series."""
    if source is None:
        tree = tmp / "tiny" if not (tmp / "tiny").exists() else tmp / "tiny"
        if not tree.exists():
            tiny_tree(tree)
        source = f"{{kind: local, path: '{tree}'}}"
    m = tmp / name
    m.write_text(
        f"queue: {{path: '{ROOT / 'patches'}', layout: llama.cpp}}\n"
        f"native_tests: '{ROOT / 'native_tests'}'\n"
        f"targets:\n  tiny:\n    layout: ggml\n    source: {source}\n"
        f"backends:\n{backends}"
        "profiles:\n  default: {targets: [tiny], backends: [cpu]}\n"
    )
    return m


def files_containing(root: Path, needle: str) -> list[Path]:
    """Every regular file under `root` whose bytes contain `needle`."""
    out = []
    for f in Path(root).rglob("*"):
        if f.is_file() and not f.is_symlink():
            try:
                if needle.encode() in f.read_bytes():
                    out.append(f)
            except OSError:
                pass
    return out


def tree_snapshot(root: Path) -> dict[str, bytes]:
    """Every file under `root` and its bytes (directories as empty entries)."""
    out = {}
    for p in sorted(Path(root).rglob("*")):
        rel = str(p.relative_to(root))
        out[rel] = p.read_bytes() if p.is_file() and not p.is_symlink() else b"<dir>"
    return out


def alias_bomb(levels: int) -> str:
    """The billion-laughs shape: each level a list of 9 aliases of the one before."""
    lines = ["a0: &a0 [lol,lol,lol,lol,lol,lol,lol,lol,lol]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


BOMB_276 = alias_bomb(6)  # 9^6 = 531441 strings from 276 bytes: took 121 s and 2.4 GB
BOMB_1K = alias_bomb(19)  # 9^19 from 1 KB: never ended
