"""Source kind `pypi-sdist`: a pinned sdist from PyPI that vendors llama.cpp or ggml.

Fetched as a file from the index pip is configured with, by requests and never by pip: nothing of
the sdist (build backend, setup.py, build dependencies) runs, and the file is kept only once its
sha256 matches the pin. Its own git metadata (llama-cpp-python ships a .git) is never extracted
or run; only the upstream commit its submodule points at is read, as provenance.
"""

from __future__ import annotations

import configparser
import gzip
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated, Literal, Optional
from urllib.parse import urljoin, urlsplit
from urllib.request import url2pathname

from .. import untrusted
from ..cache import Cache, slug
from ..config_records import RELPATH, Source, Str, checked
from ..errors import ConfigError, SourceUnavailable
from ..model.values import Sha256
from ..urls import FULL_SHA
from ..vcs.snapshots import SnapshotRepo
from . import http
from .base import Snapshot, SourceUnreachable, imported, network_reason, recorded, sha256_of
from .tarball import bounded_members, unpack, unpacked_cap

PYPI_SIMPLE = "https://pypi.org/simple"
# PEP 691; the HTML form (PEP 503) is the fallback
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"

# PyPI's project name rule (PEP 508 names); versions are exact PEP 440 versions (packaging)
_PACKAGE = re.compile(r"^([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9])\Z")


def _package(package: str) -> Optional[str]:
    return (
        None
        if _PACKAGE.match(package)
        else "is not a PyPI project name (letters, digits, '.', '_', '-'; "
        "starting and ending with a letter or digit)"
    )


def _version(version: str) -> Optional[str]:
    # packaging: loaded only for a pypi-sdist source (start-up)
    from packaging.version import InvalidVersion, Version

    with suppress(InvalidVersion):
        if Version(version) and version == version.strip():
            return None
    return 'is not an exact version (PEP 440, e.g. "0.3.36"; no specifiers)'


class PypiSdist(Source):
    """matrix.yaml's keys: `package` by PyPI's name rules (never
    an option), `version` an exact PEP 440 one."""

    kind: Literal["pypi-sdist"]
    package: Annotated[Str, checked(_package)]
    version: Annotated[Str, checked(_version)]
    sha256: Sha256
    subdirectory: RELPATH = ""


def snapshot(source: PypiSdist, cache: Cache, repo: SnapshotRepo) -> Snapshot:
    package, version, sha256 = source.package, source.version, source.sha256
    subdir = source.subdirectory.strip("/")
    description = f"{package}=={version}" + (f" ({subdir})" if subdir else "")
    folder = slug(subdir) or "root"
    ref = f"refs/snapshots/pypi/{slug(package)}-{slug(version)}-{sha256[:16]}-{folder}"

    def unpacked(tmp: Path) -> tuple[Path, Optional[str]]:
        return extract(
            download(package, version, sha256, cache, source.key), subdir, tmp, source.key
        )

    commit = imported(
        cache, repo, ref, f"snapshot of {description}\n\nsdist-sha256: {sha256}\n", unpacked
    )
    return Snapshot(commit, description, recorded(repo, commit, "sdist-sha256", "upstream-commit"))


def download(package: str, version: str, sha256: str, cache: Cache, key: str) -> Path:
    """The sdist in the cache, fetched from the index on first use; its sha256 must match."""
    folder = cache.downloads / f"pypi-{slug(package)}-{slug(version)}"
    cached = sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
    if not cached:
        cached = [fetch_sdist(package, version, sha256, cache, key, folder)]
    archive = cached[0]
    actual = sha256_of(archive)
    if actual != sha256:
        raise SourceUnavailable(
            f"{key}.sha256: {archive.name} has sha256 {actual}, the matrix pins {sha256}"
        )
    return archive


