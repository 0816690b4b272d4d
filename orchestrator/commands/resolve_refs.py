"""ggml-patch resolve-refs: every git target's ref
resolved to one commit, for a CI run's plan job."""

from __future__ import annotations

import json
import sys

from ..errors import ExitCode
from . import add_targets, repeatable

HELP = (
    "resolve the branch, tag or HEAD of every git target to a commit (git ls-remote; nothing "
    "fetched) and print the pins as JSON, for --pins"
)


def add_arguments(p) -> None:
    repeatable(
        p, "--profile", "the git targets of this profile (repeatable; default: every profile)"
    )
    add_targets(p)
    p.add_argument("--out", metavar="FILE", help="also write the pins file here (indented JSON)")


def run(args, matrix, cache) -> ExitCode:
    from .. import pins
    from ..outdir import replaceable_file

    # before any network: never over a file the tool did not write
    out = replaceable_file(args.out, "--out", pins.made_pins) if args.out else None

    names = pins.git_targets(matrix, args.profile or list(matrix.profiles), args.target)
    resolved, gone = pins.resolve_reachable(matrix, names)
    for name, pin in resolved.items():
        print(f"{name}: {pin.ref} -> {pin.commit} ({pin.remote_ref})", file=sys.stderr)
    for name, why in gone.items():  # recorded, not fatal: its legs report `source unavailable`
        print(
            f"ggml-patch: warning: {name}: unreachable, its cells will report it: {why.reason}",
            file=sys.stderr,
        )
    if not names:
        print("no git targets: nothing to pin", file=sys.stderr)
    data = pins.pins_json(resolved, gone)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(data, separators=(",", ":")))  # one line: fits a job output ($GITHUB_OUTPUT)
    return ExitCode.OK
