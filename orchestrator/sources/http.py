"""Bounded HTTP for sources: downloads and package index pages, http(s) only.

Every body is streamed, at most a byte cap, and the whole transfer ends by a deadline (requests'
timeout is per socket read: a server trickling one byte at a time would never end), so it runs
in a worker thread the caller stops waiting for at the deadline.
"""

from __future__ import annotations

import hashlib
import os
import socket
import tempfile
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import Callable, Mapping, Optional
from urllib.parse import urlsplit
from urllib.request import url2pathname

from .. import untrusted
from ..cache import Cache
from ..errors import ConfigError, SourceUnavailable
from ..redact import redact
from ..urls import http_url_problem
from .base import SourceUnreachable

CONNECT_TIMEOUT_S, READ_TIMEOUT_S = 30, 120
MAX_ARCHIVE_BYTES = 2 * 1024**3  # the largest pinned sdist is 77 MB
MAX_PAGE_BYTES = 32 * 1024**2  # a package index page
DEFAULT_DEADLINE_S = 3600.0  # a whole download; GGML_PATCH_HTTP_DEADLINE_S overrides it
_BLOCK = 64 * 1024


def fetch(
    url: str,
    sink: Callable[[bytes], None],
    what: str,
    max_bytes: int,
    headers: Optional[dict] = None,
) -> tuple[Mapping[str, str], str]:
    """GET `url`, its body to `sink` block by block; the response headers and final URL. A network
    failure or a transfer unfinished at the deadline is
    SourceUnreachable; a refusal SourceUnavailable."""
    where, why = f"{what}: {redact(url)}", http_url_problem(url)
    if why:
        raise SourceUnavailable(f"{where} {why}")
    text = os.environ.get("GGML_PATCH_HTTP_DEADLINE_S", "")
    limit = untrusted.seconds(text) if text.strip() else DEFAULT_DEADLINE_S
    if limit is None:
        raise ConfigError(
            f"GGML_PATCH_HTTP_DEADLINE_S={text!r}: expected a finite number of seconds above 0"
        )
    box: dict = {}
    stop, done = threading.Event(), threading.Event()
    import requests  # only where a transfer happens: a cached run never loads it

    session = requests.Session()

    def work() -> None:
        try:
            with session.get(
                url,
                stream=True,
                timeout=(CONNECT_TIMEOUT_S, min(READ_TIMEOUT_S, limit)),
                headers=headers or {},
            ) as r:
                box["resp"] = r
                if http_url_problem(r.url):  # a redirect to another scheme (file://, ftp://)
                    raise SourceUnavailable(f"{where} redirected to a non-http(s) URL")
                if r.status_code != 200:
                    raise HttpStatus(
                        r.status_code, f"{where} answered HTTP {r.status_code} {r.reason}"
                    )
                declared = r.headers.get("Content-Length", "")
                if declared.isdigit() and int(declared) > max_bytes:
                    raise SourceUnavailable(
                        f"{where} is {declared} bytes, more than the {max_bytes} allowed"
                    )
                total = 0
                for block in r.iter_content(_BLOCK):
                    if stop.is_set():
                        return
                    total += len(block)
                    if total > max_bytes:
                        raise SourceUnavailable(
                            f"{where} sent more than the {max_bytes} bytes allowed; stopped"
                        )
                    sink(block)
                box["headers"], box["url"] = r.headers, r.url
        except BaseException as e:  # handed to the caller's thread
            box["error"] = e
        finally:
            done.set()

    t0 = time.monotonic()
    threading.Thread(target=work, name="http-fetch", daemon=True).start()
    if not done.wait(limit):
        stop.set()
        # wake the worker's blocked read by shutting its socket down (closing the response from here
        # would wait for the worker's buffered-reader lock, as long as the server trickles)
        with suppress(AttributeError, OSError):
            sock = box.get("resp").raw._connection.sock  # type: ignore[union-attr]
            sock.shutdown(socket.SHUT_RDWR)
        took = time.monotonic() - t0
        raise SourceUnreachable(
            f"{where} did not finish within {took:.0f} s (GGML_PATCH_HTTP_DEADLINE_S); stopped"
        )
    session.close()
    if "error" in box:
        raise box["error"]
    return box["headers"], box["url"]


class HttpStatus(SourceUnavailable):
    def __init__(self, status: int, message: str):
        self.status = status
        super().__init__(message)


def download(
    url: str, sha256: str, cache: Cache, target: Path, what: str, key: str, shown: str
) -> Path:
    """`url` (http(s), or a file:// regular file) into the cache,
    moved to `target` once its sha256 matches."""
    h = hashlib.sha256()
    with tempfile.NamedTemporaryFile(
        prefix=cache.scratch_prefix("download"), dir=cache.scratch(), delete=False
    ) as tmp:
        tmp_path = Path(tmp.name)

        def sink(block: bytes) -> None:
            h.update(block)
            tmp.write(block)

        try:
            if urlsplit(url).scheme == "file":
                # a regular file only
                sink(untrusted.read_bytes(url2pathname(urlsplit(url).path), "sdist"))
            else:
                fetch(url, sink, what, MAX_ARCHIVE_BYTES, headers={"User-Agent": "ggml-patch"})
        except BaseException:
            tmp_path.unlink(missing_ok=True)
            raise
    if h.hexdigest() != sha256:
        tmp_path.unlink(missing_ok=True)
        raise SourceUnavailable(
            f"{key}.sha256: {shown} has sha256 {h.hexdigest()}, the matrix pins {sha256}"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp_path.replace(target)  # whole file or nothing: the temporary file is in the cache
    return target
