"""The one reader of untrusted files: documents (results.json, manifest.json, pins, status), the
series (patches, cover.md, known limits, mutants), policy files, and logs named by documents. Rules,
the same for every kind: only a regular file (a FIFO, a device or a folder is refused before
anything is read: opened non-blocking, checked with fstat); a size cap per kind (read no further
than the cap, whatever the file claims); UTF-8 text or one line saying where it is not; and, where a
root is given, nothing outside it (no `..`, no absolute name, no symlink resolving elsewhere). Every
refusal is a ConfigError: one line naming the file, exit 2."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import stat
import tempfile
from pathlib import Path, PurePath
from typing import Any, BinaryIO, Callable, Iterator, Optional, Union

from .errors import ConfigError

KiB, MiB = 1024, 1024 * 1024
# The most bytes one file of each kind may hold (far above any real one).
CAPS: dict[str, int] = {
    "results": 64 * MiB,  # results.json of a big matrix, mutants included
    **dict.fromkeys(("manifest", "document"), 4 * MiB),
    **dict.fromkeys(("pins", "status", "matrix", "cover", "known-limits", "mutant"), 1 * MiB),
    "pip-config": 1 * MiB,  # pip.conf, PIP_CONFIG_FILE: read for the index URLs only
    "policy": 1 * MiB,  # AGENTS.md, CONTRIBUTING.md, the pull request template
    **dict.fromkeys(("patch", "finetune", "summary"), 16 * MiB),
    "lock": 64 * KiB,
    "log": 256 * MiB,  # logs are copied in blocks, never held whole
    "index": 32 * MiB,  # a package index page of a local (file://) index
    "sdist": 2048 * MiB,  # from a local (file://) package index
}
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_KINDS = {
    stat.S_ISDIR: "a folder",
    stat.S_ISFIFO: "a FIFO",
    stat.S_ISSOCK: "a socket",
    stat.S_ISCHR: "a device",
}
_KINDS[stat.S_ISBLK] = "a device"

PathLike = Union[str, "os.PathLike[str]"]
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def name_under(root: PathLike, name: object, what: str) -> Path:
    """`root / name` for a name that came from a document: relative, no `..`, and resolving
    (symlinks followed) inside `root`. Anything else: one line naming `what`, exit 2."""
    if not isinstance(name, str) or not name or "\x00" in name:
        raise ConfigError(f"{what}: {name!r} is not a file name")
    pure = PurePath(name)
    if (
        pure.is_absolute()
        or name.startswith(("/", "\\"))
        or ".." in pure.parts
        or ".." in name.split("\\")
    ):
        raise ConfigError(f"{what}: {name!r} is not a name inside {root} (absolute, or with '..')")
    path = Path(root) / pure
    if not path.resolve().is_relative_to(Path(root).resolve()):
        raise ConfigError(f"{what}: {name!r} resolves outside {root} (a symlink); refused")
    return path


def _open(path: Path, kind: str, root: Optional[PathLike]) -> tuple[int, os.stat_result]:
    flags = _FLAGS
    if root is not None:
        resolved = path.resolve()  # once: each resolve is a system call per part of the path
        if not resolved.is_relative_to(Path(root).resolve()):
            raise ConfigError(f"{path}: resolves outside {root} (a symlink); refused")
        flags |= _NOFOLLOW  # checked above; not swapped for a link in between
        path = resolved
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such {kind} file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: a folder, not a {kind} file") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the {kind} file: {e.strerror or e}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        what = next(
            (what for test, what in _KINDS.items() if test(st.st_mode)), "not a regular file"
        )
        raise ConfigError(f"{path}: {what}, not a regular {kind} file; refused")
    return fd, st


def cap_of(kind: str) -> int:
    return CAPS.get(kind, CAPS["document"])


def _opened(
    path: Path, kind: str, root: Optional[PathLike], cap: Optional[int] = None
) -> tuple[BinaryIO, int]:
    """The regular file of `kind` open for (blocking) reads, and
    its cap; refused when it says it is larger."""
    limit = cap_of(kind) if cap is None else cap
    fd, st = _open(path, kind, root)
    if st.st_size > limit:
        os.close(fd)
        raise ConfigError(
            f"{path}: {st.st_size} bytes, more than the {limit} a {kind} file may hold; refused"
        )
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb"), limit


def read_bytes(
    path: PathLike, kind: str, root: Optional[PathLike] = None, cap: Optional[int] = None
) -> bytes:
    """The bytes of a regular file of `kind`, at most its cap (more: refused, nothing more read)."""
    f, limit = _opened(Path(path), kind, root, cap)
    chunks, total = [], 0
    with f:
        while block := f.read(min(1 * MiB, limit + 1 - total)):
            chunks.append(block)
            total += len(block)
            if total > limit:
                raise ConfigError(
                    f"{path}: more than the {limit} bytes a {kind} file may hold; refused"
                )
    return b"".join(chunks)


def read_text(
    path: PathLike, kind: str, root: Optional[PathLike] = None, cap: Optional[int] = None
) -> str:
    """A regular file of `kind` as UTF-8 text (see read_bytes); not UTF-8: one line saying where."""
    return decode(read_bytes(path, kind, root, cap), path, kind)


def decode(data: bytes, where: object, kind: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ConfigError(
            f"{where}:{line}: not UTF-8 text (byte {e.start}); a {kind} file must be UTF-8"
        ) from None


def parse_json(text: str, where: object, kind: str) -> Any:
    """JSON text -> data; invalid, or nested past what the parser takes: one line, exit 2."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(
            f"{where}:{e.lineno}: not valid JSON ({e.msg}); not a {kind} file"
        ) from None
    except RecursionError:
        raise ConfigError(f"{where}: JSON nested too deeply; not a {kind} file") from None
    except ValueError as e:  # an integer of thousands of digits (Python's conversion limit)
        raise ConfigError(f"{where}: not a {kind} file: {str(e)[:120]}") from None


