"""Source kind `git`: refs (branch, tag, commit, HEAD), the mirror cache reused between runs, the
real upstream commit kept as the base, subdirectories, submodules of a superproject (a fork
vendored at core/vendor/llama.cpp, status'd and exported in its nested layout), missing refs and
unreachable remotes. Remotes are repositories in tmp dirs (no network); the live profile of
matrix.yaml is checked to report "source unreachable" here.
"""

import json
import re
import socket
from pathlib import Path

import pytest

from orchestrator import sources
from orchestrator.cache import Cache
from orchestrator.config import load_matrix
from orchestrator.drift.status import UNREACHABLE
from orchestrator.errors import ConfigError, ExitCode
from orchestrator.sources.git import mirror_name, resolve_submodule_url
from orchestrator.vcs.snapshots import SnapshotRepo

from ..helpers.forks import ROOT, git, git_snapshot
from ..helpers.tools import run_tool


def _upstream(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "lib").mkdir()
    (path / "lib" / "a.c").write_text("int a;\n")
    (path / "README").write_text("upstream\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "one")
    git(path, "tag", "v1")
    return path


# ---- refs and the mirror ----


def test_branch_tag_commit_and_head(tmp_path):
    up = _upstream(tmp_path / "up")
    first = git(up, "rev-parse", "HEAD").strip()
    (up / "README").write_text("two\n")
    git(up, "commit", "-qam", "two")
    second = git(up, "rev-parse", "HEAD").strip()
    cache = Cache(tmp_path / "cache")
    main = git_snapshot(cache, up, "main")
    assert main.commit == second  # the upstream commit itself: real hash
    assert main.provenance == {
        "url": str(up),
        "ref": "main",
        "resolved_ref": "refs/heads/main",
        "upstream_commit": second,
    }
    assert git_snapshot(cache, up, "v1").commit == first
    assert git_snapshot(cache, up, "v1").provenance["resolved_ref"] == "refs/tags/v1"
    assert git_snapshot(cache, up, first).commit == first
    assert git_snapshot(cache, up, "HEAD").provenance["resolved_ref"] == "refs/heads/main"
    assert git_snapshot(cache, up, "refs/heads/main").commit == second
    repo = SnapshotRepo(cache.snapshots_git)
    assert repo.read_blob(second, "README") == "two\n"
    # history came along (3-way merges need it)
    assert repo.git("rev-list", "--count", second) == "2"


def test_mirror_is_reused_and_a_pinned_commit_needs_no_network(tmp_path):
    up = _upstream(tmp_path / "up")
    first = git(up, "rev-parse", "HEAD").strip()
    cache = Cache(tmp_path / "cache")
    git_snapshot(cache, up, "main")
    mirrors = list((cache.root / "mirrors").iterdir())
    assert [m.name for m in mirrors] == [f"{mirror_name(str(up))}.git"]
    marker = mirrors[0] / "objects" / "pack"
    packs = sorted(p.name for p in marker.iterdir()) if marker.exists() else []
    # the branch moves: the next run fetches only what is new into the same mirror
    (up / "lib" / "a.c").write_text("int a = 1;\n")
    git(up, "commit", "-qam", "moved")
    moved = git_snapshot(cache, up, "main")
    assert moved.commit == git(up, "rev-parse", "HEAD").strip() != first
    assert list((cache.root / "mirrors").iterdir()) == mirrors
    if packs:
        assert set(packs) <= {p.name for p in marker.iterdir()}
    # the remote is gone: a full commit already in the mirror still resolves, a branch does not
    gone = up.rename(tmp_path / "gone")
    assert git_snapshot(cache, up, first).commit == first
    with pytest.raises(sources.SourceUnreachable) as e:
        git_snapshot(cache, up, "main")
    assert str(e.value).startswith(f"targets.t.source.url: {up} is unreachable: ")
    assert "\n" not in str(e.value)
    assert gone.exists()


def test_mirror_names_are_distinct_and_file_safe():
    a, b = (
        mirror_name("https://github.com/ggml-org/llama.cpp"),
        mirror_name("https://github.com/ggml-org/llama.cpp.git"),
    )
    assert a != b and "/" not in a and a.startswith("github.com-ggml-org-llama.cpp-")


@pytest.mark.parametrize(
    "ref, phrase",
    [
        ("nope", "'nope' is not a branch, tag or full commit id at "),
        ("refs/heads/nope", "'refs/heads/nope' is not a branch, tag or full commit id at "),
        ("0" * 39 + "1", "does not exist at "),
    ],
)
def test_a_ref_that_does_not_exist_is_a_one_line_config_error(tmp_path, ref, phrase):
    up = _upstream(tmp_path / "up")
    with pytest.raises(ConfigError) as e:
        git_snapshot(Cache(tmp_path / "cache"), up, ref)
    msg = str(e.value)
    assert msg.startswith("targets.t.source.ref: ") and phrase in msg and "\n" not in msg
    assert e.value.exit_code == ExitCode.CONFIG


def test_unreachable_remote(tmp_path):
    with pytest.raises(sources.SourceUnreachable) as e:
        git_snapshot(Cache(tmp_path / "cache"), "http://127.0.0.1:9/x.git", "main")
    assert (
        "is unreachable: unable to access 'http://127.0.0.1:9/x.git/': "
        "Failed to connect to 127.0.0.1 port 9" in str(e.value)
    )
    assert e.value.exit_code == ExitCode.SOURCE_UNAVAILABLE


def test_an_unreachable_remotes_reason_is_the_same_every_run(tmp_path):
    """curl's "after N ms" is dropped: the drift issue compares
    details and would edit its body for a timing."""
    reasons = set()
    for i in range(2):
        with pytest.raises(sources.SourceUnreachable) as e:
            git_snapshot(Cache(tmp_path / f"cache{i}"), "http://127.0.0.1:9/x.git", "main")
        reasons.add(str(e.value))
    assert len(reasons) == 1 and not re.search(r"after \d+ ms", reasons.pop())


def test_subdirectory_is_a_deterministic_commit_recording_upstream(tmp_path):
    up = _upstream(tmp_path / "up")
    head = git(up, "rev-parse", "HEAD").strip()
    a = git_snapshot(Cache(tmp_path / "c1"), up, "main", subdirectory="lib")
    b = git_snapshot(Cache(tmp_path / "c2"), up, "main", subdirectory="lib")
    assert a.commit == b.commit != head
    repo = SnapshotRepo(tmp_path / "c1" / "snapshots.git")
    assert (
        repo.read_blob(a.commit, "a.c") == "int a;\n" and repo.read_blob(a.commit, "README") is None
    )
    assert f"upstream-commit: {head}" in repo.git("log", "-1", "--format=%B", a.commit)
    with pytest.raises(
        ConfigError, match="targets.t.source.subdirectory: 'nope' is not a directory"
    ):
        git_snapshot(Cache(tmp_path / "c1"), up, "main", subdirectory="nope")


@pytest.mark.parametrize(
    "sup, sub, expected",
    [
        (
            "https://github.com/CambrianTech/continuum",
            "../llama.cpp",
            "https://github.com/CambrianTech/llama.cpp",
        ),
        (
            "https://github.com/CambrianTech/continuum.git",
            "../llama.cpp.git",
            "https://github.com/CambrianTech/llama.cpp.git",
        ),
        ("https://example.com/a/b", "./c", "https://example.com/a/b/c"),
        ("/srv/git/super", "../fork", "/srv/git/fork"),
        ("/srv/git/super", "https://x/y", "https://x/y"),
    ],
)
def test_submodule_urls_resolve_like_git(sup, sub, expected):
    assert resolve_submodule_url(sup, sub) == expected


# ---- a fork vendored as a submodule of a superproject (the nested layout) ----


# ---- the live profile, where the network is unreachable ----


def _github_resolves() -> bool:
    try:
        socket.getaddrinfo("github.com", 443)
    except OSError:
        return False
    return True


def test_live_profile_targets_are_git_sources_of_the_real_upstreams():
    m = load_matrix(ROOT / "matrix.yaml")
    live = m.profiles["live"][0]
    urls = {m.target(t).source["url"] for t in live if m.target(t).source.kind == "git"}
    assert {
        "https://github.com/ggml-org/llama.cpp",
        "https://github.com/ggml-org/ggml",
        "https://github.com/CambrianTech/llama.cpp",
    } <= urls
    # the default stays offline-capable
    assert set(m.profiles["default"][0]) == {"llama.cpp", "ggml"}


@pytest.mark.skipif(
    _github_resolves(),
    reason="github.com resolves here: the live profile would fetch the whole "
    "llama.cpp history, which tests must not do",
)
def test_live_profile_reports_source_unreachable_not_a_crash(tmp_path):
    proc = run_tool(
        "status",
        "--profile",
        "live",
        "--json",
        "--matrix",
        str(ROOT / "matrix.yaml"),
        "--cache",
        str(tmp_path / "cache"),
    )
    assert proc.returncode == ExitCode.SOURCE_UNAVAILABLE, proc.stderr
    assert "Traceback" not in proc.stderr
    rows = json.loads(proc.stdout)["targets"]
    git_rows = [r for r in rows if r["source"]["kind"] == "git"]
    assert git_rows and all(r["status"] == UNREACHABLE for r in git_rows)
    assert all("Could not resolve host: github.com" in r["detail"] for r in git_rows), [
        r["detail"] for r in git_rows
    ]
