"""The drift status: how the series stands against each target. Pure: facts in, verdicts out
(check.py gathers the facts with git; commands/status.py prints them).

A target's status, by precedence:
  source unreachable / unavailable  the source could not be fetched (the reason is kept)
  not applicable    a file the fix changes, or the per-step API it fixes, is absent
  conflict          a patch applies neither as is nor with a 3-way merge: the file, the hunk,
                    and a worktree left for resolution
  already upstream  every patch is already there (it reverse-applies, or its content is present)
  applies with 3-way merge / applies cleanly

Per topic (the row's patches split back into the queue's topics), a topic in conflict or already
upstream also gets its behaviour checked (check.py, behaviour.py): its own test cases built and
run on the target as it is. `with_behaviour` is the verdict, `topic_action` what the drift issue
asks for:
  text status       behaviour passed              failed / not checked / skipped
  conflict          fixed upstream (behaviour)*   conflict (detail says which, and why)
  already upstream  already upstream (confirmed)  already upstream (detail says which)
  any other         unchanged: no behaviour check
* only where the topic's control was killed in the target's layout (proofs.py: in this run or a
  recorded one): else "conflict; the topic's tests cannot tell whether upstream fixed it here",
  whose action is to resolve, never to retire
"""

from __future__ import annotations

import itertools
import re
from typing import Callable, Literal, Optional

import unidiff
from pydantic import Field

from ..errors import ExitCode
from ..model.results import Provenance
from ..model.values import Count, Name, TextLine
from ..patchset.series import FileDiff, Patch, Series
from ..records import Record

APPLIES = "applies cleanly"
THREE_WAY = "applies with 3-way merge"
CONFLICT = "conflict"
UPSTREAM = "already upstream"
NOT_APPLICABLE = "not applicable"
UNREACHABLE = "source unreachable"
UNAVAILABLE = "source unavailable"
# a topic whose patch does not apply (or is already there) but whose own test cases pass on the
# target as it is: upstream fixed it, whatever its text
FIXED_BEHAVIOUR = "fixed upstream (behaviour)"
# topic.yaml's `retired:` names the target: upstream has the fix there, the queue does not apply it
RETIRED_HERE = "retired on this target"
# a later topic's patches tried without the conflicting one (drift/alone.py): it does not need it
ALONE = "tried on its own (an earlier topic conflicts there)"
TOPIC_NOT_TRIED = "not tried"  # an earlier topic conflicts there: git am stopped before this one
# a conflict whose tests pass on the target but never killed the topic's control in its layout
CANNOT_TELL = "the topic's tests cannot tell whether upstream fixed it here"
# the topic statuses whose behaviour is checked: the patch cannot tell whether the fix is there
NEEDS_BEHAVIOUR = (CONFLICT, UPSTREAM)

# the behaviour check's outcomes
PASSED, FAILED, NOT_CHECKED, SKIPPED = "passed", "failed", "not checked", "skipped"
BehaviourOutcome = Literal["passed", "failed", "not checked", "skipped"]

# what the drift issue asks for a topic on a target
RETIRE, REFRESH, REDERIVE, RESOLVE = "retire", "refresh", "re-derive", "resolve"

# one patch's result
CLEAN, MERGED, PRESENT, CONFLICTED, NOT_TRIED = (
    "clean",
    "3-way",
    "already upstream",
    "conflict",
    "not tried",
)

PER_STEP_API = "ggml_opt_prepare_alloc"  # the per-step mode the fix is about (ggml-opt.h)
OPT_HEADER = "include/ggml-opt.h"  # ggml layout path

_PATCH_FAILED = re.compile(r"error: patch failed: (?P<path>.+):(?P<line>\d+)$", re.M)
_EXISTS = re.compile(r"error: (?P<path>.+): already exists in (?:working directory|index)$", re.M)
_NO_FILE = re.compile(r"error: (?P<path>.+): does not exist in (?:index|working tree)$", re.M)


