"""The results model: what a run records, and results.json, its one serialised form.

The words (cell status, test outcome, verdicts, attribution label, row status) are enums whose
values are exactly the strings results.json holds. A results file is untrusted input (records.py).
`schema_version` changes only when a key changes meaning or goes away; keys added are additions.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
from pathlib import Path
from typing import Annotated, Any, Iterable, Literal, Optional, TypeVar, Union

from pydantic import (
    ConfigDict,
    Field,
    PlainValidator,
    WithJsonSchema,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .. import publish, untrusted
from ..errors import ConfigError, ExitCode
from ..records import Record, parse
from .values import (
    CellId,
    Commit,
    Count,
    ExitStatus,
    HttpsUrl,
    IsoDate,
    Name,
    ProcessStatus,
    Seconds,
    Sha256,
    Text,
    TextLine,
)

# 3: every topic's control is "control:<topic>" (2 named the first topic's "control" and the
# others "control-<topic>"); an older file is refused, not read half right
SCHEMA_VERSION = 3


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
    PASSED = "passed"
    FAILED = "failed"  # a non-zero exit: the test's own check
    CRASHED = "crashed"  # a signal
    TIMEOUT = "timeout"
    NOT_BUILT = "not-built"
    # not run on this backend (its module's skip_tests): the record's `skipped` says why
    SKIPPED = "skipped"


class Verdict(Word):
    """The negative control's (and each mutant's) verdict."""

    KILLED = "killed"  # the gate failed by its own check
    SURVIVED = "survived"  # the gate passed: it does not catch this
    INVALID = "invalid"  # did not apply, did not build, crashed, timed out


class CompetingVerdict(Word):
    """A competing fix's verdict (a fix proposed elsewhere, applied to the unfixed tree)."""

    EQUIVALENT = "equivalent"  # passes everything the fix passes
    WRONG = "wrong"  # a test the fix passes fails
    INVALID = "invalid"  # does not apply or build


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


MUTANT_PREFIX = "mutant:"  # a mutant's variant: "mutant:<file name without .patch>"
CONTROL_PREFIX = "control:"  # a topic's control: "control:<topic>", for every topic
COMPETING_PREFIX = "competing:"  # a competing fix's variant: "competing:<file name without .patch>"


class DeviceRow(Record):
    """One device x case row of a test's output (test-opt: x optimizer; the gate: x case)."""

    device: TextLine
    case: Optional[TextLine] = (
        None  # the gate: "opt_period=1", "case=schedule-TTETT opt_period=2 ..."
    )
    optimizer: Optional[TextLine] = None  # test-opt
    opt_period: Optional[Count] = None  # the gate, when the case has one
    status: RowStatus
    line: Optional[TextLine] = None  # a FAIL row: the test's own line
    step: Optional[Count] = None  # a FAIL row at a step: the first wrong step, w and the expected w
    actual: Optional[float] = None
    expected: Optional[float] = None

    @property
    def key(self) -> str:
        """What the row is about on its device: the optimizer, or the gate's case."""
        period = f"opt_period={self.opt_period}" if self.opt_period is not None else ""
        return next((k for k in (self.optimizer, self.case) if k is not None), period)


class TestRecord(Record):
    """One test binary's run in one variant."""

    __test__ = False  # not a pytest class

    outcome: Outcome
    exit_code: Optional[ProcessStatus] = None  # None: killed for the timeout
    signal: Optional[TextLine] = None
    duration_s: Seconds = 0.0
    log: str = ""
    output: Optional[str] = None  # the test's output while the cell runs; never stored
    rows: list[DeviceRow] = Field(default_factory=list)
    # its first failing case line (the gate: None when it printed none)
    failure_line: Optional[TextLine] = None
    stopped_on: Optional[TextLine] = (
        None  # not passed: the device it was on when it stopped, if known
    )
    summary_line: Optional[TextLine] = None
    skipped: Optional[TextLine] = None  # outcome skipped: why this backend does not run it
    # a native test of the project's (a topic's gate): written as `"gate": true`, absent else;
    # results.json holds its failure_line even when it printed none
    gate: Optional[bool] = None

    @field_validator("gate", mode="after")
    @classmethod
    def _only_true(cls, v: Optional[bool]) -> Optional[bool]:
        return True if v else None

    def kept_nulls(self) -> frozenset[str]:
        keep = {"exit_code", "signal", "summary_line"}
        if self.gate:
            keep.add("failure_line")
        if self.outcome not in (Outcome.PASSED, Outcome.SKIPPED):
            keep.add("stopped_on")
        return frozenset(keep)

    @classmethod
    def not_run(cls, reason: str, gate: bool = False) -> TestRecord:
        """A test this backend does not run, with the reason (never counted as passed or failed)."""
        return cls(outcome=Outcome.SKIPPED, gate=gate, skipped=reason)


