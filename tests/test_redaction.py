"""Issue 16, point 2: one redaction function for every message, log line, result and provenance
record. Each route a secret used to take is checked end to end: the secret is absent from
stdout, stderr and every file the run wrote."""
import io
import json
import socket

import pytest
from pytest_httpserver import HTTPServer

from orchestrator.upstream import bundle as B
from orchestrator import sources
from orchestrator.redact import REDACTED, redact, redact_data

from .security_fixtures import ROOT, files_containing, isolated_env, tiny_matrix, tool
from .test_github import PULLS, REPO, TOKEN, Tiny

SECRET = "s3cr3t-Pa55w0rd-9f8e7d"  # a password in a URL: not GITHUB_TOKEN, still never printed


# ---------------------------------------------------------------- the function

@pytest.mark.parametrize("text, expected", [
    (f"https://u:{SECRET}@github.com/a/b.git", "https://***@github.com/a/b.git"),
    (f"http://{SECRET}@127.0.0.1:8/x", "http://***@127.0.0.1:8/x"),
    (f"ssh://git:{SECRET}@host:22/a/b.git", "ssh://***@host:22/a/b.git"),
    (f"git://me:{SECRET}@host/a", "git://***@host/a"),
    (f"git+https://me:{SECRET}@host/a", "git+https://***@host/a"),
    (f"fetch 'HTTPS://ME:{SECRET}@HOST/A' failed", "fetch 'HTTPS://***@HOST/A' failed"),
    (f"https://h/x?access_token={SECRET}&a=1", "https://h/x?access_token=***&a=1"),
    (f"https://h/x?private_token={SECRET}", "https://h/x?private_token=***"),
    ("git@github.com:a/b.git", "git@github.com:a/b.git"),  # scp-like: a user name, no secret
    ("mail me at a@b.org, see https://github.com/a", "mail me at a@b.org, see https://github.com/a"),
    ('"url": "https://u:p@h/x", "b": "c@d"', '"url": "https://***@h/x", "b": "c@d"'),
])
def test_redact_urls_of_every_scheme(text, expected, monkeypatch):
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    assert redact(text) == expected


