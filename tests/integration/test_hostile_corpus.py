"""Issue 23: a hostile corpus, by class (paths, ownership, secrets, bounds, types, environment).

Every case runs the tool's command line in this process (fast: no interpreter start per case)
with live tokens in the environment and a password with ')' and "'" in URLs, under a SIGALRM
time bound, and asserts: the exit code, one `ggml-patch: error:` line when refused, no secret in
stdout, stderr or any file written, and nothing written outside the folders the command may
write (its --out/--results and the cache). Offline: servers are on 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import http.server
import io
import json
import os
import signal
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import pytest

from orchestrator import cli

from ..helpers.security import CLOSED_INDEX, ROOT, tiny_matrix
from ..helpers.tools import DATA

TOKEN = "ghp_corpusLIVE_0123456789abcdef"
GH_TOKEN = "gho_corpusOTHER_fedcba9876543210"
PASSWORD = "pa)ss'wd9"  # legal in URL userinfo: ')' and "'" must not end the redaction
SECRETS = (TOKEN, GH_TOKEN, PASSWORD, "pa)ss")
MATRIX = ROOT / "matrix.yaml"
CELL_LOGS = "logs/llama.cpp-cpu"


class Overtime(BaseException):
    """Raised by SIGALRM: a BaseException, so the tool's own `except Exception` cannot absorb it."""


@dataclass
class Outcome:
    code: int
    out: str
    err: str
    seconds: float

    def one_line(self, code: int) -> str:
        assert self.code == code, (self.code, self.out[-1500:], self.err[-1500:])
        lines = self.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ggml-patch: error: "), self.err
        assert "internal error" not in self.err and "Traceback" not in self.err
        return lines[0]