class Build(Record):
    ok: bool
    duration_s: Seconds = 0.0
    log: str = ""
    error: Text = ""


class EpochLoss(Record):
    """One epoch of the training program: its train and eval loss (nan/inf kept)."""

    epoch: Count
    train_loss: float
    eval_loss: float


class TrainingRun(Record):
    """The training program's run in one variant: loss per epoch."""

    program: str
    outcome: Outcome
    duration_s: Seconds = 0.0
    log: str = ""
    epochs: list[EpochLoss] = Field(default_factory=list)


class TrainingComparison(Record):
    """A cell's training evidence: loss per epoch with and without the fix."""

    NULLS = frozenset({"diverges_as_predicted"})

    patched: list[EpochLoss]
    control: list[EpochLoss]
    diverges_as_predicted: Optional[bool] = None  # None: too few epochs to tell


class MutantInfo(Record):
    """A mutant's header, and why it was not run when it was not."""

    name: TextLine
    title: TextLine
    why_wrong: TextLine
    skipped: Optional[TextLine] = None


class CompetingInfo(Record):
    """A competing fix's header: where it comes from, and why it was not run when it was not."""

    name: TextLine
    title: TextLine
    url: HttpsUrl
    date: IsoDate
    summary: Text
    provenance: Text = ""
    skipped: Optional[TextLine] = None


class CompetingJudged(Record):
    """A competing fix's verdict against what the fix passes, and the first failing case line."""

    verdict: CompetingVerdict
    reason: TextLine
    failing_test: Optional[TextLine] = None
    failure_line: Optional[TextLine] = None


class MutantTally(Record):
    """The known-wrong fixes of one cell: how many, killed, and the names of the others."""

    NULLS = frozenset({"skipped"})

    total: Count
    killed: Count
    survived: list[str] = Field(default_factory=list)
    invalid: list[str] = Field(default_factory=list)
    skipped: Optional[TextLine] = None  # why none ran
    # per test, how many mutants it kills on its own (test-opt's new cases: what upstream keeps)
    killed_by: Optional[dict[str, Count]] = None


class _OfCell(Record):
    cell: CellId  # "target/backend"
    target: Name
    backend: Name

    @model_validator(mode="before")
    @classmethod
    def _names_from_cell(cls, data: Any) -> Any:
        """target and backend from "target/backend" when a record leaves them out (older files)."""
        if not isinstance(data, dict) or not isinstance(data.get("cell"), str):
            return data
        target, _, backend = data["cell"].rpartition("/")
        return {"target": target, "backend": backend, **data}


def control_name(topic: str) -> str:
    """The variant name of `topic`'s control."""
    return CONTROL_PREFIX + topic


