"""Issue 36: data in the published documents (PR_BODY.md, ISSUE.md, READINESS.md, summary.md) is
inert and each body is bounded: hostile values from results.json, known limits and the target's
AGENTS.md, rendered by a real CommonMark renderer (markdown-it-py), produce no HTML of their own."""

import re

from markdown_it import MarkdownIt

from orchestrator import publish
from orchestrator.model.results import CompetingInfo, CompetingJudged, VariantRecord
from orchestrator.report.summary import summary_markdown
from orchestrator.upstream import pr_body as PB
from orchestrator.verdicts import known_limits as KL

from .test_pr_body import WRITTEN, docs, llama_policy, sample

EVIL = (
    "</details> ## heading @org/team <img src=https://t.example/p.png> "
    "<!-- hides the rest \x1b]0;title\x07 | x"
)
ALLOWED_TAGS = {"details", "summary", "p", "table", "thead", "tbody", "tr", "th", "td", "code"}
ALLOWED_TAGS |= {"h1", "pre", "ul", "li", "h2", "h3", "h4", "strong", "a", "blockquote", "em"}


def _render(text: str) -> str:
    md = MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough")
    return md.render(text)


def _assert_inert(doc: str) -> None:
    html = _render(doc)
    tags = {t.lstrip("/") for t in re.findall(r"<(/?[a-zA-Z][a-zA-Z0-9]*)", html)}
    assert tags <= ALLOWED_TAGS, tags - ALLOWED_TAGS
    assert "<img" not in html and "\x1b" not in doc and "\x07" not in doc
    assert "<h2>heading" not in html
    outside_code = re.sub(r"<code>.*?</code>", "", html, flags=re.S)
    assert "@org/team" not in outside_code  # a mention notifies only outside code
    # a comment the data opened would hide the rest of the body on GitHub
    assert "&lt;!--" in html or "<!-- hides" not in html
    for href in re.findall(r'href="([^"]*)"', html):
        assert publish.allowed_url(href), href


def _limit(i: int, what: str) -> KL.KnownLimit:
    return KL.KnownLimit(
        id=f"limit-{i}",
        file="ggml/src/ggml-opt.cpp",
        function="ggml_opt_reset",
        what=what,
        status=KL.STATUS,
        confirmed="by a probe",
    )


def test_2400_hostile_notes_make_a_bounded_inert_body():
    notes = [EVIL.replace("\x1b]0;title\x07", "") + f" {i}" for i in range(2400)]
    d = docs(WRITTEN)
    data = PB.additional_information(sample(), "f" * 64, "llama.cpp", [], [], {}, None, notes=notes)
    body = PB.body(llama_policy().template, d.cover, data)
    shown = publish.bounded(body, where="PR_BODY.md")
    assert len(shown) < publish.GITHUB_BODY_MAX
    assert "notes left out" in shown
    _assert_inert(shown)
    html = _render(shown)
    assert html.count("<details>") == html.count("</details>")


def test_a_hostile_competing_record_renders_inert_in_summary_md():
    r = sample()
    cell = r.cells[0]
    r.records.append(
        VariantRecord(
            cell=cell.cell,
            target=cell.target,
            backend=cell.backend,
            variant="competing:evil",
            competing=CompetingInfo(
                name="evil",
                title=EVIL,
                url="https://evil.example/x?a=1",
                date="2026-01-02",
                summary=EVIL,
            ),
            judged=CompetingJudged(verdict="wrong", reason=EVIL, failure_line=EVIL),
        )
    )
    # the tool's own records have control characters shown (publish.plain) when built
    assert "\x1b" not in r.records[-1].competing.title
    md = summary_markdown(r)
    row = next(line for line in md.splitlines() if "evil.example" in line)
    assert "](https://evil.example" not in row  # not a link: the host is not allowed
    _assert_inert(md)


def test_an_allowed_https_url_is_a_link():
    out = publish.link("PR 1", "https://github.com/ggml-org/llama.cpp/pull/1", in_table=True)
    assert out == "[PR 1](https://github.com/ggml-org/llama.cpp/pull/1)"


def test_readiness_quoting_a_hostile_agents_md_line_is_inert():
    d = docs(WRITTEN)
    from orchestrator.upstream import readiness as R
    from orchestrator.upstream.manifest import FAIL, Check, Readiness
    from orchestrator.upstream.policy import Citation

    check = Check(
        name="comment-length",
        status=FAIL,
        detail=EVIL,
        where=(EVIL,),
        rule=(Citation(file="AGENTS.md", line=75, text=EVIL),),
    )
    ready = Readiness(checks=(check,), not_applicable={}, summary={FAIL: 1})
    md = R.markdown("llama.cpp", ready, [EVIL], d.policy)
    _assert_inert(md)
    assert "\\x1b" in md  # shown, not sent
