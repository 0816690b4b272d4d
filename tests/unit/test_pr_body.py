"""PR_BODY.md follows the target's template (llama.cpp's real one, and another), the contributor's
words come from patches/cover.md only, the tool's data sit under "Additional information" in
ASCII; a cover with placeholders makes a draft; ISSUE.md holds the reproduction and nothing else."""

import re

from orchestrator.model.results import (
    DeviceInfo,
    Outcome,
    Results,
    TrainingComparison,
    load_results,
)
from orchestrator.upstream import bundle as B
from orchestrator.upstream import cover as C
from orchestrator.upstream import documents as D
from orchestrator.upstream import issue_form as F
from orchestrator.upstream import policy as P
from orchestrator.upstream import pr_body as PB

from ..helpers.samples import declared
from ..helpers.tools import DATA

LLAMA = DATA / "upstream-policy" / "llama.cpp"
TEMPLATE_TEXT = (LLAMA / ".github" / "pull_request_template.md").read_text(encoding="utf-8")
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
NAMES = ["0001-ggml-opt-zero.patch", "0002-tests-add.patch"]  # as in CLEAN
TOOLCHAIN = {"cmake": "cmake version 4.4.5", "cxx_compiler": "GNU 12.2.0 (/usr/bin/c++)"}
# the contributor's metadata line above the first heading: the commit messages are their own words
WRITTEN = """messages: own

## Overview

Per-step training never zeroed the gradient accumulators. Fixes #4242

## Additional information

Found while fine-tuning.

## Requirements

- AI usage disclosure: YES, an assistant drafted the test; I reviewed every line.
"""


TRAINING = {
    "patched": [
        {"epoch": 1, "train_loss": 3.5, "eval_loss": 3.25},
        {"epoch": 2, "train_loss": 0.5, "eval_loss": 0.625},
    ],
    "control": [
        {"epoch": 1, "train_loss": 3.5, "eval_loss": 4.75},
        {"epoch": 2, "train_loss": 41.5, "eval_loss": 60.25},
    ],
    "diverges_as_predicted": True,
}
# a clean series (ASCII, a 1-line comment, `<module> : <title>`): its
# checks all pass, so drafts come from the cover
CLEAN = [
    (
        "0001-ggml-opt-zero.patch",
        """From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: A Contributor <a@example.org>
Date: Mon, 30 Nov 2026 00:00:00 +0000
Subject: [PATCH 1/2] ggml-opt : zero gradient accumulators each period with
 per-step graphs

The accumulators are never zeroed.
---
 ggml/src/ggml-opt.cpp | 2 ++
 1 file changed, 2 insertions(+)

diff --git a/ggml/src/ggml-opt.cpp b/ggml/src/ggml-opt.cpp
index 1111111..2222222 100644
--- a/ggml/src/ggml-opt.cpp
+++ b/ggml/src/ggml-opt.cpp
@@ -1,2 +1,4 @@
 int a = 0;
+// reset the accumulators at the start of each period
+int b = 1;
 int c = 0;
""",
    ),
    (
        "0002-tests-add.patch",
        """From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: A Contributor <a@example.org>
Date: Mon, 30 Nov 2026 00:00:00 +0000
Subject: [PATCH 2/2] tests : add a per-step case to test-opt

The new case.
---
 tests/test-opt.cpp | 1 +
 1 file changed, 1 insertion(+)

diff --git a/tests/test-opt.cpp b/tests/test-opt.cpp
index 3333333..4444444 100644
--- a/tests/test-opt.cpp
+++ b/tests/test-opt.cpp
@@ -1 +1,2 @@
 int main() { return 0; }
+int per_step_case = 1;
""",
    ),
]


OWN_FAIL = (
    "test_opt_period_non_static(high_level=no, schedule=TTTTTT, opt_period=1, subtest=weights, "
    "optimizer=adamw): FAIL"
)