class VariantRecord(_OfCell):
    """One variant of one cell: the patched tree, a topic's control (its source hunks reverted,
    every test kept), a known-wrong or a competing fix."""

    # "patched", CONTROL_PREFIX + topic, MUTANT_PREFIX + name or COMPETING_PREFIX + name
    variant: str
    status: RecordStatus = RecordStatus.PENDING
    build: Optional[Build] = None  # results.json: {} when not built
    tests: dict[str, TestRecord] = Field(default_factory=dict)
    training: Optional[TrainingRun] = None
    reverted: Optional[list[str]] = None  # the control: the files reverted
    topic: Optional[str] = None  # a control's or a mutant's topic in the queue
    mutant: Optional[MutantInfo] = None
    verdict: Optional[Verdict] = None  # the control's (or a mutant's) verdict (its status too)
    verdict_reason: TextLine = ""
    failure_line: Optional[str] = None  # the gate's own failure line
    # a mutant: each test's verdict on it, run separately
    kills: Optional[dict[str, Verdict]] = None
    competing: Optional[CompetingInfo] = None
    judged: Optional[CompetingJudged] = None  # a competing fix's verdict

    @model_validator(mode="before")
    @classmethod
    def _no_build(cls, data: Any) -> Any:
        return (
            {**data, "build": None} if isinstance(data, dict) and data.get("build") == {} else data
        )

    @model_serializer(mode="wrap")
    def _without_none(self, handler: Any) -> dict[str, Any]:
        d = handler(self)
        d["build"] = d["build"] or {}
        if self.verdict is None:
            del d["failure_line"]
            if not self.verdict_reason:  # a control not judged here keeps why (no verdict)
                del d["verdict_reason"]
        return {
            k: v
            for k, v in d.items()
            if v is not None or (k == "failure_line" and self.verdict is not None)
        }

    def test(self, name: str) -> Optional[TestRecord]:
        return self.tests.get(name)

    def outcome(self, name: str) -> Optional[Outcome]:
        t = self.tests.get(name)
        return t.outcome if t else None


class AttributionEntry(Record):
    """One test failing with the fix on one device, against the same test without it."""

    NULLS = frozenset({"device"})

    test: str
    device: Optional[str] = None  # None: the failure cannot be pinned to one device
    patched: TextLine = ""
    control: TextLine = ""
    label: AttributionLabel
    reason: TextLine = ""


class Submodule(Record):
    url: TextLine
    commit: TextLine


class Provenance(Record):
    """Where a cell's base came from: what the source recorded,
    and the base commit the series applied to."""

    kind: TextLine
    description: TextLine = ""
    sdist_sha256: Optional[Sha256] = None  # pypi-sdist
    url: Optional[TextLine] = None  # git (any git URL, checked where used), tarball
    sha256: Optional[Sha256] = None  # tarball
    ref: Optional[TextLine] = None  # git: the ref asked for, and what it resolved to
    resolved_ref: Optional[TextLine] = None
    # local: the checkout, its HEAD, whether it had uncommitted changes
    path: Optional[TextLine] = None
    head: Optional[TextLine] = None
    uncommitted_changes: Optional[bool] = None
    upstream_commit: Optional[Commit] = None
    submodules: Optional[dict[str, Submodule]] = None  # git: path -> the submodule's URL and commit
    base_commit: Optional[Commit] = None


# a device key: a field name of a backend module's own record (backends/device.py)
_DEVICE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_DEVICE_SHAPES = "a string, a list of strings, an object of strings (or nulls), or null"


def _device_value(value: Any) -> Any:
    """What a backend may record under a key: a string, a list of strings, an object of strings
    or nulls (a nested record, e.g. Vulkan's setup), or null; no other object."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    if isinstance(value, dict) and all(
        isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in value.items()
    ):
        return dict(value)
    raise PydanticCustomError("device_value", "expected " + _DEVICE_SHAPES)


_STRING = {"type": "string"}
DeviceValue = Annotated[
    Union[str, list[str], dict[str, Optional[str]], None],
    PlainValidator(_device_value),
    WithJsonSchema(
        {
            "anyOf": [
                _STRING,
                {"type": "array", "items": _STRING},
                {"type": "object", "additionalProperties": {"anyOf": [_STRING, {"type": "null"}]}},
                {"type": "null"},
            ]
        }
    ),
]
R = TypeVar("R", bound=Record)


class DeviceInfo(Record):
    """What a backend module recorded about the device (driver, ICD, ...): each key its own
    record (a backends/device.py DeviceRecord, declared in its module) set, null or not. The
    model knows no backend's keys, only the shapes a value may take (DeviceValue)."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, DeviceValue] = Field(init=False)

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: Any) -> Any:
        for key in data if isinstance(data, dict) else ():
            if not (isinstance(key, str) and _DEVICE_KEY.fullmatch(key)):
                raise PydanticCustomError(
                    "device_key",
                    "key {key} is not a device key (a name: letters, digits, '_')",
                    {"key": publish.one_line(repr(key), 80)},
                )
        return data

    @classmethod
    def of(cls, record: Record, where: str) -> DeviceInfo:
        """A backend module's own record as results.json holds it (validated: `where` names it)."""
        return parse(cls, record.to_json(), where, "a device record", ours=True)

    def as_record(self, kind: type[R], where: str = "device") -> R:
        """The recorded keys read back as a backend's own record `kind` (validated)."""
        return parse(kind, self.to_json(), where, f"a {kind.__name__} record")

    def recorded(self) -> dict[str, Any]:
        """Each recorded key and its value, in the order the backend's record wrote them."""
        return dict(self.model_extra or {})

    def strings(self, key: str) -> list[str]:
        """A recorded list of strings (a string: that one), or [] when the key holds none."""
        value = self.recorded().get(key)
        return [value] if isinstance(value, str) else value if isinstance(value, list) else []

    def kept_nulls(self) -> frozenset[str]:
        return frozenset(self.recorded())


