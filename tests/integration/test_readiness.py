"""Readiness checks on real `git format-patch` series made in temporary repositories: plain
ASCII, 1-2 line comments and `<module> : <title>` subjects pass; an em dash in a message, a
4-line comment, a hard-wrapped comment, a bad subject and a Co-authored-by trailer each fail with
file:line; a new file under tests/ warns; ggml's sync script says what it would carry."""

from pathlib import Path

import pytest

from orchestrator.upstream import cover as C
from orchestrator.upstream import policy as P
from orchestrator.upstream import readiness as R
from orchestrator.upstream import sync as S

from ..helpers.samples import declared
from ..helpers.tools import DATA as TOOLS_DATA
from ..helpers.tools import git

DATA = TOOLS_DATA / "upstream-policy"
BASE = {"ggml/src/ggml-opt.cpp": "int a = 0;\n\nint b = 0;\n", "tests/CMakeLists.txt": "# tests\n"}


def llama() -> P.Policy:
    files = {
        f: (DATA / "llama.cpp" / f).read_text(encoding="utf-8")
        for f in ("AGENTS.md", "CONTRIBUTING.md", ".github/pull_request_template.md")
    }
    return P.derive(
        "llama.cpp", "b" * 40, files, declared("ggml-org/llama.cpp", "manual", "matrix.yaml:14")
    )


def make_series(tmp: Path, commits: list[tuple[str, dict]]) -> list[tuple[str, str]]:
    """`git format-patch` of `commits` (message, {path: new text}) on a base holding BASE."""
    repo = tmp / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    for path, text in BASE.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    for message, files in commits:
        for path, text in files.items():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(text, encoding="utf-8")
        git(repo, "add", ".")
        git(repo, "commit", "-q", "--cleanup=verbatim", "-m", message)
    out = tmp / "out"
    names = git(
        repo, "format-patch", "--no-signature", "-o", str(out), f"HEAD~{len(commits)}"
    ).split()
    return [(Path(n).name, Path(n).read_text(encoding="utf-8")) for n in names]


FIX = (
    "int a = 0;\n\n// reset the accumulators at the start of each period\n"
    "// the loss seed is set to 1 again\nint b = 1;\n"
)
GOOD = [
    (
        "ggml-opt : reset the accumulators each period\n\nThe accumulators are never zeroed.\n",
        {"ggml/src/ggml-opt.cpp": FIX},
    )
]


def checks(policy, patches, texts=None, cov=None) -> dict[str, R.Check]:
    r = R.run(policy, patches, texts or {}, cov, [])
    return {c.name: c for c in r.checks}


def test_plain_ascii_short_comments_and_module_subjects_pass(tmp_path):
    got = checks(llama(), make_series(tmp_path, GOOD))
    for name in (
        "ascii-commit-messages",
        "ascii-added-lines",
        "comment-length",
        "comment-wrap",
        "subject",
        "trailers",
        "new-test-files",
        "role",
    ):
        assert got[name].status == R.PASS, got[name]
    assert got["comment-length"].rule[0].where == "AGENTS.md:75"


def test_an_em_dash_in_a_commit_message_fails_with_its_line(tmp_path):
    msg = (
        "ggml-opt : reset the accumulators each period\n\n"
        "The accumulators are never zeroed \u2014 ever.\n"
    )
    patches = make_series(tmp_path, [(msg, {"ggml/src/ggml-opt.cpp": FIX})])
    c = checks(llama(), patches)["ascii-commit-messages"]
    assert c.status == R.FAIL and "AGENTS.md:73" in c.detail
    name, text = patches[0]
    n = next(i for i, ln in enumerate(text.splitlines(), 1) if "\u2014" in ln)
    assert c.where == (f"{name}:{n}: '\u2014' U+2014",)


def test_a_non_ascii_subject_is_decoded_and_fails(tmp_path):
    msg = "ggml-opt : reset accumulators \u00d7 periods\n\nBody.\n"
    patches = make_series(tmp_path, [(msg, {"ggml/src/ggml-opt.cpp": FIX})])
    assert "=?UTF-8?q?" in patches[0][1]  # format-patch encodes it in the header
    c = checks(llama(), patches)["ascii-commit-messages"]
    assert c.status == R.FAIL and c.where[0].endswith(": subject: '\u00d7' U+00D7")


def test_a_four_line_comment_fails_with_file_and_line(tmp_path):
    four = "int a = 0;\n\n// one\n// two\n// three\n// four\nint b = 1;\n"
    patches = make_series(tmp_path, [(GOOD[0][0], {"ggml/src/ggml-opt.cpp": four})])
    c = checks(llama(), patches)["comment-length"]
    assert c.status == R.FAIL and "longer than 2 lines" in c.detail and "AGENTS.md:75" in c.detail
    name, text = patches[0]
    n = text.splitlines().index("+// one") + 1
    assert c.where == (f"ggml/src/ggml-opt.cpp:3 ({name}:{n}): 4-line comment",)


