"""ggml-patch export: the series as it applies to one target's layout, for plain `git am`."""
from __future__ import annotations

from pathlib import Path

from ..errors import ExitCode

HELP = "write the series rendered for one target's layout"


def add_arguments(p) -> None:
    p.add_argument("--target", required=True, metavar="NAME")
    p.add_argument("--out", required=True, metavar="DIR")


def run(args, matrix, cache) -> ExitCode:
    from ..patchset.render import rendered_for_target
    from ..patchset.files import write_patches

    target = matrix.target(args.target)
    rendered, snap = rendered_for_target(matrix, cache, target)
    out = Path(args.out)
    write_patches(rendered, out)
    print(f"{len(rendered.patches)} patches for {target.name} ({target.layout} layout, base {snap.description}) in {out}")
    return ExitCode.OK
