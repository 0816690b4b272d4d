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
    if not changes_go_to:
        return None
    return f"scripts/sync-{changes_go_to.split('/')[-1].split('.')[0]}-am.sh"


def parse_sync_script(path: str, text: str) -> Optional[SyncMap]:
    """The pathspecs of its `git format-patch ... -- PATHS` and its sed renames; None when it has none."""
    lines = text.splitlines()
    specs: list[tuple[str, int]] = []
    for i, line in enumerate(lines):
        if "git format-patch" not in line:
            continue
        j, after = i, False
        while j < len(lines):
            part = lines[j].rstrip()
            cont = part.endswith("\\")
            try:
                tokens = shlex.split(part.rstrip("\\"), comments=True)
            except ValueError:
                tokens = []
            for tok in tokens:
                if tok.startswith(">"):
                    after = False
                    cont = False
                    break
                if after:
                    specs.append((tok, j + 1))
                elif tok == "--":
                    after = True
            if not cont:
                break
            j += 1
        if specs:
            break
    if not specs:
        return None
    renames = []
    for n, line in enumerate(lines, 1):
        m = re.search(r"-e\s+'(s/.*/[a-z]*)'\s*\\?\s*$", line)
        rule = _sed(m.group(1)) if m else None
        if rule:
            renames.append((rule[0], rule[1], n))
    return SyncMap(path, tuple(specs), tuple(renames))


def _sed(expr: str) -> Optional[tuple[str, str]]:
    """'s/ERE/REPL/g' -> (python regex, python replacement)."""
    if not expr.startswith("s/"):
        return None
    parts, cur, i = [], "", 2
    while i < len(expr):
        c = expr[i]
        if c == "\\" and i + 1 < len(expr):
            cur += expr[i : i + 2]
            i += 2
            continue
        if c == "/":
            parts.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    if len(parts) != 2:
        return None
    pattern = parts[0].replace(r"\/", "/").replace("[[:space:]]", r"\s")
    repl = parts[1].replace(r"\/", "/").replace(r"\.", ".")
    return pattern, repl


@dataclass(frozen=True)
class SyncReport:
    carried: tuple[tuple[str, str], ...]  # (canonical path, path in the target)
    not_carried: tuple[str, ...]  # canonical paths the sync leaves out
    target_only: tuple[str, ...]  # files the target's series changes that the sync would not produce
    mismatched: tuple[tuple[str, str], ...]  # carried, but to a path the target's series does not change


def compare(sync: SyncMap, canonical_paths: list[str], target_paths: list[str]) -> SyncReport:
    carried, missing, mismatched = [], [], []
    for p in canonical_paths:
        to = sync.carries(p)
        if to is None:
            missing.append(p)
        else:
            carried.append((p, to))
            if to not in target_paths:
                mismatched.append((p, to))
    produced = {to for _, to in carried}
    return SyncReport(
        tuple(carried), tuple(missing), tuple(p for p in target_paths if p not in produced), tuple(mismatched)
    )