def sample() -> Results:
    """The committed CPU sample, its test-opt failing without the fix as the series' cases make it
    (the sample predates them)."""
    r, _ = load_results(DATA / "results-cpu-sample.json")
    r.cells[0].training = TrainingComparison.model_validate(TRAINING)
    for rec in r.records:
        if rec.variant.startswith("control:") and "test-opt" in rec.tests:
            t = rec.tests["test-opt"]
            t.outcome, t.exit_code, t.failure_line = Outcome.FAILED, 1, OWN_FAIL
            t.summary_line = "0/2 backend*optimizer passed"
    return r


def llama_policy() -> P.Policy:
    files = {
        f: (LLAMA / f).read_text(encoding="utf-8")
        for f in ("AGENTS.md", "CONTRIBUTING.md", ".github/pull_request_template.md")
    }
    return P.derive(
        "llama.cpp", "b" * 40, files, declared("ggml-org/llama.cpp", "manual", "matrix.yaml:14")
    )


BUG_FORM = ".github/ISSUE_TEMPLATE/019-bug-misc.yml"
# the lines of the target's tree ISSUE.md quotes (upstream's words, cited by file:line)
TREE = {
    "ggml/include/ggml-opt.h": "    struct ggml_opt_params {\n"
    "        // by default the forward graph needs to be reconstructed for each eval\n",
    "examples/training/finetune.cpp": "\n" * 84 + "        llama_opt_epoch(ctx, dataset);\n",
    "src/llama-context.cpp": "\n" * 3675 + "    ggml_opt_prepare_alloc(opt_ctx, ctx, gf);\n",
}


def bug_form() -> F.IssueForm:
    return F.parse_form(BUG_FORM, (LLAMA / BUG_FORM).read_text(encoding="utf-8"))


def docs(cover_text, policy=None, warnings=(), form=None) -> D.Documents:
    return D.documents(
        policy=policy or llama_policy(),
        cover=C.parse_cover("patches/cover.md", cover_text),
        results=sample(),
        results_sha256="f" * 64,
        target="llama.cpp",
        commits=COMMITS,
        patches=CLEAN,
        toolchain=TOOLCHAIN,
        warnings=list(warnings),
        canonical_paths=[],
        read_file=TREE.get,
        issue_form=form,
    )


def headings(text: str) -> list[str]:
    return [ln[3:] for ln in text.splitlines() if ln.startswith("## ")]


def section(text: str, heading: str) -> str:
    return text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_shipped_cover_is_the_template_s_headings_and_placeholders_only(repo_root):
    shipped = (repo_root / "patches" / "accumulator-reset" / "cover.md").read_text(encoding="utf-8")
    assert shipped == C.blank_cover(
        P.parse_template(".github/pull_request_template.md", TEMPLATE_TEXT)
    )
    # llama.cpp's template has nothing but headings and placeholders
    assert shipped == TEMPLATE_TEXT
    assert not C.visible(section(shipped, "Overview")).strip()  # no words of the tool's


def test_a_written_cover_gives_the_template_in_order_with_the_disclosure_answered():
    d = docs(WRITTEN)
    body = d.files["PR_BODY.md"]
    assert headings(body) == ["Overview", "Additional information", "Requirements"]
    assert not d.draft, d.draft_reasons
    assert (
        section(body, "Overview").strip()
        == "Per-step training never zeroed the gradient accumulators. Fixes #4242"
    )
    req = section(body, "Requirements")
    template_req = section(TEMPLATE_TEXT, "Requirements")
    # every line of the template's Requirements, in order, the disclosure answered from cover.md
    want = [
        ln
        if not ln.startswith("- AI usage disclosure:")
        else "- AI usage disclosure: YES, an assistant drafted the test; I reviewed every line."
        for ln in template_req.strip("\n").splitlines()
    ]
    assert req.strip("\n").splitlines() == want
    extra = section(body, "Additional information")
    # the contributor's words, then the backends in one line, the failing line before the fix and
    # the passing line after it
    assert extra.startswith(
        "\nFound while fine-tuning.\n\nTested on CPU (gcc 12).\n\n"
        "Without the fix (its test commit alone):\n\n```\n"
        f"{OWN_FAIL}\n```\n\n"
        "With the fix:\n\n```\n2/2 backend*optimizer passed\n```\n"
    )
    # the project's own gate is not in the PR: none of its lines either
    assert "device=CPU opt_period=1: FAIL" not in extra and "test-opt-dynamic-accum" not in extra
    assert "git checkout --detach 0c1e57098bba43ac29e6e3b677cdceebdd22334f" in extra
    assert "git am 0001-ggml-opt-zero.patch 0002-tests-add.patch" in extra
    assert "git am 0002-tests-add.patch\n" in extra  # the bug, reproduced with the test alone
    assert body.isascii()
    assert d.files["PR_TITLE"] == COMMITS[0].subject + "\n"