class CachedFrom(Record):
    """A result reused from the result cache: its key and the timings of the run that made it."""

    key: str
    timings_of_the_run: dict[str, float] = Field(default_factory=dict)


class Cell(_OfCell):
    """One target x backend cell: what happened, and why."""

    layout: str = ""
    status: CellStatus = CellStatus.ERROR
    reason: TextLine = ""
    exit_code: ExitStatus = int(ExitCode.TOOL_ERROR)
    timings: dict[str, float] = Field(default_factory=dict)
    device: Optional[DeviceInfo] = None
    source: Optional[Provenance] = None
    cache_key: Optional[str] = None
    cached: Optional[CachedFrom] = None
    patched_commit: Optional[Commit] = None
    attribution: Optional[list[AttributionEntry]] = None
    training: Optional[TrainingComparison] = None
    failure_kind: Optional[AttributionLabel] = None
    mutants: Optional[MutantTally] = None
    # the queue's topics the cell applied, in order: the run's, less those retired on its target
    # (topic.yaml `retired:`); each has its control in the cell, no other topic has one
    topics: Optional[list[str]] = None


class SeriesPatch(Record):
    name: str
    subject: str
    author: str


class SeriesInfo(Record):
    """The series a run applied: its layout, sha256 and patches."""

    layout: str
    sha256: str
    patches: list[SeriesPatch]
    topics: Optional[list[str]] = None  # the queue's topics the run applied, in order
    # each topic's declared tests (topic.yaml `tests:`), in queue order
    topic_tests: Optional[dict[str, list[str]]] = None

    @field_validator("topic_tests", mode="before")
    @classmethod
    def _pairs(cls, v: Any) -> Any:
        """The series' (topic, tests) pairs as a mapping of names."""
        if isinstance(v, (tuple, list)):
            return {topic: [str(t) for t in tests] for topic, tests in v}
        return v

    def tests(self) -> list[str]:
        """Every declared test, each once, in queue order."""
        return list(dict.fromkeys(t for ts in (self.topic_tests or {}).values() for t in ts))


class Parallel(Record):
    """How a run was spread: cells at once and jobs per build (the first verdicts' phase; `later_`:
    the known-wrong and competing fixes' phase), the cores the cells shared, or the CI legs
    merged."""

    cells_at_once: Optional[int] = Field(default=None, ge=1)
    jobs_per_build: Optional[int] = Field(default=None, ge=1)
    later_cells_at_once: Optional[int] = Field(default=None, ge=1)
    later_jobs_per_build: Optional[int] = Field(default=None, ge=1)
    # the default schedule: every cell drew from these cores (a jobserver), none of the above
    shared_cores: Optional[int] = Field(default=None, ge=1)
    legs: Optional[int] = Field(default=None, ge=1)


