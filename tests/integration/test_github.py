"""`ggml-patch pr`: the branch pushed to a local bare "fork", the pull request created against a
GitHub API stand-in on 127.0.0.1 (pytest-httpserver): success, 401, 422, rate limit, 403, an
unreachable or silent server, a failed push; the token scanned for in every output and file."""

import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.errors import RateLimited
from orchestrator.upstream import bundle as B
from orchestrator.upstream import github as G
from orchestrator.upstream import policy as P
from orchestrator.vcs.snapshots import FIXED_IDENTITY, SnapshotRepo, Worktree

from ..helpers.samples import declared
from ..helpers.tools import DATA, ROOT, git

# unique: must appear nowhere but the Authorization header
TOKEN = "ghp_prTEST_c0ffee5eed9d4e21b7a3"
REPO = "ggml-org/ggml"
PULLS = f"/repos/{REPO}/pulls"


class Tiny:
    """A one-file "ggml" snapshot, a two-patch series on it as a bundle, and an empty bare fork."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.cache = tmp / "cache"
        repo = SnapshotRepo(self.cache / "snapshots.git")
        tree = tmp / "tree"
        (tree / "src").mkdir(parents=True)
        (tree / "tests").mkdir()
        (tree / "src" / "ggml-opt.cpp").write_text("int accumulators_zeroed = 0;\n")
        (tree / "tests" / "CMakeLists.txt").write_text("# tests\n")
        self.base = repo.import_tree(tree, "refs/snapshots/test/tiny", "snapshot of tiny")
        wt = Worktree(repo, tmp / "wt")
        wt.ensure(self.base)
        (wt.path / "src" / "ggml-opt.cpp").write_text("int accumulators_zeroed = 1;\n")
        wt.git("commit", "-qam", "ggml-opt : zero the accumulators\n\nThe fix.", env=FIXED_IDENTITY)
        (wt.path / "tests" / "test-x.cpp").write_text("int main() { return 0; }\n")
        wt.git("add", "tests/test-x.cpp")
        wt.git("commit", "-qm", "tests : add test-x\n\nThe test.", env=FIXED_IDENTITY)
        self.patched = wt.head()
        self.tree = repo.git("rev-parse", f"{self.patched}^{{tree}}")
        self.bundle = tmp / "bundle" / "tiny"
        self.write_bundle(upstream=None)
        self.fork = tmp / "fork.git"
        git(tmp, "init", "-q", "--bare", str(self.fork))
        self.repo = repo

    def write_bundle(self, upstream, submit="api", files_md=None, draft_reasons=()):
        """A bundle as `bundle` writes it; by default for a fork
        the user owns (submit: api, repo REPO)."""
        patches = B.format_patch(
            SnapshotRepo(self.cache / "snapshots.git"), self.base, self.patched
        )
        policy = P.derive(
            "tiny", self.base, files_md or {}, declared(REPO, submit, "matrix.yaml:3")
        )
        docs = (
            {"PR_TITLE": "ggml-opt : zero the accumulators\n", "PR_BODY.md": "## The bug\n\nbody\n"}
            if policy.takes_pull_request
            else {}
        )
        files = {**dict(patches), **docs}
        if self.bundle.exists():
            for old in self.bundle.iterdir():
                old.unlink()
        self.bundle.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (self.bundle / name).write_text(text)
        man = {
            "target": "tiny",
            "base": {"snapshot_commit": self.base, "upstream_commit": upstream},
            "patched_commit": self.patched,
            "files": {n: hashlib.sha256(t.encode()).hexdigest() for n, t in files.items()},
            "policy": policy.to_json(),
            "draft": bool(draft_reasons),
            "draft_reasons": list(draft_reasons),
        }
        (self.bundle / "manifest.json").write_text(json.dumps(man, indent=2))

    def fork_git(self, *args) -> str:
        return git(self.tmp, f"--git-dir={self.fork}", *args).strip()


@pytest.fixture
def tiny(tmp_path):
    t = Tiny(tmp_path)
    yield t
    _scan_tree_for_token(tmp_path)
    for d in (t.fork, t.cache / "pr" / "tiny"):
        if d.exists():  # git objects are compressed: read the history as text too
            log = subprocess.run(
                [
                    "git",
                    f"--git-dir={d if d.name.endswith('.git') else d / '.git'}",
                    "log",
                    "--all",
                    "-p",
                    "--format=%H%n%an%n%cn%n%B",
                ],
                capture_output=True,
                text=True,
            ).stdout
            assert TOKEN not in log


def _scan_tree_for_token(root: Path) -> None:
    for f in root.rglob("*"):
        if f.is_file() and not f.is_symlink():
            assert TOKEN.encode() not in f.read_bytes(), f


def run_pr(
    tiny: Tiny,
    *extra: str,
    token=TOKEN,
    api_url="http://127.0.0.1:9",
    remote=None,
    branch="fix-accum",
):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GGML_PATCH_HTTP_BACKOFF": "0"}
    env.pop("GITHUB_TOKEN", None)
    if token:
        env["GITHUB_TOKEN"] = token
    args = [
        "pr",
        "--matrix",
        str(ROOT / "matrix.yaml"),
        "--cache",
        str(tiny.cache),
        "--bundle",
        str(tiny.bundle),
        "--repo",
        REPO,
        "--head-remote",
        str(remote or tiny.fork),
        "--head-owner",
        "me",
        "--branch",
        branch,
        "--api-url",
        api_url,
        *extra,
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tiny.tmp,
    )
    assert TOKEN not in proc.stdout and TOKEN not in proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


def one_line_error(proc, code: int) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stdout[-2000:], proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ggml-patch: error: "), proc.stderr
    return lines[0]


def printed_json(stdout: str) -> str:
    return stdout.split("\n\n", 1)[1]


# ---------------------------------------------------------------- dry run


def test_dry_run_prints_the_exact_push_and_json_and_sends_nothing(tiny, api):
    proc = run_pr(tiny, api_url=api.url_for("/").rstrip("/"))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("dry run: nothing pushed or sent")
    assert (
        f"push: git -C {tiny.cache / 'pr' / 'tiny'} push "
        f"--end-of-options {tiny.fork} HEAD:refs/heads/fix-accum\n" in out
    )
    assert f"POST {api.url_for(PULLS)}\n" in out
    assert "Authorization: Bearer ***\n" in out
    assert json.loads(printed_json(out)) == {
        "title": "ggml-opt : zero the accumulators",
        "body": "## The bug\n\nbody\n",
        "head": "me:fix-accum",
        "base": "master",
    }
    # the series, applied on the base, is the tested commit
    assert f"branch: {tiny.patched} = 2 patches" in out
    assert api.log == [] and tiny.fork_git("for-each-ref") == ""


def test_open_needs_the_token(tiny):
    line = one_line_error(run_pr(tiny, "--open", token=None), 2)
    assert "--open needs GITHUB_TOKEN" in line


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--repo", "not a repo"], "--repo 'not a repo': expected OWNER/NAME"),
        (["--branch", "bad..name"], "--branch 'bad..name': not a valid git branch name"),
    ],
)
def test_bad_arguments(tiny, args, expected):
    assert expected in one_line_error(run_pr(tiny, *args), 2)


def test_a_tampered_bundle_is_refused(tiny):
    (tiny.bundle / "PR_BODY.md").write_text("hand-edited\n")
    assert "PR_BODY.md: changed since the bundle was made" in one_line_error(run_pr(tiny), 2)


# ---------------------------------------------------------------- --open


def test_open_pushes_the_branch_then_creates_the_pull_request(tiny, api):
    dry = run_pr(tiny, api_url=api.url_for("/"))
    api.expect_request(PULLS, method="POST").respond_with_json(
        {"number": 42, "html_url": "https://github.com/ggml-org/ggml/pull/42"}, status=201
    )
    proc = run_pr(tiny, "--open", api_url=api.url_for("/"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith(
        "pull request opened: https://github.com/ggml-org/ggml/pull/42"
    )
    ((request, _),) = api.log
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"  # the one place the token goes
    assert request.headers["X-GitHub-Api-Version"] == "2022-11-28"
    # exactly what the dry run showed
    assert request.get_data(as_text=True) == printed_json(dry.stdout)
    # the fork has the branch: the series on the base, the very tree the run proved
    assert tiny.fork_git("rev-parse", "refs/heads/fix-accum^{tree}") == tiny.tree
    assert tiny.fork_git("rev-parse", "refs/heads/fix-accum~2") == tiny.base


ERRORS = {
    "401": (
        401,
        {},
        {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"},
        22,
        "GitHub rejected GITHUB_TOKEN (401 Bad credentials)",
    ),
    "422": (
        422,
        {},
        {
            "message": "Validation Failed",
            "errors": [
                {
                    "resource": "PullRequest",
                    "code": "custom",
                    "message": "A pull request already exists for me:fix-accum.",
                }
            ],
        },
        23,
        "(422 Validation Failed: A pull request already exists for me:fix-accum.)",
    ),
    "rate-limit": (
        403,
        {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "4102444800"},
        {"message": "API rate limit exceeded for user ID 1."},
        24,
        "rate limit exceeded (403 API rate limit exceeded for user "
        "ID 1.): retry after 2100-01-01 00:00:00 UTC",
    ),
    "forbidden": (
        403,
        {"X-RateLimit-Remaining": "4999"},
        {"message": "Resource not accessible by personal access token"},
        22,
        "(403 Resource not accessible by personal access token): the token lacks permission",
    ),
    "server-error": (
        502,
        {},
        {"message": "Server Error"},
        26,
        "unexpected answer 502 Server Error",
    ),
}


@pytest.mark.parametrize("case", ERRORS)
def test_each_api_error_has_its_message_and_exit_code(tiny, api, case):
    status, headers, payload, code, expected = ERRORS[case]
    api.expect_request(PULLS, method="POST").respond_with_json(
        payload, status=status, headers=headers
    )
    line = one_line_error(run_pr(tiny, "--open", api_url=api.url_for("/")), code)
    assert expected in line, line
    # a POST is never retried blindly (it may have opened the pull request): a 5xx is reported
    assert len(api.log) == 1


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_server(tiny):
    port = _closed_port()
    line = one_line_error(run_pr(tiny, "--open", api_url=f"http://127.0.0.1:{port}"), 25)
    assert f"http://127.0.0.1:{port}: connection refused" in line


def test_a_server_that_never_answers_times_out(tiny):
    with socket.socket() as s:  # accepts connections (the kernel's backlog) and never answers
        s.bind(("127.0.0.1", 0))
        s.listen(4)
        port = s.getsockname()[1]
        line = one_line_error(
            run_pr(tiny, "--open", "--timeout", "1", api_url=f"http://127.0.0.1:{port}"), 25
        )
    assert "no answer within 1 s (timed out)" in line


def test_a_failed_push_stops_before_the_api(tiny, api):
    line = one_line_error(
        run_pr(tiny, "--open", api_url=api.url_for("/"), remote=tiny.tmp / "no-such-fork.git"), 21
    )
    assert "git push to" in line and "no-such-fork.git failed" in line
    assert api.log == []


def test_a_token_in_the_remote_url_is_redacted(tiny, api):
    remote = f"http://x-access-token:{TOKEN}@127.0.0.1:{_closed_port()}/me/ggml.git"
    dry = run_pr(tiny, remote=remote, api_url=api.url_for("/"))
    assert dry.returncode == 0 and "push --end-of-options http://***@127.0.0.1:" in dry.stdout
    line = one_line_error(run_pr(tiny, "--open", remote=remote, api_url=api.url_for("/")), 21)
    assert "git push to http://***@127.0.0.1:" in line
    assert api.log == []


# ----------------------------------------------------------------
# the branch goes on the upstream commit


def _fork_with_upstream(tiny: Tiny) -> str:
    """The fork holds "upstream": the base's tree under upstream's own history."""
    up = tiny.tmp / "upstream"
    git(tiny.tmp, "init", "-q", str(up))
    (up / "src").mkdir()
    (up / "tests").mkdir()
    (up / "src" / "ggml-opt.cpp").write_text("int accumulators_zeroed = 0;\n")
    (up / "tests" / "CMakeLists.txt").write_text("# tests\n")
    git(up, "add", ".")
    git(up, "commit", "-qm", "upstream: sync")
    git(up, "push", "-q", str(tiny.fork), "HEAD:refs/heads/master")
    return git(up, "rev-parse", "HEAD").strip()


def test_the_branch_is_based_on_the_upstream_commit_when_the_fork_has_it(tiny, api):
    upstream = _fork_with_upstream(tiny)
    tiny.write_bundle(upstream=upstream)
    dry = run_pr(tiny, api_url=api.url_for("/"))
    assert f"note: with --open: git fetch {tiny.fork} {upstream}" in dry.stdout
    api.expect_request(PULLS, method="POST").respond_with_json(
        {"html_url": "https://x/pull/1"}, status=201
    )
    proc = run_pr(tiny, "--open", api_url=api.url_for("/"))
    assert proc.returncode == 0, proc.stderr
    assert tiny.fork_git("rev-parse", "refs/heads/fix-accum~2") == upstream
    assert tiny.fork_git("rev-parse", "refs/heads/fix-accum^{tree}") == tiny.tree


def test_an_upstream_commit_missing_from_the_fork_is_named(tiny, api):
    tiny.write_bundle(upstream="0c1e57098bba43ac29e6e3b677cdceebdd22334f")
    line = one_line_error(run_pr(tiny, "--open", api_url=api.url_for("/")), 21)
    assert "does not have commit 0c1e57098bba, the upstream base of this bundle" in line
    assert "--onto" in line and api.log == []


# ----------------------------------------------------------------
# the target's policy decides who submits

LLAMA_POLICY = DATA / "upstream-policy" / "llama.cpp"


def _real_llama_files() -> dict:
    return {
        f: (LLAMA_POLICY / f).read_text(encoding="utf-8")
        for f in ("AGENTS.md", "CONTRIBUTING.md", ".github/pull_request_template.md")
    }


def _fork_refs(tiny: Tiny) -> str:
    return tiny.fork_git("for-each-ref")


def test_manual_submit_refuses_open_with_the_steps_and_sends_nothing(tiny, api, monkeypatch):
    tiny.write_bundle(upstream=None, submit="manual", files_md=_real_llama_files())
    # as typed, relative to the cwd
    monkeypatch.setattr(tiny, "bundle", tiny.bundle.relative_to(tiny.tmp))
    # no token needed to be told no
    proc = run_pr(tiny, "--open", api_url=api.url_for("/"), token=None)
    monkeypatch.undo()
    line = one_line_error(proc, 27)
    assert "submit is manual" in line and "nothing was pushed or sent" in line
    assert api.log == [] and _fork_refs(tiny) == ""  # no request made, nothing pushed
    out = proc.stdout
    assert "AGENTS.md:49, AGENTS.md:95" in out  # the policy's own lines, as evidence
    work = tiny.cache / "pr" / "tiny"
    assert f"  git -C {work} push {tiny.fork} HEAD:refs/heads/fix-accum\n" in out
    assert f"  git -C {work} am {tiny.bundle / '0001-ggml-opt-zero-the-accumulators.patch'} " in out
    assert "  https://github.com/ggml-org/ggml/compare/master...me:fix-accum?expand=1\n" in out
    assert f"title: {tiny.bundle}/PR_TITLE" in out


def test_the_manual_steps_work_when_a_person_runs_them(tiny, api):
    """The printed commands, run as printed, put the tested tree on the fork's branch."""
    import shlex

    tiny.write_bundle(upstream=None, submit="manual", files_md=_real_llama_files())
    proc = run_pr(tiny, "--open", api_url=api.url_for("/"), token=None)
    assert proc.returncode == 27
    cmds = [ln.strip() for ln in proc.stdout.splitlines() if ln.startswith("  git -C ")]
    assert [shlex.split(c)[3] for c in cmds] == ["checkout", "am", "push"]
    for c in cmds:
        git(tiny.tmp, *shlex.split(c)[1:])
    assert tiny.fork_git("rev-parse", "refs/heads/fix-accum^{tree}") == tiny.tree
    assert api.log == []


