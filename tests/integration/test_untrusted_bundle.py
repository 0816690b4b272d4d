"""Issue 16, point 1: a bundle, its manifest and `pr`'s arguments are untrusted input.

Every field is validated before use, refs and URLs reach git only after `--end-of-options`, and a
bad manifest or argument is refused with exit 2 and one line before anything is touched. The
injections are real: each would run a command (a file that must not appear) or wipe the cache
on the code before this issue.
"""

import json

import pytest

from orchestrator.errors import ConfigError
from orchestrator.upstream import bundle as B

from ..helpers.security import ROOT, isolated_env, tiny_matrix, tool, tree_snapshot
from .test_github import REPO, TOKEN, Tiny

# a real commit id the fork does not have
UNKNOWN_UPSTREAM = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"


@pytest.fixture
def tiny(tmp_path):
    return Tiny(tmp_path)


def pr(tiny: Tiny, *extra: str, remote=None, token=TOKEN, api_url="http://127.0.0.1:9"):
    env = isolated_env(tiny.tmp)
    if token:
        env["GITHUB_TOKEN"] = token
    p = tool(
        "pr",
        "--matrix",
        ROOT / "matrix.yaml",
        "--cache",
        tiny.cache,
        "--bundle",
        tiny.bundle,
        "--repo",
        REPO,
        f"--head-remote={remote if remote is not None else tiny.fork}",
        "--head-owner",
        "me",
        "--branch",
        "fix-accum",
        "--api-url",
        api_url,
        *extra,
        env=env,
        cwd=tiny.tmp,
    )
    assert TOKEN not in p.stdout + p.stderr
    return p


def edit_manifest(tiny: Tiny, edit) -> None:
    path = tiny.bundle / "manifest.json"
    man = json.loads(path.read_text())
    edit(man)
    path.write_text(json.dumps(man, indent=2))


def test_upload_pack_in_the_manifests_upstream_commit_runs_nothing(tiny):
    pwned = tiny.tmp / "PWNED"
    tiny.write_bundle(upstream=f"--upload-pack=touch {pwned} #")
    line = pr(tiny, "--open").error_line(2)
    assert "manifest.json" in line and "upstream_commit" in line
    assert not pwned.exists()
    assert not (tiny.cache / "pr").exists()  # refused before anything was touched


def test_upload_pack_as_head_remote_runs_nothing(tiny):
    pwned = tiny.tmp / "PWNED"
    tiny.write_bundle(upstream=UNKNOWN_UPSTREAM)  # so --open fetches from the "remote"
    line = pr(tiny, "--open", remote=f"--upload-pack=touch {pwned} #").error_line(2)
    assert "--head-remote" in line
    assert not pwned.exists()
    assert not (tiny.cache / "pr").exists()


def test_upload_pack_as_onto_runs_nothing(tiny):
    pwned = tiny.tmp / "PWNED"
    line = pr(tiny, "--open", f"--onto=--upload-pack=touch {pwned} #").error_line(2)
    assert "--onto" in line and "40" in line
    assert not pwned.exists()


def test_a_dotdot_target_leaves_the_cache_intact(tiny):
    """`"target": ".."` used to make `pr` (even a dry run) git
    init, checkout and clean -fdx the cache root."""
    (tiny.cache / "downloads" / "pypi-x-1.0").mkdir(parents=True)
    (tiny.cache / "downloads" / "pypi-x-1.0" / "x-1.0.tar.gz").write_bytes(b"sdist bytes")
    (tiny.cache / "mirrors" / "m.git").mkdir(parents=True)
    (tiny.cache / "mirrors" / "m.git" / "HEAD").write_text("ref: refs/heads/master\n")
    edit_manifest(tiny, lambda m: m.update(target=".."))
    before = tree_snapshot(tiny.cache)
    line = pr(tiny).error_line(2)
    assert "target" in line and "'..'" in line
    assert tree_snapshot(tiny.cache) == before
    assert not (tiny.cache / ".git").exists()


