"""Issue 16, point 5: bounded work. A YAML alias bomb is refused in well under a second; `pr
--timeout` bounds the whole API request (a server that trickles one byte at a time ends within
it); waiting for another run's lock says who holds it and since when, and `--lock-timeout`
bounds the wait (exit 3)."""

import select
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from orchestrator.config import load_matrix
from orchestrator.errors import ConfigError, GitHubUnreachable

from ..helpers.security import BOMB_1K, BOMB_276, ROOT, isolated_env, tiny_matrix, tool
from .test_github import REPO, TOKEN, Tiny


@pytest.mark.parametrize("bomb", [BOMB_276, BOMB_1K], ids=["276-bytes", "1KB"])
def test_an_alias_bomb_is_refused_in_under_a_second(tmp_path, bomb):
    m = tmp_path / "matrix.yaml"
    m.write_text(bomb)
    proc = tool(
        "status", "--matrix", m, "--cache", tmp_path / "c", env=isolated_env(tmp_path), timeout=30
    )
    line = proc.error_line(2)
    assert "alias" in line and f"{m}:" in line
    t0 = time.monotonic()
    with pytest.raises(ConfigError):
        load_matrix(m)
    assert time.monotonic() - t0 < 1.0


# ---------------------------------------------------------------- pr --timeout: the whole request


class Trickle:
    """An HTTP server that answers one byte every `gap` seconds (headers included)."""

    def __init__(self, gap: float = 0.5):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.gap = gap
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        body = b'{"html_url": "https://github.com/ggml-org/ggml/pull/1"}' + b" " * 200
        answer = (
            b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    conn.recv(65536)
                    for i in range(len(answer)):
                        if self.stop.is_set():
                            return
                        conn.sendall(answer[i : i + 1])
                        time.sleep(self.gap)
                except OSError:
                    pass

    def close(self):
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


@pytest.fixture
def trickle():
    t = Trickle()
    yield t
    t.close()


def test_a_trickling_server_ends_within_the_timeout(tmp_path, trickle):
    tiny = Tiny(tmp_path)
    env = isolated_env(tmp_path, GITHUB_TOKEN=TOKEN)
    proc = tool(
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
        tiny.fork,
        "--head-owner",
        "me",
        "--branch",
        "fix-accum",
        "--api-url",
        f"http://127.0.0.1:{trickle.port}",
        "--open",
        "--timeout",
        "2",
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    line = proc.error_line(25)
    assert "within 2 s" in line
    # the push and the tool's start included; the trickle alone takes ~130 s
    assert proc.seconds < 12
    assert TOKEN not in proc.stdout + proc.stderr


def test_the_request_deadline_covers_connect_reads_and_the_total(trickle):
    from orchestrator.upstream import github as G

    pr = G.PullRequest(REPO, "t", "b", "me:x", "master")
    t0 = time.monotonic()
    with pytest.raises(GitHubUnreachable, match="within 1 s"):
        G.create_pull_request(f"http://127.0.0.1:{trickle.port}", pr, TOKEN, 1.0)
    assert time.monotonic() - t0 < 3


# ---------------------------------------------------------------- waiting for a lock

HOLDER = textwrap.dedent("""\
    import sys, time
    from pathlib import Path
    from orchestrator.cache import Cache
    sys.argv = ["ggml-patch", "status", "--target", "tiny"]  # what the holder says it runs
    with Cache(Path(sys.stdin.readline().strip())).lock("status-tiny"):
        print("held", flush=True)
        sys.stdin.readline()  # hold until told to stop
""")


@pytest.fixture
def holder(tmp_path):
    env = isolated_env(tmp_path)
    p = subprocess.Popen(
        [sys.executable, "-c", HOLDER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    p.stdin.write(f"{tmp_path / 'cache'}\n")
    p.stdin.flush()
    assert p.stdout.readline().strip() == "held"
    yield p
    if p.poll() is None:
        p.stdin.write("\n")
        p.stdin.flush()
        p.wait(10)


def test_lock_timeout_expires_with_exit_10_naming_the_holder(tmp_path, holder):
    m = tiny_matrix(tmp_path)
    proc = tool(
        "status",
        "--matrix",
        m,
        "--cache",
        tmp_path / "cache",
        "--lock-timeout",
        "1",
        env=isolated_env(tmp_path),
        timeout=30,
    )
    # its own code: never taken for "a source is unavailable" (3)
    assert proc.returncode == 10, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2, proc.stderr
    waiting, error = lines
    assert (
        f"pid {holder.pid}" in waiting
        and "ggml-patch status --target tiny" in waiting
        and "since" in waiting
    )
    assert (
        error.startswith("ggml-patch: error: ")
        and "--lock-timeout" in error
        and f"pid {holder.pid}" in error
    )
    assert proc.seconds < 10


def test_waiting_for_a_lock_says_who_holds_it_then_goes_on(tmp_path, holder):
    m = tiny_matrix(tmp_path)
    env = isolated_env(tmp_path)
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "status",
            "--matrix",
            str(m),
            "--cache",
            str(tmp_path / "cache"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        ready, _, _ = select.select([p.stderr], [], [], 30)  # the line comes at once, or never
        assert ready, "no waiting line within 30 s"
        line = p.stderr.readline()
        assert line.startswith("ggml-patch: waiting for ") and f"pid {holder.pid}" in line, line
        holder.stdin.write("\n")
        holder.stdin.flush()
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert "not applicable" in out


def test_no_message_when_the_lock_is_free(tmp_path):
    m = tiny_matrix(tmp_path)
    proc = tool("status", "--matrix", m, "--cache", tmp_path / "cache", env=isolated_env(tmp_path))
    assert proc.returncode == 0 and "waiting" not in proc.stderr
    # holder info removed
    assert not [f for f in (tmp_path / "cache" / "locks").iterdir() if f.suffix == ".json"]


def test_lock_timeout_must_be_a_number(tmp_path):
    m = tiny_matrix(tmp_path)
    for bad in ("-1", "nan", "inf", "x"):
        proc = tool(
            "status",
            "--matrix",
            m,
            "--cache",
            tmp_path / "cache",
            "--lock-timeout",
            bad,
            env=isolated_env(tmp_path),
        )
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) <= 3, proc.stderr
