"""ggml-patch merge-results: combine per-cell results (one CI leg each) into one results.json,
summary.md and junit.xml."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..errors import ConfigError, ExitCode

HELP = "combine per-cell results directories (or results.json files) into one results.json, summary.md and junit.xml"


def add_arguments(p) -> None:
    p.add_argument("--out", required=True, metavar="DIR", help="where the merged results go")
    p.add_argument("inputs", nargs="+", metavar="RESULTS_DIR_OR_JSON")


def _results_file(arg: str) -> Path:
    p = Path(arg)
    if p.is_dir():
        p = p / "results.json"
    if not p.is_file():
        raise ConfigError(f"{p}: no such results file (expected a results directory or a results.json)")
    return p


def _copy_logs(results, src_dir: Path, out: Path) -> None:
    """Bring each record's logs along and point the record at the copy, so the merged results
    stand alone (a CI leg's absolute paths mean nothing once its artifact is downloaded)."""
    from ..cache import slug

    for rec in results.records:
        for entry in [rec.build, *rec.tests.values()]:
            if entry is None or not entry.log:
                continue
            parts = Path(entry.log).parts
            starts = [i for i in range(len(parts) - 1) if parts[i] == "logs" and parts[i + 1] == slug(rec.cell)]
            if not starts:
                continue
            rel = Path(*parts[starts[-1] :])
            if (src_dir / rel).is_file():
                (out / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src_dir / rel, out / rel)
                entry.log = str(out / rel)


def _matrix_order(matrix) -> list[str]:
    """Cell ids in the order one run over the matrix lists them (profiles in file order)."""
    return [f"{t.name}/{b.name}" for p in matrix.profiles for t, b in matrix.cells(p)]


def run(args, matrix, cache) -> ExitCode:
    from ..outdir import writable_dir
    from ..report.merge import merge_results
    from ..report.model import CellStatus, load_results
    from ..report.summary import write_results

    out = writable_dir(args.out, "--out")  # before anything is read or merged
    files = [_results_file(a) for a in args.inputs]
    parts = [(str(f), load_results(f)[0]) for f in files]
    merged = merge_results(parts, _matrix_order(matrix))  # refuses before anything is written
    for f, (_, res) in zip(files, parts, strict=True):
        _copy_logs(res, f.parent, out)  # the merged records are these same objects
    paths = write_results(merged, out)
    if (out / "junit.xml").is_file() and out / "junit.xml" not in paths:
        paths.append(out / "junit.xml")
    cells = merged.cells
    passed = sum(1 for c in cells if c.status == CellStatus.PASSED)
    skipped = sum(1 for c in cells if c.status == CellStatus.SKIPPED)
    print(
        f"merged {len(cells)} cells from {len(parts)} results: {passed} passed, "
        f"{len(cells) - passed - skipped} failed, {skipped} skipped: " + ", ".join(str(p) for p in paths)
    )
    return ExitCode.OK
