"""The behaviour check's effects: a topic whose patch does not apply to a target (conflict) or is
already there gets its OWN test cases (its test patches only, rendered for the target's layout)
applied to the target as it is; test-opt is built and run by the cell pipeline's own steps for a
given tree (run/cell.py tested_tree: CPU, the backend's configure and ccache as a cell's; the gate
test not built: test-opt's cases judge). The verdict is status.py's.

    <cache>/status/behaviour/<layout>/  src/ (one worktree per layout: switching targets
                                        recompiles only the files that differ), build/,
                                        harness/, logs/<target>/<topic>/
    <cache>/status/<target>/behaviour/<topic>.json  the last result and the key of its tree

The key is the tree's content (the base commit and the rendered test patches) and what builds it
(flags, harness, tool version): a re-run with nothing changed builds nothing.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Optional

from .. import __version__, backends, sources
from ..cache import Cache, slug
from ..config import Backend, Matrix, Target
from ..errors import ConfigError, GgmlPatchError
from ..model.layout import Layout, get_layout
from ..patchset.files import write_patches
from ..patchset.queue import Topic
from ..patchset.render import render
from ..patchset.series import Patch, Series
from ..records import Record
from ..run import cell
from ..run.tree import harness_files, native_programs
from ..vcs.runner import GitError
from ..vcs.snapshots import SnapshotRepo, Worktree
from ..verdicts import classify
from ..verdicts.competing import first_failing_line
from . import confined
from .status import FAILED, NOT_CHECKED, PASSED, Behaviour, short_name

BACKEND = "cpu"  # the check's backend: every machine has it
BUILD_AND_RUN = f"{__name__}:build_and_run"  # what the confined process runs


class Checked(Record):
    """<cache>/status/<target>/behaviour/<topic>.json."""

    key: str
    behaviour: Behaviour


def is_test_patch(p: Patch) -> bool:
    """A patch that only touches tests/ (a topic's test cases, after its source change)."""
    return all(f.path.startswith("tests/") or "/tests/" in f.path for f in p.files)


def result_file(cache: Cache, target: Target, topic: str) -> Path:
    return cache.root / "status" / slug(target.name) / "behaviour" / f"{slug(topic)}.json"


def check_topic(
    matrix: Matrix,
    cache: Cache,
    repo: SnapshotRepo,
    target: Target,
    snap: sources.Snapshot,
    topic: Topic,
) -> Behaviour:
    """The topic's test cases on the target as it is: passed, failed (the first failing line),
    or not checked (why)."""
    src, layout = get_layout(matrix.series_layout), get_layout(target.layout, target.prefix)
    tests = [p for p in topic.series.patches if is_test_patch(p)]
    if not tests:
        return Behaviour(outcome=NOT_CHECKED, detail="the topic has no test patch")
    try:
        # its upstream tests only: the project's own (native_tests/) are not upstream's to pass
        natives = native_programs(matrix.native_tests_dir)
        upstream = tuple(t for t in topic.meta.test_specs() if t.program not in natives)
        if not upstream:
            why = "its tests are the project's own (native_tests/), which the target does not have"
            return Behaviour(outcome=NOT_CHECKED, detail=why)
        own = Series(src.name, tuple(tests), (topic.name,), topic_tests=((topic.name, upstream),))
        names = ", ".join(t.name for t in upstream)
        rendered = render(own, src, layout, lambda p: repo.read_blob(snap.commit, p))
    except ConfigError as e:
        return Behaviour(outcome=NOT_CHECKED, detail=f"its test patches: {e}")
    backend = matrix.backends.get(BACKEND)
    if backend is None:
        return Behaviour(outcome=NOT_CHECKED, detail=f"matrix.yaml has no {BACKEND} backend")
    module = backends.get(BACKEND, cache.root)
    missing = module.missing_toolchain(backend)
    if missing:
        return Behaviour(outcome=NOT_CHECKED, detail=f"cannot build {names}: {missing}")
    flags = module.configure_flags(backend)
    harness = harness_files(matrix.native_tests_dir)
    key = _key(snap.commit, layout, rendered, flags, harness)
    out = result_file(cache, target, topic.name)
    last = _last(out)
    if last is not None and last.key == key:
        return last.behaviour.model_copy(update={"cached": True})
    root = cache.root / "status" / "behaviour" / slug(_layout_id(layout))
    print(
        f"behaviour: {topic.name} on {target.name}: building {names} with its test cases",
        file=sys.stderr,
    )
    with cache.lock(f"behaviour-{_layout_id(layout)}"):  # one tree per layout
        logs = root / "logs" / slug(target.name) / slug(topic.name)
        # the target's own code runs in it: confined (a process of its own, one deadline, no
        # secret, its homes in its folder)
        inputs = dict(matrix=matrix, cache=cache, root=root, logs=logs, repo_path=repo.path)
        inputs |= dict(target=target, snap=snap, rendered=rendered, backend=backend)
        found, lasting = confined.run(BUILD_AND_RUN, inputs, root, confined.deadline())
    if lasting:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(Checked(key=key, behaviour=found).to_json(), indent=2) + "\n")
    else:  # perhaps this machine's trouble, not the tree's: the next run checks again
        out.unlink(missing_ok=True)
    return found


