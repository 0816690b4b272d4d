"""The `ggml-patch` command line. Every user-facing error is one line and a distinct exit code."""
from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Optional

from .errors import ExitCode, GgmlPatchError


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--matrix", default="matrix.yaml", metavar="PATH", help="matrix file (default: matrix.yaml)")
    common.add_argument("--cache", metavar="DIR", help="cache directory (default: $GGML_PATCH_CACHE or ~/.cache/ggml-patch)")

    p = argparse.ArgumentParser(prog="ggml-patch", description=__doc__, parents=[common])
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    m = sub.add_parser("matrix", parents=[common], help="apply, build, test and control every cell")
    m.add_argument("--results", default="results", metavar="DIR", help="where results go (default: results/)")
    m.add_argument("--profile", default="default", help="matrix.yaml profile (default: default)")
    m.add_argument("--target", action="append", default=[], metavar="NAME", help="only this target (repeatable)")
    m.add_argument("--backend", action="append", default=[], metavar="NAME", help="only this backend (repeatable)")

    e = sub.add_parser("export", parents=[common], help="write the series as it applies to one target")
    e.add_argument("--target", required=True, metavar="NAME")
    e.add_argument("--out", required=True, metavar="DIR")
    return p


def main(argv: Optional[list[str]] = None) -> int:
    signal.signal(signal.SIGTERM, _raise_interrupt)  # SIGTERM unwinds like Ctrl-C: locks released, tree restored
    try:
        args = _parser().parse_args(argv)
        return int(_dispatch(args))
    except GgmlPatchError as e:
        print(f"ggml-patch: error: {e}", file=sys.stderr)
        return int(e.exit_code)
    except KeyboardInterrupt:
        print("ggml-patch: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except Exception as e:  # a bug in the tool: still one line, the traceback on request
        if os.environ.get("GGML_PATCH_DEBUG"):
            raise
        print(f"ggml-patch: internal error: {type(e).__name__}: {e} (set GGML_PATCH_DEBUG=1 for the traceback)",
              file=sys.stderr)
        return int(ExitCode.TOOL_ERROR)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _dispatch(args: argparse.Namespace) -> ExitCode:
    from .cache import Cache, default_cache_dir
    from .config import load_matrix

    matrix = load_matrix(args.matrix)
    cache = Cache(Path(args.cache) if args.cache else default_cache_dir())
    if args.command == "matrix":
        return _cmd_matrix(args, matrix, cache)
    if args.command == "export":
        return _cmd_export(args, matrix, cache)
    raise AssertionError(args.command)


def _cmd_matrix(args, matrix, cache) -> ExitCode:
    from .matrix import RunOptions, run_matrix
    from .results import write_results

    results_dir = Path(args.results)
    opts = RunOptions(matrix, cache, results_dir, args.profile, args.target, args.backend)
    results = run_matrix(opts)
    paths = write_results(results, results_dir)
    cells = results["cells"]
    passed = sum(1 for c in cells if c["status"] == "passed")
    skipped = sum(1 for c in cells if c["status"] == "skipped")
    print(f"{passed} passed, {len(cells) - passed - skipped} failed, {skipped} skipped: results in "
          + ", ".join(str(p) for p in paths))
    return ExitCode(results["exit_code"])


def _cmd_export(args, matrix, cache) -> ExitCode:
    from . import sources
    from .layout import get_layout
    from .series import render
    from .series_files import load_series
    from .snapshots import SnapshotRepo

    (target, _), = matrix.cells(targets=[args.target], backends=[next(iter(matrix.backends))])
    series = load_series(matrix)
    repo = SnapshotRepo(cache.snapshots_git)
    snap = sources.snapshot(target.source, cache, repo)
    rendered = render(series, get_layout(series.layout), get_layout(target.layout, target.prefix),
                      lambda p: repo.read_blob(snap.commit, p))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for p in rendered.patches:
        (out / p.name).write_text(p.text(), encoding="utf-8")
    print(f"{len(rendered.patches)} patches for {target.name} ({target.layout} layout, base {snap.description}) in {out}")
    return ExitCode.OK
