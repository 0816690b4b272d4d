"""Which binary holds the fix: the string literals the fix adds, looked for in each binary, and
the check, before any run, that each variant's binary is what it claims to be."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Optional, Sequence

from ..errors import BuildFailed
from .commands import VARIANT_LABELS, VARIANTS, Variant
from .record import BinaryCheck, BuiltFrom


def fix_markers(fix_diff: str) -> list[str]:
    """String literals the fix adds (on '+' lines, not on any '-' line): text its binary must hold
    and the unfixed one must not (GGML_ASSERT keeps its condition's text)."""
    lit = re.compile(r'"((?:[^"\\\n]|\\.){12,})"')
    added, removed = [], set()
    for line in fix_diff.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            added += lit.findall(line)
        elif line.startswith("-") and not line.startswith("---"):
            removed.update(lit.findall(line))
    return list(dict.fromkeys(s for s in added if s not in removed and "\\" not in s))


def holds_fix(binary: bytes, markers: Sequence[str]) -> Optional[bool]:
    """True: every marker is in the binary; False: none is; None: no marker, or only some
    (unknown)."""
    found = {m.encode() in binary for m in markers}
    return found.pop() if len(found) == 1 else None  # every marker agrees


def check_provenance(
    binaries: dict[Variant, Path],
    markers: tuple[str, ...],
    built_from: Optional[dict[Variant, BuiltFrom]] = None,
) -> dict[Variant, BinaryCheck]:
    """{variant: its check}: before any run, each binary is what it claims: built from the fix's
    files as the patched commit (patched) or the base (control) has them, each compiled into an
    object of its own, the two binaries different; and, when the fix adds string literals, the
    patched binary holds them all and the control none. A BuildFailed otherwise."""
    built_from = built_from or {}
    out: dict[Variant, BinaryCheck] = {}
    for variant, path in binaries.items():
        data, want, name = path.read_bytes(), variant == "patched", VARIANT_LABELS[variant]
        holds = holds_fix(data, markers)
        if markers and holds is not want:
            raise BuildFailed(
                f"{path}: the {name} binary {'lacks' if want else 'holds'} the fix "
                f"(looked for the fix's string {markers[0][:60]!r}): the builds are not what "
                "they claim; not run"
            )
        src = built_from.get(variant)
        wrong = []
        if src is not None:
            wrong = [p for p, blob in src.blobs.items() if blob != src.expected.get(p)]
        if wrong:
            was = "patched commit" if want else "base"
            raise BuildFailed(
                f"{path}: the {name} binary was built from {', '.join(wrong)} as neither the "
                f"{was} has it: the builds are not what they claim; not run"
            )
        checks = ["fix's strings in the binary"] if markers else []
        if src is not None and src.blobs:
            checks.append("fix's files at build time")
        out[variant] = BinaryCheck(
            sha256=hashlib.sha256(data).hexdigest(),
            holds_fix=want if checks else holds,
            how=checks,
            checked=bool(checks),
            markers=list(markers),
            sources=src,
        )
    if len(out) == 2 and out["patched"].checked:
        objects = []
        for v in VARIANTS:
            sources = out[v].sources
            objects.append(tuple(sorted(sources.objects.items())) if sources else ())
        same_binary = out["patched"].sha256 == out["control"].sha256
        if same_binary or (objects[0] and objects[0] == objects[1]):
            raise BuildFailed(
                "the patched and control builds of llama-finetune are the same (binary or "
                "the fix's objects): reverting the fix changed nothing that was compiled; not run"
            )
    return out
