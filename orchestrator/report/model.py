"""The results model: what a run records, and results.json, its one serialised form.

Pure apart from `load_results`/`dump_results`. The words (cell status, test outcome, control and
mutant verdict, attribution label, row status) are enums whose values are exactly the strings
results.json holds; the records are dataclasses whose `to_dict()` writes today's keys in today's
order, and whose `from_dict()` reads them back, keeping keys it does not know (`extra`: what
newer work adds survives a merge by older code). A results file is untrusted input: a malformed
one is a one-line ConfigError naming the file and the key.

results.json's `schema_version` changes only when a key changes meaning or goes away; keys added
are additions.
"""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional, TypeVar, Union

import jsonschema

from ..errors import ConfigError, ExitCode

SCHEMA_VERSION = 1


class Word(str, enum.Enum):
    """A word results.json holds: compares equal to its string, prints as it."""

    def __str__(self) -> str:
        return str(self.value)


class CellStatus(Word):
    PASSED = "passed"  # every test passed with the fix, and the control was killed
    FAILED = "failed"  # a build or test failed with the fix, or the control was not killed
    BUILD_ONLY = "build-only"  # built with and without the fix, nothing run (--build-only)
    SKIPPED = "skipped"  # something is missing; never counted as passed
    ERROR = "error"  # the tool itself failed


class Outcome(Word):
    """One test run's outcome."""

    PASSED = "passed"
    FAILED = "failed"  # a non-zero exit: the test's own check
    CRASHED = "crashed"  # a signal
    TIMEOUT = "timeout"
    NOT_BUILT = "not-built"
    SKIPPED = "skipped"  # not run on this backend (its module's skip_tests): the record's `skipped` says why


class Verdict(Word):
    """The negative control's (and each mutant's) verdict."""

    KILLED = "killed"  # the gate failed by its own check
    SURVIVED = "survived"  # the gate passed: it does not catch this
    INVALID = "invalid"  # did not apply, did not build, crashed, timed out


class AttributionLabel(Word):
    PRE_EXISTING = "pre-existing"  # fails without the fix too
    REGRESSION = "regression"  # passes without the fix
    UNKNOWN = "unknown"  # the control cannot tell


class RowStatus(Word):
    OK = "OK"
    FAIL = "FAIL"
    SKIPPED = "SKIPPED"


class RecordStatus(Word):
    """A variant record's status: how far it got, or (the control) its verdict."""

    PENDING = ""
    BUILD_FAILED = "build-failed"
    BUILT = "built"  # --build-only: nothing run
    PASSED = "passed"
    FAILED = "failed"
    KILLED = "killed"
    SURVIVED = "survived"
    INVALID = "invalid"
    SKIPPED = "skipped"  # a mutant not run (--no-mutants, or nothing to judge it against)


class Variant(Word):
    PATCHED = "patched"
    CONTROL = "control"


MUTANT_PREFIX = "mutant:"  # a mutant's variant: "mutant:<file name without .patch>"


_W = TypeVar("_W", bound=Word)


def _word(kind: type[_W], value: Any) -> _W:
    return kind(value)


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _extra(d: dict, known: Iterable[str]) -> dict[str, Any]:
    known = set(known)
    return {k: v for k, v in d.items() if k not in known}


# ---------------------------------------------------------------- the records


@dataclass
class DeviceRow:
    """One device x case row of a test's output (test-opt: x optimizer; the gate: x case)."""

    device: str
    status: RowStatus
    optimizer: Optional[str] = None  # test-opt
    case: Optional[str] = None  # the gate: "opt_period=1", "case=schedule-TTETT opt_period=2 ..."
    opt_period: Optional[int] = None  # the gate, when the case has one
    line: Optional[str] = None  # a FAIL row: the test's own line
    step: Optional[int] = None  # a FAIL row at a step: the first wrong step, w and the expected w
    actual: Optional[float] = None
    expected: Optional[float] = None
    extra: dict[str, Any] = field(default_factory=dict)

    _KEYS = ("device", "case", "optimizer", "opt_period", "status", "line", "step", "actual", "expected")

    @property
    def key(self) -> str:
        """What the row is about on its device: the optimizer, or the gate's case."""
        if self.optimizer is not None:
            return self.optimizer
        if self.case is not None:
            return self.case
        return f"opt_period={self.opt_period}" if self.opt_period is not None else ""

    def to_dict(self) -> dict[str, Any]:
        d = _drop_none(
            {
                "device": self.device,
                "case": self.case,
                "optimizer": self.optimizer,
                "opt_period": self.opt_period,
                "status": self.status.value,
                "line": self.line,
                "step": self.step,
                "actual": self.actual,
                "expected": self.expected,
            }
        )
        return {**d, **self.extra}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DeviceRow:
        return cls(
            d["device"],
            _word(RowStatus, d["status"]),
            d.get("optimizer"),
            d.get("case"),
            d.get("opt_period"),
            d.get("line"),
            d.get("step"),
            d.get("actual"),
            d.get("expected"),
            _extra(d, cls._KEYS),
        )