def build_and_run(
    matrix: Matrix,
    cache: Cache,
    root: Path,
    logs: Path,
    repo_path: Path,
    target: Target,
    snap: sources.Snapshot,
    rendered: Series,
    backend: Backend,
) -> tuple[Behaviour, bool]:
    """The test patches on the target as it is, then the cell pipeline's own steps for a given
    tree (cell.tested_tree: plan, configure, build, test), test-opt's outcome read back; and
    whether the result is the tree's (kept for a run with the same key) or may be this machine's
    (configure or build failed, the run timed out: checked again next time). In the confined
    process (confined.py); `repo_path`: the snapshots repository's folder."""
    repo = SnapshotRepo(repo_path)
    wt = Worktree(repo, root / "src")
    wt.ensure(snap.commit)
    files = write_patches(rendered, root / "series")
    for patch, f in zip(rendered.patches, files, strict=True):
        why = _apply(wt, f)
        if why:
            detail = f"its test patch {short_name(patch.name)} does not apply there: {why}"
            return Behaviour(outcome=NOT_CHECKED, detail=detail), True
    try:
        tested = cell.tested_tree(
            target, backend, cache, repo, rendered, matrix.native_tests_dir, root, wt, logs
        )
    except GgmlPatchError as e:  # configure or build failed: the cases cannot be judged there
        names = ", ".join(t.name for t in rendered.tests())
        detail = f"{names} with its test cases does not build there: {e}"
        return Behaviour(outcome=NOT_CHECKED, detail=detail), False
    runs = tested.patched.tests
    bad = [(n, r) for n, r in runs.items() if r.outcome != classify.PASSED]
    if runs and not bad:
        return Behaviour(outcome=PASSED, log=next(iter(runs.values())).log), True
    if not bad:
        return Behaviour(outcome=NOT_CHECKED, detail="no test ran"), False
    name, run = bad[0]
    if run.outcome in (classify.TIMEOUT, classify.SKIPPED):  # a hang tells nothing about the fix
        detail = f"{name} {run.outcome} ({run.skipped or f'after {backend.timeout:g} s'})"
        return Behaviour(outcome=NOT_CHECKED, detail=detail, log=run.log), False
    if run.signal:  # a crash in its cases is a bug there (e.g. a NULL dereference)
        case = classify.last_case(run.output or "")  # test-opt names its cases; others may not
        said = f"{name} crashed ({run.signal})" + (f" in {case}" if case else "")
    else:
        said = first_failing_line(name, run.output or "") or f"{name}: exit code {run.exit_code}"
    return Behaviour(outcome=FAILED, detail=said, log=run.log), True


def _apply(wt: Worktree, f: Path) -> Optional[str]:
    """Apply one test patch to the tree as it is (already there: nothing to do); git's reason why
    it does not apply, or None."""
    if wt.applies(f, reverse=True):
        return None
    try:
        wt.apply(f)
        return None
    except GitError as plain:
        try:  # upstream moved test-opt.cpp's code around the cases: a 3-way merge may place them
            wt.apply_3way(f)
            return None
        except GitError:
            wt.ensure(wt.head() or "HEAD")  # no half-merged file left for the next topic
            return plain.line


def _layout_id(layout: Layout) -> str:
    return layout.name + (f"-{layout.prefix.strip('/')}" if layout.prefix else "")


def _key(base: str, layout: Layout, rendered: Series, flags: list[str], harness: dict) -> str:
    data = {
        "base": base,
        "layout": _layout_id(layout),
        "patches": [p.text() for p in rendered.patches],
        "tests": [t.name for t in rendered.tests()],
        "flags": flags,
        "harness": harness,
        "version": __version__,
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def _last(path: Path) -> Optional[Checked]:
    try:
        return Checked.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # none yet, or unreadable: checked again