class Results(Record):
    """One run (or several CI legs merged): its cells and their variant records."""

    NULLS = frozenset({"matrix"})

    schema_version: Literal[3] = 3  # SCHEMA_VERSION
    tool: str = "ggml-patch"
    matrix: Optional[str] = None
    profile: str = ""
    series: SeriesInfo
    started_at: IsoDate = ""
    duration_s: Seconds = 0.0
    # this process only: not git, cmake, compilers, tests
    orchestrator_cpu_s: Optional[float] = None
    parallel: Optional[Parallel] = None
    exit_code: ExitStatus = 0
    cells: list[Cell] = Field(default_factory=list)
    records: list[VariantRecord] = Field(default_factory=list)

    def records_of(self, cell_id: str) -> dict[str, VariantRecord]:
        return {r.variant: r for r in self.records if r.cell == cell_id}

    def mutants_of(
        self, cell_id: str
    ) -> list[VariantRecord]:  # in the order they ran, as competing_of's
        return [
            r for r in self.records if r.cell == cell_id and r.variant.startswith(MUTANT_PREFIX)
        ]

    def controls_of(self, cell_id: str) -> list[VariantRecord]:
        """The cell's controls (one per topic), in queue order."""
        return [
            r for r in self.records if r.cell == cell_id and r.variant.startswith(CONTROL_PREFIX)
        ]

    def judged_nowhere(self) -> list[str]:
        """The run's topics whose control was killed in no cell that carried them (proven
        nowhere), in order; a topic no cell carried (retired on every target run) is not one."""
        killed = {
            r.topic
            for r in self.records
            if r.variant.startswith(CONTROL_PREFIX) and r.verdict == Verdict.KILLED
        }
        carried = {t for c in self.cells for t in (c.topics or [])}
        recorded = all(c.topics is not None for c in self.cells)
        return [
            t
            for t in self.series.topics or []
            if t not in killed and (t in carried or not recorded)
        ]

    def control_of(self, cell_id: str, topic: Optional[str] = None) -> Optional[VariantRecord]:
        """`topic`'s control in the cell (None: the first topic's), if it has one."""
        controls = self.controls_of(cell_id)
        if topic is None:
            return controls[0] if controls else None
        return next((r for r in controls if r.topic == topic), None)

    def competing_of(self, cell_id: str) -> list[VariantRecord]:
        return [
            r for r in self.records if r.cell == cell_id and r.variant.startswith(COMPETING_PREFIX)
        ]

    def cells_of(self, target: str) -> list[Cell]:
        return [c for c in self.cells if c.target == target]

    def targets(self) -> list[str]:
        """Targets in the order the run met them."""
        return list(dict.fromkeys(c.target for c in self.cells))


def overall_exit_code(cells: Iterable[Cell]) -> ExitCode:
    """The run's exit code: the lowest non-zero cell exit code (0 when every cell is fine)."""
    codes = [c.exit_code for c in cells if c.exit_code]
    if not codes:
        return ExitCode.OK
    low = min(codes)
    # a code the tool does not document (a results file from elsewhere) counts as its own failure
    return ExitCode(low) if low in ExitCode._value2member_map_ else ExitCode.TOOL_ERROR


RESULTS = "a ggml-patch results.json"


def results_of(data: Any, where: str = "results", ours: bool = False) -> Results:
    """Results from data or text; `ours`: this run's own, about to be written (records.parse)."""
    return parse(Results, data, where, RESULTS, ours=ours)


def load_results(path: Path) -> tuple[Results, str]:
    """A results.json file, validated, and the sha256 of its bytes (what a bundle names)."""
    if not path.exists():
        raise ConfigError(f"{path}: no such results file")
    data = untrusted.read_bytes(path, "results")
    parsed = untrusted.parse_json(untrusted.decode(data, path, "results"), path, "results")
    # no version at all is no ggml-patch file: the model names its first bad key instead
    if isinstance(parsed, dict) and "schema_version" in parsed:
        _current_schema(parsed["schema_version"], path)
    return results_of(parsed, str(path)), hashlib.sha256(data).hexdigest()


def _current_schema(version: Any, path: Path) -> None:
    """One line for a results file of another schema (a CI leg's from an older ggml-patch,
    merge-results' input): its keys mean other things, so the run is made again."""
    if version != SCHEMA_VERSION:
        found = publish.one_line(repr(version), 40)
        raise ConfigError(
            f"{path}: schema_version {found}, expected {SCHEMA_VERSION} "
            "(another ggml-patch version wrote it); re-run `ggml-patch matrix`"
        )


def results_json(results: Results) -> str:
    return json.dumps(results.to_json(), indent=2, sort_keys=False) + "\n"


def dump_results(results: Results, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    # replaced, never written through a symlink someone left there
    return untrusted.write_replacing(path, results_json(results))
