"""The upstream bundle, pure: refusals, PR_BODY.md's numbers against results.json, reading a
bundle back (the command: tests/integration; a real run bundled: tests/e2e)."""

import hashlib
import json
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.model.results import (
    CONTROL_PREFIX,
    MUTANT_PREFIX,
    Build,
    Cell,
    CellStatus,
    MutantTally,
    RecordStatus,
    Results,
    TrainingComparison,
    VariantRecord,
    Verdict,
)
from orchestrator.upstream import bundle as B
from orchestrator.upstream import cover as C
from orchestrator.upstream import policy as P
from orchestrator.upstream import pr_body as PB
from orchestrator.upstream import views

from ..helpers.bundle_checks import check_body_against_results
from ..helpers.samples import GATE, UPSTREAM, control_survived, gate_regressed, sample
from ..helpers.tools import DATA

# ---------------------------------------------------------------- pure: refusals


def test_sample_results_back_a_pull_request():
    r = sample()
    assert B.problems(r, r.series.sha256) == []


def test_a_control_that_survived_is_a_problem():
    r = control_survived(sample())
    found = B.problems(r, r.series.sha256)
    assert [p.target for p in found] == ["ggml"]
    assert "ggml/cpu: the negative control was not killed (survived" in found[0].text


def test_a_regressed_cell_and_a_stale_series_are_problems():
    r = gate_regressed(sample())
    texts = [p.text for p in B.problems(r, "0" * 64)]
    assert texts[0].startswith(
        "results.json was made from series 870f45871ade, the series in patches/ is now 000000000000"
    )
    assert f"llama.cpp/cpu: with the fix {GATE} failed" in texts


TOPICS = ["accumulator-reset", "grad-acc-non-static"]


def _view(r: Results, topic: str, competing: frozenset) -> Results:
    """The topic's view, as the bundle takes it: its declared tests, the training run for the
    topic that declares it (the first)."""
    tests = frozenset((r.series.topic_tests or {}).get(topic, []))
    return views.topic_results(r, topic, competing, tests, topic == TOPICS[0])


def queue_sample(second_verdict: Verdict = Verdict.KILLED) -> Results:
    """The sample as a run of two topics: its control is topic 1's; topic 2's control (the queue
    with only topic 2's hunks reverted) has `second_verdict`, a mutant of each topic killed."""
    r = sample()
    r.series.topics = list(TOPICS)
    r.series.topic_tests = {TOPICS[0]: ["test-opt", GATE], TOPICS[1]: ["test-opt"]}
    for c in list(r.cells):
        second = VariantRecord(
            cell=c.cell,
            variant=f"{CONTROL_PREFIX}{TOPICS[1]}",
            topic=TOPICS[1],
            status=RecordStatus(second_verdict.value),
            verdict=second_verdict,
            verdict_reason=f"test-opt {second_verdict} in its own case test_grad_non_static",
        )
        r.records.append(second)
        for topic in TOPICS:
            r.records.append(
                VariantRecord(
                    cell=c.cell,
                    variant=f"{MUTANT_PREFIX}{topic}-m1",
                    topic=topic,
                    status=RecordStatus.KILLED,
                    verdict=Verdict.KILLED,
                    kills={"test-opt": Verdict.KILLED, GATE: Verdict.KILLED},
                )
            )
        c.mutants = MutantTally(total=2, killed=2, killed_by={"test-opt": 2, GATE: 2})
        if second_verdict != Verdict.KILLED:
            c.status = CellStatus.FAILED
            c.reason = f"all tests pass; the control of {TOPICS[1]} was {second_verdict}"
    return r


