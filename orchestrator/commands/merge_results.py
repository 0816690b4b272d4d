"""ggml-patch merge-results: per-cell results (one CI leg each)
into one results.json, summary.md, junit.xml."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ..errors import ConfigError, ExitCode

HELP = (
    "combine per-cell results directories (or results.json files) "
    "into one results.json, summary.md and junit.xml"
)


def add_arguments(p) -> None:
    p.add_argument("--out", required=True, metavar="DIR", help="where the merged results go")
    p.add_argument(
        "--expect-profile",
        metavar="NAME",
        help="every cell of this profile must be there: one that is not (its leg timed out "
        "or died before uploading) is added as an error, and an input that is an "
        "unmatched glob (no leg reported) is skipped",
    )
    p.add_argument("inputs", nargs="+", metavar="RESULTS_DIR_OR_JSON")


def _results_file(arg: str) -> Path:
    p = Path(arg) / "results.json" if Path(arg).is_dir() else Path(arg)
    if not p.is_file():
        raise ConfigError(
            f"{p}: no such results file (expected a results directory or a results.json)"
        )
    return p


def _log_names(results, where: Path) -> list[tuple[object, str]]:
    """(record entry, its log's name inside the results folder: logs/<cell>/NAME) for every log a
    record names. A log anywhere else (another folder, '..', /proc/...) refuses the whole input:
    a results file names its own logs, nothing more."""
    from ..cache import slug

    out = []
    for rec in results.records:
        for entry in (e for e in [rec.build, *rec.tests.values()] if e is not None and e.log):
            parts = Path(entry.log).parts
            starts = [
                i
                for i in range(len(parts) - 1)
                if parts[i] == "logs" and parts[i + 1] == slug(rec.cell)
            ]
            rel = parts[starts[-1] :] if starts else ()
            if len(rel) < 3 or ".." in rel:
                raise ConfigError(
                    f"{where}: {rec.cell} names the log {entry.log!r}, which is not inside its "
                    f"results folder (expected .../logs/{slug(rec.cell)}/NAME)"
                )
            out.append((entry, "/".join(rel)))
    return out


def _not_an_input(out: Path, files: list[Path]) -> None:
    """--out may not be an input's folder, inside one, or hold one: writing there would
    truncate the logs it is about to copy (`merge-results --out LEG LEG`)."""
    where = out.resolve()
    for f in files:
        leg = f.parent.resolve()
        if where == leg or where.is_relative_to(leg) or leg.is_relative_to(where):
            raise ConfigError(
                f"--out {out}: also an input ({f}); give a new folder for the merged results"
            )


def _within_caps(names: list[tuple[object, str]], src_dir: Path) -> None:
    """Every log to copy is under the log cap, checked before --out is claimed."""
    from .. import untrusted

    cap = untrusted.cap_of("log")
    for _, rel in names:
        src = untrusted.name_under(src_dir, rel, f"{src_dir}: log")
        if untrusted.is_regular(src) and src.stat().st_size > cap:
            raise ConfigError(
                f"{src}: {src.stat().st_size} bytes, more than the {cap} a log file may hold; "
                "refused"
            )


def _copy_logs(names: list[tuple[object, str]], src_dir: Path, out: Path) -> None:
    """Bring each record's logs along and point the record at the copy, so the merged results
    stand alone (a CI leg's absolute paths mean nothing once its artifact is downloaded). Only
    regular files inside the leg's folder are read (no symlink out of it, no FIFO or device)."""
    from .. import untrusted
    from ..redact import redact, safe_cut

    for entry, rel in names:
        src = untrusted.name_under(src_dir, rel, f"{src_dir}: log")
        dst = untrusted.name_under(out, rel, f"{out}: log")
        if untrusted.is_regular(src):
            dst.parent.mkdir(parents=True, exist_ok=True)
            # a leg's log may hold a secret
            untrusted.copy_file(src, dst, root=src_dir, line=redact, split=safe_cut)
            entry.log = str(dst)  # type: ignore[attr-defined]
        else:
            entry.log = None  # type: ignore[attr-defined]  # absent here: named nowhere


def run(args, matrix, cache) -> ExitCode:
    from ..model.results import CellStatus, load_results, overall_exit_code
    from ..outdir import check, claim, made_results
    from ..report.merge import merge_results
    from ..report.summary import write_results

    # before anything is read or merged: no user's files
    out = check(args.out, "--out", legacy=made_results)
    inputs = args.inputs
    if args.expect_profile:
        matrix.cells(args.expect_profile)  # an unknown profile: one line, before anything is read
        inputs = [a for a in inputs if not ("*" in a and not Path(a).exists())]
    files = [_results_file(a) for a in inputs]
    _not_an_input(out, files)
    parts = [(str(f), load_results(f)[0]) for f in files]
    # refused before any write
    logs = [_log_names(res, f) for f, (_, res) in zip(files, parts, strict=True)]
    for f, names in zip(files, logs, strict=True):
        _within_caps(names, f.parent)
    # as one run lists them
    order = [f"{t.name}/{b.name}" for p in matrix.profiles for t, b in matrix.cells(p)]
    merged = merge_results(parts, order)  # refuses before anything is written
    if args.expect_profile:
        merged.cells.extend(
            never_reported(matrix, args.expect_profile, {c.cell for c in merged.cells})
        )
        merged.exit_code = int(overall_exit_code(merged.cells))
    claim(out, "--out", legacy=made_results)
    for f, names in zip(files, logs, strict=True):
        _copy_logs(names, f.parent, out)  # the merged records are these same objects
    paths = [*write_results(merged, out), out / "junit.xml"]
    n, total = Counter(c.status for c in merged.cells), len(merged.cells)
    passed, skipped = n[CellStatus.PASSED], n[CellStatus.SKIPPED]
    print(
        f"merged {total} cells from {len(parts)} results: {passed} passed, "
        f"{total - passed - skipped} failed, {skipped} skipped: " + ", ".join(map(str, paths))
    )
    return ExitCode.OK


def never_reported(matrix, profile: str, present: set[str]) -> list:
    """An error cell (the tool error: Cell's default exit code) for each cell of
    `profile` without results: its leg timed out, was cancelled or died before uploading.
    Absent from a merge it would pass unnoticed."""
    from ..model.results import Cell, CellStatus

    why = "no results: its CI leg never reported (timed out, cancelled or died before uploading)"
    missing = []
    for t, b in matrix.cells(profile):
        name = f"{t.name}/{b.name}"
        if name in present:
            continue
        missing.append(
            Cell(
                cell=name,
                target=t.name,
                backend=b.name,
                layout=t.layout,
                status=CellStatus.ERROR,
                reason=why,
            )
        )
    return missing
