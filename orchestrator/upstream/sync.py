"""What a sync script would carry: e.g. ggml's scripts/sync-llama-am.sh, which brings llama.cpp's
commits into ggml. It formats each llama.cpp commit limited to a list of paths (`git format-patch
... -- PATHS`), renames those paths with sed, and `git am`s the result. Parsing that script from the
target's own tree tells which files of the canonical (llama.cpp-layout) series the sync carries,
and where to: the ggml-layout series the matrix proved must be exactly that. Pure."""

from __future__ import annotations

import fnmatch
import re
import shlex
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class SyncMap:
    script: str  # its path in the target's tree
    pathspecs: tuple[tuple[str, int], ...]  # (pathspec, line)
    renames: tuple[tuple[str, str, int], ...]  # (python regex, replacement, line)

    @property
    def line(self) -> int:
        return self.pathspecs[0][1] if self.pathspecs else 0

    def carries(self, path: str) -> Optional[str]:
        """The path the sync gives `path` (None when it does not carry it)."""
        if not any(fnmatch.fnmatchcase(path, spec) for spec, _ in self.pathspecs):
            return None
        line = f" a/{path}"  # as the path stands in a `diff --git a/... b/...` line
        for pattern, repl, _ in self.renames:
            line = re.sub(pattern, repl, line)
        return line[len(" a/") :] if line.startswith(" a/") else line.strip()


def sync_script_for(changes_go_to: Optional[str]) -> Optional[str]:
    """scripts/sync-llama-am.sh for ggml-org/llama.cpp: the script named after the repository."""
    return (
        f"scripts/sync-{changes_go_to.split('/')[-1].split('.')[0]}-am.sh"
        if changes_go_to
        else None
    )


def parse_sync_script(path: str, text: str) -> Optional[SyncMap]:
    """The pathspecs of its `git format-patch ... -- PATHS` and its sed renames; None when it has
    none."""
    lines = text.splitlines()
    specs: list[tuple[str, int]] = []
    for i in (i for i, line in enumerate(lines) if "git format-patch" in line):
        after = False  # past the command's `--`
        for j in range(i, len(lines)):  # the command and the lines it continues on (`\`)
            part = lines[j].rstrip()
            try:
                tokens = shlex.split(part.rstrip("\\"), comments=True)
            except ValueError:
                tokens = []
            redirect = next((k for k, tok in enumerate(tokens) if tok.startswith(">")), len(tokens))
            for tok in tokens[:redirect]:
                if after:
                    specs.append((tok, j + 1))
                after = after or tok == "--"
            if redirect < len(tokens) or not part.endswith("\\"):
                break
        if specs:
            break
    if not specs:
        return None
    rules = []
    for n, line in enumerate(lines, 1):
        m = re.search(_SED_ARG, line)
        rule = _sed(m[1]) if m else None
        if rule:
            rules.append((*rule, n))
    return SyncMap(path, tuple(specs), tuple(rules))


_SED_ARG = r"-e\s+'(s/.*/[a-z]*)'\s*\\?\s*$"
_PART = r"(?:\\.|[^\\/])*"  # up to the next '/' that no backslash escapes
_SED = re.compile(rf"s/({_PART})/({_PART})/{_PART}\\?", re.S)


def _sed(expr: str) -> Optional[tuple[str, str]]:
    """'s/ERE/REPL/g' -> (python regex, python replacement)."""
    m = _SED.fullmatch(expr)
    if not m:
        return None
    pattern = m[1].replace(r"\/", "/").replace("[[:space:]]", r"\s")
    replacement = m[2].replace(r"\/", "/").replace(r"\.", ".")
    return pattern, replacement


@dataclass(frozen=True)
class SyncReport:
    carried: tuple[tuple[str, str], ...]  # (canonical path, path in the target)
    not_carried: tuple[str, ...]  # canonical paths the sync leaves out
    # files the target's series changes that the sync would not produce
    target_only: tuple[str, ...]
    # carried, but to a path the target's series does not change
    mismatched: tuple[tuple[str, str], ...]


def compare(sync: SyncMap, canonical_paths: list[str], target_paths: list[str]) -> SyncReport:
    carried = []
    for p in canonical_paths:
        to = sync.carries(p)
        if to is not None:
            carried.append((p, to))
    produced = {to for _, to in carried}
    return SyncReport(
        tuple(carried),
        tuple(p for p in canonical_paths if sync.carries(p) is None),
        tuple(p for p in target_paths if p not in produced),
        tuple((p, to) for p, to in carried if to not in target_paths),
    )