@pytest.mark.parametrize(
    "field, value, phrase",
    [
        ("target", "a/b", "target"),
        ("target", "-x", "target"),
        ("snapshot_commit", "HEAD", "snapshot_commit"),
        ("snapshot_commit", "--output=/tmp/x", "snapshot_commit"),
        ("upstream_commit", "master", "upstream_commit"),
        ("upstream_commit", "0c1e57098bba", "upstream_commit"),
        ("patched_commit", "x" * 40, "patched_commit"),
        ("url", "--upload-pack=sh", "url"),
        ("url", "ext::sh -c touch% /tmp/x", "url"),
        ("files", {"../PR_BODY.md": "0" * 64}, "files"),
        ("files", {"PR_TITLE": "not-a-sha"}, "files"),
        ("files", [], "files"),
        ("target", None, "target"),
    ],
)
def test_each_manifest_field_is_validated(tiny, field, value, phrase):
    def edit(m):
        if field in ("snapshot_commit", "upstream_commit"):
            m["base"][field] = value
        elif field == "url":
            m["base"]["source"] = {"kind": "git", "url": value}
        else:
            m[field] = value

    edit_manifest(tiny, edit)
    line = pr(tiny).error_line(2)
    assert "manifest.json" in line and phrase in line, line
    assert not (tiny.cache / "pr").exists()


@pytest.mark.parametrize(
    "args, phrase",
    [
        (["--api-url", "file:///etc/passwd"], "--api-url"),
        (["--api-url", "not a url"], "--api-url"),
        (["--head-owner=--upload-pack=x"], "--head-owner"),
        (["--base=--force"], "--base"),
        (["--timeout", "nan"], "--timeout"),
        (["--timeout", "inf"], "--timeout"),
    ],
)
def test_bad_pr_arguments_are_refused_before_anything(tiny, args, phrase):
    assert phrase in pr(tiny, *args).error_line(2)
    assert not (tiny.cache / "pr").exists()


@pytest.mark.parametrize(
    "remote", ["--upload-pack=touch x", "ext::sh -c touch% x", "fd::3", "-", "a b c"]
)
def test_bad_head_remotes_are_refused(tiny, remote):
    assert "--head-remote" in pr(tiny, remote=remote).error_line(2)


def test_a_good_bundle_still_goes_through(tiny):
    """The validation refuses only what is wrong: the fixture's bundle passes the dry run."""
    p = pr(tiny)
    assert p.returncode == 0, p.stderr
    assert "--end-of-options" in p.stdout  # the printed push command is the safe one git runs


def test_read_bundle_validates_the_manifest(tiny):
    edit_manifest(tiny, lambda m: m["base"].update(snapshot_commit="; rm -rf ~"))
    with pytest.raises(ConfigError, match=r"manifest.json: base.snapshot_commit"):
        B.read_bundle(tiny.bundle)


# ---- matrix.yaml's git sources: the same injections through `url` and `ref` ----


@pytest.mark.parametrize("key", ["url", "ref"])
def test_upload_pack_in_a_git_source_runs_nothing(tmp_path, key):
    pwned = tmp_path / "PWNED"
    evil = f"'--upload-pack=touch {pwned} #'"
    url, ref = (evil, "master") if key == "url" else (f"'{tmp_path}'", evil)
    m = tiny_matrix(tmp_path, source=f"{{kind: git, url: {url}, ref: {ref}}}")
    line = tool(
        "status", "--matrix", m, "--cache", tmp_path / "cache", env=isolated_env(tmp_path)
    ).error_line(2)
    assert f"targets.tiny.source.{key}" in line
    assert not pwned.exists()


def test_a_submodule_url_from_gitmodules_is_checked(tmp_path):
    """.gitmodules is upstream content: a url there that is an option never reaches git."""
    from orchestrator.sources.git import checked_url

    with pytest.raises(ConfigError, match="submodules"):
        checked_url("--upload-pack=touch x", "targets.t.source.submodules")
    assert checked_url("https://github.com/a/b", "k") == "https://github.com/a/b"


def test_git_receives_refs_after_end_of_options(tiny):
    """Belt and braces behind validation: the push argv the tool runs (and prints)."""
    from orchestrator.upstream import github as G

    argv = G.push_argv(tiny.cache, "/srv/fork.git", "b")
    assert argv[argv.index("push") + 1 :] == [
        "--end-of-options",
        "/srv/fork.git",
        "HEAD:refs/heads/b",
    ]
