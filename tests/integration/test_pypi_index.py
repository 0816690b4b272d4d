"""Issue 16, point 4: an sdist is fetched as a file from the package index (the user's pip
configuration, PyPI by default) and kept only once its sha256 matches the pin: nothing of the
sdist runs, ever. The index here is a local HTTP server on 127.0.0.1 (pytest-httpserver).

The sdist below carries an in-tree build backend that creates a file when imported: `pip
download` of it (the code before this issue) runs that backend before any hash is checked.
"""

import hashlib
import io
import tarfile
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

from orchestrator.cache import Cache
from orchestrator.errors import SourceUnavailable
from orchestrator.sources import SourceUnreachable, pypi_sdist

from ..helpers.security import isolated, isolated_env, tiny_matrix, tool  # noqa: F401 (fixture)

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


def evil_sdist(path: Path, pwned: Path) -> str:
    """evilpkg-1.0.tar.gz whose build backend writes `pwned` as soon as anything imports it."""
    files = {
        "pyproject.toml": "[build-system]\nrequires = []\nbuild-backend = "
        '"backend"\nbackend-path = ["."]\n',
        "backend.py": f"open({str(pwned)!r}, 'w').write('ran')\n"
        "def get_requires_for_build_wheel(config_settings=None):\n    return []\n",
        "PKG-INFO": "Metadata-Version: 2.1\nName: evilpkg\nVersion: 1.0\n",
        "vendor/ggml/src/ggml-opt.cpp": "// opt\n",
    }
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"evilpkg-1.0/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def index(tmp_path, isolated, monkeypatch):  # noqa: F811
    server = HTTPServer(host="127.0.0.1", port=0)
    server.start()
    monkeypatch.setenv("PIP_INDEX_URL", server.url_for("/simple/"))
    yield server
    server.clear()
    server.stop()


@pytest.fixture
def sdist(tmp_path):
    path = tmp_path / "served" / "evilpkg-1.0.tar.gz"
    path.parent.mkdir()
    sha = evil_sdist(path, tmp_path / "PWNED")
    return path, sha


def serve_html(index, sdist_path: Path, listed_sha: str | None):
    frag = f"#sha256={listed_sha}" if listed_sha else ""
    index.expect_request("/simple/evilpkg/").respond_with_data(
        f'<html><body><a href="/files/{sdist_path.name}{frag}">{sdist_path.name}</a>'
        '<a href="/files/evilpkg-1.0-py3-none-any.whl">evilpkg-1.0-py3-none-any.whl</a>'
        "</body></html>",
        content_type="text/html",
    )
    index.expect_request(f"/files/{sdist_path.name}").respond_with_data(
        sdist_path.read_bytes(), content_type="application/octet-stream"
    )


def download(tmp_path, sha):
    return pypi_sdist.download("evilpkg", "1.0", sha, Cache(tmp_path / "cache"), "targets.t.source")


def test_a_wrong_pin_runs_nothing_and_keeps_nothing(tmp_path, index, sdist):
    path, real = sdist
    serve_html(index, path, None)  # the index gives no hash: the file is fetched and checked
    with pytest.raises(SourceUnavailable, match=f"has sha256 {real}, the matrix pins {'a' * 64}"):
        download(tmp_path, "a" * 64)
    assert not (tmp_path / "PWNED").exists()
    assert list((tmp_path / "cache" / "downloads").rglob("*.tar.gz")) == []
    assert list((tmp_path / "cache" / "tmp").iterdir()) == []


def test_the_right_pin_keeps_the_file_and_runs_nothing(tmp_path, index, sdist):
    path, real = sdist
    serve_html(index, path, real)
    got = download(tmp_path, real)
    assert got.read_bytes() == path.read_bytes() and got.name == "evilpkg-1.0.tar.gz"
    assert not (tmp_path / "PWNED").exists()
    served = len(index.log)
    assert download(tmp_path, real) == got and len(index.log) == served  # cached: no second request