@dataclass
class TestRecord:
    """One test binary's run in one variant."""

    __test__ = False  # not a pytest class

    outcome: Outcome
    exit_code: Optional[int] = None  # None: killed for the timeout
    signal: Optional[str] = None
    duration_s: float = 0.0
    log: str = ""
    rows: list[DeviceRow] = field(default_factory=list)
    summary_line: Optional[str] = None
    gate: bool = False  # the gate test: it has a failure line (None when it printed none)
    failure_line: Optional[str] = None
    stopped_on: Optional[str] = None  # not passed: the device it was on when it stopped, if known
    output: Optional[str] = None  # the test's output while the cell runs; never stored
    skipped: Optional[str] = None  # outcome skipped: why this backend does not run it
    extra: dict[str, Any] = field(default_factory=dict)

    _KEYS = (
        "outcome",
        "exit_code",
        "signal",
        "duration_s",
        "log",
        "output",
        "rows",
        "failure_line",
        "stopped_on",
        "summary_line",
        "skipped",
    )

    @classmethod
    def not_run(cls, reason: str, gate: bool = False) -> TestRecord:
        """A test this backend does not run, with the reason (never counted as passed or failed)."""
        return cls(Outcome.SKIPPED, gate=gate, skipped=reason)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "outcome": self.outcome.value,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "duration_s": self.duration_s,
            "log": self.log,
        }
        if self.output is not None:
            d["output"] = self.output
        d["rows"] = [r.to_dict() for r in self.rows]
        if self.gate:
            d["failure_line"] = self.failure_line
        if self.outcome not in (Outcome.PASSED, Outcome.SKIPPED) or self.stopped_on is not None:
            d["stopped_on"] = self.stopped_on
        d["summary_line"] = self.summary_line
        if self.skipped is not None:
            d["skipped"] = self.skipped
        return {**d, **self.extra}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TestRecord:
        return cls(
            _word(Outcome, d["outcome"]),
            d.get("exit_code"),
            d.get("signal"),
            d.get("duration_s", 0.0),
            d.get("log", ""),
            [DeviceRow.from_dict(r) for r in d.get("rows") or []],
            d.get("summary_line"),
            "failure_line" in d,
            d.get("failure_line"),
            d.get("stopped_on"),
            d.get("output"),
            d.get("skipped"),
            _extra(d, cls._KEYS),
        )


@dataclass
class Build:
    ok: bool
    duration_s: float = 0.0
    log: str = ""
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "duration_s": self.duration_s, "log": self.log, "error": self.error, **self.extra}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Build:
        return cls(
            bool(d.get("ok")),
            d.get("duration_s", 0.0),
            d.get("log", ""),
            d.get("error", ""),
            _extra(d, ("ok", "duration_s", "log", "error")),
        )