def _files(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for p in root.rglob("*"):
        try:
            st = p.lstat()
        except OSError:
            continue
        out[str(p)] = (st.st_mtime_ns, st.st_size)
    return out


class World:
    """tmp_path laid out for the corpus: a home, a leg's results folder, a tiny matrix."""

    def __init__(self, tmp: Path, monkeypatch):
        self.tmp = tmp
        self.mp = monkeypatch
        self.home = tmp / "home"
        self.home.mkdir()
        self.cache = tmp / "cache"
        self.out = tmp / "out"
        self.leg = tmp / "leg"
        (self.leg / CELL_LOGS).mkdir(parents=True)
        self.data = json.loads((DATA / "results-cpu-sample.json").read_text())
        for k in ("GGML_PATCH_DEBUG", "PIP_EXTRA_INDEX_URL", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
            monkeypatch.delenv(k, raising=False)
        for k in [k for k in os.environ if k.startswith("GIT_")]:
            monkeypatch.delenv(k)
        for k, v in {
            "HOME": str(self.home),
            "GGML_PATCH_CACHE": str(tmp / "default-cache"),
            "PIP_INDEX_URL": CLOSED_INDEX,
            "PIP_CONFIG_FILE": os.devnull,
            "GITHUB_TOKEN": TOKEN,
            "GH_TOKEN": GH_TOKEN,
        }.items():
            monkeypatch.setenv(k, v)
        monkeypatch.chdir(tmp)

    def leg_results(
        self, mutate: Optional[Callable[[dict], None]] = None, text: Optional[str] = None
    ) -> Path:
        data = json.loads(json.dumps(self.data))
        if mutate:
            mutate(data)
        (self.leg / "results.json").write_text(text if text is not None else json.dumps(data))
        return self.leg

    def run(self, *args, may_write: tuple[Path, ...] = (), bound: float = 10.0) -> Outcome:
        """The command line in this process, under a time bound; checks secrets and writes."""
        before = _files(self.tmp)
        out, err = io.StringIO(), io.StringIO()
        old = signal.signal(signal.SIGALRM, _overtime)
        signal.setitimer(signal.ITIMER_REAL, bound)
        t0 = time.monotonic()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = cli.main([str(a) for a in args])
        except SystemExit as e:  # argparse's own exit (a bad option value)
            code = int(e.code or 0)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        result = Outcome(code, out.getvalue(), err.getvalue(), time.monotonic() - t0)
        assert result.seconds < bound
        for s in SECRETS:
            assert s not in result.out and s not in result.err, (
                s,
                result.out[-500:],
                result.err[-500:],
            )
        allowed = tuple(str(p) for p in (*may_write, self.cache, self.tmp / "default-cache"))
        for path, stamp in _files(self.tmp).items():
            if before.get(path) == stamp:
                continue
            assert path.startswith(allowed), f"written outside what the command may write: {path}"
            p = Path(path)
            if p.is_file() and not p.is_symlink():
                data = p.read_bytes()
                for s in SECRETS:
                    assert s.encode() not in data, (s, path)
        return result


def status_row(res: Outcome, code: int) -> dict:
    """`status --json`'s one row (its detail is the one line saying why), after its exit code."""
    assert res.code == code, (res.code, res.out[-1500:], res.err[-1500:])
    assert "Traceback" not in res.err and "internal error" not in res.err
    rows = json.loads(res.out)["targets"]
    assert len(rows) == 1 and "\n" not in rows[0]["detail"]
    return rows[0]


def yq(text: str) -> str:
    """`text` as a single-quoted YAML scalar."""
    return "'" + text.replace("'", "''") + "'"


def _overtime(signum, frame):
    raise Overtime("the case ran past its time bound")


@pytest.fixture
def world(tmp_path, monkeypatch):
    return World(tmp_path, monkeypatch)


def _set_log(data: dict, log: str) -> None:
    data["records"][0]["build"]["log"] = log


def merge(world: World, leg: Path, bound: float = 10.0) -> Outcome:
    return world.run(
        "merge-results",
        "--matrix",
        MATRIX,
        "--cache",
        world.cache,
        "--out",
        world.out,
        leg,
        may_write=(world.out,),
        bound=bound,
    )


# ================================================================ paths

ESCAPING_LOGS = [
    "/proc/self/environ",
    "/etc/passwd",
    f"/x/{CELL_LOGS}/../../../../etc/passwd",
    f"/x/{CELL_LOGS}/../../x.log",
    f"{CELL_LOGS}/../../../escape.log",
    "../../outside.log",
    "logs/other-cell/build.log",
    "relative.log",
    f"/x/{CELL_LOGS}",
]


@pytest.mark.integration
@pytest.mark.parametrize("log", ESCAPING_LOGS)
def test_paths_a_log_outside_its_results_folder_is_refused(world, log):
    leg = world.leg_results(lambda d: _set_log(d, log))
    line = merge(world, leg).one_line(2)
    assert "not inside its results folder" in line
    assert not world.out.exists()


# kind: how it is made, and the exit code (2: refused, resolves outside; 0: not copied)
LINKED_LOGS = {
    "symlink-to-environ": (lambda p, w: p.symlink_to("/proc/self/environ"), 2),
    "symlink-to-secret": (lambda p, w: p.symlink_to(w.tmp / "secret.txt"), 2),
    "symlink-to-dev-zero": (lambda p, w: p.symlink_to("/dev/zero"), 2),
    "dangling": (lambda p, w: p.symlink_to(w.tmp / "nowhere"), 2),
    "parent-symlink": (None, 2),  # logs/<cell> itself a link out of the folder
    "fifo": (lambda p, w: os.mkfifo(p), 0),
    "folder": (lambda p, w: p.mkdir(), 0),
    "absent": (lambda p, w: None, 0),
}


@pytest.mark.integration
@pytest.mark.parametrize("kind", list(LINKED_LOGS))
def test_paths_a_log_that_is_not_a_regular_file_inside_is_never_read(world, kind):
    (world.tmp / "secret.txt").write_text(f"token={TOKEN}\n")
    leg = world.leg_results(lambda d: _set_log(d, f"/ci/run/{CELL_LOGS}/build-patched.log"))
    target = leg / CELL_LOGS / "build-patched.log"
    make, code = LINKED_LOGS[kind]
    if make is None:
        outside = world.tmp / "outside-logs"
        outside.mkdir()
        (outside / "build-patched.log").write_text(f"{TOKEN}\n")
        (leg / CELL_LOGS).rmdir()
        (leg / CELL_LOGS).symlink_to(outside)
    else:
        make(target, world)
    res = merge(world, leg, bound=5)
    if code:
        assert "outside" in res.one_line(code)
        return
    assert res.code == 0, res.err
    merged = json.loads((world.out / "results.json").read_text())
    assert not merged["records"][0]["build"]["log"]
    assert not (world.out / CELL_LOGS / "build-patched.log").exists()


@pytest.mark.integration
def test_paths_a_regular_log_inside_is_copied_and_its_tail_is_well_formed_xml(world):
    import xml.etree.ElementTree as ET

    def fail(d):
        rec = d["records"][0]
        rec["status"] = "build-failed"
        rec["build"].update(ok=False, error="exit 1", log=f"/ci/{CELL_LOGS}/build-patched.log")

    leg = world.leg_results(fail)
    (leg / CELL_LOGS / "build-patched.log").write_bytes(
        b"\x1b[31mFAILED\x1b[0m \x00\x07\x1b]0;title\x07 bad \xff\xfe bytes\n"
        + f"{TOKEN}\n".encode()
    )
    res = merge(world, leg)
    assert res.code == 0, res.err
    # well-formed whatever the log held
    root = ET.fromstring((world.out / "junit.xml").read_bytes())
    text = "".join(root.itertext())
    assert "FAILED" in text and "\x1b" not in text and TOKEN not in text


@pytest.mark.integration
@pytest.mark.parametrize("name", ["../escape.patch", "/etc/passwd", "sub/../../x", "a\\..\\..\\x"])
def test_paths_a_bundle_file_name_outside_the_bundle_is_refused(tmp_path, name):
    from orchestrator.errors import ConfigError
    from orchestrator.untrusted import name_under

    t0 = time.monotonic()
    with pytest.raises(ConfigError) as e:
        name_under(tmp_path, name, "manifest.json: files")
    assert "\n" not in str(e.value) and time.monotonic() - t0 < 1


# ================================================================ ownership

USER_FOLDERS = {
    "notes": {"notes.txt": "mine"},
    "a-tmp-of-mine": {"tmp/draft.txt": "mine", "report.md": "mine"},
    "results-of-another-tool": {"results.json": '{"tool": "other"}', "data.csv": "1,2"},
    "hidden": {".mine": "x"},
}


def _fill(root: Path, files: dict[str, str]) -> dict[str, bytes]:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
        os.utime(root / rel, (0, 0))  # a day old and more: what clean_scratch would take
    return {rel: (root / rel).read_bytes() for rel in files}


def _intact(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        assert (root / rel).read_bytes() == data, rel


@pytest.mark.integration
@pytest.mark.parametrize("folder", list(USER_FOLDERS))
@pytest.mark.parametrize("command", ["merge-results", "resolve-refs", "matrix"])
def test_ownership_cache_at_a_users_folder_is_refused(world, folder, command):
    mine = world.tmp / "work"
    kept = _fill(mine, USER_FOLDERS[folder])
    args = {
        "merge-results": ["--out", world.out, world.leg_results()],
        "resolve-refs": [],
        "matrix": ["--results", world.tmp / "results"],
    }[command]
    m = tiny_matrix(world.tmp) if command == "matrix" else MATRIX
    line = world.run(command, "--matrix", m, "--cache", mine, *args).one_line(2)
    assert "--cache" in line and "not ggml-patch's cache" in line
    _intact(mine, kept)


@pytest.mark.integration
def test_ownership_the_environment_cache_at_a_users_folder_is_refused(world):
    mine = world.tmp / "work"
    kept = _fill(mine, USER_FOLDERS["a-tmp-of-mine"])
    world.mp.setenv("GGML_PATCH_CACHE", str(mine))
    line = world.run("resolve-refs", "--matrix", MATRIX).one_line(2)
    assert "GGML_PATCH_CACHE" in line
    _intact(mine, kept)


@pytest.mark.integration
def test_ownership_an_unmarked_legacy_cache_keeps_its_tmp(world):
    kept = _fill(world.cache, {"tmp/users-draft": "mine", "downloads/x": "y"})
    res = world.run("resolve-refs", "--matrix", MATRIX, "--cache", world.cache)
    assert res.code == 0, res.err
    _intact(world.cache, kept)


@pytest.mark.integration
@pytest.mark.parametrize("folder", list(USER_FOLDERS))
def test_ownership_merge_out_at_a_users_folder_is_refused(world, folder):
    world.out.mkdir()
    kept = _fill(world.out, USER_FOLDERS[folder])
    line = merge(world, world.leg_results()).one_line(2)
    assert "--out" in line and "did not create" in line
    _intact(world.out, kept)


@pytest.mark.integration
@pytest.mark.parametrize("folder", list(USER_FOLDERS))
def test_ownership_matrix_results_at_a_users_folder_is_refused(world, folder):
    res_dir = world.tmp / "results"
    res_dir.mkdir()
    kept = _fill(res_dir, USER_FOLDERS[folder])
    m = tiny_matrix(world.tmp)
    line = world.run(
        "matrix", "--matrix", m, "--cache", world.cache, "--results", res_dir
    ).one_line(2)
    assert "--results" in line
    _intact(res_dir, kept)


@pytest.mark.integration
@pytest.mark.parametrize(
    "content", ["my notes\n", '{"pins": {}}', '{"version": 1, "pins": {}, "mine": 1}', ""]
)
def test_ownership_resolve_refs_never_replaces_a_users_file(world, content):
    f = world.tmp / "pins.json"
    f.write_text(content)
    line = world.run(
        "resolve-refs", "--matrix", MATRIX, "--cache", world.cache, "--out", f
    ).one_line(2)
    assert "--out" in line and f.read_text() == content


@pytest.mark.integration
def test_ownership_resolve_refs_out_at_a_symlink_is_refused(world):
    (world.tmp / "target.txt").write_text("mine")
    link = world.tmp / "pins.json"
    link.symlink_to(world.tmp / "target.txt")
    world.run("resolve-refs", "--matrix", MATRIX, "--cache", world.cache, "--out", link).one_line(2)
    assert (world.tmp / "target.txt").read_text() == "mine"


@pytest.mark.integration
def test_ownership_a_users_partial_folder_survives_a_bundle_write(tmp_path):
    from orchestrator.upstream.bundle import _write_dir

    mine = tmp_path / ".tiny.partial"
    kept = _fill(mine, {"draft.patch": "mine"})
    _write_dir(tmp_path / "tiny", {"manifest.json": '{"tool": "ggml-patch", "target": "tiny"}'})
    _intact(mine, kept)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tiny.partial")] == [
        ".tiny.partial"
    ]


# ================================================================ secrets

URLS_WITH_PASSWORDS = [
    f"https://user:{PASSWORD}@127.0.0.1:9",
    f"http://x-access-token:{PASSWORD}@127.0.0.1:9/api",
    f"https://{TOKEN}@127.0.0.1:9",
    f"https://127.0.0.1:9/?access_token={PASSWORD}",
]


@pytest.mark.integration
@pytest.mark.parametrize("api_url", URLS_WITH_PASSWORDS)
def test_secrets_drift_dry_run_prints_no_secret(world, api_url):
    # with GITHUB_TOKEN set, a dry run reads the open issue: without it nothing is contacted;
    # the token is still live (GH_TOKEN) and in the status file
    world.mp.delenv("GITHUB_TOKEN")
    world.mp.setenv("GH_TOKEN", TOKEN)
    world.mp.setenv("GH_ENTERPRISE_TOKEN", GH_TOKEN)
    status = world.tmp / "status.json"
    status.write_text(
        json.dumps(
            {
                "profile": "live",
                "targets": [
                    {
                        "target": "t",
                        "layout": "ggml",
                        "source": {"kind": "git", "url": f"https://u:{PASSWORD}@h/x"},
                        "status": "conflict",
                        "detail": f"git said {TOKEN} and {GH_TOKEN} at "
                        f"https://me:{PASSWORD}@host/r",
                        "base": "ab" * 20,
                    }
                ],
            }
        )
    )
    res = world.run(
        "drift-issue",
        "--matrix",
        MATRIX,
        "--cache",
        world.cache,
        "--repo",
        "o/r",
        "--api-url",
        api_url,
        "--dry-run",
        "--status",
        status,
    )
    assert res.code == 0, res.err
    assert "POST" in res.out


@pytest.mark.integration
@pytest.mark.parametrize("where", ["reason", "failure_line", "error"])
def test_secrets_merge_writes_no_secret_from_a_results_file(world, where):
    def salt(d):
        text = f"fetch https://u:{PASSWORD}@host/r failed; token {TOKEN}"
        if where == "reason":
            d["cells"][0]["reason"] = text
        elif where == "failure_line":
            next(iter(d["records"][0]["tests"].values()))["failure_line"] = text
        else:
            d["records"][0]["build"]["error"] = text

    res = merge(world, world.leg_results(salt))
    assert res.code == 0, res.err


@pytest.mark.integration
@pytest.mark.parametrize("url", URLS_WITH_PASSWORDS[:3])
def test_secrets_a_matrix_url_with_a_password_is_redacted_in_the_error(world, url):
    m = tiny_matrix(
        world.tmp, source=f"{{kind: tarball, url: {yq(url + '/x.tar.gz')}, sha256: '{'0' * 64}'}}"
    )
    row = status_row(
        world.run("status", "--json", "--matrix", m, "--cache", world.cache, bound=30), 3
    )
    assert row["status"] == "source unreachable" and "***@" in row["detail"] + row["source"].get(
        "url", "***@"
    )


@pytest.mark.integration
@pytest.mark.parametrize("api_url", URLS_WITH_PASSWORDS[:2])
def test_secrets_pr_never_prints_the_api_urls_password(world, api_url):
    res = world.run(
        "pr",
        "--matrix",
        MATRIX,
        "--cache",
        world.cache,
        "--bundle",
        world.tmp / "no-bundle",
        "--repo",
        "o/r",
        "--branch",
        "fix",
        "--head-remote",
        f"https://u:{PASSWORD}@github.com/me/r.git",
        "--api-url",
        api_url,
    )
    res.one_line(2)


@pytest.mark.integration
@pytest.mark.parametrize(
    "prompt, answers",
    [
        ("Password for 'https://x-access-token@github.com': ", True),
        ("Username for 'https://github.com': ", False),  # the user name, not the token
        ("Password for 'http://x-access-token@github.com': ", False),
        ("Password for 'https://x-access-token@evil.example': ", False),
        ("Password for 'https://x-access-token@github.com.evil.example': ", False),
        ("Password for 'https://a@evil.example/@github.com': ", False),
    ],
)
def test_secrets_the_askpass_answers_only_the_github_host_over_https(tmp_path, prompt, answers):
    import subprocess

    from orchestrator.upstream.github import askpass_script

    script = askpass_script(tmp_path, "github.com")
    p = subprocess.run(
        [str(script), prompt],
        capture_output=True,
        text=True,
        timeout=10,
        env={"PATH": os.environ["PATH"], "GITHUB_TOKEN": TOKEN},
    )
    assert (TOKEN in p.stdout) is answers


# ================================================================ bounds


def _sparse(path: Path, size: int = 200 * 1024 * 1024) -> None:
    with open(path, "wb") as f:
        f.truncate(size)  # st_size says 200 MB: refused from fstat, nothing read


SPECIALS = {
    "fifo": lambda p: os.mkfifo(p),
    "dev-zero": lambda p: p.symlink_to("/dev/zero"),
    "dev-urandom": lambda p: p.symlink_to("/dev/urandom"),
    "folder": lambda p: p.mkdir(),
    "sparse-200MB": _sparse,
}


def _special_args(world: World, which: str, path: Path) -> tuple[list, tuple]:
    if which == "--matrix":
        return ["status", "--matrix", path, "--cache", world.cache], ()
    if which == "--pins":
        return ["resolve-refs", "--matrix", MATRIX, "--cache", world.cache, "--pins", path], ()
    if which == "--status":
        return [
            "drift-issue",
            "--matrix",
            MATRIX,
            "--cache",
            world.cache,
            "--repo",
            "o/r",
            "--dry-run",
            "--status",
            path,
        ], ()
    # results.json of a leg
    return [
        "merge-results",
        "--matrix",
        MATRIX,
        "--cache",
        world.cache,
        "--out",
        world.out,
        path,
    ], (world.out,)


@pytest.mark.integration
@pytest.mark.parametrize("kind", list(SPECIALS))
@pytest.mark.parametrize("which", ["--matrix", "--pins", "--status", "results"])
def test_bounds_a_special_file_as_a_document_is_one_line(world, kind, which):
    path = world.tmp / ("results.json" if which == "results" else f"doc-{kind}")
    SPECIALS[kind](path)
    args, may = _special_args(world, which, path)
    line = world.run(*args, may_write=may, bound=5).one_line(2)
    assert str(path) in line or path.name in line


@pytest.mark.integration
@pytest.mark.parametrize(
    "line_text",
    [
        "automated pr " * 4000,
        "do not " * 8000,
        "comments " * 6000 + "1 -",
        "a" * 52000,
        "<!--" * 20000,
        "disclosure " * 5000 + ":",
        "[" * 50000,
        "# a" + " " * 50000 + "x",
        "open an issue " * 4000,
        "regression test " * 3000,
    ],
)
def test_bounds_policy_rules_on_a_long_line_are_fast(line_text):
    from orchestrator.upstream import cover, policy

    t0 = time.monotonic()
    files = {
        "AGENTS.md": line_text + "\n",
        "CONTRIBUTING.md": (line_text + "\n") * 3,
        ".github/pull_request_template.md": "## A\n" + line_text + "\n",
    }
    p = policy.derive("t", "0" * 40, files)
    c = cover.parse_cover("cover.md", "## A\n" + line_text + "\n" + "<!--" * 5000)
    cover.problems(c, p.template)
    cover.issue_reference(c)
    assert time.monotonic() - t0 < 2.0


# -- a hostile HTTP server on 127.0.0.1


class Hostile(http.server.BaseHTTPRequestHandler):
    behaviours: dict[str, Callable] = {}

    def do_GET(self):  # noqa: N802
        name = self.path.strip("/").split("/")[0]
        Hostile.behaviours.get(name, Hostile.not_found)(self)

    def not_found(self):
        self.send_response(404)
        self.end_headers()

    def log_message(self, *a):
        pass


@pytest.fixture(scope="module")
def hostile():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def _endless(h):
    h.send_response(200)
    h.end_headers()
    try:
        while True:
            h.wfile.write(b"\0" * 65536)
            time.sleep(0.05)
    except OSError:
        pass


def _trickle(h):
    h.send_response(200)
    h.send_header("Content-Length", "100000")
    h.end_headers()
    try:
        for _ in range(100000):
            h.wfile.write(b"x")
            h.wfile.flush()
            time.sleep(0.2)
    except OSError:
        pass


def _huge(h):
    h.send_response(200)
    h.send_header("Content-Length", str(50 * 1024**3))
    h.end_headers()


def _redirect_file(h):
    h.send_response(302)
    h.send_header("Location", "file:///dev/zero")
    h.end_headers()


def _index_file_link(h):
    body = b'<a href="file:///dev/zero#sha256=' + b"0" * 64 + b'">tinypkg-1.0.tar.gz</a>'
    h.send_response(200)
    h.send_header("Content-Type", "text/html")
    h.end_headers()
    h.wfile.write(body)


_ARCHIVES: dict[str, bytes] = {}


def _archive(name):
    def serve(h):
        h.send_response(200)
        h.send_header("Content-Length", str(len(_ARCHIVES[name])))
        h.end_headers()
        h.wfile.write(_ARCHIVES[name])

    return serve


def _bomb() -> bytes:
    buf = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=1) as gz,
        tarfile.open(fileobj=gz, mode="w") as tar,
    ):
        info = tarfile.TarInfo("top/zeros.bin")
        info.size = 300 * 1024 * 1024

        class Zeros(io.RawIOBase):
            left = info.size

            def readable(self):
                return True

            def readinto(self, b):
                n = min(len(b), self.left)
                b[:n] = bytes(n)
                self.left -= n
                return n

        tar.addfile(info, io.BufferedReader(Zeros(), 1 << 20))
    return buf.getvalue()


