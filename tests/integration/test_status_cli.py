"""ggml-patch status and refresh at the command line: bad input refused in one line before anything
is touched, an unreachable index a status of its own."""

import os

import pytest

from orchestrator.cache import Cache
from orchestrator.config import load_matrix
from orchestrator.drift.check import status_of_targets
from orchestrator.drift.status import UNREACHABLE

from ..helpers.forks import ROOT, git, write_matrix
from ..helpers.patches import bare_queue
from ..helpers.tools import run_tool

HDR = "From: A <a@example.com>\nSubject: [PATCH] x\n\nbody\n\n"


BAD_PATCHES = {
    "dotdot": HDR + "diff --git a/../etc/x b/../etc/x\nindex 1..2 100644\n--- "
    "a/../etc/x\n+++ b/../etc/x\n@@ -1 +1 @@\n-a\n+b\n",
    "absolute": HDR + "diff --git a//etc/passwd b//etc/passwd\nindex 1..2 100644\n--- "
    "a//etc/passwd\n+++ b//etc/passwd\n@@ -1 +1 @@\n-a\n+b\n",
    "binary": HDR
    + "diff --git a/ggml/x.bin b/ggml/x.bin\nnew file mode 100644\nindex 0000000..1234567\n"
    "GIT binary patch\nliteral 3\nKcmZ?wy0Hxa\n\nliteral 0\nHcmV?d00001\n\n",
    "corrupt": HDR
    + "diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n",
}


def _one_line_error(proc, code=2) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and lines[0].startswith("ggml-patch: error: ")
        and "Traceback" not in proc.stderr
    ), proc.stderr
    return lines[0]


@pytest.mark.parametrize("case", [*sorted(BAD_PATCHES), "empty", "not-utf8"])
def test_bad_series_is_refused_before_anything_is_touched(tmp_path, case):
    series = bare_queue(tmp_path / "series")  # the bad patch in the queue's one topic
    if case == "empty":
        pass
    elif case == "not-utf8":
        (series / "0001-x.patch").write_bytes(b"\xff\xfe" + HDR.encode())
    else:
        (series / f"0001-{case}.patch").write_text(BAD_PATCHES[case])
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    m = write_matrix(
        tmp_path,
        {"t": f"layout: llama.cpp\nsource: {{kind: local, path: {checkout}}}\n"},
        series_dir="series",
    )
    line = _one_line_error(
        run_tool("status", "--matrix", str(m), "--cache", str(tmp_path / "cache"))
    )
    expected = {
        "dotdot": "escapes the source tree",
        "absolute": "escapes the source tree",
        "binary": "binary diff",
        "corrupt": "corrupt diff",
        "empty": "the series is empty",
        "not-utf8": "not UTF-8",
    }[case]
    assert expected in line
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize(
    "ref, message",
    [
        (
            "no-such-branch",
            "targets.t.source.ref: 'no-such-branch' is not a branch, tag or full commit id at ",
        ),
        ("0123456789abcdef0123456789abcdef01234567", "targets.t.source.ref: "),
    ],
)
def test_a_ref_that_does_not_exist_is_refused_before_anything_is_touched(tmp_path, ref, message):
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "master")
    (upstream / "README").write_text("x\n")
    git(upstream, "add", "README")
    git(upstream, "commit", "-qm", "x")
    good = f"layout: llama.cpp\nsource: {{kind: git, url: '{upstream}', ref: master}}\n"
    m = write_matrix(
        tmp_path,
        {
            "a": good,
            "t": f"layout: llama.cpp\nsource: {{kind: git, url: '{upstream}', ref: '{ref}'}}\n",
        },
    )
    line = _one_line_error(
        run_tool("status", "--matrix", str(m), "--cache", str(tmp_path / "cache"))
    )
    assert message in line and str(upstream) in line
    assert not (
        tmp_path / "cache" / "status"
    ).exists()  # target a was fetched, but no worktree was made


def test_pypi_unreachable_is_a_status_too(tmp_path, monkeypatch):
    """A package index that cannot be reached (not a missing
    package) makes a row "source unreachable"."""
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # nothing listens there
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    m = write_matrix(
        tmp_path,
        {
            "p": "layout: ggml\nsource: {kind: pypi-sdist, package: pkg, version: '1.0', "
            f"sha256: '{'0' * 64}'}}\n"
        },
    )
    row = status_of_targets(load_matrix(m), Cache(tmp_path / "cache"), ["p"])[0]
    assert row.status == UNREACHABLE
    assert row.detail.startswith(
        "targets.p.source: the package index is unreachable for pkg==1.0: "
        "http://127.0.0.1:9/simple (connection refused"
    )
    assert row.source.description == "pkg==1.0"


@pytest.mark.parametrize("argv", [["status", "--help"], ["refresh", "--help"]])
def test_help(argv):
    assert run_tool(*argv).returncode == 0


def test_unknown_profile_or_target_is_one_line(tmp_path):
    m = str(ROOT / "matrix.yaml")
    assert "unknown profile 'lve'; did you mean 'live'?" in _one_line_error(
        run_tool("status", "--matrix", m, "--cache", str(tmp_path), "--profile", "lve")
    )
    assert "unknown target 'gml'" in _one_line_error(
        run_tool("status", "--matrix", m, "--cache", str(tmp_path), "--target", "gml")
    )
    assert "unknown target 'gml'" in _one_line_error(
        run_tool("refresh", "gml", "--matrix", m, "--cache", str(tmp_path))
    )
    assert not (tmp_path / "status").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["status"],
        ["matrix"],
        ["export", "--target", "ggml", "--out", "OUT"],
        ["refresh", "ggml"],
        ["bundle"],
    ],
)
def test_an_unknown_topic_is_one_line_before_anything_is_touched(tmp_path, argv):
    m = str(ROOT / "matrix.yaml")
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    line = _one_line_error(
        run_tool(*argv, "--topic", "nope", "--matrix", m, "--cache", str(tmp_path / "c"))
    )
    assert "--topic: unknown topic 'nope' (the queue: accumulator-reset" in line
    assert not (tmp_path / "c" / "status").exists() and not (tmp_path / "out").exists()