def test_the_tool_s_data_are_ascii_even_when_results_are_not():
    r = sample()
    r.cells[0].device = DeviceInfo(
        devices=["llvmpipe \u2014 LLVM \u00d7 15"], drivers=["Mesa 25.0.7\u2026"]
    )
    data = PB.additional_information(r, "f" * 64, "llama.cpp", COMMITS, NAMES, TOOLCHAIN, None)
    text = "\n".join(data)
    assert text.isascii() and "llvmpipe - LLVM x 15" in text and "Mesa 25.0.7..." in text
    assert "<summary>test-opt per backend</summary>" in text


def test_the_blank_cover_is_a_draft_with_a_banner():
    d = docs(TEMPLATE_TEXT)
    body = d.files["PR_BODY.md"]
    assert d.draft
    assert body.startswith("> [!CAUTION]\n> DRAFT (ggml-patch readiness): not ready to submit:\n")
    assert "> - patches/cover.md:1: '## Overview' not written (placeholders only)" in body
    assert "'- AI usage disclosure:' not answered" in body
    assert headings(body) == ["Overview", "Additional information", "Requirements"]
    # unwritten, each section keeps the template's placeholder
    assert "<!-- Describe what this PR does and why. Be concise but complete -->" in section(
        body, "Overview"
    )
    man = d.manifest_fields(
        __import__("orchestrator.upstream.authorship", fromlist=["Identity"]).Identity(
            "A B", "a@b.org", "--author"
        ),
        None,
        "c" * 40,
    )
    assert man["draft"] is True and man["draft_reasons"] == d.draft_reasons
    assert {c["name"]: c["status"] for c in man["readiness"]["checks"]}["cover-written"] == "warn"


def test_a_missing_or_empty_cover_is_a_draft():
    assert docs(None).draft_reasons[0].startswith("patches/cover.md: missing")
    assert (
        docs("  \n<!-- nothing -->\n").draft_reasons[0]
        == "patches/cover.md: empty (only placeholders)"
    )
    todo = WRITTEN.replace("Found while fine-tuning.", "TODO: say where")
    assert any(
        "placeholder left in '## Additional information'" in r for r in docs(todo).draft_reasons
    )
    yes = WRITTEN.replace("YES, an assistant drafted the test; I reviewed every line.", "YES")
    assert any("disclosure YES without how AI was used" in r for r in docs(yes).draft_reasons)


def test_a_cover_with_non_ascii_is_a_draft_the_words_stay_the_contributor_s():
    d = docs(WRITTEN.replace("Found while fine-tuning.", "Found while fine\u2014tuning."))
    assert "Found while fine\u2014tuning." in d.files["PR_BODY.md"]  # never rewritten by the tool
    fails = [c for c in d.readiness.checks if c.status == "fail"]
    assert [c.name for c in fails] == ["ascii-pr-text"] and d.draft


def test_a_template_with_other_headings_gets_its_own_headings():
    template = "## Description\n\n<!-- what and why -->\n\n## Checklist\n\n- [ ] I ran the tests\n"
    pol = P.derive(
        "x",
        "a" * 40,
        {".github/pull_request_template.md": template},
        declared("me/x", "manual", "m:1"),
    )
    d = docs("messages: own\n\n## Description\n\nThe fix.\n", policy=pol)
    body = d.files["PR_BODY.md"]
    assert headings(body) == ["Description", "Checklist"]
    assert section(body, "Checklist").startswith("\n- [ ] I ran the tests\n")
    # no "Additional information": data at the end
    assert "<details><summary>ggml-patch data</summary>" in body
    assert not d.draft, d.draft_reasons


