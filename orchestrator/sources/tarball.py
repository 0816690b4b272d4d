"""Source kind `tarball`: a URL and its sha256 (a release archive, a GitHub archive of a commit).

Downloaded once into the cache (kept only when its sha256 matches the pin), extracted without any
git metadata, its single top folder dropped, `subdirectory` of it imported as a base commit. A
GitHub archive names its commit in the tar's pax header: kept as provenance.
"""

from __future__ import annotations

import tarfile
from pathlib import Path, PurePosixPath
from typing import Annotated, Literal, Optional
from urllib.parse import urlparse

from ..cache import Cache, slug
from ..config_records import RELPATH, Source, Str, checked
from ..errors import SourceUnavailable
from ..model.values import Sha256
from ..redact import redact
from ..urls import FULL_SHA, http_url_problem
from ..vcs.snapshots import SnapshotRepo
from . import http
from .base import Snapshot, SourceUnreachable, imported, network_reason, recorded, sha256_of

MAX_MEMBERS = 500_000  # llama.cpp's whole tree is ~2000 files
MAX_UNPACKED_BYTES = 8 * 1024**3
# what an archive may unpack to: 32 times its size, at least 256 MiB (the pinned sdists: 3-7 times)
UNPACK_RATIO, UNPACK_FLOOR = 32, 256 * 1024**2


def unpacked_cap(archive: Path) -> int:
    """The most bytes `archive` may unpack to: a 1 MB archive never becomes a gigabyte."""
    return min(MAX_UNPACKED_BYTES, max(UNPACK_FLOOR, UNPACK_RATIO * archive.stat().st_size))


class TarballSource(Source):
    """matrix.yaml's keys for this kind: `url` an http(s) URL (what requests fetches)."""

    kind: Literal["tarball"]
    url: Annotated[Str, checked(http_url_problem, ": ")]
    sha256: Sha256
    subdirectory: RELPATH = ""


def snapshot(source: TarballSource, cache: Cache, repo: SnapshotRepo) -> Snapshot:
    url, sha256 = source.url, source.sha256
    subdir = source.subdirectory.strip("/")
    ref = f"refs/snapshots/tarball/{sha256[:16]}-{slug(subdir) or 'root'}"
    description = f"{_file_name(url)} ({sha256[:12]})" + (f" ({subdir})" if subdir else "")
    header = f"snapshot of {redact(url)}\n\ntarball-sha256: {sha256}\n"
    commit = imported(
        cache,
        repo,
        ref,
        header,
        lambda tmp: extract(download(url, sha256, cache, source.key), subdir, tmp, source.key),
    )
    return Snapshot(
        commit,
        description,
        {"url": url, "sha256": sha256, **recorded(repo, commit, "upstream-commit")},
    )


def download(url: str, sha256: str, cache: Cache, key: str) -> Path:
    """The archive in the cache, fetched on first use; its sha256 must match the pin."""
    target = cache.downloads / f"tarball-{sha256[:16]}" / _file_name(url)
    if target.exists() and sha256_of(target) == sha256:
        return target
    import requests  # only where a transfer happens: a cached run never loads it

    try:
        # a byte cap and a deadline
        return http.download(url, sha256, cache, target, f"{key}.url", key, url)
    except requests.RequestException as e:
        raise SourceUnreachable(f"{key}.url: {url} is unreachable: {network_reason(e)}") from None


def extract(archive: Path, subdir: str, dest: Path, key: str) -> tuple[Path, Optional[str]]:
    """Extract the archive (its single top folder dropped) into dest, skipping every .git entry;
    returns the directory for `subdir` and the commit a GitHub archive names."""
    try:
        tar = tarfile.open(archive)
    except tarfile.TarError as e:
        raise SourceUnavailable(f"{key}.url: {archive.name} is not a tar archive: {e}") from None
    with tar:
        members = bounded_members(tar, archive.name, key, unpacked_cap(archive))
        parts = [
            PurePosixPath(m.name).parts for m in members if m.isfile() or m.isdir() or m.issym()
        ]
        tops = {p[0] for p in parts if p}
        top = tops.pop() if len(tops) == 1 and any(len(p) > 1 for p in parts) else ""
        root = PurePosixPath(top, subdir) if subdir else PurePosixPath(top or ".")
        unpack(tar, members, root, dest, archive.name, f"{key}.url", key)
        comment = (tar.pax_headers or {}).get("comment", "")
    return dest / root, comment if FULL_SHA.match(comment or "") else None


def unpack(
    tar: tarfile.TarFile,
    members: list[tarfile.TarInfo],
    root: PurePosixPath,
    dest: Path,
    name: str,
    at: str,
    key: str,
) -> None:
    """The files, folders and symlinks under `root` into dest, every .git entry skipped; refused
    whole when an entry would leave dest (tarfile's "data" filter)."""
    wanted = [
        m
        for m in members
        if (m.isfile() or m.isdir() or m.issym())
        and (
            str(root) == "."
            or PurePosixPath(m.name) == root
            or root in PurePosixPath(m.name).parents
        )
        and ".git" not in PurePosixPath(m.name).parts
    ]
    if not any(m.isfile() for m in wanted):
        raise SourceUnavailable(f"{key}.subdirectory: {name} has no files under {root}")
    try:
        tar.extractall(dest, members=wanted, filter="data")
    except (
        tarfile.TarError,
        OSError,
    ) as e:  # an entry leaving the folder, a link out of it, a bad header
        raise SourceUnavailable(f"{at}: {name}: refused to unpack: {e}") from None


def bounded_members(tar: tarfile.TarFile, name: str, key: str, cap: int) -> list[tarfile.TarInfo]:
    """The archive's members, read one header at a time: at most MAX_MEMBERS of them and `cap`
    bytes in all, or refused (exit 3) before anything is written."""
    members, total = [], 0
    try:
        for m in tar:
            members.append(m)
            total += max(0, m.size)
            if len(members) > MAX_MEMBERS or total > cap:
                raise SourceUnavailable(
                    f"{key}: {name} unpacks to more than "
                    f"{MAX_MEMBERS} entries or {cap} bytes; refused"
                )
    except (tarfile.TarError, OSError, EOFError) as e:
        raise SourceUnavailable(f"{key}: {name} is not a readable tar archive: {e}") from None
    return members


def _file_name(url: str) -> str:
    return slug(PurePosixPath(urlparse(url).path).name) or "archive.tar.gz"
