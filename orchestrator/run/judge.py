"""Every variant judged in one place (`judge`): the record's status and verdict are set here and
nowhere else, by the variant's kind: the patched tree passes or fails its tests; a control is
killed by its own tests (the project's gate where its topic declares one, else its upstream tests'
own cases); a known-wrong fix by the tests that pass with the fix; a competing fix against them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

from ..model.results import (
    AttributionEntry,
    CompetingVerdict,
    RecordStatus,
    TestRecord,
    VariantRecord,
    Verdict,
)
from ..model.testspec import BACKEND_OPS
from ..patchset.series import Series
from ..verdicts import attribution, backend_ops, classify
from ..verdicts.classify import GateVerdict
from ..verdicts.competing import first_failing_line
from ..verdicts.competing import judge as judge_competing
from ..verdicts.mutants import overall_verdict, per_test_verdicts

if TYPE_CHECKING:
    from .pipeline import CellContext

# test-opt's cases name themselves (test_NAME(...)): a topic's control is killed by its own ones
_CASES_BY_NAME = "test-opt"

_AS_STATUS = {
    CompetingVerdict.EQUIVALENT: RecordStatus.PASSED,
    CompetingVerdict.WRONG: RecordStatus.FAILED,
}


def settle(
    rec: VariantRecord, status: RecordStatus, verdict: Optional[GateVerdict] = None
) -> VariantRecord:
    """The record's status, and its verdict and why where it has one."""
    rec.status = status
    if verdict is not None:
        rec.verdict, rec.verdict_reason = verdict.verdict, verdict.reason
    return rec


def judge(
    rec: VariantRecord,
    kind: str,
    *,
    ctx: Optional[CellContext] = None,
    series: Optional[Series] = None,
    patched: Optional[VariantRecord] = None,
    apply_error: Optional[str] = None,
    skipped: Optional[str] = None,
    not_reverted: Optional[str] = None,
    judged: Sequence[str] = (),
) -> VariantRecord:
    """`rec` judged as a variant of `kind` (see the module's words); `skipped`: not run here, and
    why; `not_reverted`: its topic's hunks did not revert on the whole queue (git's line);
    `judged`: the tests a known-wrong or competing fix is judged by."""
    if skipped is not None:
        return _skipped(rec, kind, skipped)
    if not_reverted is not None:
        why = f"its hunks do not revert on the whole queue: {not_reverted}"
        return settle(rec, RecordStatus.INVALID, GateVerdict(Verdict.INVALID, why))
    built = bool(rec.build and rec.build.ok)
    runs = ctx is None or ctx.runs_tests
    if apply_error is None and (not built or not runs) and kind in ("patched", "control"):
        if not runs or kind == "patched":  # built only (--build-only), or not at all
            return settle(rec, RecordStatus.BUILT if built else RecordStatus.BUILD_FAILED)
    if kind == "patched":
        return settle(rec, RecordStatus.PASSED if tests_pass(rec) else RecordStatus.FAILED)
    if kind == "control":
        assert series is not None and patched is not None and ctx is not None
        return _control(ctx, series, patched, rec)
    assert patched is not None
    if kind == "mutant":
        return _known_wrong(rec, patched, apply_error, list(judged))
    return _competing(rec, patched, apply_error, list(judged))


def tests_pass(rec: VariantRecord) -> bool:
    """Some test ran, and every test that ran passed."""
    outcomes = [t.outcome for t in rec.tests.values() if t.outcome != classify.SKIPPED]
    return bool(outcomes) and all(o == classify.PASSED for o in outcomes)


def passing_with_fix(patched: VariantRecord, names: list[str]) -> list[str]:
    """Of `names`, the tests that pass with the fix: what a known-wrong or competing fix is
    judged by."""
    return [t for t in names if patched.outcome(t) == classify.PASSED]


def _skipped(rec: VariantRecord, kind: str, why: str) -> VariantRecord:
    if rec.mutant is not None:
        rec.mutant.skipped = why
    if rec.competing is not None:
        rec.competing.skipped = why
    if kind == "control":
        rec.verdict_reason = why
    return settle(rec, RecordStatus.SKIPPED)


def _gate_of(rec: VariantRecord) -> Optional[str]:
    """The record's native test (the project's gate), if it ran or was meant to."""
    return next((n for n, t in rec.tests.items() if t.gate), None)


def _control(
    ctx: CellContext, series: Series, patched: VariantRecord, rec: VariantRecord
) -> VariantRecord:
    gate = _gate_of(rec)
    if gate is not None:
        return _control_by_gate(ctx, patched, rec, gate)
    topic = rec.topic or ""
    cases, crash = series.topic_cases(topic), dict(series.control_crash).get(topic)
    built = bool(rec.build and rec.build.ok)
    verdicts: dict[str, Optional[GateVerdict]] = {}
    unjudged = []
    for name, t in rec.tests.items():
        if t.outcome == classify.SKIPPED:
            continue
        if name.split()[0] == BACKEND_OPS:
            v, why = _by_backend_ops(ctx, patched.tests.get(name), t, built, crash)
            if why is not None:
                unjudged.append(f"{name}: {why}")
                continue
            verdicts[name] = v
        else:
            reference = patched.tests.get(name)
            verdicts[name] = _by_own_cases(name, t, built, cases, crash, reference)
    found = [v for v in verdicts.values() if v is not None]
    if not found:
        why = "; ".join(unjudged) or "no test ran"
        if unjudged:  # honest: neither passed nor failed, and said so
            rec.verdict_reason = why
            return settle(rec, RecordStatus.SKIPPED)
        return settle(rec, RecordStatus.INVALID, GateVerdict(Verdict.INVALID, why))
    killer = next((n for n, v in verdicts.items() if v and v.verdict == Verdict.KILLED), None)
    if killer is not None:
        v = verdicts[killer]
        assert v is not None
        rec.failure_line = _failure_line_of(killer, rec.tests[killer], patched.tests.get(killer))
    elif all(v.verdict == Verdict.SURVIVED for v in found):
        v = found[0]
    else:
        v = next(v for v in found if v.verdict == Verdict.INVALID)
    return settle(rec, RecordStatus(v.verdict.value), v)


