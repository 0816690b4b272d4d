"""The fine-tuning evidence's section of summary.md, between two markers, so `ggml-patch evidence`
and `ggml-patch matrix` share one summary.md without disturbing each other: the evidence run adds
or replaces only its section; a matrix run rewrites the rest and keeps the section. Pure."""

from __future__ import annotations

from typing import Optional

BEGIN = "<!-- ggml-patch evidence: begin -->"
END = "<!-- ggml-patch evidence: end -->"


def extract(text: Optional[str]) -> Optional[str]:
    """The marked section of `text`, markers included (None: there is none, or it is
    unterminated)."""
    text = text or ""
    start = text.find(BEGIN)
    end = text.find(END, start + len(BEGIN)) if start >= 0 else -1
    return text[start : end + len(END)] if end >= 0 else None


def marked(section: str) -> str:
    return f"{BEGIN}\n{section.strip(chr(10))}\n{END}"


def splice(text: Optional[str], section: str) -> str:
    """`text` (a summary.md, or None) with its evidence section replaced by `section` (a marked
    section), or `section` appended when it has none; every other line unchanged."""
    old = extract(text)
    if text and old:
        return text.replace(old, section, 1)
    if not text:
        return section + "\n"
    return text.rstrip("\n") + "\n\n" + section + "\n"


def keep(old_text: Optional[str], new_text: str) -> str:
    """A rewritten summary.md (`new_text`) with the evidence section the old one had, if any."""
    section = extract(old_text)
    return splice(new_text, section) if section and not extract(new_text) else new_text