class PatchResult(Record, frozen=True):
    name: TextLine
    result: TextLine  # CLEAN, MERGED, PRESENT, CONFLICTED or NOT_TRIED
    detail: TextLine = ""


class Conflict(Record, frozen=True):
    patch: TextLine
    file: TextLine  # the file (target layout) where it stopped
    hunk: TextLine  # the patch's hunk header there, or what failed ("new file", ...)
    lines: tuple[tuple[Count, Count], ...] = ()  # conflict-marker line ranges in the file
    worktree: TextLine = ""  # left with `git am -3` stopped at this patch
    reason: TextLine = ""  # git's own line (e.g. no blobs for a 3-way merge)
    kept: bool = False  # an earlier run's resolution worktree, left as it was
    # a kept worktree made for another base or series: why, and the command that discards it
    stale: TextLine = ""


class Behaviour(Record, frozen=True):
    """The behaviour check of one topic on one target: its own test cases (only its test patches,
    rendered for the target) on the target as it is, test-opt built and run."""

    outcome: BehaviourOutcome
    detail: TextLine = ""  # why not checked or skipped, or the first failing line
    log: TextLine = ""  # the run's (or the failed build's) log
    cached: bool = False  # the same tree as the last check: its result, nothing built


class TopicOnTarget(Record):
    """Where one topic stands on one target (its part of the target's row)."""

    NULLS = frozenset({"behaviour"})

    status: TextLine
    detail: TextLine = ""
    behaviour: Optional[Behaviour] = None  # None: the status needs no behaviour check


class TargetStatus(Record):
    """One target's row of `ggml-patch status --json`."""

    NULLS = frozenset({"base", "conflict"})

    target: Name
    layout: TextLine = ""
    # kind, description, provenance
    source: Provenance = Field(default_factory=lambda: Provenance(kind=""))
    status: TextLine
    detail: TextLine = ""
    base: Optional[TextLine] = None
    patches: list[PatchResult] = Field(default_factory=list)
    conflict: Optional[Conflict] = None
    # topic -> where it stands (its own patches' results, its behaviour where checked)
    topics: dict[Name, TopicOnTarget] = Field(default_factory=dict)


class StatusReport(Record):
    """`ggml-patch status --json`: the profile and every target's row."""

    profile: TextLine = "?"
    targets: list[TargetStatus] = Field(min_length=1)


def target_status(results: list[PatchResult]) -> tuple[str, str]:
    """(status, detail) of a target from its patches' results."""
    if r := next((r for r in results if r.result == CONFLICTED), None):
        return CONFLICT, f"{short_name(r.name)}: {r.detail}"
    present = [short_name(r.name) for r in results if r.result == PRESENT]
    if results and len(present) == len(results):
        return UPSTREAM, "; ".join(f"{short_name(r.name)}: {r.detail}" for r in results if r.detail)
    status = THREE_WAY if any(r.result == MERGED for r in results) else APPLIES
    return status, (f"already upstream: {', '.join(present)}" if present else "")


def split_topics(
    topics: list[tuple[str, list[str]]], row: TargetStatus
) -> dict[str, TopicOnTarget]:
    """A target's row as one status per topic, `topics` being each topic's name and its own patch
    names, in the order the row's patches come (as many per topic as its series has)."""
    out = {}
    start = 0
    for name, own in topics:
        mine = row.patches[start : start + len(own)]
        start += len(own)
        if not row.patches:  # not applicable, unreachable: the same for every topic
            out[name] = TopicOnTarget(status=row.status, detail=row.detail)
        elif all(r.result == NOT_TRIED for r in mine):  # git am stopped before it (or none)
            detail = "an earlier topic's patch conflicts there"
            out[name] = TopicOnTarget(status=TOPIC_NOT_TRIED, detail=detail)
        else:
            # the results under the topic's own patch names (the queue numbers them as a whole)
            named = [r.model_copy(update={"name": n}) for r, n in zip(mine, own, strict=False)]
            word, detail = target_status(named)
            detail = alone_detail(mine, detail) or detail
            out[name] = TopicOnTarget(status=word, detail=detail)
    return out


