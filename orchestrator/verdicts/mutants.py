"""Mutants (pure): known-wrong fixes the gate must catch
(native_tests/<topic>/mutants/NN-name.patch): a header of `Mutant: <one-line title>` and `Why it
is wrong: <one line>`, a blank line, then a git diff in the series' layout that turns the FIXED file
into the wrong one. Verdicts: killed (a test fails by its own check), survived (the cell fails,
exit 7), invalid (did not apply or build, crashed, timed out).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Optional

from ..config import Matrix
from ..errors import ConfigError
from ..model.layout import UPSTREAM_TEST
from ..model.results import Outcome, TestRecord, Verdict
from ..patchset.files import read_topic_diff_files
from ..patchset.queue import Queue
from ..patchset.render import DiffInLayout
from ..patchset.series import FileDiff, parse_patch
from .classify import INVALID, KILLED, SURVIVED, GateVerdict, gate_verdict
from .competing import first_failing_line

_HEADER = re.compile(r"^(?P<key>Mutant|Why it is wrong): (?P<value>\S.*)$", re.M)


@dataclass(frozen=True)
class Mutant(DiffInLayout):
    name: str  # the file name without .patch, e.g. "02-reset-at-build-when-opt-i-zero"
    title: str
    why: str
    files: tuple[FileDiff, ...]  # the diff, in the series' layout
    topic: str = ""  # the queue's topic whose native_tests/<topic>/mutants/ holds it


def parse_mutant(name: str, text: str) -> Mutant:
    """A mutant file's text; one ConfigError line naming the file when it is malformed."""
    if "\ndiff --git " not in "\n" + text:
        raise ConfigError(
            f"{name}: no 'diff --git' section; a mutant is a header, a blank line and a git diff"
        )
    header = ("\n" + text).split("\ndiff --git ", 1)[0]
    fields = {m["key"]: m["value"].strip() for m in _HEADER.finditer(header)}
    for key in ("Mutant", "Why it is wrong"):
        if key not in fields:
            raise ConfigError(f"{name}: no '{key}: ...' line before the diff")
    # paths checked: a/ b/ prefixes, nothing escaping the tree, no binary
    patch = parse_patch(name, text)
    return Mutant(
        name.removesuffix(".patch"), fields["Mutant"], fields["Why it is wrong"], patch.files
    )


def mutant_verdict(
    apply_error: Optional[str], build_ok: bool, gate: Optional[TestRecord]
) -> GateVerdict:
    """The gate's verdict on one mutant (the control's own rules, classify.gate_verdict)."""
    if apply_error is not None:
        return GateVerdict(INVALID, f"the mutant did not apply: {apply_error}")
    return gate_verdict(
        build_ok,
        gate.outcome if gate else None,
        gate.exit_code if gate else None,
        (gate.output or "") if gate else "",
        variant="the tree with the mutant",
        passed="the gate test passed with this known-wrong fix: it does not catch it",
    )


def test_opt_verdict(
    apply_error: Optional[str], build_ok: bool, test: Optional[TestRecord], name: str = "test-opt"
) -> GateVerdict:
    """An upstream test's verdict (`name`'s, test-opt's by default) on one mutant: killed by its
    own check (a case's FAIL line), survived, or invalid."""
    if apply_error is not None or not build_ok:
        # the gate's words: not applied, not built
        return mutant_verdict(apply_error, build_ok, None)
    if test is None:
        return GateVerdict(INVALID, f"{name} did not run")
    if test.outcome == Outcome.PASSED:
        return GateVerdict(
            SURVIVED, f"{name} passed with this known-wrong fix: its cases do not catch it"
        )
    line = first_failing_line(name, test.output or "")
    if test.outcome != Outcome.FAILED or not line:
        return GateVerdict(
            INVALID,
            f"{name} {test.outcome} (exit code {test.exit_code}) without a failing case line",
        )
    return GateVerdict(KILLED, f"{name} failed by its own check: {line}")


def _is_gate(test: Optional[TestRecord]) -> bool:
    return test is not None and bool(test.gate)


def per_test_verdicts(
    apply_error: Optional[str], build_ok: bool, tests: Mapping[str, TestRecord], judged: list[str]
) -> dict[str, GateVerdict]:
    """Each test's verdict on one mutant, run separately (only the tests that pass with the fix)."""
    return {
        t: (
            mutant_verdict(apply_error, build_ok, tests.get(t))
            if _is_gate(tests.get(t))
            else test_opt_verdict(apply_error, build_ok, tests.get(t), t)
        )
        for t in judged
    }


def overall_verdict(per_test: Mapping[str, GateVerdict]) -> GateVerdict:
    """killed when any test kills it (each reason kept),
    survived when every test passed, else invalid."""
    reasons = "; ".join(f"{t}: {v.reason}" for t, v in per_test.items())
    verdicts = {v.verdict for v in per_test.values()}
    if KILLED in verdicts:
        return GateVerdict(KILLED, reasons)
    if verdicts == {SURVIVED}:
        return GateVerdict(SURVIVED, reasons)
    return GateVerdict(INVALID, reasons or "no test to judge it")


def tally_line(n_total: int, killed_by: Mapping[str, int], alone: str = UPSTREAM_TEST) -> str:
    """ "12 known-wrong fixes: 12 killed by test-opt alone (the gate: 12)" """
    others = ", ".join(f"{t}: {n}" for t, n in killed_by.items() if t != alone)
    return f"{n_total} known-wrong fixes: {killed_by.get(alone, 0)} killed by {alone} alone" + (
        f" ({others})" if others else ""
    )


def kill_line(verdicts: list[Optional[Verdict]]) -> str:
    """ "the gate kills N/M known-wrong fixes" (skipped mutants are not counted)."""
    ran = [v for v in verdicts if v is not None]
    return (
        f"the gate kills {sum(1 for v in ran if v == Verdict.KILLED)}/{len(ran)} known-wrong fixes"
    )


def load_mutants(
    matrix: Matrix, topics: Optional[list[str]] = None, queue: Optional[Queue] = None
) -> list[Mutant]:
    """native_tests/<topic>/mutants/*.patch of each chosen topic (the active ones by default), in
    queue order, each folder in name order (none without it); a malformed one a ConfigError.
    `queue`: the matrix's, already loaded."""
    return read_topic_diff_files(matrix, topics, "mutants", "mutant", parse_mutant, queue)