def test_a_hard_wrapped_comment_fails(tmp_path):
    wrapped = (
        "int a = 0;\n\n"
        "// With per-step graphs the accumulators outlive every graph, and the reset in\n"
        "// ggml_opt_alloc runs before the build.\nint b = 1;\n"
    )
    c = checks(llama(), make_series(tmp_path, [(GOOD[0][0], {"ggml/src/ggml-opt.cpp": wrapped})]))[
        "comment-wrap"
    ]
    assert c.status == R.FAIL and c.where[0].startswith("ggml/src/ggml-opt.cpp:3 ")
    assert [e.where for e in c.rule] == ["AGENTS.md:77", "AGENTS.md:81"]


def test_two_sentences_on_two_lines_are_not_a_wrap(tmp_path):
    two = (
        "int a = 0;\n\n"
        "// grad_accs is indexed by forward-graph node and was sized from the first graph:\n"
        "// a per-step graph with a different node count would read past its end below.\n"
        "int b = 1;\n"
    )
    got = checks(llama(), make_series(tmp_path, [(GOOD[0][0], {"ggml/src/ggml-opt.cpp": two})]))
    assert got["comment-wrap"].status == R.PASS and got["comment-length"].status == R.PASS


def test_a_subject_without_module_fails(tmp_path):
    patches = make_series(
        tmp_path, [("Reset the accumulators\n\nBody.\n", {"ggml/src/ggml-opt.cpp": FIX})]
    )
    c = checks(llama(), patches)["subject"]
    assert c.status == R.FAIL and c.where == (f"{patches[0][0]}:4: 'Reset the accumulators'",)
    assert "CONTRIBUTING.md:70" in c.detail


def test_co_authored_by_fails_assisted_by_passes(tmp_path):
    co = GOOD[0][0] + "\nCo-authored-by: Some Model <m@example.org>\n"
    assert (
        checks(llama(), make_series(tmp_path / "a", [(co, {"ggml/src/ggml-opt.cpp": FIX})]))[
            "trailers"
        ].status
        == R.FAIL
    )
    ok = GOOD[0][0] + "\nAssisted-by: Some Model\n"
    assert (
        checks(llama(), make_series(tmp_path / "b", [(ok, {"ggml/src/ggml-opt.cpp": FIX})]))[
            "trailers"
        ].status
        == R.PASS
    )


def test_a_new_file_under_tests_warns(tmp_path):
    commits = GOOD + [
        ("tests : add test-x\n\nThe test.\n", {"tests/test-x.cpp": "int main() { return 0; }\n"})
    ]
    patches = make_series(tmp_path, commits)
    c = checks(llama(), patches)["new-test-files"]
    assert c.status == R.WARN and c.where == (f"tests/test-x.cpp (new in {patches[1][0]})",)
    assert "AGENTS.md:87" in c.detail
    bare = checks(P.derive("x", "a" * 40, {}), patches)["new-test-files"]
    # no rule: nothing to ask
    assert bare.status == R.PASS and "state no approval rule" in bare.detail


def test_pull_request_checks_need_a_written_cover(tmp_path):
    pol = llama()
    patches = make_series(tmp_path, GOOD)
    blank = C.parse_cover("patches/cover.md", C.blank_cover(pol.template))
    r = R.run(
        pol,
        patches,
        {"PR_BODY.md": "## Overview\n## Additional information\n## Requirements\n"},
        blank,
        C.problems(blank, pol.template),
    )
    got = {c.name: c.status for c in r.checks}
    assert (
        got["cover-written"] == R.WARN
        and got["disclosure"] == R.WARN
        and got["issue-referenced"] == R.WARN
    )
    assert got["pr-body-headings"] == R.PASS and got["ascii-pr-text"] == R.PASS
    written = C.parse_cover(
        "patches/cover.md",
        "## Overview\n\nFixes #123\n\n## Requirements\n\n- AI usage disclosure: NO\n",
    )
    r = R.run(
        pol,
        patches,
        {"PR_BODY.md": "## Overview\n## Overview\n"},
        written,
        C.problems(written, pol.template),
    )
    got = {c.name: c for c in r.checks}
    assert got["cover-written"].status == R.PASS and got["disclosure"].status == R.PASS
    assert got["issue-referenced"].status == R.PASS and got["issue-referenced"].where == (
        "patches/cover.md:3",
    )
    assert got["pr-body-headings"].status == R.FAIL  # the body lost the template's headings