def alone_detail(mine: list[PatchResult], detail: str) -> Optional[str]:
    """A topic's detail on the target when it was tried on its own: said first."""
    if not any(r.detail.startswith(ALONE) for r in mine):
        return None
    rest = detail.replace(f"{ALONE}; ", "").replace(ALONE, "").strip("; ")
    return f"{ALONE}; {rest}" if rest else ALONE


def with_behaviour(
    text: TopicOnTarget, found: Optional[Behaviour], proven: Optional[str] = None, name: str = ""
) -> TopicOnTarget:
    """The topic's status once its behaviour is known (the verdict table in the module's doc).
    `proven`: where its control was killed in the target's layout (proofs.py), None: nowhere on
    record; passing tests that were never seen failing without the fix cannot say it is fixed.
    `name`: the topic's, for the command that would prove them."""
    if found is None or text.status not in NEEDS_BEHAVIOUR:
        return text
    shown = f"{text.status}: {text.detail}" if text.detail else text.status
    if found.outcome == PASSED and text.status == CONFLICT and proven:
        detail = f"its test cases pass on the target as it is, and caught the bug {proven}"
        detail += f" (the patch: {shown})"
        return TopicOnTarget(status=FIXED_BEHAVIOUR, detail=detail, behaviour=found)
    if found.outcome == PASSED and text.status == CONFLICT:
        detail = f"{CANNOT_TELL} (they pass on the target as it is, but were never seen failing "
        detail += f"without the fix in this layout: `ggml-patch matrix --topic {name or 'NAME'}` "
        detail += "on a target of this layout shows whether they can)"
        detail = f"{text.detail}; {detail}" if text.detail else detail
        return TopicOnTarget(status=CONFLICT, detail=detail, behaviour=found)
    if found.outcome == PASSED:
        said = "its test cases pass on the target as it is"
    elif found.outcome == FAILED:
        said = "its test cases fail on the target as it is"
        said += f": {found.detail}" if found.detail else ""
    else:
        said = f"behaviour not checked: {found.detail}"
    detail = f"{text.detail}; {said}" if text.detail else said
    return TopicOnTarget(status=text.status, detail=detail, behaviour=found)


def topic_action(on: TopicOnTarget) -> Optional[str]:
    """What to do with the topic for this target: retire it (merged upstream, by its text or by
    its behaviour), refresh it (it applies only with a 3-way merge), re-derive it (it conflicts
    and its cases fail there: the bug is there, the fix must be written anew), resolve the
    conflict (its behaviour was not checked); None: nothing."""
    if on.status in (UPSTREAM, FIXED_BEHAVIOUR):
        return RETIRE
    if on.status == THREE_WAY:
        return REFRESH
    if on.status == CONFLICT:
        failed = on.behaviour is not None and on.behaviour.outcome == FAILED
        return REDERIVE if failed else RESOLVE
    return None


def short_name(patch_name: str) -> str:
    """0001-ggml-opt-zero-....patch -> 0001 (the table's width; JSON keeps the whole name)."""
    m = re.match(r"^(\d+)-", patch_name)
    return m.group(1) if m else patch_name


def exit_code(rows: list[TargetStatus]) -> ExitCode:
    """0 unless a target conflicts (4) or its source could not be had (3); the lowest wins."""
    code = {
        UNREACHABLE: ExitCode.SOURCE_UNAVAILABLE,
        UNAVAILABLE: ExitCode.SOURCE_UNAVAILABLE,
        CONFLICT: ExitCode.SERIES_DOES_NOT_APPLY,
    }
    return min((code[r.status] for r in rows if r.status in code), default=ExitCode.OK)


def modified_fix_files(series: Series) -> list[str]:
    """Files the fix changes (outside tests/) that must exist before it: not the ones it creates."""
    fix = set(series.fix_paths())
    changed: list[str] = []
    for p in series.patches:
        for f in p.files:
            if f.path in fix and not is_new_file(f) and f.path not in changed:
                changed.append(f.path)
    return changed


