"""Reading the series from patches/ (the one place the series touches the file system)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, TypeVar

from .. import untrusted
from ..config import Matrix, _line_for, require_native_tests
from ..errors import ConfigError
from ..model.layout import GATE_TEST
from .series import Series, parse_patch

T = TypeVar("T")


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


def read_series(directory: Path, layout: str) -> Series:
    if not directory.is_dir():
        raise ConfigError(f"{directory}: the series directory does not exist")
    # the bytes as they are (untrusted.read_text translates no newline): parse_patch refuses a
    # CRLF-converted patch and keeps a CR inside a hunk, which is content
    patches = read_diff_files(directory, "patch", parse_patch)
    if not patches:
        raise ConfigError(f"{directory}: the series is empty: no *.patch files")
    return Series(layout, tuple(patches))


def load_series(matrix: Matrix) -> Series:
    """The series named by matrix.yaml, checked against native_tests/: the test the series
    adds must be the gate test's source, byte for byte."""
    if not matrix.series_dir.is_dir():
        raise ConfigError(
            f"{matrix.path}:{_line_for(matrix.lines, ('series', 'path'))}: series.path: "
            f"{matrix.series_dir}: the series directory does not exist"
        )
    # the gate test the series must carry, and the harness every build uses
    require_native_tests(matrix)
    series = read_series(matrix.series_dir, matrix.series_layout)
    # maintainers approved the gate as a new test file: its own patch joins
    if matrix.series.gate_approval:
        # native_tests/upstream-gate/*.patch, after the series
        gate_dir = matrix.native_tests_dir / "upstream-gate"
        gate = read_series(gate_dir, series.layout) if gate_dir.is_dir() else None
        if gate is None or not gate.patches:
            raise ConfigError(
                f"{matrix.path}: series.gate_approval is set but {gate_dir} holds no gate patch"
            )
        series = Series(series.layout, series.patches + gate.patches)
    native = matrix.native_tests_dir / f"{GATE_TEST}.cpp"
    in_series = series.gate_test_source()
    if (
        native.exists()
        and in_series is not None
        and native.read_text(encoding="utf-8") != in_series
    ):
        raise ConfigError(
            f"{matrix.series_dir}: the series' {GATE_TEST}.cpp differs from {native}; "
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
