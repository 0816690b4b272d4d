"""The contribution policy, derived from a target's own files: llama.cpp's and ggml's real files
(copied byte for byte from the pinned sdists into tests/data/upstream-policy/), and synthetic ones
(no AGENTS.md, a template with other headings, a project that allows automation). Every rule
keeps the exact line it came from; matrix.yaml's `upstream:` is validated with file:line."""

from pathlib import Path

import pytest

from orchestrator.config import load_matrix
from orchestrator.errors import ConfigError
from orchestrator.upstream import policy as P
from orchestrator.upstream.manifest import DEFAULT_MAX_COMMENT_LINES

from ..helpers.samples import declared as upstream
from ..helpers.tools import DATA as TOOLS_DATA

DATA = TOOLS_DATA / "upstream-policy"


def files_of(root: Path) -> dict:
    return {
        f: (root / f).read_text(encoding="utf-8") if (root / f).is_file() else None
        for f in (*P.POLICY_FILES, *P.TEMPLATE_FILES)
    }


def llama() -> P.Policy:
    return P.derive(
        "llama.cpp",
        "b" * 40,
        files_of(DATA / "llama.cpp"),
        upstream("ggml-org/llama.cpp", "manual", "matrix.yaml:14"),
    )


def lines(p: P.Policy, rule: str) -> list[str]:
    return [e.where for e in p.rule(rule).citations]


def test_every_evidence_line_is_the_files_own_line():
    """Citation is never paraphrased: each one is the file's line, at that line number."""
    for name, pol in (
        ("llama.cpp", llama()),
        ("ggml", P.derive("ggml", "c" * 40, files_of(DATA / "ggml"))),
    ):
        evidence = [e for r in pol.rules.values() for e in r.citations]
        evidence += [
            e for e in pol.role.citations + pol.submit.citations if e.file != "matrix.yaml"
        ]
        assert evidence
        for e in evidence:
            assert (DATA / name / e.file).read_text(encoding="utf-8").splitlines()[
                e.line - 1
            ].strip() == e.text


def test_llama_cpp_rules_from_its_real_files():
    p = llama()
    assert p.files == {
        "AGENTS.md": True,
        "CONTRIBUTING.md": True,
        ".github/pull_request_template.md": True,
    }
    assert p.rule("automated_submission_forbidden").value is True
    assert lines(p, "automated_submission_forbidden")[:2] == ["AGENTS.md:49", "AGENTS.md:95"]
    assert lines(p, "private_forks_exempt") == ["AGENTS.md:27"]
    assert lines(p, "ai_written_text_forbidden") == [
        "AGENTS.md:47",
        "AGENTS.md:91",
        "CONTRIBUTING.md:25",
    ]
    assert p.rule("ascii_only").value is True and lines(p, "ascii_only") == ["AGENTS.md:73"]
    assert p.max_comment_lines == 2 and lines(p, "max_comment_lines") == ["AGENTS.md:75"]
    assert lines(p, "no_hard_wrap") == ["AGENTS.md:77", "AGENTS.md:81"]
    assert lines(p, "new_test_files_need_approval") == ["AGENTS.md:87"]
    assert "CONTRIBUTING.md:35" in lines(p, "issue_first")
    assert lines(p, "regression_test_required") == ["CONTRIBUTING.md:35"]
    assert lines(p, "disclosure_required") == ["AGENTS.md:43", "CONTRIBUTING.md:21"]
    assert p.rule("assisted_by_trailer").value == "Assisted-by" and lines(
        p, "assisted_by_trailer"
    ) == ["AGENTS.md:92"]
    assert p.rule("subject_format").value == "<module> : <commit title>"
    assert lines(p, "subject_format") == ["CONTRIBUTING.md:70"]
    assert p.rule("changes_go_to").value is None
    # the template's own link names the repository it belongs to
    assert p.rule("own_repo").value == "ggml-org/llama.cpp"
    assert lines(p, "own_repo") == [".github/pull_request_template.md:13"]


def test_llama_cpp_template_headings_and_disclosure_line():
    t = llama().template
    assert t.file == ".github/pull_request_template.md"
    assert t.headings == ["Overview", "Additional information", "Requirements"]
    assert [s.line for s in t.sections] == [1, 5, 9]
    assert [s.fixed for s in t.sections] == [False, False, True]
    # "Delete this section if not applicable"
    assert [s.optional for s in t.sections] == [False, True, False]
    assert t.disclosure.where == ".github/pull_request_template.md:14"
    assert t.disclosure.text.startswith("- AI usage disclosure: <!--")