def _pip_config_files(environ) -> list[Path]:
    """pip's configuration files, lowest priority first (pip's own order on POSIX)."""
    if environ.get("PIP_CONFIG_FILE") == os.devnull:
        return []
    home = Path(environ.get("HOME") or Path.home())
    xdg_dirs = (environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(os.pathsep)
    own = [Path(environ["PIP_CONFIG_FILE"])] if environ.get("PIP_CONFIG_FILE") else []
    files = [Path(d) / "pip" / "pip.conf" for d in xdg_dirs if d] + [Path("/etc/pip.conf")]
    files += [
        home / ".pip" / "pip.conf",
        Path(environ.get("XDG_CONFIG_HOME") or home / ".config") / "pip" / "pip.conf",
    ]
    return [*files, Path(sys.prefix) / "pip.conf", *own]


def _pip_config_text(path: Path, named: str) -> Optional[str]:
    """A pip configuration file's text, read by the one reader (a regular file, 1 MiB at most,
    UTF-8: /dev/zero or a FIFO is refused at once, never read); None when absent. A file
    PIP_CONFIG_FILE names that breaks those rules is one line, exit 2; another is skipped."""
    if not path.exists() and not path.is_symlink():
        return None
    try:
        return untrusted.read_text(path, "pip-config")
    except ConfigError as e:
        if named and str(path) == named:
            raise ConfigError(f"PIP_CONFIG_FILE: {e}") from None
        return None


def index_urls(environ=None) -> list[str]:
    """The indexes pip would use: index-url (PyPI's by default), then
    extra-index-url; from the env or pip.conf."""
    environ = os.environ if environ is None else environ
    index: Optional[str] = None
    extra: list[str] = []
    named = environ.get("PIP_CONFIG_FILE") or ""
    for f in _pip_config_files(environ):
        parser = configparser.RawConfigParser()
        text = _pip_config_text(f, named)
        if text is None:
            continue
        try:
            parser.read_string(text, str(f))
        except configparser.Error:
            continue  # pip would complain about its own file; the default index still works
        for section in ("global", "download"):
            if parser.has_option(section, "index-url"):
                index = parser.get(section, "index-url").strip() or index
            if parser.has_option(section, "extra-index-url"):
                extra = parser.get(section, "extra-index-url").split()
    index = environ.get("PIP_INDEX_URL", "").strip() or index or PYPI_SIMPLE
    if environ.get("PIP_EXTRA_INDEX_URL", "").strip():
        extra = environ["PIP_EXTRA_INDEX_URL"].split()
    return list(dict.fromkeys(u.rstrip("/") for u in [index, *extra] if u))


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    # as the index lists it (None: not listed; the download is checked anyway)
    sha256: Optional[str]


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: Optional[str] = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href, self._text = dict(attrs).get("href"), []

    def handle_data(self, data):
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._text).strip()))
            self._href = None


def parse_listing(text: str, content_type: str, page_url: str) -> list[IndexFile]:
    """A project page of the simple API (PEP 691 JSON or PEP 503 HTML) -> its files."""
    if SIMPLE_JSON in (content_type or ""):
        try:
            data = json.loads(text)
        except ValueError:
            return []
        out = []
        for f in data.get("files") or [] if isinstance(data, dict) else []:
            if (
                isinstance(f, dict)
                and isinstance(f.get("filename"), str)
                and isinstance(f.get("url"), str)
            ):
                digest = (
                    (f.get("hashes") or {}).get("sha256")
                    if isinstance(f.get("hashes"), dict)
                    else None
                )
                out.append(IndexFile(f["filename"], urljoin(page_url, f["url"]), digest))
        return out
    parser = _Links()
    parser.feed(text)
    out = []
    for href, label in parser.links:
        if not href:
            continue
        url, _, frag = urljoin(page_url, href).partition("#")
        digest = frag[len("sha256=") :] if frag.startswith("sha256=") else None
        out.append(IndexFile(label or PurePosixPath(urlsplit(url).path).name, url, digest))
    return out


def _is_the_sdist(filename: str, package: str, version: str) -> bool:
    # packaging: loaded only for a pypi-sdist source (start-up)
    from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename
    from packaging.version import Version  # start-up, as above

    if not filename.endswith((".tar.gz", ".zip")):
        return False
    try:
        name, ver = parse_sdist_filename(filename)
    except InvalidSdistFilename:
        return False
    return canonicalize_name(name) == canonicalize_name(package) and ver == Version(version)


