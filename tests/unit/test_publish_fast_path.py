"""Issue 35: publish.plain and publish.one_line skip their per-character loop for printable ASCII
(thousands of calls in a no-change re-run). The loop they had is the oracle: same output for any
text, printable ASCII or not."""

import string

from hypothesis import given
from hypothesis import strategies as st

from orchestrator import publish


def _plain_by_character(value, newlines=False):
    out = []
    for ch in str(value):
        if newlines and ch in "\n\t":
            out.append(ch)
        elif publish.is_control(ch):
            out.append(publish._shown(ch))
        else:
            out.append(ch)
    return "".join(out)


def _one_line_by_character(value, limit=publish._LINE_MAX):
    spaced = "".join(" " if ch in publish._BREAKS or ch == "\t" else ch for ch in str(value))
    flat = _plain_by_character(" ".join(spaced.split()))
    return flat if len(flat) <= limit else flat[: max(0, limit - 3)] + "..."


PRINTABLE_ASCII = st.text(alphabet=string.printable, max_size=80)
TEXTS = st.one_of(PRINTABLE_ASCII, st.text(max_size=80))


@given(TEXTS, st.booleans())
def test_plain_is_the_per_character_rule(text, newlines):
    assert publish.plain(text, newlines) == _plain_by_character(text, newlines)


@given(TEXTS, st.integers(min_value=0, max_value=100))
def test_one_line_is_the_per_character_rule(text, limit):
    assert publish.one_line(text, limit) == _one_line_by_character(text, limit)


def test_the_fast_path_still_folds_and_cuts():
    assert publish.one_line("  a   b ") == "a b"
    assert publish.one_line("abcdefgh", 6) == "abc..."
    # not printable ASCII: the loop shows what must be shown
    assert publish.one_line("a\x1b[31mb\tc") == "a\\x1b[31mb c"
    assert publish.plain("\u202eevil") == "\\u202eevil"