@dataclass
class VariantRecord:
    """One variant of one cell: the patched tree, or the control (the fix reverted, the test kept)."""

    cell: str
    target: str
    backend: str
    variant: str  # Variant.PATCHED or Variant.CONTROL (other work may add variants)
    status: RecordStatus = RecordStatus.PENDING
    build: Optional[Build] = None
    tests: dict[str, TestRecord] = field(default_factory=dict)
    training: Optional[dict[str, Any]] = None  # the training program's run: loss per epoch
    reverted: Optional[list[str]] = None  # the control: the files reverted
    verdict: Optional[Verdict] = None  # the control's verdict (its status too)
    verdict_reason: str = ""
    failure_line: Optional[str] = None  # the control: the gate's own failure line
    # a mutant: name, title, why_wrong (its header), and `skipped` (why it was not run) when it was not
    mutant: Optional[dict[str, Any]] = None
    extra: dict[str, Any] = field(default_factory=dict)

    _KEYS = (
        "cell",
        "target",
        "backend",
        "variant",
        "status",
        "build",
        "tests",
        "training",
        "reverted",
        "mutant",
        "verdict",
        "verdict_reason",
        "failure_line",
    )

    @property
    def is_mutant(self) -> bool:
        return str(self.variant).startswith(MUTANT_PREFIX)

    def test(self, name: str) -> Optional[TestRecord]:
        return self.tests.get(name)

    def outcome(self, name: str) -> Optional[Outcome]:
        t = self.tests.get(name)
        return t.outcome if t else None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "cell": self.cell,
            "target": self.target,
            "backend": self.backend,
            "variant": str(self.variant),
            "status": self.status.value,
            "build": self.build.to_dict() if self.build else {},
            "tests": {n: t.to_dict() for n, t in self.tests.items()},
        }
        if self.training is not None:
            d["training"] = self.training
        if self.reverted is not None:
            d["reverted"] = self.reverted
        if self.mutant is not None:
            d["mutant"] = self.mutant
        if self.verdict is not None:
            d.update(verdict=self.verdict.value, verdict_reason=self.verdict_reason, failure_line=self.failure_line)
        return {**d, **self.extra}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VariantRecord:
        target, _, backend = d["cell"].rpartition("/")
        return cls(
            d["cell"],
            d.get("target", target),
            d.get("backend", backend),
            d["variant"],
            _word(RecordStatus, d.get("status", "")),
            Build.from_dict(d["build"]) if d.get("build") else None,
            {n: TestRecord.from_dict(t) for n, t in (d.get("tests") or {}).items()},
            d.get("training"),
            d.get("reverted"),
            _word(Verdict, d["verdict"]) if d.get("verdict") else None,
            d.get("verdict_reason", ""),
            d.get("failure_line"),
            d.get("mutant"),
            _extra(d, cls._KEYS),
        )


