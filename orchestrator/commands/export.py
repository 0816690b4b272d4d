"""ggml-patch export: the series as it applies to one target's layout, for plain `git am`."""

from __future__ import annotations

from ..errors import ExitCode
from . import add_topics

HELP = "write the series rendered for one target's layout"


def add_arguments(p) -> None:
    add_topics(p)
    p.add_argument("--target", required=True, metavar="NAME")
    p.add_argument("--out", required=True, metavar="DIR")


def run(args, matrix, cache) -> ExitCode:
    from .. import outdir
    from ..patchset.files import load_series, write_patches
    from ..patchset.render import rendered_for_target

    target = matrix.target(args.target)
    # a folder holding a user's files is refused before any work
    out = outdir.check(args.out, "--out")
    series = load_series(matrix, list(args.topic or []))
    rendered, snap = rendered_for_target(matrix, cache, target, series)
    # replaces only *.patch in the tool's own folder
    write_patches(rendered, outdir.claim(out, "--out"))
    print(
        f"{len(rendered.patches)} patches for {target.name} ({target.layout} "
        f"layout, base {snap.description}) in {out}"
    )
    return ExitCode.OK