def test_llama_cpp_is_a_pull_request_submitted_by_hand():
    p = llama()
    assert (
        p.takes_pull_request and p.submit.value == "manual" and p.repo.value == "ggml-org/llama.cpp"
    )
    assert (
        p.role.value.text
        == "pull request to ggml-org/llama.cpp, submitted by hand (submit: manual)"
    )
    assert [e.where for e in p.submit.citations] == ["matrix.yaml:14"]
    # undeclared, the tool still never chooses api: manual, on the policy's own lines
    bare = P.derive("llama.cpp", "b" * 40, files_of(DATA / "llama.cpp"))
    assert bare.submit.value == "manual" and bare.repo.value == "ggml-org/llama.cpp"
    assert [e.where for e in bare.submit.citations][:2] == ["AGENTS.md:49", "AGENTS.md:95"]


def test_ggml_is_verified_through_llama_cpp_s_sync():
    p = P.derive("ggml", "c" * 40, files_of(DATA / "ggml"))
    assert p.files == {
        "AGENTS.md": False,
        "CONTRIBUTING.md": True,
        ".github/pull_request_template.md": True,
    }
    assert p.template.headings == []  # ggml's template is one sentence, no headings
    assert p.rule("changes_go_to").value == "ggml-org/llama.cpp"
    assert lines(p, "changes_go_to") == ["CONTRIBUTING.md:3", ".github/pull_request_template.md:1"]
    assert p.rule("guidelines_from").value == "ggml-org/llama.cpp" and lines(
        p, "guidelines_from"
    ) == ["CONTRIBUTING.md:1"]
    assert not p.takes_pull_request and p.submit.value == "none"
    assert p.role.value.text == "verified through ggml-org/llama.cpp's sync"
    # nothing of llama.cpp's rules is carried over: ggml's own files state none of them
    for rule in (
        "automated_submission_forbidden",
        "ascii_only",
        "max_comment_lines",
        "new_test_files_need_approval",
    ):
        assert p.rule(rule).value is None and p.rule(rule).citations == ()
    assert p.max_comment_lines == DEFAULT_MAX_COMMENT_LINES
    declared = P.derive(
        "ggml", "c" * 40, files_of(DATA / "ggml"), upstream("ggml-org/ggml", "none", "m.yaml:9")
    )
    assert [e.where for e in declared.submit.citations] == [
        "m.yaml:9"
    ] and not declared.takes_pull_request


def test_no_files_at_all():
    p = P.derive("bare", "d" * 40, {})
    assert p.files == {
        "AGENTS.md": False,
        "CONTRIBUTING.md": False,
        ".github/pull_request_template.md": False,
    }
    assert p.template is None and all(r.value is None for r in p.rules.values())
    assert p.submit.value == "manual" and p.takes_pull_request and p.repo.value is None


def test_no_agents_md_only_contributing():
    contributing = (
        "# Contributing\n\n- Use ASCII only in code and messages.\n"
        "- Keep comments short: at most 3 lines.\n- Bug fixes must start with an issue.\n"
    )
    p = P.derive("x", "e" * 40, {"CONTRIBUTING.md": contributing})
    assert p.files["AGENTS.md"] is False
    assert p.rule("ascii_only").value is True and lines(p, "ascii_only") == ["CONTRIBUTING.md:3"]
    assert p.max_comment_lines == 3 and lines(p, "max_comment_lines") == ["CONTRIBUTING.md:4"]
    assert p.rule("automated_submission_forbidden").value is None
    assert lines(p, "issue_first") == ["CONTRIBUTING.md:5"]
    assert p.rule("new_test_files_need_approval").value is None  # not stated: nothing invented


def test_a_template_with_other_headings():
    template = (
        "## Description\n\n<!-- what and why -->\n\n## How was it tested\n\n<!-- optional -->\n\n"
        "## Checklist\n\n- [ ] I ran the tests\n- [ ] Docs updated\n"
    )
    p = P.derive("x", "f" * 40, {".github/PULL_REQUEST_TEMPLATE.md": template})
    t = p.template
    assert t.file == ".github/PULL_REQUEST_TEMPLATE.md"
    assert t.headings == ["Description", "How was it tested", "Checklist"]
    assert [s.fixed for s in t.sections] == [False, False, True]
    assert [s.optional for s in t.sections] == [False, True, False]
    assert t.disclosure is None