def _project_page(index: str, package: str) -> tuple[Optional[str], str, str]:
    """(page text or None when the index has no such project, its content type, its URL)."""
    # packaging: loaded only for a pypi-sdist source (start-up)
    from packaging.utils import canonicalize_name

    url = f"{index}/{canonicalize_name(package)}/"
    if urlsplit(url).scheme == "file":
        path = Path(url2pathname(urlsplit(url).path))
        page = path / "index.html"
        if page.is_file():
            return untrusted.read_lenient(page, "index") or "", "text/html", page.as_uri()
        if path.is_dir():  # a plain folder of files serves as its own listing
            return (
                "".join(f'<a href="{p.name}">{p.name}</a>' for p in sorted(path.iterdir())),
                "text/html",
                url,
            )
        return None, "", url

    headers, chunks = (
        {"Accept": f"{SIMPLE_JSON}, text/html;q=0.1", "User-Agent": "ggml-patch"},
        list[bytes](),
    )
    try:  # capped, with a deadline
        h, final = http.fetch(
            url, chunks.append, f"the package index {index}", http.MAX_PAGE_BYTES, headers=headers
        )
    except http.HttpStatus as e:
        if e.status == 404:
            return None, "", url
        raise
    return b"".join(chunks).decode("utf-8", errors="replace"), h.get("Content-Type", ""), final


def fetch_sdist(
    package: str, version: str, sha256: str, cache: Cache, key: str, folder: Path
) -> Path:
    """`package==version`'s sdist from the indexes, moved into `folder`
    once its sha256 matches. Nothing of it runs."""
    import requests  # only where a transfer happens: a cached run never loads it

    indexes = index_urls()
    unreachable, refused, seen = [], [], []
    for index in indexes:
        try:
            text, ctype, page = _project_page(index, package)
        except OSError as e:  # requests' errors are OSErrors too
            why = network_reason(e) if isinstance(e, requests.RequestException) else e.strerror or e
            unreachable.append(f"{index} ({why})")
            continue
        if text is None:
            continue
        files = [
            f
            for f in parse_listing(text, ctype, page)
            if _is_the_sdist(f.filename, package, version) and _followable(page, f.url)
        ]
        seen += [f.filename for f in files]
        # a file the index lists with the pinned hash first; one
        # listed with another hash is never fetched
        for f in sorted(files, key=lambda f: f.sha256 != sha256):
            if f.sha256 and f.sha256 != sha256:
                refused.append(f"{index} lists {f.filename} with sha256 {f.sha256}")
                continue
            try:
                return http.download(
                    f.url,
                    sha256,
                    cache,
                    folder / (slug(f.filename) or "sdist.tar.gz"),
                    key,
                    key,
                    f.filename,
                )
            except requests.RequestException as e:
                unreachable.append(f"{f.url} ({network_reason(e)})")
    if refused:
        raise SourceUnavailable(f"{key}.sha256: {'; '.join(refused)}; the matrix pins {sha256}")
    if unreachable and not seen:
        raise SourceUnreachable(
            f"{key}: the package index is unreachable for {package}=={version}: "
            f"{'; '.join(unreachable)}; set PIP_INDEX_URL (or index-url in pip.conf) to a "
            "reachable index"
        )
    raise SourceUnavailable(
        f"{key}: no sdist of {package}=={version} on {', '.join(indexes)}"
        + (f" (unreachable: {'; '.join(unreachable)})" if unreachable else "")
    )


def _followable(page: str, url: str) -> bool:
    """Links an index page may lead to: http(s) from an http(s) page; from a local (file://)
    index, files of that index. Never another scheme (file:///dev/zero from a web page)."""
    page_scheme, scheme, web = (
        urlsplit(page).scheme.lower(),
        urlsplit(url).scheme.lower(),
        ("http", "https"),
    )
    return scheme in web if page_scheme in web else scheme == "file" == page_scheme


