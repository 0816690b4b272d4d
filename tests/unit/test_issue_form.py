"""The target's bug form (a GitHub issue form) read from its tree, and ISSUE.md rendered field by
field as GitHub shows a filed form; a file that is no form is one line naming the key."""

import pytest

from orchestrator.upstream import issue_form as F

from ..helpers.tools import DATA

FORM = ".github/ISSUE_TEMPLATE/019-bug-misc.yml"
TEXT = (DATA / "upstream-policy" / "llama.cpp" / FORM).read_text(encoding="utf-8")


def test_llama_cpp_s_bug_form_gives_its_fields_labels_and_required_flags():
    form = F.parse_form(FORM, TEXT)
    assert (form.name, form.title, form.labels) == (
        "Bug (misc.)",
        "Misc. bug: ",
        ("bug-unconfirmed",),
    )
    # the markdown element is text for the reporter, no field
    assert [(f.id, f.type, f.required) for f in form.fields] == [
        ("version", "textarea", True),
        ("operating-system", "dropdown", False),
        ("module", "dropdown", False),
        ("command", "textarea", False),
        ("info", "textarea", True),
        ("first_bad_commit", "textarea", False),
        ("logs", "textarea", False),
    ]
    os_field = form.fields[1]
    assert os_field.options[:2] == ("Linux", "Mac") and form.fields[3].render == "shell"
    assert "<summary>Logs</summary>" in form.fields[6].value
    roles = [F.role_of(f) for f in form.fields]
    assert roles == ["version", "os", "module", "command", "problem", "bisect", "logs"]


def test_the_bug_form_is_picked_by_its_name():
    names = ["010-bug-compilation.yml", "011-bug-results.yml", "019-bug-misc.yml", "config.yml"]
    assert F.pick_bug_form(names) == "019-bug-misc.yml"
    assert F.pick_bug_form(["bug_report.yaml", "feature.yml"]) == "bug_report.yaml"
    assert F.pick_bug_form(["config.yml", "feature.yml"]) is None
    assert F.pick_bug_form([]) is None


@pytest.mark.parametrize(
    "text, phrase",
    [
        ("name: x\nbody: 3\n", "body: expected a list of form elements"),
        ("name: x\nbody: [\n", "not valid YAML"),
        ("name: x\nlabels: 5\nbody: []\n", "labels: expected a list of label names"),
        ("name: x\nbody:\n  - type: markdown\n", "body: no input field"),
        ("name: x\nbody:\n  - type: input\n    attributes: {label: 3}\n", "attributes.label"),
        ("name: x\nbody:\n  - 7\n", "body[0]: expected a mapping"),
    ],
)
def test_a_file_that_is_no_form_is_one_line_naming_the_key(text, phrase):
    with pytest.raises(F.FormError) as e:
        F.parse_form("f.yml", text)
    msg = str(e.value)
    assert msg.startswith("f.yml") and phrase in msg and "\n" not in msg, msg


def test_render_fills_each_field_by_role_and_leaves_the_others_no_response():
    form = F.parse_form(FORM, TEXT)
    values = {
        "version": ["x at commit 0c1e5709"],
        "os": F.chosen_options(form.fields[1], ["Linux"]),
        "module": F.chosen_options(form.fields[2], ["libllama", "Other"]),
        "command": ["./build/bin/test-opt"],
        "problem": ["It breaks."],
        "logs": ["step 2: FAIL"],
    }
    text = F.render(form, values, "a title")
    assert "Title: Misc. bug: a title" in text and "labels: bug-unconfirmed" in text
    assert "### Name and Version\n\nx at commit 0c1e5709\n" in text
    assert "### Operating systems\n\nLinux\n" in text
    assert "libllama (core library), Other (Please specify in the next section)" in text
    assert "### Command line\n\n```shell\n./build/bin/test-opt\n```\n" in text
    assert "### First Bad Commit\n\n_No response_\n" in text
    assert "### Problem description & steps to reproduce\n" in text  # the form is data: inert
    logs = text.split("### Relevant log output\n", 1)[1]
    assert "<details>\n<summary>Logs</summary>\n\n```console\nstep 2: FAIL\n```\n</details>" in logs
    assert F.missing_required(form, values) == []
    assert F.missing_required(form, {}) == [
        "Name and Version",
        "Problem description & steps to reproduce",
    ]


def test_an_option_the_form_does_not_offer_is_never_invented():
    form = F.parse_form(FORM, TEXT)
    assert F.chosen_options(form.fields[1], ["Plan 9"]) == []


def test_issue_md_reproduces_on_current_master_when_the_run_has_its_cells():
    """A live target of the same upstream (llama.cpp-master for llama.cpp) adds its commit and
    failing line; a run without its cells adds nothing."""
    from orchestrator.config import load_matrix
    from orchestrator.model.results import Outcome
    from orchestrator.upstream import bundle, issue

    from ..helpers.samples import sample
    from ..helpers.tools import ROOT

    matrix = load_matrix(ROOT / "matrix.yaml")
    assert bundle.live_of(matrix, "llama.cpp") == ("llama.cpp-master",)
    assert bundle.live_of(matrix, "ggml") == ("ggml-master",)
    results = sample()
    for rec in results.records:  # test-opt fails without the fix, as the series' cases make it
        if rec.variant.startswith("control:") and "test-opt" in rec.tests:
            t = rec.tests["test-opt"]
            t.outcome, t.failure_line = Outcome.FAILED, "test_x(high_level=no): FAIL"
    names = ["0001-fix.patch", "0002-tests.patch"]
    assert issue.master_lines(results, ("llama.cpp-master",), names) == []
    # the sample's own llama.cpp cells stand in for a live target's (they carry an upstream commit)
    lines = issue.master_lines(results, ("llama.cpp",), names)
    assert lines[:2] == ["", "On current master (0c1e5709), the same cases without the fix:"]
    assert "```" in lines and any("FAIL" in ln for ln in lines), lines