def test_redact_the_tokens_value_wherever_it_appears(monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    assert redact(f"a {TOKEN} b /x/{TOKEN}/y") == f"a {REDACTED} b /x/{REDACTED}/y"
    assert redact(f"x {SECRET}", (SECRET,)) == f"x {REDACTED}"
    data = {"url": f"https://u:{SECRET}@h/x", "list": [TOKEN, 3, None], "n": 1.5}
    assert redact_data(data) == {"url": "https://***@h/x", "list": [REDACTED, 3, None], "n": 1.5}


def test_errors_are_redacted_when_made(monkeypatch):
    from orchestrator.errors import ConfigError

    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    assert str(ConfigError(f"https://x:{SECRET}@h/ {TOKEN}")) == "https://***@h/ ***"


# ---------------------------------------------------------------- pr: --api-url, ssh remotes, git timeouts

@pytest.fixture
def tiny(tmp_path):
    return Tiny(tmp_path)


@pytest.fixture
def api():
    server = HTTPServer(host="127.0.0.1", port=0)
    server.start()
    yield server
    server.clear()
    server.stop()


def pr(tiny, *extra, remote=None, api_url="http://127.0.0.1:9", token=TOKEN):
    env = isolated_env(tiny.tmp)
    if token:
        env["GITHUB_TOKEN"] = token
    return tool("pr", "--matrix", ROOT / "matrix.yaml", "--cache", tiny.cache, "--bundle", tiny.bundle,
                "--repo", REPO, "--head-remote", remote or tiny.fork, "--head-owner", "me", "--branch", "fix-accum",
                "--api-url", api_url, *extra, env=env, cwd=tiny.tmp, timeout=60)


def assert_absent(secret: str, proc, *roots):
    assert secret not in proc.stdout, proc.stdout
    assert secret not in proc.stderr, proc.stderr
    for root in roots:
        assert files_containing(root, secret) == []


def test_a_token_in_api_url_is_never_printed(tiny, api):
    api_url = api.url_for("/").rstrip("/").replace("http://", f"http://u:{TOKEN}@")
    dry = pr(tiny, api_url=api_url)
    assert dry.returncode == 0, dry.stderr
    assert "POST http://***@127.0.0.1:" in dry.stdout
    assert_absent(TOKEN, dry, tiny.tmp)
    api.expect_request(PULLS, method="POST").respond_with_json({"message": "Not Found"}, status=404)
    proc = pr(tiny, "--open", api_url=api_url)
    assert "404 Not Found" in proc.error_line(26)
    assert_absent(TOKEN, proc, tiny.tmp)


def test_a_password_in_api_url_is_never_printed(tiny, api):
    api_url = api.url_for("/").rstrip("/").replace("http://", f"http://u:{SECRET}@")
    api.expect_request(PULLS, method="POST").respond_with_json({"message": "Server Error"}, status=500)
    proc = pr(tiny, "--open", api_url=api_url)
    assert "unexpected answer 500" in proc.error_line(26)
    assert_absent(SECRET, proc, tiny.tmp)


def test_an_ssh_password_is_never_printed(tiny):
    tiny.write_bundle(upstream="0c1e57098bba43ac29e6e3b677cdceebdd22334f")
    proc = pr(tiny, remote=f"ssh://me:{SECRET}@127.0.0.1:1/me/ggml.git")
    assert proc.returncode == 0, proc.stderr
    assert "git fetch ssh://***@127.0.0.1:1/me/ggml.git" in proc.stdout
    assert_absent(SECRET, proc, tiny.tmp)


@pytest.fixture
def silent_port():
    """A port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s.getsockname()[1]


def test_a_git_fetch_that_times_out_is_exit_21_without_the_token(tiny, silent_port):
    tiny.write_bundle(upstream="0c1e57098bba43ac29e6e3b677cdceebdd22334f")
    remote = f"http://x-access-token:{TOKEN}@127.0.0.1:{silent_port}/me/ggml.git"
    proc = pr(tiny, "--open", "--git-timeout", "2", remote=remote)
    line = proc.error_line(21)
    assert "timed out after 2 s" in line and "http://***@127.0.0.1" in line
    assert proc.seconds < 30
    assert_absent(TOKEN, proc, tiny.tmp)


def test_a_git_push_that_times_out_is_exit_21_without_the_secret(tiny, silent_port):
    remote = f"http://me:{SECRET}@127.0.0.1:{silent_port}/me/ggml.git"
    proc = pr(tiny, "--open", "--git-timeout", "2", remote=remote)
    assert "timed out after 2 s" in proc.error_line(21)
    assert_absent(SECRET, proc, tiny.tmp)


# ---------------------------------------------------------------- matrix URLs: messages, results, provenance

def test_credentials_in_a_git_source_url_reach_no_output_or_file(tmp_path):
    url = f"http://me:{SECRET}@127.0.0.1:9/llama.cpp.git"  # nothing listens: unreachable, quickly
    m = tiny_matrix(tmp_path, source=f"{{kind: git, url: '{url}', ref: master}}")
    env = isolated_env(tmp_path)
    status = tool("status", "--matrix", m, "--cache", tmp_path / "cache", env=env)
    assert status.returncode == 3, status.stderr
    assert "http://***@127.0.0.1" in status.stdout
    run = tool("matrix", "--matrix", m, "--cache", tmp_path / "cache", "--results", tmp_path / "r", env=env)
    assert run.returncode == 3, run.stderr
    assert "http://***@127.0.0.1" in (tmp_path / "r" / "results.json").read_text()
    for proc in (status, run):  # everything the tool wrote (matrix.yaml, the user's input, holds it)
        assert_absent(SECRET, proc, tmp_path / "cache", tmp_path / "r", tmp_path / "home")


def test_the_tokens_value_in_a_source_url_reaches_no_output_or_file(tmp_path):
    m = tiny_matrix(tmp_path, source=f"{{kind: git, url: 'http://127.0.0.1:9/{TOKEN}/x.git', ref: master}}")
    env = isolated_env(tmp_path, GITHUB_TOKEN=TOKEN)
    proc = tool("matrix", "--matrix", m, "--cache", tmp_path / "cache", "--results", tmp_path / "r", env=env)
    assert proc.returncode == 3, proc.stderr
    assert_absent(TOKEN, proc, tmp_path / "cache", tmp_path / "r", tmp_path / "home")


def test_provenance_is_redacted_where_every_source_kind_returns_it(monkeypatch, tmp_path):
    def fake_kind(source, cache, repo):
        return sources.Snapshot("0" * 40, f"https://u:{SECRET}@h/x master",
                                {"url": f"https://u:{SECRET}@h/x", "submodules": {"a": {"url": f"ssh://u:{SECRET}@h/y"}}})
    monkeypatch.setattr(sources, "_kind", lambda source: fake_kind)
    snap = sources.snapshot(None, None, None)
    assert SECRET not in json.dumps([snap.description, snap.provenance])
    assert snap.provenance["url"] == "https://***@h/x"


def test_pr_body_and_manifest_carry_no_credentials():
    results = json.loads((ROOT / "tests" / "data" / "results-cpu-sample.json").read_text())
    for c in results["cells"]:
        c.setdefault("source", {})["url"] = f"https://me:{SECRET}@github.com/me/ggml.git"
    target = results["cells"][0]["target"]
    body = B.pr_body(results, "0" * 64, target, [B.Commit("s", "b", ("src/x.c",))], {}, [])
    assert SECRET not in body and "https://***@github.com/me/ggml.git" in body
    man = B.manifest(target=target, layout="ggml", results=B.as_results(results), results_sha256="0" * 64, results_path="/r",
                     source=results["cells"][0]["source"], patched_commit="1" * 40, patches=[], files={},
                     verification={}, toolchain={}, warnings=[])
    assert SECRET not in json.dumps(man)


def test_progress_lines_are_redacted(monkeypatch):
    from rich.console import Console

    from orchestrator.progress import Reporter

    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    out = io.StringIO()
    r = Reporter(1, Console(file=out, width=300))
    r.start_cell(f"t/{TOKEN}")
    r.step("fetch", f"git https://u:{SECRET}@h/x")
    r.done(f"ok {TOKEN}")
    r.skip(f"https://u:{SECRET}@h/x")
    r.cell_result("failed", f"https://u:{SECRET}@h/x")
    text = out.getvalue()
    assert SECRET not in text and TOKEN not in text and "https://***@h/x" in text


def test_github_errors_given_as_a_string_are_one_message():
    """Issue 16 point 9: `errors` as a string used to be printed character by character."""
    from orchestrator.upstream import github as G

    text = json.dumps({"message": "Validation Failed", "errors": "head branch is missing"})
    assert G._message(text) == "Validation Failed: head branch is missing"

