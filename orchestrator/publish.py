"""The one escaping layer for what the tool publishes (PR_BODY.md, ISSUE.md, the COMMENT drafts,
READINESS.md, summary.md, the drift issue): text that came from data (results.json, known
limits, a target's AGENTS.md, a status file) is rendered inert before it joins the tool's own
Markdown, and each published body is bounded below what GitHub accepts.

Inert means: one line, no control characters (shown as `\\xNN`), no HTML (`<`, `>`, `&` as
entities), no @mention (`@` as `&#64;`), no Markdown of its own (headings, lists, links, images,
emphasis, table pipes and code fences escaped), no bare URL GitHub would link (shown as code).
A link is made only for an https URL on ALLOWED_HOSTS; any other URL is shown as code.
Each value is redacted (redact.redact) BEFORE it is escaped: an escaped secret is no longer
the text the redaction looks for, yet renders as the secret.

`plain` (control characters out, for a terminal and results), `text` (inline Markdown), `cell`
(a table cell), `code` (a code span), `link`, `lines_in_block` (lines inside a ``` block),
`bounded` (a whole body), `bounded_rows` (a table or list kept within a budget)."""

from __future__ import annotations

import re
import unicodedata
from typing import Iterable
from urllib.parse import urlsplit

from .redact import redact

# GitHub refuses an issue, pull request or comment body over 65,536 characters; the note that
# says what was left out fits in the margin.
GITHUB_BODY_MAX = 65_536
BODY_MAX = 65_000
ALLOWED_HOSTS = frozenset(
    {
        "github.com",
        "gist.github.com",
        "gitlab.com",
        "pypi.org",
        "files.pythonhosted.org",
    }
)
_LINE_MAX = 2_000  # one inert value in a published line, at most (a longer one is cut, said so)

# bidirectional overrides and isolates reorder what a reader sees: treated as control characters
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f")
_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
# Markdown's punctuation that may start a construct anywhere in a line (with `[` escaped, `!`
# and `(` start nothing); and what starts a block only at the start of a line
_MD_ESCAPE = frozenset("\\`*_[]|~$")
_LINE_START = frozenset("#-+=>")
_HTML = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
# a word GitHub would act on: a URL or www. (linked), @name (a mention: GitHub finds those in
# the rendered text, so an entity would not stop it; code spans are skipped), #123 and
# owner/repo#123 (a cross-reference), javascript: and the like
_ACTIVE_WORD = re.compile(r"(?i)://|@|#\d|^www\.|^(?:javascript|data|vbscript|file|mailto):")


def is_control(ch: str) -> bool:
    """A character a terminal or renderer acts on instead of showing: C0, DEL, C1, bidi."""
    return unicodedata.category(ch) in ("Cc", "Zl", "Zp") or ch in _BIDI


def _shown(ch: str) -> str:
    o = ord(ch)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def plain(value: object, newlines: bool = False) -> str:
    """`value` with every control character shown as `\\xNN` (ESC, BEL, CR, DEL, C1, bidi
    controls): safe on a terminal and in a results file. `newlines`: keep \\n (and tabs)."""
    text = str(value)
    if text.isascii() and text.isprintable():
        # nothing to show (the common case): no per-character loop, thousands of times a run
        return text
    out = []
    for ch in text:
        if newlines and ch in "\n\t":
            out.append(ch)
        elif is_control(ch):
            out.append(_shown(ch))
        else:
            out.append(ch)
    return "".join(out)


def one_line(value: object, limit: int = _LINE_MAX) -> str:
    """`value` on one line (line breaks and tabs as spaces, runs of blanks as one), control
    characters shown, at most `limit` characters (a cut one ends with `...`)."""
    text = str(value)
    if text.isascii() and text.isprintable():
        # no break, tab or control character in it: only the runs of blanks to fold
        flat = " ".join(text.split())
    else:
        spaced = "".join(" " if ch in _BREAKS or ch == "\t" else ch for ch in text)
        flat = plain(" ".join(spaced.split()))
    return flat if len(flat) <= limit else flat[: max(0, limit - 3)] + "..."


def _inert_source(value: object, limit: int = _LINE_MAX) -> str:
    """`value` redacted, THEN on one line: every escaping below starts here, so a secret is
    removed while it is still the text it was (escaped, `ghp_x` would be `ghp\\_x`, which no
    redaction recognises, and rendered it is the token again)."""
    return one_line(redact(str(value)), limit)


def _escape_words(part: str) -> str:
    out = []
    for i, ch in enumerate(part):
        # a lone & ("A & B") starts no entity: kept, so a heading reads as written
        lone_amp = ch == "&" and not part[i + 1 : i + 2].isalnum() and part[i + 1 : i + 2] != "#"
        if ch in _HTML and not lone_amp:
            out.append(_HTML[ch])
        elif ch in _MD_ESCAPE:
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _line_start(part: str) -> str:
    """A heading, list, quote or rule marker at the start made literal ("1." too)."""
    if part[:1] in _LINE_START:
        return "\\" + part
    m = re.match(r"^(\d{1,9})([.)])(?= |$)", part)
    return f"{m[1]}\\{m[2]}{part[m.end() :]}" if m else part