def test_role_fails_when_api_would_submit_to_a_project_that_forbids_it():
    files = {
        f: (DATA / "llama.cpp" / f).read_text(encoding="utf-8")
        for f in ("AGENTS.md", ".github/pull_request_template.md")
    }
    upstream = P.derive("l", "a" * 40, files, declared("ggml-org/llama.cpp", "api", "m.yaml:3"))
    c = R.check_role(upstream)
    assert c.status == R.FAIL and "forbids automated submissions (AGENTS.md:49)" in c.detail
    fork = P.derive("l", "a" * 40, files, declared("me/llama.cpp", "api", "m.yaml:3"))
    assert R.check_role(fork).status == R.PASS  # the user's own fork


def test_ggml_takes_no_pull_request_and_its_sync_leaves_the_new_test_out(tmp_path):
    ggml_files = {
        f: (DATA / "ggml" / f).read_text()
        for f in ("CONTRIBUTING.md", ".github/pull_request_template.md")
    }
    pol = P.derive(
        "ggml", "c" * 40, ggml_files, declared("ggml-org/ggml", "none", "matrix.yaml:24")
    )
    script = "scripts/sync-llama-am.sh"
    assert S.sync_script_for("ggml-org/llama.cpp") == script
    sync = S.parse_sync_script(script, (DATA / "ggml" / script).read_text())
    canonical = [
        "ggml/src/ggml-opt.cpp",
        "tests/CMakeLists.txt",
        "tests/test-opt-dynamic-accum.cpp",
    ]
    ggml_layout = ["src/ggml-opt.cpp", "tests/CMakeLists.txt", "tests/test-opt-dynamic-accum.cpp"]
    report = S.compare(sync, canonical, ggml_layout)
    r = R.run(pol, make_series(tmp_path, GOOD), {}, None, [], sync, report, script)
    assert set(r.not_applicable) == set(R.PR_ONLY)
    c = {c.name: c for c in r.checks}["sync"]
    assert c.status == R.WARN and c.rule[0].where == "scripts/sync-llama-am.sh:70"
    assert "carries ggml/src/ggml-opt.cpp -> src/ggml-opt.cpp" in c.detail
    assert c.where == ("tests/CMakeLists.txt", "tests/test-opt-dynamic-accum.cpp")
    # folded into test-opt.cpp, which the sync carries, the whole series would reach ggml
    whole = S.compare(
        sync,
        ["ggml/src/ggml-opt.cpp", "tests/test-opt.cpp"],
        ["src/ggml-opt.cpp", "tests/test-opt.cpp"],
    )
    assert R.check_sync(sync, whole, script, "ggml-org/llama.cpp").status == R.PASS
    wrong = S.compare(sync, ["ggml/src/ggml-opt.cpp"], ["ggml/src/ggml-opt.cpp"])
    assert R.check_sync(sync, wrong, script, "ggml-org/llama.cpp").status == R.FAIL
    assert R.check_sync(None, None, script, "ggml-org/llama.cpp").status == R.WARN


@pytest.mark.parametrize(
    "path, mapped",
    [
        ("ggml/src/ggml-opt.cpp", "src/ggml-opt.cpp"),
        ("ggml/include/ggml-opt.h", "include/ggml-opt.h"),
        ("ggml/CMakeLists.txt", "CMakeLists.txt"),
        ("ggml/src/ggml-cuda/opt-step-sgd.cu", "src/ggml-cuda/opt-step-sgd.cu"),
        ("tests/test-opt.cpp", "tests/test-opt.cpp"),
        ("tests/test-opt-dynamic-accum.cpp", None),
        ("src/llama.cpp", None),
    ],
)
def test_ggml_sync_map(path, mapped):
    sync = S.parse_sync_script(
        "scripts/sync-llama-am.sh", (DATA / "ggml" / "scripts" / "sync-llama-am.sh").read_text()
    )
    assert sync.carries(path) == mapped


def test_readiness_markdown_lists_locations_and_policy_lines(tmp_path):
    four = "int a = 0;\n\n// one\n// two\n// three\n// four\nint b = 1;\n"
    pol = llama()
    r = R.run(
        pol, make_series(tmp_path, [(GOOD[0][0], {"ggml/src/ggml-opt.cpp": four})]), {}, None, []
    )
    md = R.markdown("llama.cpp", r, ["comment-length: ..."], pol)
    assert "| comment-length | fail |" in md and "- draft: yes" in md
    assert "- AGENTS.md:75: - Keep code comments concise (usually 1-2 lines)" in md
