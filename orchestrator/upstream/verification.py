"""A bundle verified as a contributor would check it: its `git format-patch` files `git am`ed on a
fresh copy of the base, then the cell pipeline's configure, build and tests; the toolchain that
did it."""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from pathlib import Path

from ..cache import Cache
from ..config import Backend
from ..errors import BuildFailed, BundleRefused, BundleVerificationFailed, SeriesDoesNotApply
from ..model.results import Cell, Outcome
from ..patchset.series import Series
from ..run import toolchain
from ..run.cell import tested_tree
from ..vcs.snapshots import SnapshotRepo, Worktree
from .bundle_options import BundleOptions
from .manifest import Durations, Verification, VerifiedTest


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
    worktree.ensure(base)  # exactly the base, untracked files cleaned: a fresh copy
    try:
        # the same `git am` as the matrix's own: the same commit comes out
        if prior:
            worktree.am(prior)
        worktree.am(files)
    except SeriesDoesNotApply as e:
        raise SeriesDoesNotApply(
            f"{target_name}: the bundle's series does not apply with git am to a fresh copy "
            f"of {base[:12]}: {e}"
        ) from None
    head = worktree.head()
    tree = (repo.tree_of(head) if head else None) or ""
    if not head or tree != repo.tree_of(patched):
        raise BundleVerificationFailed(
            f"{target_name}: git am of the bundle gives tree {tree[:12]}, not the tree "
            f"of the tested commit {patched[:12]}"
        )
    apply_s = time.monotonic() - t0
    return head, apply_s


def verify(
    opts: BundleOptions,
    target,
    repo,
    worktree,
    work: Path,
    base: str,
    patched: str,
    patches: list[tuple[str, str]],
    series: Series,
    prior: list[Path],
) -> Verification:
    """git am the bundle's files on a fresh copy of the base (after `prior`: the patches of the
    topics it follows), then the cell pipeline's configure, build and tests (CPU) of `series`.
    `patched` is the bundle's head: the contributor's commits. Its trees persist in the cache: a
    repeat costs seconds."""
    t_all = time.monotonic()
    head, apply_s = _am_on_fresh_copy(
        target.name, repo, worktree, work, base, patched, patches, prior
    )

    backend = opts.matrix.backends.get("cpu") or Backend("cpu")
    try:
        tested = tested_tree(
            target,
            backend,
            opts.cache,
            repo,
            series,
            opts.matrix.native_tests_dir,
            work,
            worktree,
            # the build tree is the target's, shared by its topics; the logs are each topic's
            work / "logs" / (series.topics[-1] if series.topics else "series"),
        )
    except BuildFailed as e:
        raise BuildFailed(f"{target.name}: bundle verification: {e}") from None
    rec = tested.patched
    assert rec.build is not None
    tests = {
        name: VerifiedTest(
            outcome=str(t.outcome), exit_code=t.exit_code, summary_line=t.summary_line, log=t.log
        )
        for name, t in rec.tests.items()
    }
    failed = [
        f"{n} {t.outcome}"
        for n, t in tests.items()
        if t.outcome not in (Outcome.PASSED, Outcome.SKIPPED)
    ]
    if failed:
        raise BundleVerificationFailed(
            f"{target.name}: with the bundle applied to a fresh copy of the base: "
            f"{', '.join(failed)} (logs: {tested.logs})"
        )
    return Verification(
        worktree=str(worktree.path),
        head=head,
        head_is_bundle_commit=head == patched,
        tree_is_patched_tree=True,
        configure_reused=tested.configure_reused,
        build_log=rec.build.log,
        tests=tests,
        durations_s=Durations(
            apply=round(apply_s, 2),
            configure=tested.configure_s,
            build=rec.build.duration_s,
            tests=tested.tests_s,
            total=round(time.monotonic() - t_all, 2),
        ),
    )


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