def load_json(path: PathLike, kind: str, root: Optional[PathLike] = None) -> Any:
    return parse_json(read_text(path, kind, root), path, kind)


def read_optional(path: PathLike, kind: str, root: Optional[PathLike] = None) -> Optional[str]:
    """read_text, or None where there is no such file (a symlink to nowhere counts as one)."""
    p = Path(path)
    return read_text(p, kind, root) if p.exists() or p.is_symlink() else None


def read_lenient(path: PathLike, kind: str, root: Optional[PathLike] = None) -> Optional[str]:
    """A file the tool wrote and reads back (summary.md): its text, bad
    bytes replaced; None when absent or refused."""
    try:
        return read_bytes(path, kind, root).decode("utf-8", errors="replace")
    except ConfigError:
        return None


def tail_text(path: PathLike, root: Optional[PathLike], max_bytes: int = 64 * KiB) -> Optional[str]:
    """The last `max_bytes` of a log inside `root` as text (bad bytes replaced), or None when it
    is not a regular file there: a log named by a document is evidence, never a reason to fail."""
    try:
        fd, st = _open(Path(path), "log", root)
    except ConfigError:
        return None
    try:
        os.set_blocking(fd, True)
        os.lseek(fd, max(0, st.st_size - max_bytes), os.SEEK_SET)
        data = os.read(fd, max_bytes)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace")


def copy_file(
    src: PathLike,
    dst: PathLike,
    root: PathLike,
    kind: str = "log",
    line: Optional[Callable[[str], str]] = None,
    overlap: int = 4 * KiB,
    split: Optional[Callable[[bytes, int], int]] = None,
) -> None:
    """Copy a regular file inside `root` over `dst` line by line (cap of `kind`), each through
    `line` if given. A line longer than a block is taken a megabyte at a time, its last `overlap`
    bytes (or from its last blank) held back for the next block, and `split` (redact.safe_cut)
    moves the edge before any secret it would cut, so redaction never sees half of one. `dst` is
    replaced (written beside it, then renamed): a symlink there is never written through."""
    f, limit = _opened(Path(src), kind, root)
    total = 0
    held = b""
    with f, _replacing(dst) as out:
        while chunk := f.readline(1 * MiB):
            total += len(chunk)
            if total > limit:
                raise ConfigError(
                    f"{src}: more than the {limit} bytes a {kind} file may hold; refused"
                )
            chunk = held + chunk
            held = b""
            if not chunk.endswith(b"\n") and len(chunk) > overlap:
                cut = _cut(chunk, overlap, split)
                chunk, held = chunk[:cut], chunk[cut:]
            out.write(_through(chunk, line))
        if held:
            out.write(_through(held, line))


def _cut(chunk: bytes, overlap: int, split: Optional[Callable[[bytes, int], int]]) -> int:
    """Where to split a block of a long line: after its last blank when there is one in its
    second half (a URL with a password holds none), else `overlap` bytes from its end; then
    moved before any secret it would split (`split`)."""
    blank = max(chunk.rfind(b" "), chunk.rfind(b"\t"))
    cut = blank + 1 if blank >= len(chunk) // 2 else len(chunk) - overlap
    return split(chunk, cut) if split is not None else cut


def _through(chunk: bytes, line: Optional[Callable[[str], str]]) -> bytes:
    if line is None:
        return chunk
    return line(chunk.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


@contextlib.contextmanager
def _replacing(path: PathLike) -> Iterator[BinaryIO]:
    """A binary file to write that replaces `path` when done: written to a new file beside it,
    then renamed over it, so a symlink (or a hard link) at `path` is replaced, never written
    through; on an error nothing at `path` changes."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # as an ordinary new file would be
        with os.fdopen(fd, "wb") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_replacing(path: PathLike, text: Union[str, bytes]) -> Path:
    """`text` (UTF-8) as the new file at `path`, replacing what is there (see `_replacing`)."""
    with _replacing(path) as f:
        f.write(text.encode("utf-8") if isinstance(text, str) else text)
    return Path(path)


def is_regular(path: PathLike) -> bool:
    """Whether `path` is a regular file (a symlink is not)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def seconds(text: str, zero: bool = False) -> Optional[float]:
    """`text` as a finite number of seconds above 0 (`zero`: or
    0), never `inf`, `nan` or `-1`; else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and (value > 0 or zero and value >= 0) else None


def seconds_arg(text: str, zero: bool = False) -> float:
    """An argparse type: `seconds`, or exit 2."""
    value = seconds(text, zero)
    if value is None:
        bound = ">= 0" if zero else "above 0"
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of seconds (expected a finite number {bound})"
        )
    return value