def test_one_run_of_the_queue_backs_each_topic_s_bundle():
    """Each topic's bundle reads its own view of the run: its control as "control", its own
    known-wrong fixes, the gate test and the training run only for the gate's topic."""
    r = queue_sample()
    first = _view(r, TOPICS[0], frozenset())
    second = _view(r, TOPICS[1], frozenset())
    assert B.problems(first, r.series.sha256, TOPICS[0]) == []
    assert B.problems(second, r.series.sha256, TOPICS[1]) == []
    for view, topic in ((first, TOPICS[0]), (second, TOPICS[1])):
        recs = view.records_of("ggml/cpu")
        assert view.control_of("ggml/cpu").topic == topic
        assert [v for v in recs if v.startswith(MUTANT_PREFIX)] == [f"{MUTANT_PREFIX}{topic}-m1"]
        assert view.cells_of("ggml")[0].mutants.total == 1
    assert GATE in first.records_of("ggml/cpu")["patched"].tests
    assert GATE not in second.records_of("ggml/cpu")["patched"].tests
    assert second.cells_of("ggml")[0].mutants.killed_by == {"test-opt": 1}
    # the run's own records are left as they were
    assert f"{CONTROL_PREFIX}{TOPICS[1]}" in r.records_of("ggml/cpu")


def test_one_topic_s_failed_control_does_not_hide_another_s_result():
    r = queue_sample(Verdict.SURVIVED)
    assert all(c.status == CellStatus.FAILED for c in r.cells)
    first = _view(r, TOPICS[0], frozenset())
    second = _view(r, TOPICS[1], frozenset())
    assert B.problems(first, r.series.sha256, TOPICS[0]) == []
    assert all(c.status == CellStatus.PASSED for c in first.cells)
    texts = [p.text for p in B.problems(second, r.series.sha256, TOPICS[1])]
    assert "ggml/cpu: the negative control was not killed (survived: test-opt survived" in (
        " ".join(texts)
    )


def test_a_run_without_the_topic_or_of_another_series_cannot_back_its_bundle():
    r = queue_sample()
    r.series.topics = [TOPICS[0]]
    view = _view(r, TOPICS[1], frozenset())
    texts = [p.text for p in B.problems(view, r.series.sha256, TOPICS[1])]
    assert texts[0] == (
        "results.json was made from the topics accumulator-reset; a bundle of "
        "grad-acc-non-static needs a run that carries it: "
        "`ggml-patch matrix --topic grad-acc-non-static`"
    )
    r.series.topics = list(TOPICS)
    view = _view(r, TOPICS[0], frozenset())
    texts = [p.text for p in B.problems(view, "0" * 64, TOPICS[0])]
    assert texts[0].startswith("results.json was made from series ")


def test_a_target_whose_cells_were_all_skipped_proves_nothing():
    r = sample()
    for c in r.cells:
        if c.target == "ggml":
            c.status, c.reason = CellStatus.SKIPPED, "no device"
    r.records = [x for x in r.records if x.target != "ggml"]
    assert [p.text for p in B.problems(r, r.series.sha256)] == [
        "ggml: no cell ran its tests (skipped or build-only), so nothing was proven"
    ]


def test_build_only_cells_are_shown_but_neither_evidence_nor_failure():
    r = sample()
    r.cells.append(
        Cell(
            cell="ggml/cuda",
            target="ggml",
            backend="cuda",
            layout="ggml",
            status=CellStatus.BUILD_ONLY,
            reason="built with and without the fix; tests not run: no GPU",
            exit_code=0,
            timings={"build_patched": 1000.5, "build_control": 2.25},
            source=r.cells[1].source,
            patched_commit=r.cells[1].patched_commit,
        )
    )
    for variant in ("patched", "control"):
        r.records.append(
            VariantRecord(
                cell="ggml/cuda",
                target="ggml",
                backend="cuda",
                variant=variant,
                build=Build(ok=True),
            )
        )
    assert B.problems(r, r.series.sha256) == []
    body = body_of(r, "ggml")
    check_body_against_results(body, r, "ggml")
    # a backend that ran no test is named in the tested line, never with this machine's reason
    assert "CUDA not run" in body and "no GPU" not in body


