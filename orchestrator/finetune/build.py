"""The training evidence's builds, under the CPU cell's lock: llama.cpp's own CMake project
(llama-finetune only) with the fix and with only the fix reverted, each binary copied out, then
checked to hold (or lack) the fix before any run.
"""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import time
from pathlib import Path
from typing import NamedTuple

from ..errors import BuildFailed
from ..model.layout import BuildPlan
from ..run.cell import APPLY, Planned, Tree, build_variant, fix_reverted
from ..run.pipeline import CellContext, Step
from . import real_model
from .commands import PROGRAM, VARIANT_LABELS, Variant
from .inputs import DEFINITIONS, INPUTS
from .provenance import check_provenance
from .record import BinaryCheck, BuiltFrom

# ---------------------------------------------------------------- build: both variants


class Built(NamedTuple):
    """A variant's llama-finetune copied out of the build tree, what it was built from, and what
    its build cost (wall and CPU seconds, the revert and restore included)."""

    binary: Path
    built_from: BuiltFrom
    seconds: float
    cpu_seconds: float


def training_plan(ctx: CellContext) -> Planned:
    """llama.cpp's own CMake project (DEFINITIONS) in the cell's worktree, llama-finetune only."""
    llama_dir = str(ctx.worktree.path / ctx.layout.prefix).rstrip("/")
    plan = BuildPlan(llama_dir, DEFINITIONS, (PROGRAM,), programs=())
    detail = f"llama.cpp's own CMake project, target {PROGRAM}, {ctx.options.build_subdir}"
    return Planned(plan, detail, "cmake configure (fine-tuning evidence)")


def build_patched(ctx: CellContext) -> Built:
    """llama-finetune with the fix, copied out of the build tree."""
    t0, c0 = time.monotonic(), children_cpu()
    # the real model's F32 copy is made with the patched tree's llama-quantize (it never trains)
    extra = (real_model.QUANTIZE,) if ctx.got(INPUTS).real else ()
    binary = _built(ctx, "patched", extra)
    built_from = _sources(ctx, ctx.got(APPLY), "patched")
    return Built(binary, built_from, since(t0), round(children_cpu() - c0, 2))


def build_control(ctx: CellContext) -> Built:
    """llama-finetune with only the fix reverted (the control's tree; patched again after)."""
    t0, c0 = time.monotonic(), children_cpu()
    tree = ctx.got(APPLY)
    with fix_reverted(tree) as reverted:
        ctx.steps.done(f"reverted {', '.join(reverted)}")
        binary = _built(ctx, "control")
        built_from = _sources(ctx, tree, "control")
    return Built(binary, built_from, since(t0), round(children_cpu() - c0, 2))


def since(t0: float) -> float:
    return round(time.monotonic() - t0, 2)


def _sources(ctx: CellContext, tree: Tree, variant: Variant) -> BuiltFrom:
    """Read right after a variant's build: the fix's files as blob ids in the tree and as
    expected (the patched commit's, or the base's), and the sha256 of the `<file>.o` each was
    compiled into."""
    paths = tree.rendered.fix_paths()
    rev = tree.head if variant == "patched" else tree.snap.commit
    blobs = ctx.repo.hash_blobs(tree.worktree.path, paths)
    objects = {}
    for p in paths:
        found = sorted(ctx.build_dir.glob(f"**/{Path(p).name}.o"))
        objects[p] = hashlib.sha256(found[0].read_bytes()).hexdigest() if found else None
    return BuiltFrom(
        blobs=dict(zip(paths, blobs, strict=True)),
        expected={p: (ctx.repo.object_id(rev, p) if rev else None) for p in paths},
        objects=objects,
    )


def _built(ctx: CellContext, variant: Variant, extra: tuple[str, ...] = ()) -> Path:
    """The variant's llama-finetune (and `extra` targets) built and copied out: its path."""
    rec = build_variant(ctx, variant, (PROGRAM, *extra))
    if not (rec.build and rec.build.ok):
        error = rec.build.error if rec.build else ""
        log = rec.build.log if rec.build else ctx.logs
        raise BuildFailed(
            f"{ctx.target.name}: {PROGRAM} {VARIANT_LABELS[variant]}: build failed: "
            f"{error} (log: {log})"
        )
    for name in (PROGRAM, *extra):
        dst = ctx.build_dir / "variants" / variant / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_name(dst.name + ".tmp")
        shutil.copy2(ctx.build_dir / "bin" / name, tmp)
        os.replace(tmp, dst)
    return ctx.build_dir / "variants" / variant / PROGRAM


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def provenance_step(ctx: CellContext) -> dict[Variant, BinaryCheck]:
    """Each binary checked to hold (or lack) the fix before any run."""
    patched, control = ctx.got(BUILD_PATCHED), ctx.got(BUILD_CONTROL)
    binaries: dict[Variant, Path] = {"patched": patched.binary, "control": control.binary}
    built_from: dict[Variant, BuiltFrom] = {
        "patched": patched.built_from,
        "control": control.built_from,
    }
    ctx.steps.step("provenance", "each binary holds (or lacks) the fix")
    provenance = check_provenance(binaries, ctx.got(INPUTS).markers, built_from)
    said = []
    for variant, check in provenance.items():
        said.append(f"{VARIANT_LABELS[variant]} {'holds' if check.holds_fix else 'lacks'} it")
    how = " and the ".join(provenance["patched"].how)
    if provenance["patched"].checked:
        ctx.steps.done(f"checked: {', '.join(said)} (by the {how})")
    else:
        ctx.steps.done("not checked: nothing to check it by")
    return provenance


# ---------------------------------------------------------------- the runs


TRAINING_PLAN = Step("plan", training_plan)
BUILD_PATCHED: Step[Built] = Step("build", build_patched)
BUILD_CONTROL: Step[Built] = Step("control", build_control)
PROVENANCE = Step("provenance", provenance_step)
