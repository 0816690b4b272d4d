"""The upstream tests that judge a change, inferred from the test files its diff touches
(topic.yaml's `tests:`): tests/test-NAME.cpp (or .c) -> `test-NAME`; tests/test-backend-ops.cpp ->
`test-backend-ops -o OP[,OP]` for the ops whose cases the diff adds or changes, as `-o` matches
them (upstream's `matches_filter`: each case's `op_desc()`, ggml_op_desc() unless the case
overrides it). A change whose tests cannot be told is refused with the `tests:` line to write.

Pure: a diff in, test lines out. The op names are upstream's (ggml 0.15.3's test-backend-ops.cpp):
a case struct test_xxx tests the op XXX unless listed below.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Sequence

import unidiff

from ..errors import ConfigError
from ..model.testspec import BACKEND_OPS, TestSpec

_SOURCE = re.compile(r"^(test-[a-z0-9][a-z0-9_-]*)\.(?:c|cc|cpp)$")
_OP_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")

# case structs whose op_desc() is not their name upper-cased: an override returning a fixed
# name, or build_graph's result is another op (ggml_interpolate makes UPSCALE, ...)
FIXED_OPS: dict[str, tuple[str, ...]] = {
    "test_example": ("ADD",),
    "test_rope": ("ROPE", "ROPE_BACK"),  # forward=false builds ggml_rope_ext_back
    "test_gla": ("GATED_LINEAR_ATTN",),
    "test_pool1d": ("POOL_1D",),
    "test_pool2d": ("POOL_2D",),
    "test_interpolate": ("UPSCALE",),
    "test_pad_ext": ("PAD",),
    "test_llama": ("LLAMA",),
    "test_falcon": ("FALCON",),
}
# case structs whose op is an argument: the enumerators (or functions) the added lines name
_ENUM_OPS: dict[str, re.Pattern[str]] = {
    "test_unary": re.compile(r"\bGGML_UNARY_OP_([A-Z0-9_]+)\b"),
    "test_glu": re.compile(r"\bGGML_GLU_OP_([A-Z0-9_]+)\b"),
    "test_glu_split": re.compile(r"\bGGML_GLU_OP_([A-Z0-9_]+)\b"),
    "test_generic_op": re.compile(r"\bGGML_OP_([A-Z0-9_]+)\b"),
    "test_bin_bcast": re.compile(r"\bggml_(add|sub|mul|div)(?:_inplace)?\b"),
}
_NEW_CASE = re.compile(r"\bnew\s+(test_[a-z0-9_]+)\s*[({]|make_unique<\s*(test_[a-z0-9_]+)\s*>")
_STRUCT = re.compile(r"^\s*struct\s+(test_[a-z0-9_]+)\s*:\s*public\s+test_[a-z_]+")
_DESC_LITERAL = re.compile(r'return\s+"([A-Z][A-Z0-9_]*)"\s*;')


class NoTestsInferred(ConfigError):
    """A change whose tests cannot be told from its diff: `line` is what to write instead."""

    def __init__(self, message: str, line: str):
        super().__init__(f"{message}; name them: --test '{line}' (topic.yaml: tests: [{line}])")
        self.line = line


@dataclass(frozen=True)
class InferredTests:
    lines: tuple[str, ...]  # topic.yaml's `tests:`, each `PROGRAM [ARGS]`
    explanation: str  # one line: what was read from which file


def parse_test_line(where: str, line: str) -> tuple[str, tuple[str, ...]]:
    """A `tests:` line as (program, args): model/testspec.py's rule, the one the queue reads."""
    try:
        spec = TestSpec.parse(line)
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None
    return spec.program, spec.args


def _program(path: str) -> Optional[str]:
    """tests/test-NAME.cpp (any layout: the last tests/ folder) -> test-NAME; else None."""
    parts = path.split("/")
    if len(parts) < 2 or parts[-2] != "tests":
        return None
    m = _SOURCE.match(parts[-1])
    return m.group(1) if m else None


def _ops_of(struct: str, text: str, descs: dict[str, str]) -> tuple[str, ...]:
    """The -o names of a case struct, `text` the added lines that construct it."""
    if struct in descs:
        return (descs[struct],)
    if struct in FIXED_OPS:
        return FIXED_OPS[struct]
    pattern = _ENUM_OPS.get(struct)
    if pattern is None:
        return (struct[len("test_") :].upper(),)
    names = [m.upper() for m in pattern.findall(text) if m != "COUNT"]
    return tuple(dict.fromkeys(names))


@dataclass
class _OpsScan:
    cases: dict[str, str]  # struct -> the added text that names it (its ops' arguments)
    descs: dict[str, str]  # struct defined by the diff -> its op_desc() literal
    unresolved: list[str]  # where cases change but no struct is named
    perf_only: bool = False