def test_the_refusal_is_one_line_naming_the_way_out():
    msg = B.refusal_message(B.problems(control_survived(sample()), sample().series.sha256))
    assert "\n" not in msg and "--allow-incomplete" in msg


# ---------------------------------------------------------------- pure: PR_TITLE and PR_BODY.md

COMMITS = [
    B.SeriesCommit(
        "ggml-opt : zero gradient accumulators each period with per-step graphs",
        "The accumulators are never zeroed.",
        ("ggml/src/ggml-opt.cpp",),
    ),
    B.SeriesCommit(
        "tests : add test-opt-dynamic-accum for per-step gradient accumulation",
        "The new test.",
        ("tests/CMakeLists.txt", "tests/test-opt-dynamic-accum.cpp"),
    ),
]
NAMES = ["0001-ggml-opt.patch", "0002-tests.patch"]
TOOLCHAIN = {
    "cmake": "cmake version 4.4.5",
    "cxx_compiler": "GNU 12.2.0 (/usr/bin/c++)",
    "git": "git version 2.39.5",
}
TEMPLATE = P.parse_template(
    ".github/pull_request_template.md",
    (DATA / "upstream-policy" / "llama.cpp" / ".github" / "pull_request_template.md").read_text(),
)
COVER = C.parse_cover(
    "patches/cover.md", "## Overview\n\nThe fix.\n\n## Requirements\n\n- AI usage disclosure: NO\n"
)


def body_of(results: Results, target: str, warnings=()) -> str:
    """PR_BODY.md as the bundle writes it for a pull-request target (the llama.cpp template)."""
    repo = "ggml-org/llama.cpp" if target == "llama.cpp" else None
    data = PB.additional_information(results, "f" * 64, target, COMMITS, NAMES, TOOLCHAIN, repo)
    top = PB.banner([], list(warnings))
    return "\n".join(top) + ("\n" if top else "") + PB.body(TEMPLATE, COVER, data)


def test_title_is_the_fix_subject():
    assert views.pr_title(list(reversed(COMMITS))) == COMMITS[0].subject


@pytest.mark.parametrize("target", ["llama.cpp", "ggml"])
def test_every_number_in_the_body_is_the_one_in_results_json(target):
    r = sample()
    body = body_of(r, target)
    check_body_against_results(body, r, target)
    assert not body.startswith("> [!WARNING]")
    assert [ln for ln in body.splitlines() if ln.startswith("## ")] == [
        "## Overview",
        "## Additional information",
        "## Requirements",
    ]
    # the compiler in the tested line; no tool version list, no machine path
    assert "gcc 12" in body and "cmake version" not in body and "/usr/" not in body
    assert body.isascii()
    if target == "llama.cpp":
        assert "git checkout --detach 0c1e57098bba43ac29e6e3b677cdceebdd22334f" in body
        assert "-DLLAMA_BUILD_TESTS=ON" in body
    else:
        assert "-DGGML_BUILD_TESTS=ON" in body


def test_the_body_check_catches_a_wrong_number():
    """The comparison itself can fail: change one number in the results and the body disagrees."""
    r = sample()
    body = body_of(r, "ggml")
    wrong = r.model_copy(deep=True)
    rec = wrong.records_of("ggml/cpu")["patched"]
    rec.tests[UPSTREAM].summary_line = "1/2 backend*optimizer passed"
    with pytest.raises(AssertionError):
        check_body_against_results(body, wrong, "ggml")
    # a number outside the tables too
    with pytest.raises(AssertionError, match="numbers in PR_BODY.md"):
        check_body_against_results(
            body.replace(
                "\nReproduce:",
                "\nWithout the fix (its test commit alone):\n\n41 steps\n\nReproduce:",
            ),
            r,
            "ggml",
        )


