"""The pypi-sdist source kind, on tarballs made by the test (no network)."""

import hashlib
import io
import tarfile

import pytest

from orchestrator.cache import Cache
from orchestrator.errors import SourceUnavailable
from orchestrator.sources import pypi_sdist, snapshot
from orchestrator.sources.pypi_sdist import PypiSdist
from orchestrator.vcs.snapshots import SnapshotRepo

UPSTREAM = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"


def _tar(path, files):
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"llama_cpp_python-0.3.36/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


FILES = {
    "pyproject.toml": "[project]\n",
    "vendor/llama.cpp/.git": "gitdir: ../../.git/modules/vendor/llama.cpp\n",  # the sdist's trap
    "vendor/llama.cpp/ggml/src/ggml-opt.cpp": "// opt\n",
    "vendor/llama.cpp/tests/CMakeLists.txt": "llama_build_and_test(test-opt.cpp)\n",
    ".git/modules/vendor/llama.cpp/HEAD": UPSTREAM + "\n",
    ".git/modules/vendor/llama.cpp/config": "[core]\n",
}


def test_extract_takes_the_subdirectory_without_git_metadata(tmp_path):
    archive = tmp_path / "s.tar.gz"
    _tar(archive, FILES)
    tree, upstream = pypi_sdist.extract(archive, "vendor/llama.cpp", tmp_path / "x", "k")
    assert upstream == UPSTREAM
    found = sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file())
    assert found == ["ggml/src/ggml-opt.cpp", "tests/CMakeLists.txt"]


def test_missing_subdirectory_is_a_source_error(tmp_path):
    archive = tmp_path / "s.tar.gz"
    _tar(archive, FILES)
    with pytest.raises(SourceUnavailable, match="no files under"):
        pypi_sdist.extract(archive, "vendor/ggml", tmp_path / "x", "targets.t.source")


def _seeded(tmp_path, sha):
    cache = Cache(tmp_path / "cache")
    archive = cache.downloads / "pypi-llama-cpp-python-0.3.36" / "llama_cpp_python-0.3.36.tar.gz"
    archive.parent.mkdir(parents=True)
    real = _tar(archive, FILES)
    src = PypiSdist(
        kind="pypi-sdist",
        package="llama-cpp-python",
        version="0.3.36",
        sha256=sha or real,
        subdirectory="vendor/llama.cpp",
    ).at("targets.x.source")
    return cache, src, real


def test_snapshot_imports_once_and_records_provenance(tmp_path):
    cache, src, real = _seeded(tmp_path, None)
    repo = SnapshotRepo(cache.snapshots_git)
    a = snapshot(src, cache, repo)
    assert a.provenance == {"sdist_sha256": real, "upstream_commit": UPSTREAM}
    assert repo.read_blob(a.commit, "ggml/src/ggml-opt.cpp") == "// opt\n"
    assert repo.read_blob(a.commit, ".git") is None
    # the second time comes from the snapshot ref, even with the download gone
    for f in cache.downloads.rglob("*.tar.gz"):
        f.unlink()
    assert snapshot(src, cache, repo).commit == a.commit


def test_sha256_mismatch(tmp_path):
    cache, src, real = _seeded(tmp_path, "a" * 64)
    with pytest.raises(SourceUnavailable) as e:
        snapshot(src, cache, SnapshotRepo(cache.snapshots_git))
    msg = str(e.value)
    assert "targets.x.source.sha256" in msg and real in msg and "a" * 64 in msg and "\n" not in msg


def test_extract_without_system_tar_gives_the_same_tree(tmp_path, monkeypatch):
    archive = tmp_path / "s.tar.gz"
    _tar(archive, FILES)
    a, up_a = pypi_sdist.extract(archive, "vendor/llama.cpp", tmp_path / "a", "k")
    monkeypatch.setattr(pypi_sdist.shutil, "which", lambda name: None)
    b, up_b = pypi_sdist.extract(archive, "vendor/llama.cpp", tmp_path / "b", "k")
    files = lambda root: sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())  # noqa: E731
    assert files(a) == files(b) == ["ggml/src/ggml-opt.cpp", "tests/CMakeLists.txt"]
    assert up_a == up_b == UPSTREAM
