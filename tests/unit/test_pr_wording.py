"""What the pull request says and how: no tool term in the visible part of PR_BODY.md, no word cut
short anywhere, the backends in one line, `Fixes #N` once the issue is recorded, the commit
messages the contributor's own words only once they say so, trailers described as they are, and
a draft comment (never a judgment in the PR) for each ported fix."""

import dataclasses
import re

import pytest

from orchestrator.model.results import CompetingInfo, CompetingJudged, DeviceInfo
from orchestrator.upstream import comments as CM
from orchestrator.upstream import cover as C
from orchestrator.upstream import pr_body as PB
from orchestrator.upstream import readiness as R
from orchestrator.verdicts.competing import load_competing, parse_competing

from ..helpers.tools import ROOT
from .test_pr_body import CLEAN, COMMITS, NAMES, TOOLCHAIN, WRITTEN, docs, llama_policy, sample

ISSUE_URL = "https://github.com/ggml-org/llama.cpp/issues/31337"


@pytest.mark.parametrize(
    "word", ["cell", "Cells", "gate", "killed", "mutants", "control", "verdict", "competing"]
)
def test_a_tool_term_in_the_visible_part_fails(word):
    body = f"## Overview\n\nThe {word} here.\n"
    check = R.check_pr_words(body)
    assert check.status == "fail" and check.where == (f"PR_BODY.md:3: '{word}'",)


def test_tool_terms_folded_or_in_comments_are_not_shown_so_they_pass():
    body = "## Overview\n\n<!-- the gate -->\n<details><summary>s</summary>\n\ncells\n</details>\n"
    assert R.check_pr_words(body).status == "pass"
    # words that merely contain one are other words
    assert R.check_pr_words("cancelled controller gateway\n").status == "pass"


def test_a_word_cut_short_fails_anywhere_and_shorten_never_cuts_one():
    texts = {"PR_BODY.md": "| run the metal tests on a Mac with t... |\n", "ISSUE.md": "ok\n"}
    check = R.check_cut_words(texts)
    assert check.status == "fail" and check.where == ("PR_BODY.md:1: 't...'",)
    assert R.check_cut_words({"X": "...buil the rest\n"}).status == "fail"
    assert R.check_cut_words({"X": "Mesa 25.0.7... and a pause ... here\n"}).status == "pass"
    text = "skipped: Metal needs macOS, run the metal tests on a Mac with the toolchain installed"
    short = PB.shorten(text, 40)
    assert len(short) <= 40 and short.endswith(" ...") and text.startswith(short[:-4])
    assert R.check_cut_words({"X": short}).status == "pass"
    assert PB.shorten("short", 40) == "short"
    assert PB.shorten("unbreakable" * 5, 10) == "unbreakable" * 5 + " ..."


def test_more_than_200_visible_words_warn():
    body = (
        "## Overview\n\n" + "word " * 201 + "\n<details><summary>s</summary>\n\nmore\n</details>\n"
    )
    assert R.check_pr_length(body).status == "warn"
    assert R.check_pr_length("## Overview\n\n" + "word " * 190 + "\n").status == "pass"


def test_the_backends_tested_and_not_run_are_one_line():
    r = sample()
    cells = r.cells_of("llama.cpp")
    assert PB.tested_line(r, "llama.cpp", TOOLCHAIN, "x86_64") == "Tested on CPU (x86_64, gcc 12)."
    vk = cells[0].model_copy(
        update={
            "cell": "llama.cpp/vulkan",
            "backend": "vulkan",
            "device": DeviceInfo(devices=["llvmpipe (LLVM 15.0.6, 256 bits)"]),
        }
    )
    metal = cells[0].model_copy(
        update={"cell": "llama.cpp/metal", "backend": "metal", "status": "skipped"}
    )
    cuda = metal.model_copy(update={"cell": "llama.cpp/cuda", "backend": "cuda"})
    r.cells += [vk, cuda, metal]
    assert PB.tested_line(r, "llama.cpp", TOOLCHAIN, "x86_64") == (
        "Tested on CPU (x86_64, gcc 12) and Vulkan (lavapipe); CUDA and Metal not run."
    )
    assert PB.compiler_short("Clang 17.0.6 (/usr/bin/clang++)") == "clang 17"


def test_the_recorded_issue_makes_the_body_say_fixes_and_readiness_warns_until_then():
    plain = WRITTEN.replace(" Fixes #4242", "")
    before = docs(plain)
    check = {c.name: c for c in before.readiness.checks}["issue-referenced"]
    assert check.status == "warn" and "`issue: URL`" in check.detail
    assert "Fixes #" not in before.files["PR_BODY.md"]
    after = docs(f"issue: {ISSUE_URL}\n" + plain)
    check = {c.name: c for c in after.readiness.checks}["issue-referenced"]
    assert check.status == "pass" and check.where == ("patches/cover.md:1",)
    extra = after.files["PR_BODY.md"].split("## Additional information\n", 1)[1]
    assert extra.startswith("\nFound while fine-tuning.\n\nFixes #31337\n")
    other = C.fixes_line(C.parse_cover("c.md", "issue: https://github.com/o/r/issues/5\n"), "x/y")
    assert other == "Fixes https://github.com/o/r/issues/5"
    assert C.recorded_issue(C.parse_cover("c.md", "issue: #5\n")) is None  # a URL is needed