def _traversal() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in ("top/ok.txt", "top/../../escaped.txt"):
            info = tarfile.TarInfo(name)
            info.size = 2
            tar.addfile(info, io.BytesIO(b"x\n"))
    return buf.getvalue()


def _link_out() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("top/ok.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"x\n"))
        link = tarfile.TarInfo("top/link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
        hard = tarfile.TarInfo("top/hard")
        hard.type, hard.linkname = tarfile.LNKTYPE, "../../etc/passwd"
        tar.addfile(hard)
    return buf.getvalue()


Hostile.behaviours.update(
    endless=_endless,
    trickle=_trickle,
    huge=_huge,
    redirect=_redirect_file,
    index=_index_file_link,
    bomb=_archive("bomb"),
    traversal=_archive("traversal"),
    linkout=_archive("linkout"),
)


@pytest.mark.integration
@pytest.mark.parametrize(
    "path, code", [("endless", 3), ("trickle", 3), ("huge", 3), ("redirect", 3)]
)
def test_bounds_a_hostile_download_server_ends_in_time(world, hostile, path, code):
    world.mp.setenv("GGML_PATCH_HTTP_DEADLINE_S", "1.5")
    url = f"{hostile}/{path}/x.tar.gz".replace("http://", f"http://u:{PASSWORD}@")
    m = tiny_matrix(world.tmp, source=f"{{kind: tarball, url: {yq(url)}, sha256: '{'0' * 64}'}}")
    row = status_row(
        world.run("status", "--json", "--matrix", m, "--cache", world.cache, bound=15), code
    )
    assert row["status"].startswith("source un"), row
    scratch = world.cache / "tmp"
    assert not scratch.exists() or not any(scratch.iterdir())  # no half-written download left


@pytest.mark.integration
@pytest.mark.parametrize(
    "name, make", [("bomb", _bomb), ("traversal", _traversal), ("linkout", _link_out)]
)
def test_bounds_a_hostile_archive_is_refused_with_exit_3(world, hostile, name, make):
    if name not in _ARCHIVES:
        _ARCHIVES[name] = make()
    sha = hashlib.sha256(_ARCHIVES[name]).hexdigest()
    m = tiny_matrix(
        world.tmp, source=f"{{kind: tarball, url: '{hostile}/{name}/x.tar.gz', sha256: '{sha}'}}"
    )
    row = status_row(
        world.run("status", "--json", "--matrix", m, "--cache", world.cache, bound=30), 3
    )
    assert row["status"] == "source unavailable" and (
        "refused" in row["detail"] or "unpack" in row["detail"]
    )
    assert not (world.tmp / "escaped.txt").exists()


@pytest.mark.integration
def test_bounds_an_index_link_to_a_local_device_is_never_followed(world, hostile):
    world.mp.setenv("PIP_INDEX_URL", f"{hostile}/index")
    m = tiny_matrix(
        world.tmp,
        source=f"{{kind: pypi-sdist, package: tinypkg, version: '1.0', sha256: '{'0' * 64}'}}",
    )
    row = status_row(
        world.run("status", "--json", "--matrix", m, "--cache", world.cache, bound=15), 3
    )
    assert "no sdist" in row["detail"], row


# ================================================================ types


def _sample_edit(path: list, value):
    def edit(d):
        target = d
        for k in path[:-1]:
            target = target[k]
        target[path[-1]] = value

    return edit


RESULTS_TYPES = {
    "cells-a-string": (["cells"], "x"),
    "records-a-number": (["records"], 5),
    "duration-a-string": (["duration_s"], "fast"),
    "exit-code-a-string": (["exit_code"], "0"),
    "series-a-list": (["series"], []),
    "series-sha-a-number": (["series", "sha256"], 7),
    "cell-id-a-list": (["cells", 0, "cell"], ["a"]),
    "cell-status-unknown": (["cells", 0, "status"], "fine"),
    "record-build-a-string": (["records", 0, "build"], "ok"),
    "record-tests-a-list": (["records", 0, "tests"], []),
    "record-log-a-number": (["records", 0, "build", "log"], 12),
    "duration-a-huge-number": (["duration_s"], "1e999"),
}


@pytest.mark.integration
@pytest.mark.parametrize("name", list(RESULTS_TYPES))
def test_types_a_results_field_of_the_wrong_type_is_one_line(world, name):
    path, value = RESULTS_TYPES[name]
    if value == "1e999":
        leg = world.leg_results(
            text=json.dumps(world.data).replace('"duration_s": ', '"duration_s": 1e999, "x": ', 1)
        )
    else:
        leg = world.leg_results(_sample_edit(path, value))
    merge(world, leg).one_line(2)
    assert not world.out.exists()


@pytest.mark.integration
@pytest.mark.parametrize(
    "text",
    [
        "[" * 100000 + "]" * 100000,
        '{"a": ' * 50000 + "1" + "}" * 50000,
        "NaN",
        '{"cells": NaN}',
        "\ufeff{}",
        "",
        "null",
        '"just a string"',
    ],
)
def test_types_nested_or_odd_json_is_one_line(world, text):
    merge(world, world.leg_results(text=text)).one_line(2)


PINS = [
    '{"pins": []}',
    '{"pins": {"x": 5}}',
    '{"pins": {"x": {"commit": 123}}}',
    '{"pins": {"x": {"commit": "abc"}}}',
    "[]",
    '{"pins": {"x": {"commit": "' + "g" * 40 + '"}}}',
]


@pytest.mark.integration
@pytest.mark.parametrize("text", PINS)
def test_types_a_bad_pins_file_is_one_line(world, text):
    f = world.tmp / "pins.json"
    f.write_text(text)
    world.run("resolve-refs", "--matrix", MATRIX, "--cache", world.cache, "--pins", f).one_line(2)


STATUSES = [
    '{"targets": 5}',
    '{"targets": [5]}',
    '{"targets": [{"target": 1, "status": "conflicts"}]}',
    "[]",
    '{"targets": [{"target": "t", "status": ["x"]}]}',
]


@pytest.mark.integration
@pytest.mark.parametrize("text", STATUSES)
def test_types_a_bad_status_file_is_one_line(world, text):
    f = world.tmp / "status.json"
    f.write_text(text)
    world.run(
        "drift-issue",
        "--matrix",
        MATRIX,
        "--cache",
        world.cache,
        "--repo",
        "o/r",
        "--dry-run",
        "--status",
        f,
    ).one_line(2)


# the values of the records read back besides results.json (issue 36, point 2): each breaks a
# rule of its field (one line, no control character, bounded, https, ISO 8601, bounded integer)
_PIN = {"commit": "a" * 40, "ref": "master", "url": "https://github.com/o/r"}
PINS_VALUES = {  # name -> (the file's entries, the key its error line names)
    "reason-with-terminal-escapes": (
        {"unreachable": {"t": {"reason": "\x1b]0;x\x07\x1b[2J"}}},
        "unreachable.t.reason: a control character",
    ),
    "reason-two-lines": (
        {"unreachable": {"t": {"reason": "down\n## owned @org/team"}}},
        "unreachable.t.reason: a line break",
    ),
    "reason-huge": (
        {"unreachable": {"t": {"reason": "x" * 100_000}}},
        "unreachable.t.reason: 100000 characters",
    ),
    "target-a-path": ({"pins": {"../x": _PIN}}, "pins.../x.[key]: string should match pattern"),
    "ref-with-escape": (
        {"pins": {"t": {**_PIN, "ref": "main\x1b[2J"}}},
        "pins.t.ref: a control character",
    ),
    "url-two-lines": (
        {"pins": {"t": {**_PIN, "url": "https://github.com/o/r\nx"}}},
        "pins.t.url: a line break",
    ),
}


@pytest.mark.integration
@pytest.mark.parametrize("name", list(PINS_VALUES))
def test_types_a_pins_value_breaking_its_rule_is_one_line(world, name):
    entries, said = PINS_VALUES[name]
    f = world.tmp / "pins.json"
    f.write_text(json.dumps({"version": 1, "pins": {}, **entries}))
    line = world.run(
        "resolve-refs", "--matrix", MATRIX, "--cache", world.cache, "--pins", f
    ).one_line(2)
    assert f"pins.json: {said}" in line, line
    assert "\x1b" not in line and len(line) < 600


_ROW = {"target": "ggml", "status": "applies cleanly"}
STATUS_VALUES = {
    "detail-with-a-heading": {**_ROW, "detail": "a\n## owned @org/team <!--"},
    "detail-with-terminal-escapes": {**_ROW, "detail": "\x1b]0;x\x07\x1b[2J"},
    "detail-huge": {**_ROW, "detail": "x" * 100_000},
    "target-a-path": {**_ROW, "target": "../x"},
    "patch-name-two-lines": {**_ROW, "patches": [{"name": "a\nb", "result": "CLEAN"}]},
    "conflict-line-huge": {
        **_ROW,
        "conflict": {"patch": "p", "file": "f", "hunk": "h", "lines": [[1, 10**15]]},
    },
    "source-description-with-escape": {
        **_ROW,
        "source": {"kind": "git", "description": "\x1b[2Jx"},
    },
}


@pytest.mark.integration
def test_types_a_valid_status_file_reads_back():
    """The control of the cases below: the same row without the bad value is taken."""
    from orchestrator.ci.drift_issue import read_status

    profile, rows = read_status({"profile": "default", "targets": [_ROW]}, "status.json")
    assert profile == "default" and list(rows) == ["ggml"]


@pytest.mark.integration
@pytest.mark.parametrize("name", list(STATUS_VALUES))
def test_types_a_status_value_breaking_its_rule_is_one_line(world, name):
    f = world.tmp / "status.json"
    f.write_text(json.dumps({"profile": "default", "targets": [STATUS_VALUES[name]]}))
    args = ("--repo", "o/r", "--dry-run", "--status", f)
    line = world.run("drift-issue", "--matrix", MATRIX, "--cache", world.cache, *args).one_line(2)
    assert "\x1b" not in line and len(line) < 600


def _manifest_edit(path: list, value) -> Callable[[dict], None]:
    def edit(m: dict) -> None:
        at = m
        for key in path[:-1]:
            at = at[key]
        at[path[-1]] = value

    return edit


MANIFEST_VALUES = {
    "warning-with-a-heading": _manifest_edit(["warnings"], ["a\n## owned @org/team"]),
    "draft-reason-with-escapes": _manifest_edit(["draft_reasons"], ["\x1b]0;x\x07"]),
    "results-exit-code-12345": _manifest_edit(["results", "exit_code"], 12345),
    "results-started-at-not-iso": _manifest_edit(["results", "started_at"], "<img src=x>"),
    "results-sha256-not-hex": _manifest_edit(["results", "sha256"], "x"),
    "summary-line-huge": _manifest_edit(
        ["verification", "tests", "test-opt", "summary_line"], "x" * 100_000
    ),
    "author-with-escape": _manifest_edit(["authorship", "author"], "A \x1b[2J <a@b.org>"),
    "check-detail-with-escape": _manifest_edit(
        ["readiness", "checks", 0, "detail"], "\x1b]8;;https://evil/\x07x"
    ),
    "readiness-count-negative": _manifest_edit(["readiness", "summary", "warn"], -1),
    "citation-line-huge": _manifest_edit(["readiness", "checks", 0, "rule", 0, "line"], 10**15),
    "duration-negative": _manifest_edit(["verification", "durations_s", "total"], -1.0),
    "base-description-two-lines": _manifest_edit(["base", "description"], "a\n## b"),
    "toolchain-with-escape": _manifest_edit(["toolchain", "cmake"], "3.25\x1b[2J"),
    "rule-value-two-lines": _manifest_edit(["policy", "submit", "value"], "manual\n## x"),
    "rule-citation-with-escape": _manifest_edit(
        ["policy", "repo", "citations", 0, "text"], "\x1b[2Jx"
    ),
}


@pytest.mark.integration
@pytest.mark.parametrize("name", list(MANIFEST_VALUES))
def test_types_a_manifest_value_breaking_its_rule_is_one_line(tmp_path, name):
    from orchestrator.errors import ConfigError, ExitCode
    from orchestrator.upstream.manifest import read_manifest

    from ..unit.test_manifest import written

    data = written()
    assert read_manifest(json.dumps(data), tmp_path / "manifest.json")  # what bundle writes
    MANIFEST_VALUES[name](data)
    t0 = time.monotonic()
    with pytest.raises(ConfigError) as e:
        read_manifest(json.dumps(data), tmp_path / "manifest.json")
    line = str(e.value)
    assert e.value.exit_code == ExitCode.CONFIG == 2 and time.monotonic() - t0 < 1
    assert "\n" not in line and "\x1b" not in line and len(line) < 600, line


_TOPIC = "summary: s\norigin: local\nlast_update: 2026-12-02\nstate: local\ntests: [test-opt]\n"
TOPIC_VALUES = {
    "bug-breaking-out-of-a-link": "bug: 'https://github.com/o/r/issues/1\"><img/src=x>'\n",
    "forwarded-with-a-bidi-override": 'forwarded: "https://github.com/o/r/pull/1\\u202e"\n',
    "bug-huge": "bug: https://github.com/" + "a" * 3000 + "\n",
    "summary-huge": "summary: " + "x" * 100_000 + "\n",
}


@pytest.mark.integration
@pytest.mark.parametrize("name", list(TOPIC_VALUES))
def test_types_a_topic_yaml_value_breaking_its_rule_is_one_line(name):
    from orchestrator.errors import ConfigError, ExitCode
    from orchestrator.patchset.queue import parse_topic_meta

    where = "patches/t/topic.yaml"
    assert parse_topic_meta(where, _TOPIC)[0].summary == "s"  # the control
    bad = TOPIC_VALUES[name]
    kept = [line for line in _TOPIC.splitlines(True) if line.split(":")[0] != bad.split(":")[0]]
    with pytest.raises(ConfigError) as e:
        parse_topic_meta(where, "".join(kept) + bad)
    line = str(e.value)
    assert e.value.exit_code == ExitCode.CONFIG == 2
    assert line.startswith(where) and "\n" not in line and len(line) < 600, line


@pytest.mark.integration
@pytest.mark.parametrize(
    "option, value",
    [
        ("--timeout", "inf"),
        ("--timeout", "nan"),
        ("--timeout", "0"),
        ("--timeout", "-1"),
        ("--timeout", "1e999"),
        ("--lock-timeout", "nan"),
        ("--lock-timeout", "inf"),
        ("--lock-timeout", "-5"),
    ],
)
def test_types_a_timeout_must_be_a_finite_number(world, option, value):
    res = world.run(
        "drift-issue",
        "--matrix",
        MATRIX,
        "--cache",
        world.cache,
        "--repo",
        "o/r",
        "--dry-run",
        "--status",
        world.tmp / "none.json",
        f"{option}={value}",
    )
    assert res.code == 2 and len(res.err.strip().splitlines()) == 1 and "error:" in res.err


@pytest.mark.integration
@pytest.mark.parametrize(
    "holder",
    [
        {"pid": 1, "command": "x", "since": 1e300},
        {"pid": 1, "command": "x", "since": float("nan")},
        {"pid": "one", "command": "x", "since": 1},
        {"pid": 1, "command": ["x"], "since": 1},
        {"pid": 10**30, "command": "x", "since": 1},
        {"pid": 1, "command": "x" * 100000, "since": 1},
        [1, 2],
    ],
)
def test_types_a_lock_holder_file_is_validated(tmp_path, holder):
    from orchestrator.locking import describe_holder, holder_path

    lock = tmp_path / "x.lock"
    holder_path(lock).write_text(json.dumps(holder))
    t0 = time.monotonic()
    said = describe_holder(lock)
    assert said == "another process (it did not say which)" and time.monotonic() - t0 < 1


ODD_TMP = {
    "huge-pid": lambda t: (t / "extract-host-pid99999999999999999999999-x").mkdir(),
    "fifo": lambda t: os.mkfifo(t / "odd-fifo"),
    "symlink-out": lambda t: (t / "link").symlink_to("/etc"),
    "bad-utf8": lambda t: (t / os.fsdecode(b"\xff\xfe-name")).write_text("x"),
}


@pytest.mark.integration
@pytest.mark.parametrize("kind", list(ODD_TMP))
def test_types_an_odd_cache_tmp_entry_never_breaks_a_command(world, kind):
    world.cache.mkdir()
    (world.cache / ".ggml-patch-cache").write_text("marker\n")
    (world.cache / "tmp").mkdir()
    ODD_TMP[kind](world.cache / "tmp")
    res = world.run("resolve-refs", "--matrix", MATRIX, "--cache", world.cache)
    assert res.code == 0, res.err
    assert Path("/etc/passwd").exists()


# ================================================================ environment


def _checkout(world: World) -> Path:
    import subprocess

    tree = world.tmp / "tiny"
    (tree / "src").mkdir(parents=True)
    (tree / "tests").mkdir()
    (tree / "src" / "ggml-opt.cpp").write_text("// ggml-opt\n")
    from ..helpers.security import TESTS_CMAKE

    (tree / "tests" / "CMakeLists.txt").write_text(TESTS_CMAKE)
    env = {"PATH": os.environ["PATH"], "HOME": str(world.home), "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=u", "-c", "user.email=e", "commit", "-qm", "x"],
    ):
        subprocess.run(["git", "-C", str(tree), *args], check=True, env=env, capture_output=True)
    return tree


ENVIRONMENTS = {
    "GIT_DIR": lambda w: {"GIT_DIR": str(w.tmp / "elsewhere.git")},
    "GIT_WORK_TREE": lambda w: {"GIT_WORK_TREE": str(w.tmp)},
    "GIT_INDEX_FILE": lambda w: {"GIT_INDEX_FILE": str(w.tmp / "idx")},
    "GIT_CONFIG_fsmonitor": lambda w: {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "core.fsmonitor",
        "GIT_CONFIG_VALUE_0": f"touch {w.tmp}/pwned",
    },
    "GIT_CONFIG_PARAMETERS": lambda w: {
        "GIT_CONFIG_PARAMETERS": f"'core.fsmonitor'='touch {w.tmp}/pwned'"
    },
    "GIT_OBJECT_DIRECTORY": lambda w: {"GIT_OBJECT_DIRECTORY": str(w.tmp / "objs")},
    "GIT_EXTERNAL_DIFF": lambda w: {"GIT_EXTERNAL_DIFF": f"touch {w.tmp}/pwned;"},
    "repo-config-fsmonitor": None,
    "repo-config-hooks": None,
}


@pytest.mark.integration
@pytest.mark.parametrize("kind", list(ENVIRONMENTS))
def test_environment_never_reaches_git(world, kind):
    import subprocess

    tree = _checkout(world)
    if ENVIRONMENTS[kind] is None:
        key = "core.fsmonitor" if kind == "repo-config-fsmonitor" else "core.hooksPath"
        hooks = world.tmp / "hooks"
        hooks.mkdir()
        for h in (
            "post-checkout",
            "pre-commit",
            "post-commit",
            "applypatch-msg",
            "pre-applypatch",
            "post-applypatch",
        ):
            (hooks / h).write_text(f"#!/bin/sh\ntouch {world.tmp}/pwned\n")
            (hooks / h).chmod(0o755)
        value = f"touch {world.tmp}/pwned" if key == "core.fsmonitor" else str(hooks)
        subprocess.run(["git", "-C", str(tree), "config", key, value], check=True)
    else:
        for k, v in ENVIRONMENTS[kind](world).items():
            world.mp.setenv(k, v)
    m = tiny_matrix(world.tmp)
    res = world.run("status", "--matrix", m, "--cache", world.cache, bound=60)
    assert res.code in (0, 1), res.err  # the same answer as without it: not applicable / applies
    assert "conflict" not in res.out.lower() or "applies" in res.out.lower()
    assert not (world.tmp / "pwned").exists()
    assert not (world.tmp / "elsewhere.git").exists()


# ================================================================ issue 36: published, validated,
# owned per entry, redacted in pieces, built in a clean environment


def _competing_record(d: dict, **info) -> None:
    rec = json.loads(json.dumps(d["records"][0]))
    rec["variant"] = "competing:evil"
    rec["competing"] = {
        "name": "evil",
        "title": "a fix",
        "url": "https://github.com/o/r/pull/1",
        "date": "2026-01-02",
        "summary": "s",
        **info,
    }
    rec["judged"] = {"verdict": "wrong", "reason": "r"}
    d["records"].append(rec)


RESULTS_VALUES = {
    "url-javascript": lambda d: _competing_record(d, url="javascript:alert(1)"),
    "url-http": lambda d: _competing_record(d, url="http://github.com/o/r"),
    "date-with-a-heading": lambda d: _competing_record(d, date="2026-01-02\n## owned @org/team"),
    "date-not-a-date": lambda d: _competing_record(d, date="yesterday"),
    "title-with-terminal-escapes": lambda d: _competing_record(d, title="\x1b]0;x\x07\x1b[2J t"),
    "title-two-lines": lambda d: _competing_record(d, title="a\nb"),
    "reason-with-escape": _sample_edit(["cells", 0, "reason"], "\x1b[2Jcleared"),
    "reason-huge": _sample_edit(["cells", 0, "reason"], "x" * 100_000),
    "exit-code-12345": _sample_edit(["cells", 0, "exit_code"], 12345),
    "run-exit-code-negative": _sample_edit(["exit_code"], -1),
    "started-at-not-iso": _sample_edit(["started_at"], "<img src=x>"),
}


@pytest.mark.integration
@pytest.mark.parametrize("name", list(RESULTS_VALUES))
def test_types_a_results_value_breaking_its_rule_is_one_line(world, name):
    line = merge(world, world.leg_results(RESULTS_VALUES[name])).one_line(2)
    assert "\x1b" not in line and len(line) < 600
    assert not world.out.exists()


@pytest.mark.integration
def test_types_a_5000_digit_integer_is_one_line(world):
    text = json.dumps(world.data).replace(
        '"exit_code": ', '"exit_code": ' + "9" * 5000 + ', "x": ', 1
    )
    merge(world, world.leg_results(text=text)).one_line(2)


# ---------------------------------------------------------------- ownership per entry


@pytest.mark.integration
@pytest.mark.parametrize(
    "files",
    [{"summary.md": "# my notes\n"}, {"results.json": '{"mine": 1}'}, {"junit.xml": "<x/>"}],
    ids=["summary-only", "results-without-tool", "junit-only"],
)
@pytest.mark.parametrize("command", ["merge-results", "matrix"])
def test_ownership_a_folder_without_our_marker_or_tool_key_is_refused(world, files, command):
    mine = world.tmp / "mine"
    kept = _fill(mine, files)
    if command == "merge-results":
        args = ["merge-results", "--matrix", MATRIX, "--out", mine, world.leg_results()]
    else:
        args = ["matrix", "--matrix", tiny_matrix(world.tmp), "--results", mine]
    world.run(*args, "--cache", world.cache).one_line(2)
    _intact(mine, kept)


@pytest.mark.integration
def test_ownership_entries_of_a_marked_folder_are_replaced_not_written_through(world):
    first = merge(world, world.leg_results())
    assert first.code == 0, first.err
    victims = {}
    for name in ("summary.md", "results.json", "junit.xml"):
        victim = world.tmp / f"victim-{name}"
        victim.write_text("the user's file\n")
        (world.out / name).unlink()
        (world.out / name).symlink_to(victim)
        victims[name] = victim
    again = merge(world, world.leg_results())
    assert again.code == 0, again.err
    for name, victim in victims.items():
        assert victim.read_text() == "the user's file\n", name
        assert (world.out / name).is_file() and not (world.out / name).is_symlink()


@pytest.mark.integration
def test_ownership_merge_out_that_is_an_input_is_refused(world):
    def with_log(d):
        _set_log(d, f"/ci/{CELL_LOGS}/build-patched.log")

    leg = world.leg_results(with_log)
    log = leg / CELL_LOGS / "build-patched.log"
    log.write_text("the leg's log\n")
    (leg / ".ggml-patch-output").write_text("marked\n")
    res = world.run(
        "merge-results",
        "--matrix",
        MATRIX,
        "--cache",
        world.cache,
        "--out",
        leg,
        leg,
        may_write=(world.tmp / "none",),
    )
    assert "also an input" in res.one_line(2)
    assert log.read_text() == "the leg's log\n"


@pytest.mark.integration
def test_ownership_a_log_over_the_cap_is_refused_before_out_is_claimed(world, monkeypatch):
    from orchestrator import untrusted

    monkeypatch.setitem(untrusted.CAPS, "log", 1024)

    def two_logs(d):
        _set_log(d, f"/ci/{CELL_LOGS}/build-patched.log")
        next(iter(d["records"][0]["tests"].values()))["log"] = f"/ci/{CELL_LOGS}/test.log"

    leg = world.leg_results(two_logs)
    (leg / CELL_LOGS / "build-patched.log").write_text("small\n")
    (leg / CELL_LOGS / "test.log").write_text("x" * 4096)
    assert "more than the 1024" in merge(world, leg).one_line(2)
    assert not world.out.exists()


# ---------------------------------------------------------------- redaction in pieces


@pytest.mark.integration
@pytest.mark.parametrize("secret", [TOKEN, GH_TOKEN])
def test_secrets_a_token_across_the_block_edge_of_a_long_line_is_redacted(world, secret):
    def with_log(d):
        _set_log(d, f"/ci/{CELL_LOGS}/build-patched.log")

    leg = world.leg_results(with_log)
    mib = 1024 * 1024
    # the token straddles the 1 MiB block edge, and the 4 KiB hold-back edge too
    for at in (mib - 10, mib - 4096 - 10):
        line = b"a" * at + secret.encode() + b"b" * 100 + b"\n"
        (leg / CELL_LOGS / "build-patched.log").write_bytes(line * 2)
        shutil_rmtree(world.out)
        res = merge(world, leg)
        assert res.code == 0, res.err  # World.run checks every file written for the secret
        assert (world.out / CELL_LOGS / "build-patched.log").stat().st_size > 2 * at


def shutil_rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.integration
def test_secrets_resolve_refs_keeps_no_password_in_the_pins_file(world):
    m = tiny_matrix(
        world.tmp,
        source=f"{{kind: git, url: {yq(f'https://u:{PASSWORD}@127.0.0.1:9/r.git')}, ref: main}}",
    )
    pins = world.tmp / "pins-out" / "pins.json"
    res = world.run(
        "resolve-refs",
        "--matrix",
        m,
        "--cache",
        world.cache,
        "--out",
        pins,
        may_write=(pins.parent,),
        bound=30,
    )
    assert res.code == 0, res.err
    data = json.loads(pins.read_text())
    assert data["unreachable"]["tiny"]["url"] == "https://127.0.0.1:9/r.git"


def test_secrets_a_quoted_password_in_a_printed_command_is_redacted():
    from orchestrator.locking import this_command
    from orchestrator.redact import shell_line

    url = f"https://u:{PASSWORD}@github.com/me/r.git"
    assert PASSWORD not in this_command(["ggml-patch", "pr", "--head-remote", url])
    # what pr's dry run prints: the words redacted, then quoted
    line = shell_line(["git", "push", url, "HEAD:fix"])
    assert PASSWORD not in line and "pa)ss" not in line
    assert line == "git push https://***@github.com/me/r.git HEAD:fix"
    assert shell_line(["echo", "it's"]) == "echo 'it'\"'\"'s'"  # the others quoted


# ---------------------------------------------------------------- a clean build environment


@pytest.mark.integration
def test_environment_cmake_and_tests_get_no_token_and_no_toolchain_file(world, tmp_path):
    """A real CMake configure through the tool's spawn: the target's CMake code cannot read a
    token, and a CMAKE_TOOLCHAIN_FILE of the caller's environment never runs."""
    from orchestrator.run.testrun import spawn

    project = tmp_path / "proj"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(p CXX)\n"
        "add_executable(t t.cpp)\n"
        'file(WRITE "${CMAKE_BINARY_DIR}/seen.txt" '
        '"gh=$ENV{GITHUB_TOKEN} ghx=$ENV{GH_TOKEN} pw=$ENV{DB_PASSWORD} cflags=$ENV{CFLAGS}")\n'
    )
    (project / "t.cpp").write_text("int main() { return 0; }\n")
    marker = tmp_path / "toolchain-ran"
    toolchain = tmp_path / "evil.cmake"
    toolchain.write_text(f'file(WRITE "{marker}" "ran")\n')
    world.mp.setenv("CMAKE_TOOLCHAIN_FILE", str(toolchain))
    world.mp.setenv("DB_PASSWORD", PASSWORD)
    world.mp.setenv("CFLAGS", "-O1")
    build = tmp_path / "build"
    proc = spawn(["cmake", "-S", str(project), "-B", str(build), "-G", "Ninja"], {})
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    # the compiler is found and builds with what passes (PATH, HOME, CC, CFLAGS, ...)
    ninja = spawn(["ninja", "-C", str(build)], {})
    ninja_out, _ = ninja.communicate(timeout=120)
    assert ninja.returncode == 0 and (build / "t").exists(), ninja_out
    seen = (build / "seen.txt").read_text()
    assert seen == "gh= ghx= pw= cflags=-O1", seen
    assert not marker.exists()
    env_proc = spawn(["env"], {"GGML_VK_VISIBLE_DEVICES": "0"})
    env_out, _ = env_proc.communicate(timeout=10)
    assert TOKEN not in env_out and GH_TOKEN not in env_out and PASSWORD not in env_out
    assert "GGML_VK_VISIBLE_DEVICES=0" in env_out and "CMAKE_TOOLCHAIN_FILE" not in env_out


