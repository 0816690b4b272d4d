"""Mutants: known-wrong fixes the gate must catch (native_tests/mutants/NN-short-name.patch).

A mutant file is a header of `Mutant: <one-line title>` and `Why it is wrong: <one line>`, a
blank line, then a plain git diff in the series' (canonical) layout that turns the FIXED file
into the wrong one. Each cell applies it (paths rendered into the target's layout) on the
patched tree, rebuilds, runs the gate, and restores the files. Verdicts: killed (the gate fails
by its own check), survived (the gate passes: the cell fails, exit 7), invalid (did not apply,
did not build, crashed, timed out).

Pure: text in, a Mutant out; a gate run in, a verdict out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from ..errors import ConfigError
from ..patchset.layout import Layout
from ..patchset.render import retarget
from ..patchset.series import FileDiff, parse_patch
from ..report.model import TestRecord, Verdict
from .classify import INVALID, GateVerdict, gate_verdict

_HEADER = re.compile(r"^(?P<key>Mutant|Why it is wrong): (?P<value>\S.*)$", re.M)


@dataclass(frozen=True)
class Mutant:
    name: str  # the file name without .patch, e.g. "02-reset-at-build-when-opt-i-zero"
    title: str
    why: str
    files: tuple[FileDiff, ...]  # the diff, in the series' layout

    def rendered(self, src: Layout, dst: Layout) -> str:
        """The diff with its paths in `dst`'s layout, for `git apply` in a target's tree."""
        return "".join(retarget(f, src, dst).text for f in self.files)

    def paths(self, src: Layout, dst: Layout) -> list[str]:
        """The files it changes, in `dst`'s layout (what is restored after it)."""
        return [retarget(f, src, dst).path for f in self.files]


def parse_mutant(name: str, text: str) -> Mutant:
    """A mutant file's text; one ConfigError line naming the file when it is malformed."""
    stem = name[: -len(".patch")] if name.endswith(".patch") else name
    if "\ndiff --git " not in "\n" + text:
        raise ConfigError(f"{name}: no 'diff --git' section; a mutant is a header, a blank line and a git diff")
    header = ("\n" + text).split("\ndiff --git ", 1)[0]
    fields = {m["key"]: m["value"].strip() for m in _HEADER.finditer(header)}
    for key in ("Mutant", "Why it is wrong"):
        if key not in fields:
            raise ConfigError(f"{name}: no '{key}: ...' line before the diff")
    patch = parse_patch(name, text)  # paths checked: a/ b/ prefixes, nothing escaping the tree, no binary
    return Mutant(stem, fields["Mutant"], fields["Why it is wrong"], patch.files)


def mutant_verdict(apply_error: Optional[str], build_ok: bool, gate: Optional[TestRecord]) -> GateVerdict:
    """The gate's verdict on one mutant (the control's own rules, classify.gate_verdict)."""
    if apply_error is not None:
        return GateVerdict(INVALID, f"the mutant did not apply: {apply_error}")
    return gate_verdict(
        build_ok,
        gate.outcome if gate else None,
        gate.exit_code if gate else None,
        (gate.output or "") if gate else "",
        variant="the tree with the mutant",
        passed="the gate test passed with this known-wrong fix: it does not catch it",
    )


def kill_line(verdicts: list[Optional[Verdict]]) -> str:
    """ "the gate kills N/M known-wrong fixes" (skipped mutants are not counted)."""
    ran = [v for v in verdicts if v is not None]
    return f"the gate kills {sum(1 for v in ran if v == Verdict.KILLED)}/{len(ran)} known-wrong fixes"
