"""The cell's tree: the worktree with the series applied (apply_series, its state.json), the
harness copied beside it, and the one way a variant changes it (`changed`): a topic's source hunks
reverted (`git apply -R` of them on the whole queue) and/or a diff applied, the files put back
byte for byte whatever happens."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, NamedTuple, Optional

from .. import sources
from ..model.layout import PRECOMPILE_CMAKE
from ..patchset.files import write_patches
from ..patchset.series import FileDiff, Series
from ..records import Record
from ..vcs.runner import GitError
from ..vcs.snapshots import Worktree

# the harness: its CMake files, and every program of native_tests/ (the gate tests a topic may
# declare, the training programs), built through extra-programs.cmake
_HARNESS_CMAKE = ("CMakeLists.txt", "extra-programs.cmake", PRECOMPILE_CMAKE)


class Tree(NamedTuple):
    """What apply made: the worktree on the base (`snap`) with the series rendered for the target
    applied, and the commit `git am` made (`head`)."""

    snap: sources.Snapshot
    rendered: Series
    worktree: Worktree
    head: str = ""
    key: str = ""  # the result cache's key of the cell's inputs


class TreeState(Record):
    """The cell's state.json: the base and series its worktree holds, and the commit `git am`
    made."""

    base: str
    series: str
    head: str


def apply_series(worktree: Worktree, base: str, rendered: Series, cell_dir: Path) -> str:
    """The worktree on base + series; one already there left untouched (no file times change:
    nothing recompiles)."""
    state_file = cell_dir / "state.json"
    try:
        state: Optional[TreeState] = TreeState.model_validate_json(state_file.read_text())
    except (OSError, ValueError):
        state = None  # none, or unreadable: the series is applied again
    if state and (state.base, state.series) == (base, rendered.sha256) and state.head:
        if worktree.path.exists() and worktree.head() == state.head and worktree.is_clean():
            return state.head
    files = write_patches(rendered, cell_dir / "series")
    state_file.unlink(missing_ok=True)
    worktree.ensure(base)
    head = worktree.am(files)
    state_file.write_text(TreeState(base=base, series=rendered.sha256, head=head).model_dump_json())
    return head


def native_programs(native_tests: Path) -> tuple[str, ...]:
    """The programs native_tests/ holds (test-*.cpp, train-*.cpp), by name: what a topic may
    declare beside upstream's tests."""
    found = [*native_tests.glob("test-*.cpp"), *native_tests.glob("train-*.cpp")]
    return tuple(sorted(p.stem for p in found))


def harness_files(native_tests: Path) -> dict[str, str]:
    names = [*_HARNESS_CMAKE, *(f"{p}.cpp" for p in native_programs(native_tests))]
    return {name: (native_tests / name).read_text(encoding="utf-8") for name in names}


def harness(native_tests: Path, cell_dir: Path) -> Path:
    """The CMake harness and the native programs copied into the cell (unchanged files untouched):
    the build tree does not depend on where this checkout lives, so a second clone reuses it."""
    out = cell_dir / "harness"
    out.mkdir(parents=True, exist_ok=True)
    for name, text in harness_files(native_tests).items():
        dst = out / name
        if not dst.exists() or dst.read_text(encoding="utf-8") != text:
            dst.write_text(text, encoding="utf-8")
    return out


@contextmanager
def files_kept(root: Path, paths: list[str]) -> Iterator[None]:
    """The files' bytes written back on the way out, whatever happens (one that did not exist
    removed): no git process, the index untouched, an unchanged file not touched (nothing
    recompiles)."""
    kept = {p: (root / p).read_bytes() if (root / p).is_file() else None for p in paths}
    try:
        yield
    finally:
        for p, data in kept.items():
            f = root / p
            if data is None:
                f.unlink(missing_ok=True)
            elif not f.is_file() or f.read_bytes() != data:
                f.write_bytes(data)


class TreeChange(NamedTuple):
    """How a variant differs from the patched tree: the source hunks it reverts (a topic's, or the
    whole series'), and a diff it applies on top (a known-wrong or competing fix), with the paths
    that diff touches."""

    reverts: tuple[FileDiff, ...] = ()
    diff: str = ""
    diff_paths: tuple[str, ...] = ()
    name: str = "variant"  # the patch files' name under the cell's folder

    @property
    def paths(self) -> list[str]:
        return sorted({f.path for f in self.reverts} | set(self.diff_paths))


class TreeChanged(NamedTuple):
    reverted: list[str]  # the paths whose hunks were reverted
    error: Optional[str]  # the diff did not apply (git's line); None: it did


@contextmanager
def changed(worktree: Worktree, cell_dir: Path, change: TreeChange) -> Iterator[TreeChanged]:
    """The worktree as `change` says, the files put back on the way out whatever happens; a
    GitError when the reverted hunks do not revert (the variant is then invalid). The one way any
    variant changes the tree."""
    reverted = sorted({f.path for f in change.reverts})
    with files_kept(worktree.path, change.paths):
        if change.reverts:
            patch = cell_dir / "reverts" / f"{change.name}.patch"
            patch.parent.mkdir(parents=True, exist_ok=True)
            patch.write_text("".join(f.text for f in change.reverts), encoding="utf-8")
            worktree.unapply(patch)
        error = None
        if change.diff:
            patch = cell_dir / "diffs" / f"{change.name}.patch"
            patch.parent.mkdir(parents=True, exist_ok=True)
            patch.write_text(change.diff, encoding="utf-8")
            try:
                worktree.apply(patch)
            except GitError as e:
                error = e.line
        yield TreeChanged(reverted, error)


def whole_fix(series: Series) -> tuple[FileDiff, ...]:
    """Every source hunk of the series (outside tests/): what a control of the whole fix reverts."""
    return tuple(f for p in series.patches for f in p.files if f.path in series.fix_paths())


@contextmanager
def fix_reverted(tree: Tree) -> Iterator[list[str]]:
    """The worktree with the whole fix reverted (every source hunk of the series), the tests
    kept, put back whatever happens (the training evidence's control)."""
    change = TreeChange(reverts=whole_fix(tree.rendered), name="whole-fix")
    with changed(tree.worktree, tree.worktree.path.parent, change) as done:
        yield done.reverted
