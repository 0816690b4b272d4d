"""The escaping layer for published Markdown (orchestrator/publish.py): hostile values rendered by a
real CommonMark + GFM-tables renderer (markdown-it-py, rich's own) come out as text only."""

import re

import pytest
from markdown_it import MarkdownIt

from orchestrator import publish

HOSTILE = [
    "## heading",
    "@org/team please look",
    "<img src=https://tracker.example/p.png>",
    "<!-- hides the rest",
    "</details> breakout <details><summary>x</summary>",
    "a | b | c",
    "```\nfence",
    "[click](https://evil.example/)",
    "![pixel](https://evil.example/p.png)",
    "javascript:alert(1)",
    "see www.evil.example and https://evil.example/x",
    "owner/repo#12 cross-reference",
    "1. an ordered list",
    "- a list",
    "> a quote",
    "line one\nline two\r\n## second heading",
    "\x1b]0;title\x07\x1b[2J clear",
    "right\u202eleft",
    "*bold* _em_ ~~strike~~ $x$",
    "a\\|b `code|with` pipes",
]


def _md() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough")


def _active(html: str) -> list[str]:
    """The HTML elements a value produced beyond the paragraph and table the test wrapped it in."""
    tags = re.findall(r"<(/?[a-zA-Z][a-zA-Z0-9]*)", html)
    allowed = {"p", "/p", "table", "/table", "thead", "/thead", "tbody", "/tbody", "tr", "/tr"}
    allowed |= {"th", "/th", "td", "/td", "code", "/code"}
    return [t for t in tags if t not in allowed]


@pytest.mark.parametrize("value", HOSTILE)
def test_text_renders_as_text_only(value):
    html = _md().render(f"{publish.text(value)}\n")
    assert _active(html) == []
    assert "<!--" not in html and "\x1b" not in html and "\u202e" not in html
    # a mention outside a code span would notify: every @ sits inside <code>
    outside_code = re.sub(r"<code>.*?</code>", "", html)
    assert "@" not in outside_code


@pytest.mark.parametrize("value", HOSTILE)
def test_a_cell_stays_in_its_cell(value):
    doc = f"| a | b |\n|---|---|\n| {publish.cell(value)} | end |\n"
    html = _md().render(doc)
    assert _active(html) == []
    assert html.count("<td>") == 2, html
    assert "<td>end</td>" in html


def test_links_only_for_https_on_allowed_hosts():
    assert (
        publish.link("PR", "https://github.com/o/r/pull/1") == "[PR](https://github.com/o/r/pull/1)"
    )
    for url in (
        "javascript:alert(1)",
        "http://github.com/o/r",
        "https://evil.example/x",
        "https://u:p@github.com/o/r",
        "https://github.com/o/r)(x",
        "data:text/html,<b>x</b>",
    ):
        out = publish.link("PR", url)
        html = _md().render(out + "\n")
        assert "<a " not in html, (url, html)
        assert "<code>" in html


def test_code_span_outlasts_backticks_and_block_lines_cannot_close_the_fence():
    html = _md().render(publish.code("a ``` b `` c") + "\n")
    assert "<code>a ``` b `` c</code>" in html
    lines = publish.lines_in_block(["```", "# not a heading", "<b>x</b>"])
    html = _md().render("\n".join(["```", *lines, "```", "after"]) + "\n")
    assert html.count("<pre>") == 1 and "<h1>" not in html and "<p>after</p>" in html


def test_plain_shows_control_characters():
    assert publish.plain("a\x1b[2Jb\x07\x9b\u202e") == "a\\x1b[2Jb\\x07\\x9b\\u202e"
    assert publish.plain("a\nb\tc", newlines=True) == "a\nb\tc"
    assert publish.one_line("a\nb\r\nc\u2028d") == "a b c d"


def test_a_long_body_is_bounded_with_its_structure_closed_and_a_note():
    body = "\n".join(
        ["intro", "<details><summary>x</summary>", "", "```"] + [f"row {i}" for i in range(40000)]
    )
    out = publish.bounded(body, where="PR_BODY.md")
    assert len(out) < publish.GITHUB_BODY_MAX
    assert len(out) <= publish.BODY_MAX
    tail = out.splitlines()[-6:]
    assert tail[0].startswith("row ") and tail[1] == "```" and "</details>" in tail
    assert "left out" in tail[-1] and "65,536" in tail[-1]
    html = _md().render(out)
    assert html.count("<pre>") == 1 and "left out" in html.split("</pre>")[-1]
    assert publish.bounded("short\n") == "short\n"


def test_bounded_rows_say_how_many_were_left_out():
    rows = [f"| {i} |" for i in range(1000)]
    out = publish.bounded_rows(rows, 100, "known limits")
    assert len("\n".join(out)) < 200
    assert out[-1].startswith("... ") and "known limits left out" in out[-1]
    assert str(1000 - (len(out) - 1)) in out[-1]


def test_a_lone_ampersand_stays_and_an_entity_is_shown_literally():
    """`A & B` starts no entity (a heading of upstream's form reads as written); `&lt;`, `&#60;`
    and `a&b` could, so they are escaped or shown as code and read as typed."""
    assert publish.text("Problem description & steps") == "Problem description & steps"
    assert publish.text("&lt;b&gt;") == "&amp;lt;b&amp;gt;"
    assert publish.text("&#60;") == "`&#60;`"  # "#6" could cross-reference: shown as code
    assert publish.text("a&b x&") == "a&amp;b x&"
