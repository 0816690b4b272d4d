"""A bundle verified as a contributor would check it: its `git format-patch` files `git am`ed on a
fresh copy of the base, then exactly the build and test lines its documents show
(contributor.py, run by contributor_run.py), and its test commits alone, which must fail; the
toolchain that did it."""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..cache import Cache
from ..errors import BundleRefused, BundleVerificationFailed, SeriesDoesNotApply
from ..model.results import Cell, Outcome
from ..model.testspec import TestSpec
from ..run import toolchain
from ..vcs.snapshots import SnapshotRepo, Worktree
from . import contributor, contributor_run
from .manifest import CommandRun, Durations, Verification, VerifiedTest


def format_patch(repo: SnapshotRepo, base: str, patched: str) -> list[tuple[str, str]]:
    """`git format-patch base..patched`: [(file name, text)], in order."""
    if not repo.descends(base, patched):
        raise BundleRefused(
            f"the patched commit {patched[:12]} does not descend from the base {base[:12]}"
        )
    with tempfile.TemporaryDirectory(prefix="format-patch-") as tmp:
        return [
            (p.name, p.read_text(encoding="utf-8"))
            for p in repo.format_patches(base, patched, Path(tmp))
        ]


def _am_on_fresh_copy(
    target_name: str,
    repo: SnapshotRepo,
    worktree: Worktree,
    work: Path,
    base: str,
    patched: str,
    patches: list[tuple[str, str]],
    prior: list[Path],
) -> tuple[str, float]:
    """The bundle's files `git am`ed on exactly the base (after `prior`), checked to give the
    tested tree: (the commit it gives, seconds)."""
    series_dir = work / "bundle-series"
    if series_dir.exists():
        shutil.rmtree(series_dir)
    series_dir.mkdir(parents=True)
    files = [series_dir / name for name, _ in patches]
    for f, (_, text) in zip(files, patches, strict=True):
        f.write_text(text, encoding="utf-8")

    t0 = time.monotonic()
    _am_fresh(worktree, base, prior, files, f"{target_name}: the bundle's series does not apply")
    head = worktree.head()
    tree = (repo.tree_of(head) if head else None) or ""
    if not head or tree != repo.tree_of(patched):
        raise BundleVerificationFailed(
            f"{target_name}: git am of the bundle gives tree {tree[:12]}, not the tree "
            f"of the tested commit {patched[:12]}"
        )
    apply_s = time.monotonic() - t0
    return head, apply_s


@dataclass(frozen=True)
class Shown:
    """What the bundle's documents show a contributor to run (contributor.py): the tests, the
    patch files of the test commits alone (the reproduction; none: no such commit), the layout
    whose CMake builds them, the native programs (their failing lines are the gate's rows), the
    topic whose bundle it is (its logs' folder: the build folder is the target's, shared)."""

    tests: tuple[TestSpec, ...]
    test_only: tuple[str, ...]
    layout: str
    natives: tuple[str, ...] = ()
    topic: str = "series"


def verify(
    target,
    repo,
    worktree,
    work: Path,
    base: str,
    patched: str,
    patches: list[tuple[str, str]],
    shown: Shown,
    prior: list[Path],
) -> Verification:
    """git am the bundle's files on a fresh copy of the base (after `prior`: the patches of the
    topics it follows), then the build and test lines the bundle's documents show, exactly (each
    must pass and print its passing line); then, where the series has test commits, those alone
    on the base, whose tests must fail with the line the documents show. `patched` is the
    bundle's head: the contributor's commits. The build folder persists in the cache: a repeat
    rebuilds what changed."""
    t_all = time.monotonic()
    head, apply_s = _am_on_fresh_copy(
        target.name, repo, worktree, work, base, patched, patches, prior
    )
    lines = contributor.commands(shown.layout, base, [], shown.tests).run_lines
    seconds = contributor_run.deadline()
    keep = work / "contributor-build"
    reused = keep.exists()
    logs = work / "logs" / shown.topic
    fixed = contributor_run.run_lines(
        lines, worktree.path, keep, work, logs / "with-the-fix", seconds
    )
    commands = _checked_fix(target.name, base, lines, fixed)
    reproduction: list[CommandRun] = []
    if shown.test_only:
        left = seconds - (time.monotonic() - t_all)
        _am_test_commits(target.name, worktree, work, base, patches, shown.test_only, prior)
        ran = contributor_run.run_lines(
            lines, worktree.path, keep, work, logs / "tests-alone", left
        )
        reference = next((r.run.output for r in fixed if r.is_test), "")
        reproduction = _checked_bug(target.name, base, ran, shown.natives, reference)
    tests = {
        # the test as results name it: its program and arguments
        r.line[len(contributor.BIN_PREFIX) :]: VerifiedTest(
            outcome=str(r.outcome), exit_code=r.run.exit_code, summary_line=c.shown, log=r.run.log
        )
        for r, c in zip(fixed, commands, strict=True)
        if r.is_test
    }
    build_runs = [r for r in fixed if not r.is_test]
    return Verification(
        worktree=str(worktree.path),
        head=head,
        head_is_bundle_commit=head == patched,
        tree_is_patched_tree=True,
        configure_reused=reused,
        build_log=build_runs[-1].run.log if build_runs else "",
        tests=tests,
        durations_s=Durations(
            apply=round(apply_s, 2),
            configure=round(build_runs[0].run.duration_s, 2) if build_runs else 0.0,
            build=round(sum(r.run.duration_s for r in build_runs[1:]), 2),
            tests=round(sum(r.run.duration_s for r in fixed if r.is_test), 2),
            total=round(time.monotonic() - t_all, 2),
        ),
        commands=commands,
        reproduction=reproduction,
    )