def text(value: object, limit: int = _LINE_MAX, in_table: bool = False, start: bool = True) -> str:
    """Untrusted text as inert inline Markdown: one line, nothing active (see the module); a word
    GitHub would link or act on is shown as code. `start`: the value may begin a line (a bullet's
    text does); False where the tool's own text precedes it on the line."""
    words = []
    for word in _inert_source(value, limit).split(" "):
        if _ACTIVE_WORD.search(word):
            words.append(code(word, in_table=in_table))
        else:
            words.append(_escape_words(word))
    joined = " ".join(words)
    # a table cell is inline: only a value that may open a line can open a block
    return joined if in_table or not start else _line_start(joined)


def cell(value: object, limit: int = 300) -> str:
    """Untrusted text for one table cell: `text`, never empty (a lone cell would collapse)."""
    return text(value, limit, in_table=True) or "-"


def cell_with_code(value: object, limit: int = 2_000) -> str:
    """A table cell written by the tool with `code spans` around data: each span kept as code
    (its content shown literally), the text between inert (`cell`)."""
    parts = _inert_source(value, limit).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: nothing is code
        return cell(value, limit)
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(code(part, limit, in_table=True))
        else:  # the spaces around a code span are kept
            lead = " " if part.startswith(" ") else ""
            trail = " " if part.endswith(" ") and part.strip() else ""
            out.append(lead + text(part, limit, in_table=True) + trail)
    return "".join(out) or "-"


def code(value: object, limit: int = _LINE_MAX, in_table: bool = False) -> str:
    """A code span showing `value` literally (one line): its fence is longer than any run of
    backticks inside. `in_table`: a pipe is written `\\|` (GitHub's table rule, even in code)."""
    flat = _inert_source(value, limit)
    if not flat:
        return "-"
    longest = max((len(r) for r in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or longest else ""
    if in_table:
        flat = flat.replace("|", "\\|")
    return f"{fence}{pad}{flat}{pad}{fence}"


def allowed_url(url: object) -> bool:
    """An https URL on ALLOWED_HOSTS, without userinfo, spaces or characters a link would end at."""
    if not isinstance(url, str) or len(url) > 2_000:
        return False
    if any(is_control(ch) or ch.isspace() or ch in '<>"`()[]|\\' for ch in url):
        return False
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
    except ValueError:
        return False
    return parts.scheme == "https" and "@" not in parts.netloc and host in ALLOWED_HOSTS


def link(label: object, url: object, limit: int = 200, in_table: bool = False) -> str:
    """`[label](url)` for an allowed https URL; otherwise the label and the URL shown as code."""
    shown = text(label, limit, in_table) or "link"
    if allowed_url(url):
        return f"[{shown}]({url})"
    if not url:
        return shown
    return f"{shown} ({code(url, 300, in_table)})"


def lines_in_block(lines: Iterable[object], limit: int = _LINE_MAX) -> list[str]:
    """Untrusted lines for inside a fenced code block the tool opens with ```: each one line,
    control characters shown, and a line that would close the fence indented by four spaces
    (a closing fence may be indented by three)."""
    out = []
    for line in lines:
        flat = _inert_source(line, limit)
        out.append("    " + flat if flat.startswith(("```", "~~~")) else flat)
    return out


def inert_block(value: object, limit: int = 20_000) -> list[str]:
    """Untrusted multi-line text as inert Markdown lines (each line through `text`)."""
    kept = plain(redact(str(value)), newlines=True)[:limit]
    return [text(line) for line in kept.split("\n")]


def bounded_rows(rows: list[str], budget: int, what: str) -> list[str]:
    """`rows` (table rows or list items) while they fit in `budget` characters, then one line
    that says how many of `what` were left out."""
    out: list[str] = []
    used = 0
    for i, row in enumerate(rows):
        used += len(row) + 1
        if used > budget:
            left = len(rows) - i
            return [*out, f"... {left} more {what} left out (the published body is bounded)"]
        out.append(row)
    return out


def _open_structure(kept: str) -> list[str]:
    """What must be closed after the cut: an open ``` fence, then open <details> blocks."""
    closing, fence = [], None
    depth = 0
    for line in kept.split("\n"):
        stripped = line.strip()
        if fence is not None:
            if stripped.startswith(fence) and not stripped[len(fence) :].strip():
                fence = None
            continue
        m = re.match(r"^(`{3,}|~{3,})", stripped)
        if m:
            fence = m[1]
            continue
        depth += line.count("<details")
        depth -= line.count("</details>")
    if fence is not None:
        closing.append(fence)
    closing += ["", "</details>"] * max(0, depth)
    return closing


def bounded(body: str, limit: int = BODY_MAX, where: str = "") -> str:
    """`body` as published: at most `limit` characters (below GitHub's 65,536). A longer one is
    cut at a line, its open code fence and <details> blocks closed, and one line says what was
    left out (`where`: the file that has it all)."""
    if len(body) <= limit:
        return body
    note_room = 400
    kept = body[: max(0, limit - note_room)]
    kept = kept[: kept.rfind("\n") + 1] if "\n" in kept else ""
    left = body[len(kept) :]
    closing = _open_structure(kept)
    full = f"; the whole text is in {text(where)}" if where else ""
    note = (
        f"**ggml-patch:** {len(left):,} characters ({left.count(chr(10)):,} lines) left out "
        f"here: GitHub takes at most {GITHUB_BODY_MAX:,} characters in a body{full}."
    )
    return kept + "\n".join([*closing, "", note, ""])