def _changes_before_struct(hunk) -> bool:
    """Whether the hunk changes a line of the struct its section header names (before that
    struct's closing `};` and before any struct the hunk adds)."""
    for line in hunk:
        if line.is_added and _STRUCT.match(line.value):
            return False
        if line.is_added or line.is_removed:
            return True
        if line.value.startswith("};"):
            return False
    return False


def _scan_hunk(scan: _OpsScan, hunk, path: str) -> None:
    added = [line.value for line in hunk if line.is_added]
    section = hunk.section_header or ""
    for i, text in enumerate(added):
        m = _STRUCT.match(text)
        if m:  # a case struct the diff defines: its op_desc() literal, if it overrides it
            own = added[i + 1 :]
            end = next((j for j, t in enumerate(own) if _STRUCT.match(t)), len(own))
            d = next((d for t in own[:end] if (d := _DESC_LITERAL.search(t))), None)
            if d:
                scan.descs[m.group(1)] = d.group(1)
    if "make_test_cases_perf" in section:
        scan.perf_only = scan.perf_only or bool(added)
        return
    inside = _STRUCT.match(section)
    if inside and _changes_before_struct(hunk):  # the struct's own code changed: all its cases
        scan.cases.setdefault(inside.group(1), "")
    named = [a or b for text in added for a, b in _NEW_CASE.findall(text)]
    for s in named:
        scan.cases[s] = scan.cases.get(s, "") + "".join(added)
    if named or not added or inside or "make_test_cases_eval" not in section:
        return
    # cases changed without a constructor in the added lines (a value list of a loop): the
    # structs the hunk's context constructs
    context = [line.value for line in hunk]
    near = [a or b for text in context for a, b in _NEW_CASE.findall(text)]
    if not near:
        scan.unresolved.append(f"{path} line {hunk.target_start}")
    for s in near:
        scan.cases[s] = scan.cases.get(s, "") + "".join(context)


def _backend_ops_line(where: str, pf) -> tuple[str, str]:
    """test-backend-ops's line for its file's diff, and what it was read from."""
    scan = _OpsScan({}, {}, [])
    for hunk in pf:
        _scan_hunk(scan, hunk, pf.path)
    todo = f"{BACKEND_OPS} -o OP"
    if scan.unresolved:
        raise NoTestsInferred(
            f"{where}: {scan.unresolved[0]}: cases change but no case struct is named there "
            f"(OP as `{BACKEND_OPS} --list-ops` names it)",
            todo,
        )
    ops: dict[str, None] = {}
    for struct, text in scan.cases.items():
        names = _ops_of(struct, text, scan.descs)
        if not names:
            raise NoTestsInferred(
                f"{where}: {pf.path}: the added {struct} cases do not name their op "
                f"(OP as `{BACKEND_OPS} --list-ops` names it)",
                todo,
            )
        ops.update(dict.fromkeys(n for n in names if _OP_NAME.match(n)))
    if not ops:
        why = "adds only perf cases" if scan.perf_only else "adds no test case"
        raise NoTestsInferred(f"{where}: {pf.path} {why} (no op to judge)", todo)
    line = f"{BACKEND_OPS} -o {','.join(ops)}"
    return line, f"{pf.path}: cases of {', '.join(scan.cases)}"


def infer_tests(where: str, diff: str) -> InferredTests:
    """The `tests:` lines of a change from its git diff (the files under tests/ it touches)."""
    try:
        files = list(unidiff.PatchSet(diff))
    except unidiff.UnidiffParseError as e:
        raise ConfigError(f"{where}: not a unified diff: {e}") from None
    lines: dict[str, None] = {}
    read: list[str] = []
    other: list[str] = []
    for pf in files:
        path = pf.path
        program = None if pf.is_removed_file else _program(path)
        if program is None:
            if "tests" in path.split("/")[:-1]:
                other.append(path)
            continue
        if program == BACKEND_OPS:
            line, what = _backend_ops_line(where, pf)
        else:
            line, what = program, path
        if line not in lines:
            lines[line] = None
            read.append(what)
    if not lines:
        named = f" (it touches {', '.join(other)})" if other else ""
        raise NoTestsInferred(
            f"{where}: no upstream test program's source (tests/test-NAME.cpp) in the change"
            f"{named}; cannot tell which test judges it",
            "test-NAME",
        )
    for line in lines:
        parse_test_line(where, line)  # what is written reads back
    shown = ", ".join(f"`{line}`" for line in lines)
    return InferredTests(tuple(lines), f"tests: {shown} (from {'; '.join(read)})")


def given_tests(lines: Sequence[str]) -> InferredTests:
    """The --test lines as given (each checked: one line naming the bad one)."""
    for i, line in enumerate(lines):
        parse_test_line(f"--test[{i}]", line)
    shown = ", ".join(f"`{line}`" for line in lines)
    return InferredTests(tuple(lines), f"tests: {shown} (as --test gives them)")