def _by_backend_ops(
    ctx: CellContext,
    fixed: Optional[TestRecord],
    t: TestRecord,
    built: bool,
    crash: Optional[str],
) -> tuple[Optional[GateVerdict], Optional[str]]:
    """test-backend-ops's verdict on a topic's control on this cell's device (its output with
    the fix against without it, verdicts/backend_ops.py): (verdict, None), or (None, why it
    cannot be judged here)."""
    if not built:
        return GateVerdict(Verdict.INVALID, "the control did not build"), None
    if fixed is None:
        return GateVerdict(Verdict.INVALID, "test-backend-ops did not run with the fix"), None
    device = ctx.module.ops_device
    j = backend_ops.judge(
        backend_ops.parse(fixed.output or "", fixed.exit_code),
        backend_ops.parse(t.output or "", t.exit_code),
        device,
        crash_kills=crash is not None,
    )
    if j.outcome == "cannot-judge":
        return None, j.text
    if j.outcome == "proven":
        return GateVerdict(Verdict.KILLED, j.reason), None
    survived = "survived" in j.reason
    return GateVerdict(Verdict.SURVIVED if survived else Verdict.INVALID, j.reason), None


def _by_own_cases(
    name: str,
    t: TestRecord,
    built: bool,
    cases: list[str],
    crash: Optional[str],
    reference: Optional[TestRecord] = None,
) -> Optional[GateVerdict]:
    """One upstream test's verdict on a topic's control (None: not run on this backend);
    `reference`: the same test with the fix (where a crash stopped it: the case it printed next)."""
    if t.outcome == classify.SKIPPED:
        return None
    if name == _CASES_BY_NAME:
        ref = (reference.output or "") if reference else ""
        return classify.topic_control_verdict(
            built, t.outcome, t.exit_code, t.output or "", cases, crash, ref
        )
    return classify.test_verdict(built, name, t.outcome, t.exit_code, t.output or "")


def _failure_line_of(
    name: str, t: TestRecord, reference: Optional[TestRecord] = None
) -> Optional[str]:
    output = t.output or ""
    # a crash has no FAIL line: its signal and the case it died in say what went wrong
    if t.outcome == classify.CRASHED:
        ref = (reference.output or "") if reference else ""
        return classify.crash_line(t.exit_code, output, ref, name)
    return first_failing_line(name, output)


def control_attribution(patched: VariantRecord, rec: VariantRecord) -> list[AttributionEntry]:
    """Each test failing with the fix, against the same test (and device) without it."""
    return attribution.attribute(patched.tests, rec.tests, bool(rec.build and rec.build.ok))


def _control_by_gate(
    ctx: CellContext, patched: VariantRecord, rec: VariantRecord, gate: str
) -> VariantRecord:
    """The gate's verdict, and the topic's upstream test's beside it (classify.control_verdict)."""
    built = bool(rec.build and rec.build.ok)
    entries = control_attribution(patched, rec)
    upstream = next((n for n, t in rec.tests.items() if not t.gate), None)
    g = rec.test(gate)
    g_exit, g_output = (g.exit_code, g.output or "") if g else (None, "")
    if upstream is None:
        v = classify.gate_verdict(built, rec.outcome(gate), g_exit, g_output)
    else:
        pre = None
        if attribution.pre_existing_only(entries, upstream):
            mine = [e for e in entries if e.test == upstream]
            pre = attribution.describe(mine, labels=False)
        skipped = rec.tests[upstream].skipped if upstream in rec.tests else None
        v = classify.control_verdict(
            built, rec.outcome(gate), g_exit, g_output, rec.outcome(upstream), pre, skipped
        )
    rec.failure_line = classify.gate_failure_line(g_output)
    return settle(rec, RecordStatus(v.verdict.value), v)


def _known_wrong(
    rec: VariantRecord, patched: VariantRecord, apply_error: Optional[str], judged: list[str]
) -> VariantRecord:
    built = bool(rec.build and rec.build.ok)
    per_test = per_test_verdicts(apply_error, built, rec.tests, judged)
    v = overall_verdict(per_test)
    rec.kills = {t: pv.verdict for t, pv in per_test.items()}
    killer = next((t for t, pv in per_test.items() if pv.verdict == Verdict.KILLED), None)
    if killer:
        t = rec.tests[killer]
        rec.failure_line = first_failing_line(killer, t.output or "", bool(t.gate))
    return settle(rec, RecordStatus(v.verdict.value), v)


def _competing(
    rec: VariantRecord, patched: VariantRecord, apply_error: Optional[str], judged: list[str]
) -> VariantRecord:
    outcomes = {t: patched.outcome(t) for t in judged}
    built = bool(rec.build and rec.build.ok)
    j = rec.judged = judge_competing(apply_error, built, rec.tests, outcomes)
    return settle(rec, _AS_STATUS.get(j.verdict, RecordStatus.INVALID))