def extract(archive: Path, subdir: str, dest: Path, key: str) -> tuple[Path, Optional[str]]:
    """Extract `subdir` of the sdist's top folder into dest, skipping every .git entry; and the
    upstream commit its submodule metadata names. System tar where there is one: unpacking 77 MB
    in Python is most of the tool's own CPU time on a cold run."""
    try:
        with tarfile.open(archive) as tar:
            first = tar.next()  # the first header only, not a scan of the archive
    except (tarfile.TarError, OSError, EOFError) as e:
        raise SourceUnavailable(
            f"{key}: {archive.name} is not a readable tar archive: {e}"
        ) from None
    if first is None:
        raise SourceUnavailable(f"{key}: {archive.name} is an empty archive")
    top = PurePosixPath(first.name).parts[0]
    root, head, head_text = PurePosixPath(top, subdir), f"{top}/.git/modules/{subdir}/HEAD", ""
    dest.mkdir(parents=True, exist_ok=True)
    tar_exe = shutil.which("tar")
    if tar_exe:
        # GNU tar refuses members with '..' or absolute names; the archive's
        # sha256 was checked already. It reads the archive decompressed from a
        # pipe, which stops at MAX_UNPACKED_BYTES (a bomb).
        argv = [
            tar_exe,
            "-xf",
            "-",
            "-C",
            str(dest),
            "--no-same-owner",
            "--exclude=.git",
            str(root),
        ]
        proc = _tar_capped(argv, archive, key)
        if proc.returncode != 0:
            if "Not found in archive" in proc.stderr:
                raise SourceUnavailable(
                    f"{key}.subdirectory: {archive.name} has no files under {root}"
                )
            raise SourceUnavailable(
                f"{key}: cannot unpack {archive.name}: {proc.stderr.strip().splitlines()[-1:]}"
            )
        if subdir:  # the sdist's git metadata: the submodule's HEAD, extracted apart and only read
            meta = dest / ".git-meta"
            meta.mkdir()
            _tar_capped([tar_exe, "-xf", "-", "-C", str(meta), head], archive, key)
            head_text = (meta / head).read_text(errors="replace") if (meta / head).is_file() else ""
    else:
        with tarfile.open(archive) as tar:
            unpack(
                tar,
                bounded_members(tar, archive.name, key, unpacked_cap(archive)),
                root,
                dest,
                archive.name,
                key,
                key,
            )
            with suppress(KeyError):  # the sdist's git metadata: read, never extracted
                member = tar.extractfile(head) if subdir else None
                head_text = member.read().decode(errors="replace") if member else ""
    if not (dest / root).is_dir() or not any(p.is_file() for p in (dest / root).rglob("*")):
        raise SourceUnavailable(f"{key}.subdirectory: {archive.name} has no files under {root}")
    return dest / root, head_text.strip() if FULL_SHA.match(head_text.strip()) else None


def _tar_capped(argv: list[str], archive: Path, key: str) -> subprocess.CompletedProcess:
    """Run tar on the archive's decompressed bytes, fed through a pipe and cut off (refused, exit
    3) past MAX_UNPACKED_BYTES: a small archive never fills the disk."""
    cap, total = unpacked_cap(archive), 0
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err)
        assert proc.stdin is not None
        try:
            with gzip.open(archive, "rb") as src:
                while True:
                    block = src.read(1 << 20)
                    if not block:
                        break
                    total += len(block)
                    if total > cap:
                        break
                    proc.stdin.write(block)
        except BrokenPipeError:
            pass  # tar stopped reading: its exit status says why
        except (OSError, EOFError) as e:
            proc.kill()
            raise SourceUnavailable(f"{key}: cannot unpack {archive.name}: {e}") from None
        finally:
            with suppress(OSError):
                proc.stdin.close()
            if total > cap:
                proc.kill()
            proc.wait()
        if total > cap:
            raise SourceUnavailable(
                f"{key}: {archive.name} unpacks to more than {cap} bytes; refused"
            )
        err.seek(0)
        return subprocess.CompletedProcess(
            argv, proc.returncode, "", err.read().decode(errors="replace")
        )
