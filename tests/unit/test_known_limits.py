"""patches/known-limits.yaml: the contributor's data on what the series leaves as it is, validated
on load (one line: file, line, key), shown under "Additional information" and in the manifest,
never in ISSUE.md (the reproduction only)."""

import pytest

from orchestrator.errors import ConfigError
from orchestrator.upstream import cover as C
from orchestrator.upstream import documents as D
from orchestrator.verdicts.known_limits import STATUS, load_known_limits, parse_known_limits

from .test_pr_body import CLEAN, COMMITS, TOOLCHAIN, WRITTEN, llama_policy, sample, section

GOOD = f"""limits:
  - id: opt-reset-no-op-per-step
    file: ggml/src/ggml-opt.cpp
    function: ggml_opt_reset
    what: zeroes nothing with per-step graphs
    status: {STATUS}
    confirmed: a probe
"""


def test_the_shipped_file_keeps_only_the_limit_no_topic_fixes(repo_root):
    # issue 12 named three; ggml_opt_reset and ggml_opt_grad_acc are topics now (issue 31)
    limits = load_known_limits(repo_root / "patches" / "accumulator-reset")
    assert [(k.id, k.function) for k in limits] == [("opt-i-advances-on-eval", "ggml_opt_eval")]
    assert all(
        k.status == "not changed by this series" and k.file == "ggml/src/ggml-opt.cpp"
        for k in limits
    )
    topic = repo_root / "patches" / "accumulator-reset"
    assert (topic / "known-limits.yaml").read_bytes().isascii()


def test_no_file_no_limits(tmp_path):
    assert load_known_limits(tmp_path) == ()


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda t: t.replace("    confirmed: a probe\n", ""),
            "patches/known-limits.yaml:2: limits[0]: key 'confirmed' missing",
        ),
        (
            lambda t: t + "    note: x\n",
            "patches/known-limits.yaml:8: limits[0].note: unknown key (allowed: id, file, function",
        ),
        (
            lambda t: t.replace(STATUS, "fixed here"),
            "patches/known-limits.yaml:6: limits[0].status: 'fixed "
            "here' is not 'not changed by this series'",
        ),
        (
            lambda t: t.replace("zeroes nothing", "zeroes nothing \u2014 ever"),
            "patches/known-limits.yaml:5: limits[0].what: must be one line of printable ASCII",
        ),
        (
            lambda t: t.replace("id: opt-reset-no-op-per-step", "id: Opt Reset"),
            "patches/known-limits.yaml:2: limits[0].id: 'Opt Reset' is not a slug",
        ),
        (
            lambda t: t.replace("function: ggml_opt_reset", "function: ggml_opt_reset()"),
            "patches/known-limits.yaml:4: limits[0].function: "
            "'ggml_opt_reset()' is not a C identifier",
        ),
        (
            lambda t: t.replace("file: ggml/src/ggml-opt.cpp", "file: ../ggml-opt.cpp"),
            "limits[0].file: '../ggml-opt.cpp' is not a relative path in the series' layout",
        ),
        (lambda t: "limits: []\n", "patches/known-limits.yaml:1: limits: must not be empty"),
        (
            lambda t: t + t[len("limits:\n") :],
            "patches/known-limits.yaml:8: limits[1].id: 'opt-reset-no-op-per-step' is "
            "also limits[0]'s id",
        ),
        (lambda t: "limits: [\n", "patches/known-limits.yaml:2: invalid YAML"),
        (lambda t: "", "patches/known-limits.yaml:1: (top level): expected object, got NoneType"),
    ],
)
def test_a_malformed_file_is_one_line_naming_file_line_and_key(edit, message):
    with pytest.raises(ConfigError) as e:
        parse_known_limits("patches/known-limits.yaml", edit(GOOD))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_the_body_carries_them_under_additional_information_and_issue_md_does_not():
    limits = parse_known_limits("patches/known-limits.yaml", GOOD)
    d = D.documents(
        policy=llama_policy(),
        cover=C.parse_cover("patches/cover.md", WRITTEN),
        results=sample(),
        results_sha256="f" * 64,
        target="llama.cpp",
        commits=COMMITS,
        patches=CLEAN,
        toolchain=TOOLCHAIN,
        warnings=[],
        canonical_paths=[],
        read_file=lambda p: None,
        known_limits=limits,
    )
    extra = section(d.files["PR_BODY.md"], "Additional information")
    # manifest.json keeps them (bundle.py); the PR body shows only what its own commands print
    assert "Known limits" not in extra and "opt-reset-no-op-per-step" not in extra
    assert "opt-reset-no-op-per-step" not in d.files["ISSUE.md"]
    assert not d.draft, d.draft_reasons  # data, not a readiness problem
