"""Related upstream work (patches/related-upstream.yaml): the file validated on load, and
readiness's check that cover.md references every open related pull request."""

import pytest

from orchestrator.errors import ConfigError
from orchestrator.upstream import cover as C
from orchestrator.upstream import policy as P
from orchestrator.upstream import readiness as R
from orchestrator.verdicts.related import load_related, open_prs, parse_related

from ..helpers.patches import PATCH_DIR
from ..helpers.samples import declared
from ..helpers.tools import DATA

OPEN = "https://github.com/ggml-org/llama.cpp/pull/22705"


def _policy():
    files = {
        f: (DATA / "upstream-policy" / "llama.cpp" / f).read_text(encoding="utf-8")
        for f in ("AGENTS.md", "CONTRIBUTING.md", ".github/pull_request_template.md")
    }
    return P.derive(
        "llama.cpp", "b" * 40, files, declared("ggml-org/llama.cpp", "manual", "matrix.yaml:14")
    )


def test_the_shipped_file_lists_the_qlora_line_and_the_symptom_reports():
    related = load_related(PATCH_DIR)
    assert [r.url for r in open_prs(related)] == [OPEN]
    numbers = {r.number: r for r in related}
    assert {20453, 22705, 26794, 14424, 18484, 18499} == set(numbers)
    assert all("unconfirmed" in numbers[n].what for n in (14424, 18484, 18499))
    assert all(r.what.isascii() for r in related)


@pytest.mark.parametrize(
    "text, phrase",
    [
        ("related: []\n", "related-upstream.yaml:1: related: must not be empty"),
        (
            "related:\n  - url: http://example.com/x\n    kind: pr\n    state: open\n    what: x\n",
            "related-upstream.yaml:2: related[0].url: 'http://example.com/x' "
            "is not a GitHub pull request or issue URL",
        ),
        (
            f"related:\n  - url: {OPEN}\n    kind: commit\n    state: open\n    what: x\n",
            "related-upstream.yaml:3: related[0].kind: 'commit' is not one of pr, issue",
        ),
        (
            f"related:\n  - url: {OPEN}\n    kind: pr\n    state: open\n    what: x\n    by: me\n",
            "related[0].by: unknown key",
        ),
    ],
)
def test_a_malformed_file_is_one_line_naming_the_line_and_key(text, phrase):
    with pytest.raises(ConfigError) as e:
        parse_related("related-upstream.yaml", text)
    assert phrase in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_readiness_warns_until_cover_references_every_open_related_pr_citing_contributing():
    related = load_related(PATCH_DIR)
    pol = _policy()
    cov = C.parse_cover("patches/cover.md", "## Overview\n\nThe fix.\n")
    c = R.check_related(pol, cov, related)
    assert c.status == R.WARN and OPEN in c.detail and "CONTRIBUTING.md:" in c.detail
    assert any("existing PR" in e.text for e in c.rule)
    # referenced as #N (not inside a longer number), or by
    # URL, it passes; an HTML comment does not count
    assert (
        R.check_related(
            pol, C.parse_cover("c.md", "See #22705 for the QLoRA work.\n"), related
        ).status
        == R.PASS
    )
    assert (
        R.check_related(pol, C.parse_cover("c.md", f"Related: {OPEN}\n"), related).status == R.PASS
    )
    assert (
        R.check_related(pol, C.parse_cover("c.md", "#227050\n<!-- #22705 -->\n"), related).status
        == R.WARN
    )
    assert R.check_related(pol, cov, ()).status == R.PASS