def _record(r: contributor_run.LineRun, shown: Optional[str] = None) -> CommandRun:
    return CommandRun(
        line=r.line,
        exit_code=r.run.exit_code,
        duration_s=round(r.run.duration_s, 3),
        log=r.run.log,
        shown=shown,
    )


def _checked_fix(
    name: str, base: str, lines: list[str], ran: list[contributor_run.LineRun]
) -> list[CommandRun]:
    """Each line passed, each test printed its passing line; else one line naming the first
    that did not (and its log)."""
    where = f"{name}: with the bundle applied to a fresh copy of {base[:12]}"
    out = []
    for r in ran:
        if r.outcome != Outcome.PASSED:
            raise BundleVerificationFailed(
                f"{where}: `{r.line}` failed ({r.how()}; log: {r.run.log})"
            )
        shown = contributor_run.passing_line(r) if r.is_test else None
        if r.is_test and not shown:
            raise BundleVerificationFailed(
                f"{where}: `{r.line}` printed no line saying 'passed' to show (log: {r.run.log})"
            )
        out.append(_record(r, shown))
    if len(out) != len(lines):
        raise BundleVerificationFailed(f"{where}: `{lines[len(out)]}` was not run")
    return out


def _checked_bug(
    name: str,
    base: str,
    ran: list[contributor_run.LineRun],
    natives: tuple[str, ...],
    reference: str,
) -> list[CommandRun]:
    """With the test commits alone the build lines pass and the tests fail, each failing one
    with a line to show; else one line naming what did not."""
    where = f"{name}: the test commits alone on {base[:12]}"
    out = []
    for r in ran:
        if not r.is_test:
            if r.outcome != Outcome.PASSED:
                raise BundleVerificationFailed(
                    f"{where}: `{r.line}` failed ({r.how()}; log: {r.run.log})"
                )
            out.append(_record(r))
            continue
        shown = None
        if r.outcome != Outcome.PASSED:
            shown = contributor_run.failing_line(r, natives, reference)
            if not shown:
                raise BundleVerificationFailed(
                    f"{where}: `{r.line}` failed ({r.how()}) without a failing line to show "
                    f"(log: {r.run.log})"
                )
        out.append(_record(r, shown))
    if not any(c.shown for c in out):
        raise BundleVerificationFailed(
            f"{where}: every test passes without the fix (the reproduction shows no failure)"
        )
    return out


def _am_test_commits(
    target_name: str,
    worktree: Worktree,
    work: Path,
    base: str,
    patches: list[tuple[str, str]],
    test_only: tuple[str, ...],
    prior: list[Path],
) -> None:
    """The bundle's test commits alone `git am`ed on a fresh copy of the base (after `prior`),
    as the documents' reproduction does."""
    files = [work / "bundle-series" / n for n, _ in patches if n in test_only]
    what = f"{target_name}: the bundle's test commits alone do not apply"
    _am_fresh(worktree, base, prior, files, what)


def _am_fresh(worktree: Worktree, base: str, prior: list[Path], files: list[Path], what: str):
    """`files` `git am`ed on exactly the base (untracked files cleaned: a fresh copy), after
    `prior`, as the matrix's own `git am` does (the same commit comes out)."""
    worktree.ensure(base)
    try:
        if prior:
            worktree.am(prior)
        worktree.am(files)
    except SeriesDoesNotApply as e:
        raise SeriesDoesNotApply(
            f"{what} with git am to a fresh copy of {base[:12]}: {e}"
        ) from None


_SET = re.compile(r'^set\((CMAKE_(?:C|CXX)_COMPILER(?:_ID|_VERSION)?) "([^"]*)"\)', re.M)


def compiler_info(build_dir: Path) -> dict[str, str]:
    """{"c_compiler": "GNU 12.2.0 (/usr/bin/cc)", ...} from what CMake detected in a build tree."""
    found: dict[str, str] = {}
    cache = Path(build_dir) / "CMakeCache.txt"
    for lang, key in (("C", "c_compiler"), ("CXX", "cxx_compiler")):
        var = f"CMAKE_{lang}_COMPILER"
        for f in sorted(Path(build_dir).glob(f"CMakeFiles/*/CMake{lang}Compiler.cmake")):
            sets = dict(_SET.findall(f.read_text(errors="replace")))
            if sets.get(var):
                found[key] = (
                    f"{sets.get(f'{var}_ID', '?')} {sets.get(f'{var}_VERSION', '?')} ({sets[var]})"
                )
        if key not in found and cache.exists():  # older trees: the cache has the path at least
            m = re.search(rf"^{var}:\w+=(.+)$", cache.read_text(errors="replace"), re.M)
            if m:
                found[key] = m.group(1).strip()
    return found


def toolchain_of(cache: Cache, cells: list[Cell], build_dir: Path) -> dict[str, str]:
    """The tools' versions, the verification build's compilers, and a cell's C++ compiler only where
    it differs from those (the rest is noise)."""
    versions = toolchain.versions()
    info = {k: versions[k] for k in ("cmake", "ninja", "git")}
    if shutil.which("ccache"):
        info["ccache"] = versions["ccache"]
    info = {k: v for k, v in {**info, **compiler_info(build_dir)}.items() if v}
    for c in cells:
        cxx = compiler_info(cache.cell_dir(c.cell) / "build").get("cxx_compiler")
        if cxx and cxx != info.get("cxx_compiler"):
            info[f"cell {c.cell} C++ compiler"] = cxx
    return info
