"""The series' own text passes every readiness check on it (issue 13: commit messages and added
lines) under the pinned llama.cpp's rules: ASCII, comments of at most 2 lines not hard-wrapped,
`<module> : <title>` subjects, no Co-authored-by. The e2e
bundle test checks the same on a real bundle."""

from orchestrator.upstream import policy as P
from orchestrator.upstream import readiness as R

from ..helpers.patches import PATCH_DIR, read_patch
from ..helpers.samples import declared
from ..helpers.tools import DATA

SERIES_OWN_TEXT = (
    "ascii-commit-messages",
    "ascii-added-lines",
    "comment-length",
    "comment-wrap",
    "subject",
    "trailers",
)


def test_no_check_on_the_series_own_text_fails():
    files = {
        f: (DATA / "upstream-policy" / "llama.cpp" / f).read_text(encoding="utf-8")
        for f in ("AGENTS.md", "CONTRIBUTING.md", ".github/pull_request_template.md")
    }
    pol = P.derive(
        "llama.cpp", "b" * 40, files, declared("ggml-org/llama.cpp", "manual", "matrix.yaml:14")
    )
    patches = [(p.name, read_patch(p.name)) for p in sorted(PATCH_DIR.glob("*.patch"))]
    got = {c.name: c for c in R.run(pol, patches, {}, None, []).checks}
    assert {k: (got[k].status, got[k].where) for k in SERIES_OWN_TEXT} == {
        k: (R.PASS, ()) for k in SERIES_OWN_TEXT
    }


def test_the_series_adds_no_file_under_tests():
    files = {
        f: (DATA / "upstream-policy" / "llama.cpp" / f).read_text(encoding="utf-8")
        for f in ("AGENTS.md", "CONTRIBUTING.md", ".github/pull_request_template.md")
    }
    pol = P.derive(
        "llama.cpp", "b" * 40, files, declared("ggml-org/llama.cpp", "manual", "matrix.yaml:14")
    )
    patches = [(p.name, read_patch(p.name)) for p in sorted(PATCH_DIR.glob("*.patch"))]
    got = {c.name: c for c in R.run(pol, patches, {}, None, []).checks}
    assert got["new-test-files"].status == R.PASS