def test_commit_messages_are_the_project_s_draft_until_the_contributor_confirms_them():
    draft = docs(WRITTEN.replace("messages: own\n", ""))
    check = {c.name: c for c in draft.readiness.checks}["commit-messages"]
    assert check.status == "fail" and draft.draft
    assert "`messages: own`" in check.detail and check.where[0].startswith(CLEAN[0][0])
    assert any(e.file == "AGENTS.md" for e in check.rule)  # the rule it enforces, cited
    assert "commit-messages" in "\n".join(draft.draft_reasons)
    own = docs(WRITTEN)
    check = {c.name: c for c in own.readiness.checks}["commit-messages"]
    assert check.status == "pass" and not own.draft
    # only the exact word: anything else is not a confirmation
    assert C.messages_own(C.parse_cover("c.md", "messages: draft\n")) is None
    assert C.messages_own(C.parse_cover("c.md", "## Overview\nmessages: own\n")) is None


def test_trailers_are_described_as_they_are():
    messages = [R.message_of(n, t) for n, t in CLEAN]
    check = R.check_trailers(llama_policy(), messages)
    assert check.detail == "no Co-authored-by and no Assisted-by trailer"
    signed = [(n, t.replace("\n---\n", "\nAssisted-by: Some Model\n---\n", 1)) for n, t in CLEAN]
    check = R.check_trailers(llama_policy(), [R.message_of(n, t) for n, t in signed[:1]])
    assert check.detail == "no Co-authored-by; Assisted-by in 1 of 1 commit(s)"


def _judged_port(r, fix, line):
    rec = r.control_of("llama.cpp/cpu").model_copy(deep=True)
    rec.variant = f"competing:{fix.name}"
    rec.competing = CompetingInfo(
        name=fix.name, title=fix.title, url=fix.url, date=fix.date, summary=fix.summary
    )
    rec.judged = CompetingJudged(
        verdict="wrong",
        reason=f"test-opt fails: {line}",
        failing_test="test-opt",
        failure_line=line,
    )
    r.records.append(rec)
    return r


def test_a_ported_fix_without_a_known_thread_is_one_neutral_line_and_no_draft():
    fix = load_competing_shipped()
    assert not fix.discussed_at  # no stored PR or issue names the commit
    line = (
        "test_opt_period_non_static(high_level=no, schedule=TTTTTT, opt_period=1, "
        "subtest=weights, optimizer=adamw): FAIL"
    )
    r = _judged_port(sample(), fix, line)
    # a comment on a bare commit page helps no one: no draft
    assert CM.drafts([fix], r, "llama.cpp", COMMITS, NAMES, "ggml-org/llama.cpp") == {}
    [note] = CM.neutral_lines([fix], r, "llama.cpp")
    assert note.startswith(fix.url) and note.endswith(line) and "wrong" not in note
    body = PB.additional_information(
        r, "f" * 64, "llama.cpp", COMMITS, NAMES, TOOLCHAIN, "ggml-org/llama.cpp", notes=[note]
    )
    text = "\n".join(body)
    folded = text.split("<details><summary>Other work on the same code</summary>", 1)[1]
    assert "0eb92d8f033fbc86c7f2ec9bc32f61f75fed88d4" in folded
    assert "0eb92d8f" not in "\n".join(PB.visible_lines(text))
    assert fix.name not in text and "**wrong**" not in text


def test_a_ported_fix_with_a_known_thread_gets_facts_not_prose():
    fix = load_competing_shipped()
    fix = type(fix)(
        **{**fix.__dict__, "discussed_at": "https://github.com/ggml-org/llama.cpp/pull/1"}
    )
    line = "test_opt_period_non_static(high_level=no, schedule=TTTTTT): FAIL"
    r = _judged_port(sample(), fix, line)
    texts = CM.drafts([fix], r, "llama.cpp", COMMITS, NAMES, "ggml-org/llama.cpp")
    text = texts["COMMENT-qlora-branch-alloc-zeroing.md"]
    assert "- Thread: `https://github.com/ggml-org/llama.cpp/pull/1`" in text
    assert f"```\n{line}\n```" in text and "git apply qlora-branch-alloc-zeroing.patch" in text
    assert "git am 0002-tests-add.patch" in text and "./build/bin/test-opt" in text
    # the file it applies is the diff the draft carries
    assert "<summary>qlora-branch-alloc-zeroing.patch</summary>" in text
    assert "\n+        for (struct ggml_tensor * ga : opt_ctx->grad_accs) {\n" in text
    # facts for the contributor to word: no first person, no ruling
    assert not re.search(r"\b(I|I'm|I've|my|we)\b", text.split("-->", 1)[1])
    assert "**wrong**" not in text and "verdict" not in text.lower() and text.isascii()
    # no judged record of it for this target: no draft
    assert CM.drafts([fix], sample(), "llama.cpp", COMMITS, NAMES, None) == {}


