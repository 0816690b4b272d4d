"""Source kind `pypi-sdist`: a pinned sdist from PyPI that vendors llama.cpp or ggml.

Fetched once with pip, checked by sha256, the subdirectory imported as a base commit.
The sdist's own git metadata (llama-cpp-python ships a .git) is never extracted or run;
only the upstream commit its submodule points at is read, as provenance.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import Optional

from ..cache import Cache, slug
from ..config import Source
from ..errors import SourceUnavailable
from ..snapshots import SnapshotRepo
from . import Snapshot, SourceUnreachable

# pip's words for a network it cannot reach (urllib3/requests messages in its retries and errors)
_NETWORK_ERRORS = ("Failed to establish a new connection", "NameResolutionError", "Temporary failure in name resolution",
                   "Network is unreachable", "Connection refused", "Read timed out", "ConnectTimeoutError",
                   "ProxyError")


def snapshot(source: Source, cache: Cache, repo: SnapshotRepo) -> Snapshot:
    package, version, sha256 = source["package"], source["version"], source["sha256"]
    subdir = source.get("subdirectory", "").strip("/")
    description = f"{package}=={version}" + (f" ({subdir})" if subdir else "")
    ref = f"refs/snapshots/pypi/{slug(package)}-{slug(version)}-{sha256[:16]}-{slug(subdir) or 'root'}"
    with cache.lock(f"snapshot-{ref}"):
        commit = repo.ref_commit(ref)
        if commit:
            return Snapshot(commit, description, _provenance(repo, commit))
        archive = download(package, version, sha256, cache, source.key)
        with tempfile.TemporaryDirectory(prefix="extract-", dir=cache.scratch()) as tmp:
            tree, upstream = extract(archive, subdir, Path(tmp), source.key)
            message = (f"snapshot of {description}\n\nsdist-sha256: {sha256}\n"
                       + (f"upstream-commit: {upstream}\n" if upstream else ""))
            commit = repo.import_tree(tree, ref, message)
    return Snapshot(commit, description, _provenance(repo, commit))


def _provenance(repo: SnapshotRepo, commit: str) -> dict:
    prov = {}
    for line in repo.git("log", "-1", "--format=%B", commit).splitlines():
        key, sep, value = line.partition(": ")
        if sep and key in ("sdist-sha256", "upstream-commit"):
            prov[key.replace("-", "_")] = value.strip()
    return prov


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download(package: str, version: str, sha256: str, cache: Cache, key: str) -> Path:
    """The sdist in the cache, fetched with pip on first use; its sha256 must match."""
    folder = cache.downloads / f"pypi-{slug(package)}-{slug(version)}"
    cached = sorted(folder.glob("*")) if folder.is_dir() else []
    if not cached:
        with tempfile.TemporaryDirectory(prefix="pip-", dir=cache.scratch()) as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", package,  # build deps stay wheels
                   "--disable-pip-version-check", "--quiet", "-d", tmp, f"{package}=={version}"]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            files = [p for p in Path(tmp).iterdir() if p.name.endswith((".tar.gz", ".zip"))]
            if proc.returncode != 0 or len(files) != 1:
                last = (proc.stderr.strip().splitlines() or ["no sdist downloaded"])[-1]
                if any(m in proc.stderr for m in _NETWORK_ERRORS):  # a status for `status`, not a missing package
                    raise SourceUnreachable(f"{key}: PyPI is unreachable for {package}=={version}: {last}")
                raise SourceUnavailable(f"{key}: pip could not download {package}=={version}: {last}")
            folder.mkdir(exist_ok=True)
            target = folder / files[0].name
            shutil.move(str(files[0]), target)  # whole file or nothing: the temp dir is in the cache
            cached = [target]
    archive = cached[0]
    actual = sha256_of(archive)
    if actual != sha256:
        raise SourceUnavailable(f"{key}.sha256: {archive.name} has sha256 {actual}, the matrix pins {sha256}")
    return archive


def extract(archive: Path, subdir: str, dest: Path, key: str) -> tuple[Path, Optional[str]]:
    """Extract `subdir` of the sdist's top folder into dest, skipping every .git entry."""
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        top = PurePosixPath(members[0].name).parts[0]
        root = PurePosixPath(top, subdir) if subdir else PurePosixPath(top)
        wanted = []
        for m in members:
            p = PurePosixPath(m.name)
            if p != root and root not in p.parents:
                continue
            if ".git" in p.parts[len(root.parts):]:
                continue
            if not (m.isfile() or m.isdir() or m.issym()):
                continue
            wanted.append(m)
        if not any(m.isfile() for m in wanted):
            raise SourceUnavailable(f"{key}.subdirectory: {archive.name} has no files under {root}")
        tar.extractall(dest, members=wanted, filter="data")
        upstream = _upstream_commit(tar, top, subdir)
    return dest / root, upstream


def _upstream_commit(tar: tarfile.TarFile, top: str, subdir: str) -> Optional[str]:
    """The commit a vendored submodule was at, read from the sdist's git metadata files."""
    if not subdir:
        return None
    try:
        f = tar.extractfile(f"{top}/.git/modules/{subdir}/HEAD")
    except KeyError:
        return None
    head = f.read().decode().strip() if f else ""
    return head if len(head) == 40 and all(c in "0123456789abcdef" for c in head) else None
