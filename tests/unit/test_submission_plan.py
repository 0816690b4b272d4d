"""The submission plan of a bundle set (upstream/plan.py) and the issue's title and callers: the
order of the pull requests from the queue, the lines of CONTRIBUTING.md it rests on, the owner of
the changed file from CODEOWNERS, each PR body naming the others; ISSUE.md titled by the symptom
and claiming no caller the tree does not have."""

import pytest

from orchestrator.config import load_matrix
from orchestrator.patchset.files import load_queue
from orchestrator.upstream import issue
from orchestrator.upstream import plan as PL

from ..helpers.tools import ROOT

pytestmark = pytest.mark.unit

OWNERS = """\
# a comment
*.md @docs-team
/ggml/src/ggml-opt.cpp @JohannesGaessler
/ggml/src/ggml-cuda/ @cuda-owner
tests/ @test-owner  # trailing comment
"""
CONTRIBUTING = """\
# Contributing

- Squash-merge is used
- New contributors should limit your open PRs to 1
- Create separate PRs for each feature or fix
"""


def _planned():
    """The real queue as the bundle command plans it."""
    queue = load_queue(load_matrix(ROOT / "matrix.yaml"))
    out = []
    for t in queue.topics:
        after = tuple(t.meta.after)
        out.append(PL.PlannedPR(t.name, t.meta.symptom or t.meta.summary, after))
    return out


def test_code_owners_last_match_wins_and_directories_cover_their_files():
    got = PL.code_owners(
        OWNERS,
        ["ggml/src/ggml-opt.cpp", "ggml/src/ggml-cuda/x.cu", "tests/test-opt.cpp", "README.md"],
    )
    assert got == [
        ("ggml/src/ggml-opt.cpp", "@JohannesGaessler", 3),
        ("ggml/src/ggml-cuda/x.cu", "@cuda-owner", 4),
        ("tests/test-opt.cpp", "@test-owner", 5),
        ("README.md", "@docs-team", 2),
    ]
    assert PL.code_owners(None, ["ggml/src/ggml-opt.cpp"]) == []
    assert PL.code_owners("/src/ggml-opt.cpp @x\n", ["ggml/src/ggml-opt.cpp"]) == []  # anchored


def test_the_order_rests_on_the_target_s_own_lines():
    assert PL.asks(CONTRIBUTING) == [
        "CONTRIBUTING.md:4 (new contributors keep one pull request open at a time)",
        "CONTRIBUTING.md:5 (one pull request per fix)",
    ]
    assert PL.asks(None) == []


def test_each_pr_names_the_others_in_the_queue_s_order():
    planned = _planned()
    first, second = planned[0].topic, planned[1].topic
    lines = PL.other_prs_lines(planned, second)
    assert lines[0] == f"This is pull request 2 of {len(planned)} of one set, opened one at a time:"
    assert lines[2].endswith(f"(this one), after {first}")
    assert all(p.title.split(":")[0] in "\n".join(lines) for p in planned)
    assert PL.other_prs_lines(planned[:1], first) == []


def test_the_plan_says_which_first_which_follow_and_who_owns_the_file():
    planned = _planned()
    text = PL.plan_markdown(
        "llama.cpp",
        "ggml-org/llama.cpp",
        planned,
        PL.code_owners(OWNERS, ["ggml/src/ggml-opt.cpp"]),
        ".github/CODEOWNERS",
        PL.asks(CONTRIBUTING),
    )
    assert "one at a time, in this order (CONTRIBUTING.md:4" in text
    assert f"1. `{planned[0].topic}/llama.cpp/`:" in text and "first: the others follow it" in text
    for p in planned[1:]:
        assert f"once {', '.join(p.follows)} is merged" in text
    assert (
        "Reviewer: .github/CODEOWNERS:3 gives `ggml/src/ggml-opt.cpp` to `@JohannesGaessler`."
        in text
    )
    assert "sha256" not in text and "/root" not in text


def test_issue_titles_name_the_symptom_not_the_fix():
    queue = load_queue(load_matrix(ROOT / "matrix.yaml"))
    for t in queue.topics:
        subjects = [p.header.split("Subject: ", 1)[1].split("\n", 1)[0] for p in t.series.patches]
        title = issue.issue_title([], t.meta.symptom, t.meta.problem)
        assert title and not any(title in s or s.endswith(title) for s in subjects), title
    assert issue.issue_title([], None, "it breaks: because.") == "it breaks"


def test_no_caller_is_claimed_that_the_tree_does_not_have():
    tree = {
        "examples/training/finetune.cpp": "\n" * 84 + "        llama_opt_epoch(ctx, dataset);\n",
        "src/llama-context.cpp": "\n" * 3675 + "    ggml_opt_prepare_alloc(opt_ctx, ctx, gf);\n",
    }
    mode = issue.problem_lines(tree.get, "it breaks.")
    assert "llama-finetune uses this mode: `examples/training/finetune.cpp:85`" in "\n".join(mode)
    api = "\n".join(issue.problem_lines(tree.get, "it crashes.", "ggml_opt_grad_acc"))
    assert "llama-finetune uses" not in api
    assert "`ggml_opt_grad_acc` is public API; upstream's own training" in api
    assert "does not call it" in api


def test_llama_cpp_s_own_contributing_gives_the_order():
    text = (ROOT / "tests/data/upstream-policy/llama.cpp/CONTRIBUTING.md").read_text()
    assert PL.asks(text) == [
        "CONTRIBUTING.md:39 (new contributors keep one pull request open at a time)",
        "CONTRIBUTING.md:50 (one pull request per fix)",
    ]


def test_a_pr_that_follows_another_reproduces_on_top_of_it():
    from orchestrator.upstream import pr_body as PB

    from ..helpers.samples import sample

    prior = ("../../accumulator-reset/llama.cpp/*.patch",)
    bug = PB.reproduce_bug(sample(), "llama.cpp", [_Commit(True)], ["0002-t.patch"], prior)
    assert (
        bug[1]
        == "git am ../../accumulator-reset/llama.cpp/*.patch  # the pull requests this one follows"
    )
    assert bug[2] == "git am 0002-t.patch"
    assert PB.reproduce_bug(sample(), "llama.cpp", [_Commit(True)], ["0002-t.patch"])[1] == (
        "git am 0002-t.patch"
    )


class _Commit:
    def __init__(self, is_test: bool):
        self.is_test = is_test
