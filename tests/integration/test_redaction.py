"""Issue 16, point 2: one redaction function for every message, log line, result and provenance
record. Each route a secret used to take is checked end to end: the secret is absent from
stdout, stderr and every file the run wrote."""

import socket

import pytest

from ..helpers.security import ROOT, files_containing, isolated_env, tiny_matrix, tool
from .test_github import PULLS, REPO, TOKEN, Tiny

SECRET = "s3cr3t-Pa55w0rd-9f8e7d"  # a password in a URL: not GITHUB_TOKEN, still never printed


# ---------------------------------------------------------------- the function

# ----------------------------------------------------------------
# pr: --api-url, ssh remotes, git timeouts


@pytest.fixture
def tiny(tmp_path):
    return Tiny(tmp_path)


def pr(tiny, *extra, remote=None, api_url="http://127.0.0.1:9", token=TOKEN):
    env = isolated_env(tiny.tmp)
    if token:
        env["GITHUB_TOKEN"] = token
    return tool(
        "pr",
        "--matrix",
        ROOT / "matrix.yaml",
        "--cache",
        tiny.cache,
        "--bundle",
        tiny.bundle,
        "--repo",
        REPO,
        "--head-remote",
        remote or tiny.fork,
        "--head-owner",
        "me",
        "--branch",
        "fix-accum",
        "--api-url",
        api_url,
        *extra,
        env=env,
        cwd=tiny.tmp,
        timeout=60,
    )


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
    api.expect_request(PULLS, method="POST").respond_with_json(
        {"message": "Server Error"}, status=500
    )
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


# ----------------------------------------------------------------
# matrix URLs: messages, results, provenance


def test_credentials_in_a_git_source_url_reach_no_output_or_file(tmp_path):
    url = f"http://me:{SECRET}@127.0.0.1:9/llama.cpp.git"  # nothing listens: unreachable, quickly
    m = tiny_matrix(tmp_path, source=f"{{kind: git, url: '{url}', ref: master}}")
    env = isolated_env(tmp_path)
    status = tool("status", "--matrix", m, "--cache", tmp_path / "cache", env=env)
    assert status.returncode == 3, status.stderr
    assert "http://***@127.0.0.1" in status.stdout
    run = tool(
        "matrix", "--matrix", m, "--cache", tmp_path / "cache", "--results", tmp_path / "r", env=env
    )
    assert run.returncode == 3, run.stderr
    assert "http://***@127.0.0.1" in (tmp_path / "r" / "results.json").read_text()
    # everything the tool wrote (matrix.yaml, the user's input, holds it)
    for proc in (status, run):
        assert_absent(SECRET, proc, tmp_path / "cache", tmp_path / "r", tmp_path / "home")


def test_the_tokens_value_in_a_source_url_reaches_no_output_or_file(tmp_path):
    m = tiny_matrix(
        tmp_path, source=f"{{kind: git, url: 'http://127.0.0.1:9/{TOKEN}/x.git', ref: master}}"
    )
    env = isolated_env(tmp_path, GITHUB_TOKEN=TOKEN)
    proc = tool(
        "matrix", "--matrix", m, "--cache", tmp_path / "cache", "--results", tmp_path / "r", env=env
    )
    assert proc.returncode == 3, proc.stderr
    assert_absent(TOKEN, proc, tmp_path / "cache", tmp_path / "r", tmp_path / "home")