def test_environment_build_variables_are_part_of_the_cache_key(monkeypatch):
    from orchestrator import buildenv

    monkeypatch.delenv("CFLAGS", raising=False)
    before = buildenv.key_part()
    monkeypatch.setenv("CFLAGS", "-O0")
    assert buildenv.key_part() == {**before, "CFLAGS": "-O0"}
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    assert TOKEN not in json.dumps(buildenv.key_part())


def test_environment_build_variables_are_part_of_the_training_cache_key(monkeypatch):
    """A changed CC/CXX/CFLAGS re-trains: the training evidence's key (and its pre-training's)
    holds them as the cell's key does; no token is part of it."""
    from orchestrator.finetune import results as ft
    from orchestrator.finetune.record import Inputs

    for name in ("CC", "CXX", "CFLAGS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    model = ft.RandomModel(
        sha256="1" * 64,
        seed=1,
        dims={},
        n_vocab=8,
        vocab_sha256="0" * 64,
        n_params=8,
        vocab_file="models/v.gguf",
        gguf="0.19.0",
    )

    def gathered() -> Inputs:
        return Inputs(
            base="a" * 40,
            series_sha256="b" * 64,
            rendered_sha256="c" * 64,
            model=model,
            model_path=Path("/c/m.gguf"),
            pretrain_data=ft.DataInfo(sha256="3" * 64),
            pretrain_paths=(),
            data=ft.DataInfo(sha256="5" * 64),
            data_paths=(),
            program_sha256="d" * 64,
            flags=ft.BuildFlags(cmake=["-DGGML_CPU=ON"], program=ft.program_options()),
            toolchain={"cxx": "c++ 12.2.0"},
        )

    cases = tuple(ft.parse_cases([]))
    keys = {gathered().key(cases)}
    pretrain_keys = {gathered().pretrain_key()}
    for name, value in (("CC", "clang"), ("CXX", "clang++"), ("CFLAGS", "-O0")):
        monkeypatch.setenv(name, value)
        keys.add(gathered().key(cases))
        pretrain_keys.add(gathered().pretrain_key())
    assert len(keys) == 4 and len(pretrain_keys) == 4
    assert TOKEN not in json.dumps(gathered().build_env)


