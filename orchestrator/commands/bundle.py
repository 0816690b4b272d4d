"""ggml-patch bundle: the upstream pull-request bundle for each target the results prove."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from ..errors import ExitCode

HELP = "write a verified git format-patch series, PR_TITLE, PR_BODY.md and manifest.json per target"


def add_arguments(p) -> None:
    p.add_argument("--results", default="results", metavar="DIR",
                   help="the matrix run to draw the evidence from (default: results/)")
    p.add_argument("--out", metavar="DIR", help="where the bundles go (default: RESULTS/bundle)")
    p.add_argument("--target", action="append", default=[], metavar="NAME", help="only this target (repeatable)")
    p.add_argument("--allow-incomplete", action="store_true",
                   help="bundle even when the results do not prove the fix; PR_BODY.md then opens with a warning")


def run(args, matrix, cache) -> ExitCode:
    from ..upstream.bundle import BundleOptions, make_bundles

    results_dir = Path(args.results)
    out = Path(args.out) if args.out else results_dir / "bundle"
    opts = BundleOptions(matrix, cache, results_dir, out, args.allow_incomplete, args.target,
                         log=lambda msg: print(f"bundle: {msg}", file=sys.stderr, flush=True))
    t0 = time.monotonic()
    made, left_out = make_bundles(opts)
    for why in left_out:
        print(f"ggml-patch: warning: not bundled: {why}", file=sys.stderr)
    for b in made:
        for w in b.warnings:
            print(f"ggml-patch: warning: {b.target}: incomplete evidence: {w}", file=sys.stderr)
        upstream = f", upstream {b.upstream_commit[:12]}" if b.upstream_commit else ""
        print(f"{b.target}: {len(b.patches)} patches against base {b.base_commit[:12]}{upstream}, "
              f"verified in {b.verify_s:.1f} s (git am, build, test-opt, gate) -> {b.path}")
    print(f"{len(made)} bundle(s) in {out} ({time.monotonic() - t0:.1f} s)")
    return ExitCode.OK
