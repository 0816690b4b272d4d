"""Reading the queue from patches/ (the one place the series touches the file system)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, Optional, Protocol, TypeVar

from .. import untrusted
from ..config import Matrix, _line_for, require_native_tests
from ..errors import ConfigError
from ..model.layout import GATE_TEST
from .queue import QUEUE_FILE, TOPIC_FILE, Queue, build_queue, parse_queue_order
from .series import Series, parse_patch

T = TypeVar("T")


class _Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=_Named)


def read_diff_files(folder: Path, kind: str, parse: Callable[[str, str], T]) -> list[T]:
    """folder/*.patch parsed by `parse(name, text)` in name
    order (none: no folder); errors name the file."""
    out = []
    for f in sorted(folder.glob("*.patch")) if folder.is_dir() else []:
        text = untrusted.read_text(f, kind, root=folder)
        try:
            out.append(parse(f.name, text))
        except ConfigError as e:
            raise ConfigError(f"{folder}/{e}") from None
    return out


def read_topic_diff_files(
    matrix: Matrix,
    topics: Optional[list[str]],
    folder: str,
    kind: str,
    parse: Callable[[str, str], N],
    queue: Optional[Queue] = None,
) -> list[N]:
    """native_tests/<topic>/<folder>/*.patch of the chosen topics (the active ones by default), in
    queue order; a name two topics share is refused (results name a variant by it). `queue`: the
    matrix's, already loaded (a run reads it once)."""
    out: list[N] = []
    seen: dict[str, str] = {}
    for t in (queue or load_queue(matrix)).chosen(topics):
        where = matrix.topic_native_dir(t.name) / folder
        for item in read_diff_files(where, kind, parse):
            name = item.name
            if name in seen:
                raise ConfigError(
                    f"{where}/{name}.patch: the {kind} {name!r} is also topic {seen[name]!r}'s; "
                    "rename one (results name a variant by it)"
                )
            seen[name] = t.name
            if "topic" in getattr(item, "__dataclass_fields__", {}):
                # the records name the topic a mutant belongs to
                item = dataclasses.replace(item, topic=t.name)  # type: ignore[type-var]
            out.append(item)
    return out


def read_series(directory: Path, layout: str) -> Series:
    if not directory.is_dir():
        raise ConfigError(f"{directory}: the series directory does not exist")
    # the bytes as they are (untrusted.read_text translates no newline): parse_patch refuses a
    # CRLF-converted patch and keeps a CR inside a hunk, which is content
    patches = read_diff_files(directory, "patch", parse_patch)
    if not patches:
        raise ConfigError(f"{directory}: the series is empty: no *.patch files")
    return Series(layout, tuple(patches))


def load_queue(matrix: Matrix, with_gate: bool = True) -> Queue:
    """The queue matrix.yaml names (`queue.path`): patches/queue.yaml's topics, each its folder's
    topic.yaml and series (with its upstream-gate patch once the gate is approved)."""
    qdir = matrix.queue_dir
    if not qdir.is_dir():
        raise ConfigError(
            f"{matrix.path}:{_line_for(matrix.lines, ('queue', 'path'))}: queue.path: "
            f"{qdir}: the queue directory does not exist"
        )
    order_file = qdir / QUEUE_FILE
    order_text = untrusted.read_optional(order_file, "queue", root=qdir)
    if order_text is None:
        raise ConfigError(
            f"{order_file}: missing; expected `topics: [NAME, ...]`, the topics in the order "
            "they apply (each a folder beside it)"
        )
    order = parse_queue_order(str(order_file), order_text)
    files = {}
    for i, name in enumerate(order.topics):
        tdir = matrix.topic_dir(name)
        meta_file = tdir / TOPIC_FILE
        text = untrusted.read_optional(meta_file, "topic", root=qdir) if tdir.is_dir() else None
        if text is None:
            what = "has no topic.yaml" if tdir.is_dir() else "is not a folder"
            raise ConfigError(
                f"{order_file}: topics[{i}]: {tdir} {what}; run `ggml-patch topic new`"
            )
        series = read_series(tdir, matrix.series_layout)
        if with_gate and matrix.queue.gate_approval:
            series = _with_gate_patch(matrix, name, series)
        files[name] = (str(meta_file), text, series)
    return build_queue(str(order_file), matrix.series_layout, order_text, files)


def _with_gate_patch(matrix: Matrix, topic: str, series: Series) -> Series:
    """Maintainers approved the gate as a new test file: its own patch
    (native_tests/<topic>/upstream-gate/*.patch) joins the topic's series, after it."""
    gate_dir = matrix.topic_native_dir(topic) / "upstream-gate"
    if not gate_dir.is_dir():
        return series
    gate = read_series(gate_dir, series.layout)
    return Series(series.layout, series.patches + gate.patches)


def load_series(
    matrix: Matrix,
    topics: Optional[list[str]] = None,
    queue: Optional[Queue] = None,
    target: Optional[str] = None,
    any_state: bool = False,
) -> Series:
    """The series of the queue's active topics (or those named, with what they follow) as one,
    checked against native_tests/: the gate test a series adds must be the gate test's source,
    byte for byte. `queue`: the matrix's, already loaded; `target`: the series applied there
    (without the topics retired on it); `any_state`: `topics` whatever their state (a run's)."""
    require_native_tests(matrix)  # the gate test and the harness every build uses
    queue = queue or load_queue(matrix)
    series = queue.series(topics, target, any_state)
    if matrix.queue.gate_approval and series.gate_test_source() is None:
        raise ConfigError(
            f"{matrix.path}:{_line_for(matrix.lines, ('queue', 'gate_approval'))}: "
            "queue.gate_approval is set but no topic's native_tests/<topic>/upstream-gate/ "
            "holds a gate patch"
        )
    native = matrix.native_tests_dir / f"{GATE_TEST}.cpp"
    in_series = series.gate_test_source()
    if (
        native.exists()
        and in_series is not None
        and native.read_text(encoding="utf-8") != in_series
    ):
        raise ConfigError(
            f"{matrix.queue_dir}: the series' {GATE_TEST}.cpp differs from {native}; "
            "regenerate the series from native_tests/"
        )
    return series


def write_patches(series: Series, directory: Path) -> list[Path]:
    """The series as *.patch files in `directory`, and none other; the paths, in order."""
    directory.mkdir(parents=True, exist_ok=True)
    write_series(directory, series)
    return [directory / p.name for p in series.patches]


def write_series(directory: Path, series: Series) -> tuple[list[str], list[str]]:
    """Write the patches whose bytes differ, remove *.patch files the
    series no longer has; (written, removed)."""
    written, removed = [], []
    for p in series.patches:
        data = p.text().encode("utf-8", "surrogateescape")
        f = directory / p.name
        if f.exists() and f.read_bytes() == data:
            continue
        tmp = f.with_name(f".{f.name}.tmp")
        tmp.write_bytes(data)
        tmp.replace(f)
        written.append(p.name)
    for f in sorted(directory.glob("*.patch")):
        if f.name not in {p.name for p in series.patches}:
            f.unlink()
            removed.append(f.name)
    return written, removed


def check_replaceable(path: Path, root: Path) -> None:
    """`path` may be (re)written by the tool: a regular file or none, with no symlink at it or in
    a folder between it and `root` (patches/): the tool never writes through a symlink."""
    p = path
    while True:
        if p.is_symlink():
            raise ConfigError(f"{path}: {p} is a symlink; refused (never written through)")
        if p == root or p.parent == p:
            break
        p = p.parent
    if path.exists() and not untrusted.is_regular(path):
        raise ConfigError(f"{path}: not a regular file; refused")


@dataclasses.dataclass(frozen=True)
class QueueWrite:
    """What a queue command writes, all checked before the first byte: new folders (`moves`:
    a topic's folder renamed), then files (each replaced, never written through)."""

    files: tuple[tuple[Path, str], ...]
    moves: tuple[tuple[Path, Path], ...] = ()


def write_queue(root: Path, plan: QueueWrite) -> None:
    """`plan` applied under `root` (patches/): every target checked first (no symlink, a regular
    file or none, a renamed folder's new name free); folders renamed, then each file replaced
    whole (written beside it, then renamed over it). queue.yaml is the caller's last file: a
    queue never names a topic before its folder is there."""
    for src, dst in plan.moves:
        if src.is_symlink() or not src.is_dir():  # a folder moved, never what a link names
            raise ConfigError(f"{src}: not a folder (or a symlink); refused")
        if dst.exists() or dst.is_symlink():
            raise ConfigError(f"{dst}: exists; refused (a topic's folder is never replaced)")
    for path, _ in plan.files:
        check_replaceable(path, root)
    for src, dst in plan.moves:
        src.rename(dst)
    for path, text in plan.files:
        path.parent.mkdir(parents=True, exist_ok=True)
        # a patch's bytes as read (surrogateescape): a commit's non-UTF-8 line stays as it was
        untrusted.write_replacing(path, text.encode("utf-8", "surrogateescape"))