def not_applicable_reason(
    fix_files: list[str], header_path: str, read: Callable[[str], Optional[str]]
) -> Optional[str]:
    """Why the fix cannot apply at all, or None: a file it changes is absent, or the header has no
    per-step API (ggml_opt_prepare_alloc), so there is no per-step mode to fix."""
    for path in fix_files:
        if read(path) is None:
            return f"{path} is absent"
    header = read(header_path)
    if header is None:
        return f"{header_path} is absent: no per-step API ({PER_STEP_API})"
    if PER_STEP_API not in header:
        return f"{header_path} has no per-step API ({PER_STEP_API})"
    return None


def content_present(patch: Patch, read: Callable[[str], Optional[str]]) -> bool:
    """Whether the patch's change is already in the files though the patch does not reverse-apply
    (upstream merged it with other changes around): every file it creates exists with exactly its
    content, and every run of lines it adds is there, consecutive, in the file it changes."""
    return all(_file_present(f, read(f.path)) for f in patch.files)


def _file_present(f: FileDiff, current: Optional[str]) -> bool:
    if current is None:
        return False
    if is_new_file(f):
        return current == f.added_content
    lines = "\n" + "\n".join(current.splitlines()) + "\n"  # each run's lines there, consecutive
    return all("\n" + "\n".join(run) + "\n" in lines for run in added_runs(f))


def added_runs(f: FileDiff) -> list[list[str]]:
    """Each maximal run of added lines of a file diff, without the newlines."""
    runs = []
    for hunk in unidiff.PatchSet(f.text)[0]:
        for added, run in itertools.groupby(hunk, key=lambda line: line.is_added):
            if added:
                runs.append([line.value.rstrip("\n") for line in run])
    return [r for r in runs if any(x.strip() for x in r)]


def failed_hunk(patch: Patch, git_output: str) -> tuple[Optional[str], str]:
    """(file, hunk) where a plain `git am` stopped, from git's own error lines."""
    if m := _PATCH_FAILED.search(git_output):
        path, line = m.group("path"), int(m.group("line"))
        return path, hunk_header(patch, path, line) or f"at line {line}"
    for regex, what in ((_EXISTS, "new file: already exists"), (_NO_FILE, "file does not exist")):
        if m := regex.search(git_output):
            return m.group("path"), what
    return None, ""


def hunk_header(patch: Patch, path: str, old_line: int) -> Optional[str]:
    """The '@@ ... @@' line of the hunk of `path` starting at `old_line` (git apply's report)."""
    f = next((f for f in patch.files if f.path == path), None)
    if f is None:
        return None
    hunks = unidiff.PatchSet(f.text)[0]
    hunk = next((h for h in hunks if h.source_start == old_line), None)
    if hunk is None:
        return None
    return _header_line(f.text, hunk)


def _header_line(text: str, hunk: unidiff.Hunk) -> str:
    """The hunk's '@@' line as the diff has it (with its function context), else made anew."""
    prefix = f"@@ -{hunk.source_start}"
    for line in text.splitlines():
        if line.startswith(prefix) and line.count("@@") >= 2:
            return line
    old = f"-{hunk.source_start},{hunk.source_length}"
    new = f"+{hunk.target_start},{hunk.target_length}"
    return f"@@ {old} {new} @@"


def conflict_regions(text: str) -> tuple[tuple[int, int], ...]:
    """1-based (first, last) line of each <<<<<<< ... >>>>>>> block."""
    out, start = [], None
    for i, line in enumerate(text.splitlines(), 1):
        if line.startswith("<<<<<<< "):
            start = i
        elif line.startswith(">>>>>>> ") and start is not None:
            out.append((start, i))
            start = None
    return tuple(out)


def is_new_file(f: FileDiff) -> bool:
    return "\nnew file mode " in f.text.split("\n@@", 1)[0]
