"""Source kind `tarball`: URL + sha256, downloaded with requests from a local HTTP server on
127.0.0.1 into the cache. The real ggml snapshot served as a `git archive` tarball (as GitHub
serves one) gives the same status as its pinned sdist.
"""

import hashlib
import io
import socket
import tarfile

import pytest

from orchestrator import sources
from orchestrator.cache import Cache
from orchestrator.errors import ExitCode, SourceUnavailable
from orchestrator.sources.tarball import TarballSource
from orchestrator.vcs.snapshots import SnapshotRepo


def _tar(files: dict[str, str], top: str = "proj-1.0/") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(top + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo(top + ".git/config")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    return buf.getvalue()


def _src(url, sha, **more) -> TarballSource:
    return TarballSource(kind="tarball", url=url, sha256=sha, **more).at("targets.t.source")


def _snap(cache, url, sha, **more):
    return sources.snapshot(_src(url, sha, **more), cache, SnapshotRepo(cache.snapshots_git))


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_download_extract_and_cache(httpserver, tmp_path):
    data = _tar({"vendor/ggml/src/ggml-opt.cpp": "opt\n", "README": "r\n"})
    sha = hashlib.sha256(data).hexdigest()
    httpserver.expect_oneshot_request("/proj-1.0.tar.gz").respond_with_data(data)
    url = httpserver.url_for("/proj-1.0.tar.gz")
    cache = Cache(tmp_path / "cache")
    snap = _snap(cache, url, sha, subdirectory="vendor/ggml")
    repo = SnapshotRepo(cache.snapshots_git)
    assert repo.git("ls-tree", "-r", "--name-only", snap.commit).splitlines() == [
        "src/ggml-opt.cpp"
    ]
    assert snap.provenance == {"url": url, "sha256": sha}
    assert (cache.downloads / f"tarball-{sha[:16]}" / "proj-1.0.tar.gz").read_bytes() == data
    # the server answered once: the snapshot and the download are both reused
    assert _snap(cache, url, sha, subdirectory="vendor/ggml").commit == snap.commit
    whole = _snap(cache, url, sha)
    # the top folder dropped, .git skipped
    assert sorted(repo.git("ls-tree", "-r", "--name-only", whole.commit).splitlines()) == [
        "README",
        "vendor/ggml/src/ggml-opt.cpp",
    ]
    httpserver.check_assertions()


def test_sha256_mismatch_is_refused_and_not_kept(httpserver, tmp_path):
    data = _tar({"a": "a\n"})
    httpserver.expect_request("/p.tar.gz").respond_with_data(data)
    cache = Cache(tmp_path / "cache")
    with pytest.raises(SourceUnavailable) as e:
        _snap(cache, httpserver.url_for("/p.tar.gz"), "0" * 64)
    assert str(e.value) == (
        f"targets.t.source.sha256: {httpserver.url_for('/p.tar.gz')} has sha256 "
        f"{hashlib.sha256(data).hexdigest()}, the matrix pins {'0' * 64}"
    )
    assert not list(cache.downloads.rglob("*.tar.gz")) and not list(cache.scratch().iterdir())


def test_http_error_and_unreachable(httpserver, tmp_path):
    httpserver.expect_request("/missing.tar.gz").respond_with_data("no", status=404)
    cache = Cache(tmp_path / "cache")
    with pytest.raises(SourceUnavailable, match=r"answered HTTP 404 NOT FOUND$"):
        _snap(cache, httpserver.url_for("/missing.tar.gz"), "0" * 64)
    url = f"http://127.0.0.1:{_free_port()}/x.tar.gz"
    with pytest.raises(sources.SourceUnreachable) as e:
        _snap(cache, url, "0" * 64)
    assert (
        str(e.value) == f"targets.t.source.url: {url} is unreachable: connection refused 127.0.0.1"
    )
    assert e.value.exit_code == ExitCode.SOURCE_UNAVAILABLE