@dataclass
class AttributionEntry:
    """One test failing with the fix on one device, against the same test without it."""

    test: str
    device: Optional[str]  # None: the failure cannot be pinned to one device
    with_fix: str
    without_fix: str
    label: AttributionLabel
    reason: str
    extra: dict[str, Any] = field(default_factory=dict)

    _KEYS = ("test", "device", "with_fix", "without_fix", "label", "reason")

    def to_dict(self) -> dict[str, Any]:
        return {
            "test": self.test,
            "device": self.device,
            "with_fix": self.with_fix,
            "without_fix": self.without_fix,
            "label": self.label.value,
            "reason": self.reason,
            **self.extra,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AttributionEntry:
        return cls(
            d["test"],
            d.get("device"),
            d.get("with_fix", ""),
            d.get("without_fix", ""),
            _word(AttributionLabel, d["label"]),
            d.get("reason", ""),
            _extra(d, cls._KEYS),
        )


@dataclass
class Cell:
    """One target x backend cell: what happened, and why."""

    cell: str  # "target/backend"
    target: str
    backend: str
    layout: str = ""
    status: CellStatus = CellStatus.ERROR
    reason: str = ""
    exit_code: int = int(ExitCode.TOOL_ERROR)
    timings: dict[str, float] = field(default_factory=dict)
    device: Optional[dict[str, Any]] = None  # what the backend module recorded (devices, drivers)
    source: Optional[dict[str, Any]] = None  # kind, description, provenance, base_commit
    cache_key: Optional[str] = None
    cached: Optional[dict[str, Any]] = None  # a result reused from the cache: its key and first timings
    patched_commit: Optional[str] = None
    attribution: Optional[list[AttributionEntry]] = None
    training: Optional[dict[str, Any]] = None  # loss per epoch with and without the fix
    failure_kind: Optional[AttributionLabel] = None
    # the known-wrong fixes: total, killed, survived and invalid (names), skipped (why none ran)
    mutants: Optional[dict[str, Any]] = None
    extra: dict[str, Any] = field(default_factory=dict)

    _KEYS = (
        "cell",
        "target",
        "backend",
        "layout",
        "status",
        "reason",
        "exit_code",
        "timings",
        "device",
        "source",
        "cache_key",
        "cached",
        "patched_commit",
        "attribution",
        "training",
        "failure_kind",
        "mutants",
    )

    def to_dict(self) -> dict[str, Any]:
        d = {
            "cell": self.cell,
            "target": self.target,
            "backend": self.backend,
            "layout": self.layout,
            "status": self.status.value,
            "reason": self.reason,
            "exit_code": self.exit_code,
            "timings": self.timings,
        }
        d.update(
            _drop_none(
                {
                    "device": self.device,
                    "source": self.source,
                    "cache_key": self.cache_key,
                    "cached": self.cached,
                    "patched_commit": self.patched_commit,
                    "attribution": None if self.attribution is None else [e.to_dict() for e in self.attribution],
                    "training": self.training,
                    "failure_kind": None if self.failure_kind is None else self.failure_kind.value,
                    "mutants": self.mutants,
                }
            )
        )
        return {**d, **self.extra}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Cell:
        target, _, backend = d["cell"].rpartition("/")
        attribution = d.get("attribution")
        return cls(
            d["cell"],
            d.get("target", target),
            d.get("backend", backend),
            d.get("layout", ""),
            _word(CellStatus, d["status"]),
            d.get("reason", ""),
            int(d.get("exit_code", 0)),
            dict(d.get("timings") or {}),
            d.get("device"),
            d.get("source"),
            d.get("cache_key"),
            d.get("cached"),
            d.get("patched_commit"),
            None if attribution is None else [AttributionEntry.from_dict(e) for e in attribution],
            d.get("training"),
            _word(AttributionLabel, d["failure_kind"]) if d.get("failure_kind") else None,
            d.get("mutants"),
            _extra(d, cls._KEYS),
        )


@dataclass
class Results:
    """One run (or several CI legs merged): its cells and their variant records."""

    series: dict[str, Any]  # layout, sha256, patches [{name, subject, author}]
    cells: list[Cell] = field(default_factory=list)
    records: list[VariantRecord] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION
    tool: str = "ggml-patch"
    matrix: Optional[str] = None
    profile: str = ""
    started_at: str = ""
    duration_s: float = 0.0
    orchestrator_cpu_s: Optional[float] = None  # this process only: not git, cmake, compilers, tests
    parallel: Optional[dict[str, Any]] = None
    exit_code: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    _KEYS = (
        "schema_version",
        "tool",
        "matrix",
        "profile",
        "series",
        "started_at",
        "duration_s",
        "orchestrator_cpu_s",
        "parallel",
        "exit_code",
        "cells",
        "records",
    )

    def records_of(self, cell_id: str) -> dict[str, VariantRecord]:
        """{variant: record} for one cell."""
        return {r.variant: r for r in self.records if r.cell == cell_id}

    def mutants_of(self, cell_id: str) -> list[VariantRecord]:
        """One cell's mutant records, in the order they ran."""
        return [r for r in self.records if r.cell == cell_id and r.is_mutant]

    def cells_of(self, target: str) -> list[Cell]:
        return [c for c in self.cells if c.target == target]

    def targets(self) -> list[str]:
        """Targets in the order the run met them."""
        return list(dict.fromkeys(c.target for c in self.cells))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "schema_version": self.schema_version,
            "tool": self.tool,
            "matrix": self.matrix,
            "profile": self.profile,
            "series": self.series,
            "started_at": self.started_at,
            "duration_s": self.duration_s,
        }
        if self.orchestrator_cpu_s is not None:
            d["orchestrator_cpu_s"] = self.orchestrator_cpu_s
        if self.parallel is not None:
            d["parallel"] = self.parallel
        d.update(
            exit_code=self.exit_code,
            cells=[c.to_dict() for c in self.cells],
            records=[r.to_dict() for r in self.records],
        )
        return {**d, **self.extra}

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "results") -> Results:
        """results.json's data, validated (a one-line ConfigError naming `where` and the key)."""
        validate(d, where)
        return cls(
            d["series"],
            [Cell.from_dict(c) for c in d["cells"]],
            [VariantRecord.from_dict(r) for r in d["records"]],
            d.get("schema_version", SCHEMA_VERSION),
            d.get("tool", "ggml-patch"),
            d.get("matrix"),
            d.get("profile", ""),
            d.get("started_at", ""),
            d.get("duration_s", 0.0),
            d.get("orchestrator_cpu_s"),
            d.get("parallel"),
            int(d.get("exit_code", 0)),
            _extra(d, cls._KEYS),
        )


def as_results(results: Union[Results, dict[str, Any]], where: str = "results") -> Results:
    """A Results, from itself or from results.json's data (validated)."""
    return results if isinstance(results, Results) else Results.from_dict(results, where)


def overall_exit_code(cells: Iterable[Cell]) -> ExitCode:
    """The run's exit code: the lowest non-zero cell exit code (0 when every cell is fine)."""
    codes = [c.exit_code for c in cells if c.exit_code]
    return ExitCode(min(codes)) if codes else ExitCode.OK


# ---------------------------------------------------------------- results.json: validation, files