@pytest.mark.integration
@pytest.mark.parametrize("kind", ["dev-zero", "fifo"])
def test_environment_pip_config_that_is_a_device_or_fifo_is_one_line(world, kind):
    if kind == "fifo":
        fifo = world.tmp / "pip.fifo"
        os.mkfifo(fifo)
        world.mp.setenv("PIP_CONFIG_FILE", str(fifo))
    else:
        world.mp.setenv("PIP_CONFIG_FILE", "/dev/zero")
    from orchestrator.errors import ConfigError
    from orchestrator.sources.pypi_sdist import index_urls

    t0 = time.monotonic()
    with pytest.raises(ConfigError) as e:
        index_urls()
    assert "PIP_CONFIG_FILE" in str(e.value) and "\n" not in str(e.value)
    assert time.monotonic() - t0 < 2


# ---------------------------------------------------------------- exit codes of API answers


class Api(http.server.BaseHTTPRequestHandler):
    answer: tuple[int, dict, bytes] = (200, {}, b"[]")

    def do_GET(self):  # noqa: N802
        status, headers, body = Api.answer
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_PATCH = do_GET  # noqa: N815

    def log_message(self, *a):
        pass


@pytest.fixture(scope="module")
def api():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Api)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def _status_file(world: World) -> Path:
    status = world.tmp / "status.json"
    row = {"target": "t", "layout": "ggml", "status": "conflict", "detail": "d", "base": "ab"}
    status.write_text(json.dumps({"profile": "live", "targets": [row]}))
    return status


