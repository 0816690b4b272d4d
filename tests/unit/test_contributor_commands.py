"""Issue 49 point 3: the commands a bundle shows come from its topic's declared tests (topic.yaml
`tests:`), with the arguments the matrix passes on a CPU, made in one place (contributor.py)
that the PR body, ISSUE.md and the verification all use."""

import pytest

from orchestrator.model.layout import GATE_TEST
from orchestrator.model.testspec import TestSpec
from orchestrator.upstream import contributor, issue, pr_body
from orchestrator.upstream.manifest import CommandRun, Durations, Verification
from orchestrator.upstream.views import SeriesCommit
from tests.helpers.patches import real_series_of_queue
from tests.helpers.samples import sample

pytestmark = pytest.mark.unit

FIX, TESTS = "0001-ggml-opt-fix.patch", "0002-tests-add-cases.patch"
GATE_PATCH = f"0003-tests-add-{GATE_TEST}.patch"


def _shown(declared: str, names: list[str]) -> tuple[TestSpec, ...]:
    return contributor.shown_tests(tuple(TestSpec.parse(t) for t in declared.split(",")), names)


def test_a_test_opt_topic():
    tests = _shown("test-opt", [FIX, TESTS])
    made = contributor.commands("llama.cpp", "0c1e570", [FIX, TESTS], tests)
    assert made.lines == [
        "git checkout --detach 0c1e570",
        f"git am {FIX} {TESTS}",
        "cmake -B build -DLLAMA_BUILD_TESTS=ON",
        "cmake --build build --target test-opt",
        "./build/bin/test-opt",
    ]
    assert made.run_lines == made.lines[2:]


def test_a_test_backend_ops_topic_keeps_its_filter_and_compares_on_the_cpu():
    tests = _shown("test-backend-ops -o CONCAT", [FIX, TESTS])
    made = contributor.commands("ggml", "d99724f2", [FIX, TESTS], tests)
    assert made.build == (
        "cmake -B build -DGGML_BUILD_TESTS=ON",
        "cmake --build build --target test-backend-ops",
    )
    # -b CPU as run/variants.py run_test passes the CPU cell's ops_device
    assert made.tests == ("./build/bin/test-backend-ops -o CONCAT -b CPU",)
    assert contributor.argv(made.tests[0]) == [
        "./build/bin/test-backend-ops",
        "-o",
        "CONCAT",
        "-b",
        "CPU",
    ]
    # a line that names its device keeps it
    assert _shown("test-backend-ops -o CONCAT -b Vulkan0", [FIX]) == (
        TestSpec("test-backend-ops", ("-o", "CONCAT", "-b", "Vulkan0")),
    )


def test_the_gate_only_where_the_bundle_carries_its_upstream_patch():
    declared = f"test-opt,{GATE_TEST}"
    without = contributor.commands("llama.cpp", "b", [FIX], _shown(declared, [FIX, TESTS]))
    assert without.tests == ("./build/bin/test-opt",)
    assert GATE_TEST not in " ".join(without.lines)
    names = [FIX, TESTS, GATE_PATCH]
    carried = contributor.commands("llama.cpp", "b", names, _shown(declared, names))
    assert carried.build[1] == f"cmake --build build --target test-opt {GATE_TEST}"
    assert carried.tests == ("./build/bin/test-opt", f"./build/bin/{GATE_TEST}")


def test_the_pull_requests_it_follows_are_applied_first():
    made = contributor.commands("llama.cpp", "b", [FIX], (TestSpec("test-opt"),), ("../a/*.patch",))
    assert made.checkout[1] == "git am ../a/*.patch  # the pull requests this one follows"


def test_the_real_queue_shows_each_topics_declared_tests():
    series = real_series_of_queue()
    for topic in series.topics:
        own = [p.name for p in series.patches if p.topic == topic]
        tests = contributor.shown_tests(series.tests_of(topic), own)
        assert tests, topic
        declared = {t.program for t in series.tests_of(topic)}
        assert {t.program for t in tests} <= declared
        if not any(GATE_TEST in n for n in own):
            assert all(t.program != GATE_TEST for t in tests), topic


def _commits() -> list[SeriesCommit]:
    return [
        SeriesCommit("ggml-opt : fix", "", ("ggml/src/ggml-opt.cpp",)),
        SeriesCommit("tests : add", "", ("tests/test-backend-ops.cpp",)),
    ]


def _verified(passing: str, failing: str) -> Verification:
    def run(line: str, shown=None) -> CommandRun:
        code = 1 if shown == failing else 0
        return CommandRun(line=line, exit_code=code, duration_s=1.0, shown=shown)

    lines = contributor.commands("llama.cpp", "b", [], (TestSpec("test-backend-ops"),)).run_lines
    return Verification(
        worktree="/w",
        head="a" * 40,
        head_is_bundle_commit=True,
        tree_is_patched_tree=True,
        configure_reused=False,
        build_log="",
        tests={},
        durations_s=Durations(apply=0, configure=0, build=0, tests=0, total=0),
        commands=[run(x) for x in lines[:-1]] + [run(lines[-1], passing)],
        reproduction=[run(x) for x in lines[:-1]] + [run(lines[-1], failing)],
    )


def test_the_body_and_the_issue_show_the_topics_tests_and_quote_the_verifications_lines():
    tests = (TestSpec("test-backend-ops", ("-o", "CONCAT", "-b", "CPU")),)
    names = [FIX, TESTS]
    verified = _verified("2/2 backends passed", "CONCAT(type=f32): FAIL")
    shown = pr_body.ShownRun(tests, verified)
    body = "\n".join(
        pr_body.additional_information(
            sample(), "0" * 64, "llama.cpp", _commits(), names, {}, None, shown=shown
        )
    )
    assert "./build/bin/test-backend-ops -o CONCAT -b CPU\n```" in body
    assert "--target test-backend-ops\n" in body and "test-opt" not in body.split("<details>")[0]
    assert "With the fix:\n\n```\n2/2 backends passed\n```" in body
    assert "Without the fix (its test commit alone):\n\n```\nCONCAT(type=f32): FAIL\n```" in body
    vals = issue.values(
        sample(), "llama.cpp", _commits(), names, None, {}, lambda p: None, "Linux", shown=shown
    )
    assert vals["command"][-1] == "./build/bin/test-backend-ops -o CONCAT -b CPU"
    assert vals["command"][1] == f"git am {TESTS}"  # the test commit alone
    assert vals["logs"] == ["CONCAT(type=f32): FAIL"]