def test_an_index_listing_another_hash_is_refused_before_downloading(tmp_path, index, sdist):
    path, real = sdist
    serve_html(index, path, "b" * 64)
    with pytest.raises(SourceUnavailable, match="sha256"):
        download(tmp_path, real)
    assert [r.path for r, _ in index.log] == ["/simple/evilpkg/"]


def test_the_json_simple_api(tmp_path, index, sdist):
    path, real = sdist
    index.expect_request("/simple/evilpkg/").respond_with_json(
        {
            "meta": {"api-version": "1.1"},
            "name": "evilpkg",
            "files": [
                {
                    "filename": path.name,
                    "url": f"../../files/{path.name}",
                    "hashes": {"sha256": real},
                }
            ],
        },
        content_type=JSON_TYPE,
    )
    index.expect_request(f"/files/{path.name}").respond_with_data(path.read_bytes())
    assert download(tmp_path, real).read_bytes() == path.read_bytes()
    assert not (tmp_path / "PWNED").exists()


def test_no_such_version(tmp_path, index, sdist):
    path, real = sdist
    serve_html(index, path, real)
    with pytest.raises(SourceUnavailable, match=r"no sdist of evilpkg==2.0"):
        pypi_sdist.download("evilpkg", "2.0", real, Cache(tmp_path / "cache"), "targets.t.source")


def test_an_unreachable_index_is_one_line(tmp_path, isolated):  # noqa: F811
    with pytest.raises(SourceUnreachable) as e:
        download(tmp_path, "a" * 64)
    msg = str(e.value)
    assert (
        "\n" not in msg and "127.0.0.1:9" in msg and "unreachable" in msg and "PIP_INDEX_URL" in msg
    )


def test_the_users_pip_configuration_names_the_index(tmp_path, isolated, monkeypatch, sdist):  # noqa: F811
    path, real = sdist
    server = HTTPServer(host="127.0.0.1", port=0)
    server.start()
    try:
        serve_html(server, path, real)
        conf = Path(isolated["HOME"]) / ".config" / "pip" / "pip.conf"
        conf.parent.mkdir(parents=True)
        conf.write_text(f"[global]\nindex-url = {server.url_for('/simple')}\n")
        monkeypatch.delenv("PIP_INDEX_URL")
        monkeypatch.delenv("PIP_CONFIG_FILE")
        monkeypatch.setenv("XDG_CONFIG_DIRS", str(tmp_path / "no-system-config"))
        assert pypi_sdist.index_urls()[0] == server.url_for("/simple")
        assert download(tmp_path, real).is_file()
    finally:
        server.clear()
        server.stop()


def test_pypi_is_the_default_index(isolated, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.delenv("PIP_INDEX_URL")
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(tmp_path / "no-system-config"))
    assert pypi_sdist.index_urls() == ["https://pypi.org/simple"]


def test_a_whole_matrix_run_fetches_from_the_index(tmp_path, index, sdist):
    """`status` end to end: the sdist comes from the configured index, nothing of it runs."""
    path, real = sdist
    serve_html(index, path, real)
    m = tiny_matrix(
        tmp_path,
        source=f"{{kind: pypi-sdist, package: evilpkg, version: '1.0', sha256: {real}, "
        "subdirectory: vendor/ggml}",
    )
    env = isolated_env(tmp_path, PIP_INDEX_URL=index.url_for("/simple/"))
    proc = tool("status", "--matrix", m, "--cache", tmp_path / "cache", env=env)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "PWNED").exists()


# ---- package and version: PyPI's name rules and PEP 440, in the matrix ----


def test_the_cached_download_is_still_checked(tmp_path, isolated):  # noqa: F811
    cache = Cache(tmp_path / "cache")
    d = cache.downloads / "pypi-evilpkg-1.0"
    d.mkdir(parents=True)
    (d / "evilpkg-1.0.tar.gz").write_bytes(b"tampered")
    with pytest.raises(SourceUnavailable, match="the matrix pins"):
        download(tmp_path, "a" * 64)