API_ANSWERS = {
    "nested-json": ((200, {}, b"[" * 100000 + b"]" * 100000), 26),
    "an-object-not-a-list": ((200, {}, b'{"items": []}'), 26),
    "a-body-that-is-an-object": ((200, {}, b'[{"number": 1, "body": {"x": 1}}]'), 0),
    "huge-rate-limit-reset": (
        (403, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "9" * 5000}, b"{}"),
        24,
    ),
    "huge-retry-after": ((429, {"Retry-After": "9" * 40}, b"{}"), 24),
}


@pytest.mark.integration
@pytest.mark.parametrize("name", list(API_ANSWERS))
def test_exit_codes_odd_api_answers_are_documented_codes(world, api, name, monkeypatch):
    monkeypatch.setenv("GGML_PATCH_API_BACKOFF_S", "0")
    Api.answer, code = API_ANSWERS[name]
    res = world.run(
        "drift-issue",
        "--repo",
        "o/r",
        "--api-url",
        api,
        "--status",
        _status_file(world),
        "--dry-run",
        "--timeout",
        "5",
        bound=20,
    )
    if code:
        res.one_line(code)
    else:
        assert res.code == 0, res.err


@pytest.mark.integration
@pytest.mark.parametrize("command", ["drift-issue", "pr"])
def test_exit_codes_a_file_api_url_is_2_for_both_commands(world, command):
    if command == "drift-issue":
        args = ["--status", _status_file(world), "--repo", "o/r", "--dry-run"]
    else:
        args = ["--matrix", MATRIX, "--cache", world.cache, "--bundle", world.tmp / "b"]
        args += ["--repo", "o/r", "--branch", "x"]
        args += ["--head-remote", "https://github.com/me/r.git"]
    res = world.run(command, *args, "--api-url", "file:///etc/passwd")
    assert "--api-url" in res.one_line(2)