def test_incomplete_evidence_opens_the_body_with_a_visible_warning():
    r = control_survived(sample())
    warnings = [p.text for p in B.problems(r, r.series.sha256)]
    body = body_of(r, "ggml", warnings)
    first = body.splitlines()[:3]
    assert first[0] == "> [!WARNING]" and "--allow-incomplete" in first[1]
    assert "not killed (survived" in first[2]
    check_body_against_results(body, r, "ggml")


# ---------------------------------------------------------------- results.json and bundle files


def test_unreadable_results_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match="no results; run `ggml-patch matrix"):
        B.load_results_dir(tmp_path)
    (tmp_path / "results.json").write_text("{\n  nope")
    with pytest.raises(ConfigError, match=r"results.json:2: not valid JSON"):
        B.load_results_dir(tmp_path)
    (tmp_path / "results.json").write_text('{"cells": []}')
    with pytest.raises(ConfigError, match="key 'series' missing"):
        B.load_results_dir(tmp_path)


def _fake_bundle(d: Path) -> None:
    d.mkdir()
    files = {"0001-x.patch": "From x\n", "PR_TITLE": "t\n", "PR_BODY.md": "b\n"}
    for n, t in files.items():
        (d / n).write_text(t)
    (d / "manifest.json").write_text(
        json.dumps(
            {
                "target": "ggml",
                "files": {n: hashlib.sha256(t.encode()).hexdigest() for n, t in files.items()},
            }
        )
    )


def test_a_bundle_changed_after_it_was_made_is_rejected(tmp_path):
    _fake_bundle(tmp_path / "b")
    assert B.read_bundle(tmp_path / "b").title == "t"
    (tmp_path / "b" / "PR_BODY.md").write_text("edited\n")
    with pytest.raises(ConfigError, match="PR_BODY.md: changed since the bundle was made"):
        B.read_bundle(tmp_path / "b")
    (tmp_path / "b" / "0001-x.patch").unlink()
    with pytest.raises(ConfigError, match="0001-x.patch: listed in manifest.json but missing"):
        B.read_bundle(tmp_path / "b")


def test_the_body_keeps_the_loss_table_and_names_no_plot():
    """The plot (when matplotlib is installed) lies beside
    PR_BODY.md; the body holds the numbers only."""
    r = sample()
    r.cells[1].training = TrainingComparison.model_validate(
        {
            "patched": [
                {"epoch": 0, "train_loss": 2.5, "eval_loss": 2.25},
                {"epoch": 1, "train_loss": 0.5, "eval_loss": 0.25},
            ],
            "control": [
                {"epoch": 0, "train_loss": 2.5, "eval_loss": 2.25},
                {"epoch": 1, "train_loss": 9.5, "eval_loss": 8.5},
            ],
            "diverges_as_predicted": True,
        }
    )
    target = r.cells[1].target
    body = body_of(r, target)
    check_body_against_results(body, r, target)
    assert "training-loss.png" not in body


def test_a_cell_that_runs_none_of_a_topic_s_cases_proves_nothing_for_it():
    """cpu-sanitize runs no test-opt: topic 2's control there is skipped, so that cell is not run
    for topic 2's bundle (never a refusal), while topic 1's view keeps it."""
    r = queue_sample()
    second = r.records_of("ggml/cpu")[f"{CONTROL_PREFIX}{TOPICS[1]}"]
    second.status, second.verdict = RecordStatus.SKIPPED, None
    second.verdict_reason = "not run: its cases are in test-opt, not run on this backend (slow)"
    view = _view(r, TOPICS[1], frozenset())
    cell = view.cells_of("ggml")[0]
    assert (cell.status, cell.reason) == (CellStatus.SKIPPED, second.verdict_reason)
    assert B.problems(view, r.series.sha256, TOPICS[1]) == [
        B.Problem(
            "ggml", "ggml: no cell ran its tests (skipped or build-only), so nothing was proven"
        )
    ]
    first = _view(r, TOPICS[0], frozenset())
    assert first.cells_of("ggml")[0].status == CellStatus.PASSED