def _enum(kind: type[Word]) -> dict[str, Any]:
    return {"enum": [w.value for w in kind]}


_NUMBER = {"type": "number"}
_STR = {"type": "string"}
_ROW = {
    "type": "object",
    "required": ["device", "status"],
    "properties": {
        "device": _STR,
        "status": _enum(RowStatus),
        "optimizer": _STR,
        "case": _STR,
        "opt_period": {"type": "integer"},
        "step": {"type": "integer"},
        "actual": _NUMBER,
        "expected": _NUMBER,
    },
}
_TEST = {
    "type": "object",
    "required": ["outcome"],
    "properties": {
        "outcome": _enum(Outcome),
        "exit_code": {"type": ["integer", "null"]},
        "duration_s": _NUMBER,
        "rows": {"type": "array", "items": _ROW},
    },
}
_RECORD = {
    "type": "object",
    "required": ["cell", "variant"],
    "properties": {
        "cell": _STR,
        "variant": _STR,
        "status": _enum(RecordStatus),
        "build": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
        "tests": {"type": "object", "additionalProperties": _TEST},
        "verdict": _enum(Verdict),
        "reverted": {"type": "array", "items": _STR},
    },
}
_ENTRY = {
    "type": "object",
    "required": ["test", "label"],
    "properties": {"test": _STR, "device": {"type": ["string", "null"]}, "label": _enum(AttributionLabel)},
}
# names become folders (a bundle's out/<target>) and commits reach git: never a path or an option
_NAME = {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z"}
_COMMIT = {"anyOf": [{"type": "string", "pattern": r"^[0-9a-f]{40}\Z"}, {"type": "null"}]}
_CELL = {
    "type": "object",
    "required": ["cell", "status"],
    "properties": {
        "cell": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*\Z"},
        "status": _enum(CellStatus),
        "target": _NAME,
        "backend": _NAME,
        "exit_code": {"type": "integer"},
        "patched_commit": _COMMIT,
        "source": {
            "anyOf": [
                {"type": "null"},
                {"type": "object", "properties": {"base_commit": _COMMIT, "upstream_commit": _COMMIT}},
            ]
        },
        "timings": {"type": "object", "additionalProperties": _NUMBER},
        "attribution": {"type": "array", "items": _ENTRY},
        "failure_kind": _enum(AttributionLabel),
    },
}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["series", "cells", "records"],
    "properties": {
        "schema_version": {"type": "integer"},
        "series": {
            "type": "object",
            "required": ["sha256", "layout", "patches"],
            "properties": {"sha256": _STR, "layout": _STR, "patches": {"type": "array"}},
        },
        "cells": {"type": "array", "items": _CELL},
        "records": {"type": "array", "items": _RECORD},
        "exit_code": {"type": "integer"},
        "duration_s": _NUMBER,
    },
}


def _where(path: Iterable[Any]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def validate(data: Any, where: str) -> None:
    """One line naming the file and the key when `data` is not results.json's shape."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a JSON object; not a ggml-patch results.json")
    err = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(SCHEMA).iter_errors(data))
    if err is None:
        return
    at = _where(err.absolute_path)
    if err.validator == "required":
        missing = next((k for k in err.validator_value if k not in err.instance), "?")
        what = f"key {missing!r} missing" if not at else f"{at}: key {missing!r} missing"
    elif err.validator == "enum":
        what = f"{at}: {err.instance!r} is not one of {', '.join(repr(v) for v in err.validator_value)}"
    elif err.validator == "type":
        what = f"{at or '(top level)'}: expected {err.validator_value}, got {type(err.instance).__name__}"
    else:
        what = f"{at or '(top level)'}: {err.message}"
    raise ConfigError(f"{where}: {what}; not a ggml-patch results.json")


def load_results(path: Path) -> tuple[Results, str]:
    """A results.json file, validated, and the sha256 of its bytes (what a bundle names)."""
    path = Path(path)
    from .. import untrusted

    if not path.exists():
        raise ConfigError(f"{path}: no such results file")
    data = untrusted.read_bytes(path, "results")
    parsed = untrusted.parse_json(untrusted.decode(data, path, "results"), path, "results")
    return Results.from_dict(parsed, str(path)), hashlib.sha256(data).hexdigest()


def results_json(results: Results) -> str:
    return json.dumps(results.to_dict(), indent=2, sort_keys=False) + "\n"


def dump_results(results: Results, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(results_json(results), encoding="utf-8")
    return path
