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
from ..vcs.snapshots import SnapshotRepo
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
    """Extract `subdir` of the sdist's top folder into dest, skipping every .git entry; and the
    upstream commit its submodule metadata names. System tar where there is one: unpacking 77 MB
    in Python is most of the tool's own CPU time on a cold run."""
    with tarfile.open(archive) as tar:
        first = tar.next()  # the first header only, not a scan of the archive
    if first is None:
        raise SourceUnavailable(f"{key}: {archive.name} is an empty archive")
    top = PurePosixPath(first.name).parts[0]
    root = PurePosixPath(top, subdir) if subdir else PurePosixPath(top)
    dest.mkdir(parents=True, exist_ok=True)
    gnu_tar = shutil.which("tar")
    if gnu_tar:
        upstream = _extract_with_tar(gnu_tar, archive, top, root, subdir, dest, key)
    else:
        upstream = _extract_in_python(archive, top, root, subdir, dest, key)
    if not (dest / root).is_dir() or not any(p.is_file() for p in (dest / root).rglob("*")):
        raise SourceUnavailable(f"{key}.subdirectory: {archive.name} has no files under {root}")
    return dest / root, upstream


def _extract_with_tar(tar_exe: str, archive: Path, top: str, root: PurePosixPath, subdir: str, dest: Path,
                      key: str) -> Optional[str]:
    # GNU tar refuses members with '..' or absolute names; the archive's sha256 was checked already
    proc = subprocess.run([tar_exe, "-xzf", str(archive), "-C", str(dest), "--no-same-owner", "--exclude=.git",
                           str(root)], capture_output=True, text=True)
    if proc.returncode != 0:
        if "Not found in archive" in proc.stderr:
            raise SourceUnavailable(f"{key}.subdirectory: {archive.name} has no files under {root}")
        raise SourceUnavailable(f"{key}: cannot unpack {archive.name}: {proc.stderr.strip().splitlines()[-1:]}")
    if not subdir:
        return None
    meta = dest / ".git-meta"
    meta.mkdir()
    head = f"{top}/.git/modules/{subdir}/HEAD"
    subprocess.run([tar_exe, "-xzf", str(archive), "-C", str(meta), head], capture_output=True)
    return _commit_id((meta / head).read_text(errors="replace") if (meta / head).is_file() else "")


def _extract_in_python(archive: Path, top: str, root: PurePosixPath, subdir: str, dest: Path,
                       key: str) -> Optional[str]:
    with tarfile.open(archive) as tar:
        wanted = []
        for m in tar.getmembers():
            p = PurePosixPath(m.name)
            if p != root and root not in p.parents:
                continue
            if ".git" in p.parts[len(root.parts):]:
                continue
            if not (m.isfile() or m.isdir() or m.issym()):
                continue
            wanted.append(m)
        tar.extractall(dest, members=wanted, filter="data")
        return _upstream_commit(tar, top, subdir)


def _commit_id(text: str) -> Optional[str]:
    head = text.strip()
    return head if len(head) == 40 and all(c in "0123456789abcdef" for c in head) else None


def _upstream_commit(tar: tarfile.TarFile, top: str, subdir: str) -> Optional[str]:
    """The commit a vendored submodule was at, read from the sdist's git metadata files."""
    if not subdir:
        return None
    try:
        f = tar.extractfile(f"{top}/.git/modules/{subdir}/HEAD")
    except KeyError:
        return None
    return _commit_id(f.read().decode(errors="replace") if f else "")