def test_code_lines_keep_whitespace_and_never_close_the_fence():
    lines = ["+    if (x) {", " ```", "```", "    ```", "a\x1bb"]
    assert PB.code_lines(lines) == ["+    if (x) {", "     ```", "    ```", "    ```", "a\\x1bb"]


def load_competing_shipped():
    from orchestrator.config import load_matrix

    [fix] = load_competing(load_matrix(ROOT / "matrix.yaml"))
    parsed = parse_competing(
        f"{fix.name}.patch",
        (
            ROOT / "native_tests" / "accumulator-reset" / "competing" / f"{fix.name}.patch"
        ).read_text(),
    )
    # the loader tags each fix with the topic whose folder holds it
    assert dataclasses.replace(parsed, topic="accumulator-reset") == fix
    return fix


def test_data_in_the_drafts_and_the_issue_is_inert():
    from orchestrator.upstream import issue_form as F

    form = F.parse_form(
        "f.yml",
        "name: 'x --> <b>@team</b>'\ntitle: 'T: '\nbody:\n"
        "  - type: textarea\n    id: version\n    attributes: {label: '<img src=x> @all'}\n",
    )
    text = F.render(form, {"version": ["v"]}, "t")
    inside = text.split("\n-->\n", 1)[0]  # the comment the tool closes on a line of its own
    assert "-->" not in inside and "<b" not in inside and "&lt;b&gt;" in inside
    assert "### &lt;img src=x&gt; `@all`" in text
    r = sample()
    fix = load_competing_shipped()
    rec = r.control_of("llama.cpp/cpu").model_copy(deep=True)
    rec.variant = f"competing:{fix.name}"
    rec.competing = CompetingInfo(
        name=fix.name, title=fix.title, url=fix.url, date=fix.date, summary=fix.summary
    )
    rec.judged = CompetingJudged(
        verdict="wrong", reason="r", failing_test="test-opt", failure_line="```\n@x <b>"
    )
    r.records.append(rec)
    hostile = type(fix)(
        **{
            **fix.__dict__,
            "title": "<script>@maintainer</script>",
            "discussed_at": "https://x.org/t",
        }
    )
    [draft] = CM.drafts([hostile], r, "llama.cpp", COMMITS, NAMES, "o/r").values()
    # shown literally in a code span: no HTML, no mention
    assert draft.count("<script>") == draft.count("`<script>@maintainer</script>`") == 1
    assert "\n    ``` @x <b>\n" in draft  # the failing line cannot close its fence


def test_the_issue_and_the_body_show_test_opt_s_line_not_the_gate_s_when_it_has_one():
    r = sample()
    line = "test_per_step_graphs(high_level=no, schedule=TTTTTT, opt_period=1): FAIL"
    control = r.control_of("llama.cpp/cpu")
    control.tests["test-opt"].outcome = "failed"
    control.tests["test-opt"].failure_line = line
    before, after = PB.before_after(r, "llama.cpp", NAMES)
    assert (before, after) == ([line], ["2/2 backend*optimizer passed"])
    from orchestrator.upstream import issue

    text, missing = issue.issue_md(
        None, r, "llama.cpp", COMMITS, NAMES, "o/r", TOOLCHAIN, lambda p: None, "Linux"
    )
    assert f"```\n{line}\n```" in text and "device=CPU opt_period=1: FAIL" not in text
    assert missing == []


def test_the_issue_says_the_topic_s_own_problem_and_names_its_cover():
    """Each topic's ISSUE.md: its own topic.yaml `problem:` line after the mode, and the
    contributor pointed at that topic's cover.md (never another topic's words)."""
    from orchestrator.upstream import issue

    problem = "ggml_opt_grad_acc passes a NULL gb_opt to ggml_graph_get_grad_acc and crashes."
    text, _ = issue.issue_md(
        None,
        sample(),
        "llama.cpp",
        COMMITS,
        NAMES,
        "o/r",
        TOOLCHAIN,
        lambda p: None,
        "Linux",
        problem=problem,
        cover_path="patches/grad-acc-non-static/cover.md",
    )
    assert f"`ggml_opt_params`), {problem}" in text
    assert "never resets the gradient accumulators" not in text
    assert "patches/grad-acc-non-static/cover.md (a line `issue: URL`" in text
    unsaid, _ = issue.issue_md(
        None, sample(), "llama.cpp", COMMITS, NAMES, "o/r", TOOLCHAIN, lambda p: None, "Linux"
    )
    assert "Affected: non-static graphs" in unsaid and problem not in unsaid