def test_issue_md_is_the_bug_form_filled_with_the_reproduction_and_nothing_else():
    d = docs(WRITTEN, form=bug_form())
    issue = d.files["ISSUE.md"]
    # the fields of upstream's bug form, in its order, as GitHub shows a filed form
    assert [ln[4:] for ln in issue.splitlines() if ln.startswith("### ")] == [
        "Name and Version",
        "Operating systems",
        "Which llama.cpp modules do you know to be affected?",
        "Command line",
        "Problem description & steps to reproduce",  # a lone & starts no entity: kept
        "First Bad Commit",
        "Relevant log output",
    ]
    assert f"follows the bug form {BUG_FORM} (Bug (misc.)); labels: bug-unconfirmed." in issue
    assert "Title: Misc. bug: zero gradient accumulators each period" in issue
    # the source's description is data: inert Markdown
    assert "ggml-org/llama.cpp at commit 0c1e5709, as in llama-cpp-python==0.3.36" in issue
    assert "### Operating systems\n\nLinux\n" in issue
    modules = "libllama (core library), Other (Please specify in the next section)"
    assert f"### Which llama.cpp modules do you know to be affected?\n\n{modules}\n" in issue
    assert "### First Bad Commit\n\n_No response_\n" in issue
    # what breaks, in upstream's words, and where upstream's own training uses that mode
    assert (
        '`ggml/include/ggml-opt.h:2`: "by default the forward graph needs to be reconstructed '
        'for each eval"' in issue
    )
    assert "`examples/training/finetune.cpp:85` (llama_opt_epoch)" in issue
    assert "`src/llama-context.cpp:3676` (ggml_opt_prepare_alloc)" in issue
    # the training symptom, then test-opt's reproduction (the test patch alone) and its line
    # the project's own training program is not the reader's to run: its loss stays out
    assert "train loss with the fix" not in issue
    assert (
        "```shell\ngit checkout --detach 0c1e57098bba43ac29e6e3b677cdceebdd22334f\ngit am 0002-"
        in issue
    )
    assert "./build/bin/test-opt\n```" in issue
    assert f"```\n{OWN_FAIL}\n```" in issue
    # the log in the form's own <details> block: test-opt's line, never the project's gate's
    logs = issue.split("### Relevant log output\n", 1)[1]
    assert "<summary>Logs</summary>" in logs and f"```console\n{OWN_FAIL}" in logs
    assert "device=CPU opt_period=1" not in issue
    # no prose, not even the cover's
    assert "Per-step training" not in issue and "Overview" not in issue
    assert issue.isascii()
    # the toy table stays in results and summary.md
    assert "| 2 | 0.5 | 0.625 | 41.5 | 60.25 |" not in issue
    # no digest in what GitHub shows: not the sdist's, not the snapshot's commit
    shown = PB.visible_lines(issue)
    assert not [ln for ln in shown if re.search(r"\b[0-9a-f]{64}\b", ln)]
    assert not [ln for ln in shown if "4f2c5210" in ln or "sdist" in ln]
    assert not [c for c in d.readiness.checks if c.name == "issue-form" and c.status != "pass"]


def test_issue_md_without_a_form_has_the_usual_fields_and_names_the_missing_ones():
    d = docs(WRITTEN)
    issue = d.files["ISSUE.md"]
    assert "the target's tree has no issue form" in issue
    assert [ln[4:] for ln in issue.splitlines() if ln.startswith("### ")] == [
        "Name and Version",
        "Command line",
        "Problem description & steps to reproduce",  # a lone & starts no entity: kept
        "Relevant log output",
    ]
    assert "./build/bin/test-opt\n```" in issue


