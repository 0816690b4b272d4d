"""The result cache of cells: what decides a cell's result (cache_inputs, hashed into its key),
a finished cell stored with its logs (store), and reused when nothing changed (reuse_cached)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from .. import __version__, buildenv, sources
from ..cache import Cache
from ..model.results import CachedFrom, Cell, VariantRecord
from ..patchset.series import Series
from ..records import Record
from . import resultcache, toolchain
from .pipeline import CellContext
from .tree import harness_files


class CachedResult(Record):
    """A result-cache entry: the finished cell and its records, log paths relative to the entry's
    logs."""

    cell: Cell
    records: list[VariantRecord]


def cache_inputs(ctx: CellContext, snap: sources.Snapshot, rendered: Series) -> dict:
    """Everything that decides the cell's result (its result-cache key hashes these)."""
    runs_mutants = not ctx.module.mutants_skip_reason
    # a backend that runs no mutant keeps its key when they change
    mutants = {}
    if runs_mutants:
        mutants = {m.name: [f.text for f in m.files] for m in ctx.options.mutant_files}
    inputs = {
        "tool": __version__,
        "base": snap.commit,
        "series": rendered.sha256,
        "layout": [ctx.layout.name, ctx.layout.prefix],
        "harness": harness_files(ctx.native_tests),
        "flags": ctx.module.configure_flags(ctx.backend),
        "env": ctx.env,
        "timeout": ctx.backend.timeout,
        "build_only": ctx.build_only_reason is not None,
        # probed again only when an executable changed: a no-change re-run starts none of them
        "toolchain": toolchain.versions(results_cache_dir(ctx.cache)),
        "mutants": mutants,
        # the key's name kept: cached results stay valid
        "mutants_enabled": not ctx.options.no_mutants,
    }
    # topic.yaml's tests, control_crash and training judge the run, not the patches: an edit of
    # one (a crash bug declared after a first run) is a new key, never the old verdict reused
    judged_by = _judged_by(ctx.options.series)
    if judged_by:
        inputs["judged_by"] = judged_by
    competing = ctx.options.competing_files
    if competing and runs_mutants:
        inputs["competing"] = {c.name: [f.text for f in c.files] for c in competing}
    # only where a backend skips tests, so every other cell keeps its key
    if ctx.skipped_tests:
        inputs["skip_tests"] = ctx.skipped_tests
    # CC, CFLAGS, ... as set now (buildenv.BUILD_VARIABLES); none set: the key is unchanged
    build_env = buildenv.key_part()
    if build_env:
        inputs["build_env"] = build_env
    return inputs


def _judged_by(series: Series) -> dict:
    """What topic.yaml says judges each carried topic, as data the key can hash."""
    return {
        name: value
        for name, value in (
            ("tests", [[t, [s.name for s in specs]] for t, specs in series.topic_tests]),
            ("control_crash", [list(c) for c in series.control_crash]),
            ("training", [list(t) for t in series.training]),
        )
        if value
    }


def results_cache_dir(cache: Cache) -> Path:
    return cache.root / "results"


def reuse_cached(ctx: CellContext, key: str) -> bool:
    """The cached result of exactly these inputs (`key`), its logs copied into this run's, if
    there is one."""
    try:
        found = CachedResult.model_validate(resultcache.load(results_cache_dir(ctx.cache), key))
    except ValueError:  # pydantic's ValidationError is one
        return False  # none, or an entry this version cannot read: not a hit
    resultcache.copy_logs(results_cache_dir(ctx.cache), key, ctx.logs)
    _map_logs(found.records, lambda p: str(ctx.logs / p) if p else p)
    timings = ctx.cell.timings  # this run's: the cached run's are kept apart
    for name in Cell.model_fields:
        setattr(ctx.cell, name, getattr(found.cell, name))
    ctx.cell.cache_key, ctx.cell.timings = key, timings
    ctx.cell.cached = CachedFrom(key=key, timings_of_the_run=found.cell.timings)
    ctx.records += found.records
    return True


def _map_logs(records: list[VariantRecord], fn: Callable[[str], str]) -> None:
    for rec in records:
        for r in (rec.build, *rec.tests.values(), rec.training):
            if r and r.log:
                r.log = fn(r.log)


def store(ctx: CellContext) -> None:
    """The finished cell and its logs in the result cache, log paths relative to the logs
    directory."""
    for rec in ctx.records:
        for t in rec.tests.values():
            t.output = None  # the tests' output is in their logs
    records = [r.model_copy(deep=True) for r in ctx.records]  # copies: paths made relative below
    # one not under this run's logs (never so today) kept as it is
    _map_logs(
        records,
        lambda p: str(Path(p).relative_to(ctx.logs)) if Path(p).is_relative_to(ctx.logs) else p,
    )
    entry = CachedResult(cell=ctx.cell, records=records).to_json()
    resultcache.store_with_logs(results_cache_dir(ctx.cache), ctx.key, entry, ctx.logs)