def test_a_policy_that_allows_automation():
    agents = (
        "# Agents\n\n## Allowed\n\n- Automated PR submissions are welcome from bots we know.\n"
        "- Agents may run `git push` to their own branches.\n"
    )
    p = P.derive("x", "a" * 40, {"AGENTS.md": agents}, upstream("me/x", "api", "matrix.yaml:7"))
    assert p.rule("automated_submission_forbidden").value is None
    assert p.submit.value == "api" and p.takes_pull_request
    assert "through the GitHub API" in p.role.value.text


def test_a_prohibition_under_a_prohibited_heading_and_in_code_is_told_apart():
    agents = (
        "### Prohibited\n\n- Automated commits or PR submissions\n\n```sh\n"
        "# never run git push for users\n```\n"
    )
    p = P.derive("x", "a" * 40, {"AGENTS.md": agents})
    # the fenced line is an example
    assert lines(p, "automated_submission_forbidden") == ["AGENTS.md:3"]


def test_look_alike_sentences_are_not_rules():
    contributing = (
        "- There is no problem with unicode file names in the docs.\n"
        "- We disclose security issues after 90 days.\n"
        "- Automated PR submissions from our bot keep dependencies fresh.\n"
    )
    p = P.derive("x", "a" * 40, {"CONTRIBUTING.md": contributing})
    for rule in ("ascii_only", "disclosure_required", "automated_submission_forbidden"):
        assert p.rule(rule).value is None, rule


def test_the_policy_goes_into_the_manifest_as_json():
    import json

    j = json.loads(json.dumps(llama().to_json()))
    assert j["submit"]["value"] == "manual" and j["role"]["value"]["kind"] == "pull-request"
    assert j["template"]["headings"][0] == {"text": "Overview", "line": 1}
    assert j["rules"]["ascii_only"]["citations"][0]["file"] == "AGENTS.md"


# ---------------------------------------------------------------- matrix.yaml's upstream:

MATRIX = """queue: {path: patches, layout: llama.cpp}
targets:
  t:
    layout: llama.cpp
    upstream: UPSTREAM
    source: {kind: local, path: .}
backends: {cpu: {}}
profiles: {default: {targets: [t], backends: [cpu]}}
"""


@pytest.mark.parametrize(
    "upstream, expected",
    [
        ("{submit: api}", "m.yaml:5: targets.t.upstream: missing required key 'repo'"),
        (
            "{submit: auto}",
            "m.yaml:5: targets.t.upstream.submit: 'auto' is not one of manual, api, none",
        ),
        (
            "{repo: llama.cpp}",
            "m.yaml:5: targets.t.upstream.repo: 'llama.cpp' is not "
            "a GitHub repository (expected OWNER/NAME",
        ),
        ("{repo: a/b, push: yes}", "m.yaml:5: targets.t.upstream.push: unknown key"),
    ],
)
def test_upstream_declaration_errors_name_file_and_line(tmp_path, upstream, expected):
    f = tmp_path / "m.yaml"
    f.write_text(MATRIX.replace("UPSTREAM", upstream))
    with pytest.raises(ConfigError) as e:
        load_matrix(f)
    assert str(e.value).startswith(str(tmp_path / expected.split(":")[0]))
    assert expected.split(":", 1)[1] in str(e.value)


def test_upstream_declaration_resolves(tmp_path, repo_root):
    f = tmp_path / "m.yaml"
    f.write_text(MATRIX.replace("UPSTREAM", "{repo: me/llama.cpp, submit: api}"))
    u = load_matrix(f).target("t").upstream
    assert (u.repo, u.submit, u.where) == ("me/llama.cpp", "api", f"{f}:5")
    m = load_matrix(repo_root / "matrix.yaml")
    assert (m.target("llama.cpp").upstream.repo, m.target("llama.cpp").upstream.submit) == (
        "ggml-org/llama.cpp",
        "manual",
    )
    assert (m.target("ggml").upstream.repo, m.target("ggml").upstream.submit) == (
        "ggml-org/ggml",
        "none",
    )