def test_a_verify_only_target_gets_no_pull_request_documents():
    ggml = DATA / "upstream-policy" / "ggml"
    pol = P.derive(
        "ggml",
        "c" * 40,
        {
            f: (ggml / f).read_text()
            for f in ("CONTRIBUTING.md", ".github/pull_request_template.md")
        },
    )
    d = D.documents(
        policy=pol,
        cover=C.parse_cover("patches/cover.md", None),
        results=sample(),
        results_sha256="f" * 64,
        target="ggml",
        commits=COMMITS,
        patches=CLEAN,
        toolchain={},
        warnings=[],
        canonical_paths=["ggml/src/ggml-opt.cpp"],
        read_file=lambda p: (ggml / p).read_text() if (ggml / p).is_file() else None,
    )
    assert set(d.files) == {"READINESS.md"}
    assert "verified through ggml-org/llama.cpp's sync" in d.files["READINESS.md"]
    assert {c.name for c in d.readiness.checks} >= {"sync", "role", "ascii-added-lines"}
    assert "cover-written" in d.readiness.not_applicable


def test_the_body_s_visible_part_is_short_and_the_rest_is_folded():
    d = docs(WRITTEN)
    body = d.files["PR_BODY.md"]
    extra = section(body, "Additional information")
    visible = PB.visible_lines(extra)
    assert len(visible) <= 40, "\n".join(visible)
    assert body.count("<details>") == body.count("</details>") >= 2
    for summary in ("Without the fix", "test-opt per backend"):
        assert f"<details><summary>{summary}</summary>" in extra
    # none of the tool's own record: digests, snapshot commits, this machine's paths and tools
    for gone in ("Base commits", "Toolchain", "Per-case results", "sha256", "/usr/", "snapshot"):
        assert gone not in body
    shown = "\n".join(visible)
    # the per-backend table is folded: visible are the backends in one line, the failing line
    # before the fix and the passing line after it, the commands
    assert "| backend | device | test-opt with the fix |" not in shown
    assert "| backend | device | test-opt with the fix | without the fix |" in extra
    assert "Reproduce:" in shown and "Tested on CPU (gcc 12)." in shown
    assert "Without the fix (its test commit alone):" in shown and "With the fix:" in shown
    assert sum(len(ln.split()) for ln in PB.visible_lines(body)) <= 200
    assert not re.search(r"(?i)\b(cells?|gates?|killed|mutants?|controls?|verdicts?)\b", shown)
    # the toy linear-regression table is not in the body
    assert "Training: loss per epoch" not in body
    assert "0c1e57098bba43ac29e6e3b677cdceebdd22334f" not in shown.split("git checkout")[0]


def test_visible_lines_skip_details_blocks_comments_and_blanks():
    text = "a\n\n<details><summary>s</summary>\n\nhidden\n</details>\n<!-- c\nd -->\nb\n"
    assert PB.visible_lines(text) == ["a", "<details><summary>s</summary>", "b"]


def test_the_fine_tuning_evidence_is_one_signed_visible_line_per_case_with_the_plot():
    from orchestrator.finetune import results as ft

    def run(variant, evals):
        return ft.Run(
            variant=variant,
            optimizer="adamw",
            opt_period=1,
            n_batch=256,
            n_ubatch=256,
            lr=1e-5,
            command=[],
            epochs=[ft.Epoch(epoch=i + 1, train_loss=e, eval_loss=e) for i, e in enumerate(evals)],
            exit_code=0,
            outcome="ok",
            threads=ft.THREADS,
            repeat=0,
            compared=True,
        )

    res = ft.FinetuneResults(
        target="llama.cpp",
        base="0c1e5709",
        model={},
        data={},
        program={},
        runs=[run("patched", [6.0, 5.5, 5.0]), run("control", [6.0, 5.9, 5.8])],
    )
    lines = PB.finetune_summary(res)
    # a head line, why the fix is right, the effective step (no sweep here: no k), then one
    # signed line per case with direction and size, then the plot (no data file recorded here:
    # no commands)
    head, _, why, step, signed, _, plot = lines
    assert head.startswith("Fine-tuning (upstream llama-finetune")
    assert why.startswith("- Why the fix is right: with it, llama-finetune's per-step graphs")
    assert step.startswith("- Without the fix llama-finetune's AdamW steps are larger than")
    assert signed.startswith("- adamw lr 1e-05 on the tiny llama (1 seed(s)), 3 epochs (`-c 256`")
    assert "ends 16.00% higher than with it: higher without the fix by more than" in signed
    assert "finetune-loss.png" in plot and all(line.isascii() for line in lines)
    assert PB.finetune_summary(None) == []