def test_manual_submit_keeps_the_dry_run(tiny, api):
    tiny.write_bundle(upstream=None, submit="manual", files_md=_real_llama_files())
    proc = run_pr(tiny, api_url=api.url_for("/").rstrip("/"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("dry run: nothing pushed or sent")
    assert api.log == [] and _fork_refs(tiny) == ""


def test_submit_none_takes_no_pull_request(tiny, api):
    ggml = DATA / "upstream-policy" / "ggml"
    files = {
        f: (ggml / f).read_text() for f in ("CONTRIBUTING.md", ".github/pull_request_template.md")
    }
    tiny.write_bundle(upstream=None, submit="none", files_md=files)
    assert not (tiny.bundle / "PR_BODY.md").exists()
    for extra in ((), ("--open",)):
        proc = run_pr(tiny, *extra, api_url=api.url_for("/"))
        assert "submit is none" in one_line_error(proc, 27)
        assert "verified through ggml-org/llama.cpp's sync (CONTRIBUTING.md:3" in proc.stdout
        assert "Its changes go to ggml-org/llama.cpp" in proc.stdout
    assert api.log == [] and _fork_refs(tiny) == ""


def test_a_draft_is_refused_before_anything_is_sent(tiny, api):
    tiny.write_bundle(
        upstream=None, draft_reasons=["patches/cover.md:1: '## Overview' not written"]
    )
    for extra in ((), ("--open",)):
        line = one_line_error(run_pr(tiny, *extra, api_url=api.url_for("/")), 20)
        assert "is a draft (patches/cover.md:1: '## Overview' not written)" in line
    assert api.log == [] and _fork_refs(tiny) == ""


def test_api_goes_only_to_the_declared_fork(tiny, api):
    line = one_line_error(
        run_pr(tiny, "--open", "--repo", "ggml-org/llama.cpp", api_url=api.url_for("/")), 2
    )
    assert "submitted through the API only to ggml-org/ggml" in line
    assert api.log == []


def test_a_bundle_without_a_policy_is_refused(tiny):
    man = json.loads((tiny.bundle / "manifest.json").read_text())
    del man["policy"]
    (tiny.bundle / "manifest.json").write_text(json.dumps(man))
    assert "no policy recorded" in one_line_error(run_pr(tiny), 2)


# ---------------------------------------------------------------- pure helpers


def test_redact():
    assert (
        G.redact(f"https://u:{TOKEN}@github.com/a/b.git x {TOKEN}", (TOKEN,))
        == "https://***@github.com/a/b.git x ***"
    )
    assert G.redact(f"https://{TOKEN}@github.com/a/b") == "https://***@github.com/a/b"
    assert G.redact("git@github.com:a/b.git") == "git@github.com:a/b.git"


@pytest.mark.parametrize(
    "url, owner",
    [
        ("https://github.com/me/llama.cpp.git", "me"),
        ("https://github.com/me/ggml", "me"),
        ("git@github.com:me/ggml.git", "me"),
        ("ssh://git@github.com/me/ggml.git", "me"),
        ("/tmp/fork.git", None),
    ],
)
def test_owner_from_remote(url, owner):
    assert G.owner_from_remote(url) == owner


def test_retry_after_and_reset_headers():
    pr = G.PullRequest(REPO, "t", "b", "me:x", "master")
    with pytest.raises(RateLimited, match=r"retry in 60 s \(Retry-After\)"):
        G.answer(429, {"Retry-After": "60"}, "{}", pr, "u", TOKEN)
    with pytest.raises(RateLimited, match=r"retry after 1970-01-01 00:01:40 UTC \(in 40 s"):
        G.answer(
            403,
            {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "100"},
            "{}",
            pr,
            "u",
            TOKEN,
            now=lambda: 60,
        )
