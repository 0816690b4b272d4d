"""The results model (model/results.py): results.json read and written with today's keys and
meanings, every record through JSON and its published schema, an unknown key or a malformed file
refused in one line."""

import hashlib
import json

import pytest

from orchestrator.errors import ConfigError
from orchestrator.model import results as M
from orchestrator.model.results import (
    AttributionLabel,
    CellStatus,
    Outcome,
    RecordStatus,
    RowStatus,
    Verdict,
    dump_results,
    load_results,
    results_of,
)

from ..helpers.samples import CPU_SAMPLE as CPU
from ..helpers.samples import VULKAN_SAMPLE as VULKAN
from ..helpers.samples import edited, key_paths


def test_the_words_are_results_json_strings():
    assert CellStatus.BUILD_ONLY == "build-only" and f"{CellStatus.BUILD_ONLY}" == "build-only"
    assert (
        json.dumps(
            [Outcome.NOT_BUILT, Verdict.KILLED, AttributionLabel.PRE_EXISTING, RowStatus.FAIL]
        )
        == '["not-built", "killed", "pre-existing", "FAIL"]'
    )
    assert RecordStatus("") is RecordStatus.PENDING


def test_a_results_json_of_today_is_written_back_byte_for_byte(tmp_path):
    results, sha = load_results(VULKAN)
    assert dump_results(results, tmp_path / "r.json").read_bytes() == VULKAN.read_bytes()
    assert sha == hashlib.sha256(VULKAN.read_bytes()).hexdigest()
    cell = results.cells[0]
    assert cell.status is CellStatus.FAILED and cell.failure_kind is AttributionLabel.PRE_EXISTING
    control = results.control_of(cell.cell)
    assert control.verdict is Verdict.KILLED and control.tests["test-opt"].stopped_on == "Vulkan0"


def test_the_older_sample_keeps_every_key_and_value():
    data = json.loads(CPU.read_text())
    again = results_of(data).to_json()
    assert key_paths(again) >= key_paths(data)

    # what the model adds to an older file: a failing test's stopped_on (null)
    def without_added(x):
        if isinstance(x, dict):
            return {
                k: without_added(v) for k, v in x.items() if not (k == "stopped_on" and v is None)
            }
        return [without_added(v) for v in x] if isinstance(x, list) else x

    assert without_added(again) == data


@pytest.mark.parametrize(
    "edit, phrase",
    [
        (lambda d: d.update(mutants_summary={"killed": 3}), "unknown key 'mutants_summary'"),
        (lambda d: d["cells"][0].update(readiness="ready"), "cells[0]: unknown key 'readiness'"),
        (
            lambda d: d["records"][1]["tests"]["test-opt"].update(sanitizer="asan"),
            "records[1].tests.test-opt: unknown key 'sanitizer'",
        ),
        (
            lambda d: d["records"][1]["tests"]["test-opt"]["rows"][0].update(note="n"),
            "records[1].tests.test-opt.rows[0]: unknown key 'note'",
        ),
        (
            lambda d: d["cells"][0]["source"].update(base_commit="--upload-pack=x"),
            "cells[0].source.base_commit: ",
        ),
        (lambda d: d["cells"][0].update(target="../x"), "cells[0].target: "),
        (lambda d: d["records"][0]["build"].update(duration_s=-1), "records[0].build.duration_s: "),
        (
            lambda d: d["records"][0]["build"].update(ok="yes"),
            "records[0].build.ok: expected boolean, got str",
        ),
    ],
)
def test_an_unknown_key_a_wrong_type_or_a_value_out_of_range_is_refused_in_one_line(edit, phrase):
    """results.json is untrusted input: nothing the model does not declare is read."""
    data = json.loads(CPU.read_text())
    edit(data)
    with pytest.raises(ConfigError) as e:
        results_of(data, "r.json")
    msg = str(e.value)
    assert msg.startswith("r.json: ") and phrase in msg and "\n" not in msg, msg


def _records():
    """One of every record, filled (the samples leave the optional ones out)."""
    epochs = [M.EpochLoss(epoch=1, train_loss=2.5, eval_loss=float("nan"))]
    return [
        M.DeviceRow(
            device="CPU",
            case="opt_period=1",
            opt_period=1,
            status=RowStatus.FAIL,
            line="l",
            step=2,
            actual=0.25,
            expected=0.5,
        ),
        M.TestRecord(
            outcome=Outcome.CRASHED,
            signal="SIGABRT",
            duration_s=1.5,
            stopped_on="Vulkan0",
            gate=True,
        ),
        M.Build(ok=True, duration_s=1.0, log="b.log"),
        M.TrainingRun(program="train-opt-dynamic", outcome=Outcome.PASSED, epochs=epochs),
        M.TrainingComparison(patched=epochs, control=epochs),
        M.MutantInfo(name="01-x", title="t", why_wrong="w", skipped="--no-mutants"),
        M.MutantTally(total=2, killed=1, survived=["02-y"]),
        M.AttributionEntry(test="test-opt", label=AttributionLabel.UNKNOWN),
        M.Provenance(
            kind="git",
            description="d",
            url="https://h/x",
            submodules={"a": M.Submodule(url="u", commit="c")},
            base_commit="a" * 40,
        ),
        M.DeviceInfo(icd=None, devices=["llvmpipe"], setup={"mesa": "25", "glslc": None}),
        M.CachedFrom(key="k", timings_of_the_run={"fetch": 1.0}),
        M.Parallel(cells_at_once=2, jobs_per_build=1),
        M.SeriesInfo(
            layout="ggml",
            sha256="0" * 64,
            patches=[M.SeriesPatch(name="n", subject="s", author="a")],
        ),
    ]


@pytest.mark.parametrize("record", _records(), ids=lambda r: type(r).__name__)
def test_every_record_goes_through_json_and_its_schema(record):
    jsonschema = pytest.importorskip("jsonschema")
    text = json.dumps(record.to_json())
    again = type(record).model_validate_json(text, strict=True)
    assert json.dumps(again.to_json()) == text
    jsonschema.validate(json.loads(text), type(record).model_json_schema())


def test_the_samples_validate_against_the_published_schema():
    jsonschema = pytest.importorskip("jsonschema")
    for path in (CPU, VULKAN):
        jsonschema.validate(json.loads(path.read_text()), M.Results.model_json_schema())


@pytest.mark.parametrize(
    "data, phrase",
    [
        ([], "expected a JSON object"),
        (edited(lambda d: d.pop("series")), "key 'series' missing"),
        (edited(lambda d: d["series"].pop("sha256")), "series: key 'sha256' missing"),
        (
            edited(lambda d: d["cells"][1].update(status="great")),
            "cells[1].status: 'great' is not one of 'passed'",
        ),
        (edited(lambda d: d["cells"].append("x")), "cells[2]: expected object, got str"),
        (edited(lambda d: d["records"][0].pop("variant")), "records[0]: key 'variant' missing"),
        (
            edited(lambda d: d["records"][0]["tests"]["test-opt"].update(outcome=None)),
            "records[0].tests.test-opt.outcome: None is not one of",
        ),
        (
            edited(
                lambda d: d["records"][1]["tests"]["test-opt-dynamic-accum"]["rows"][0].update(
                    step="2"
                )
            ),
            "records[1].tests.test-opt-dynamic-accum.rows[0].step: expected integer, got str",
        ),
        (
            edited(lambda d: d["records"][1].update(verdict="maybe")),
            "records[1].verdict: 'maybe' is not one of",
        ),
    ],
)
def test_a_malformed_results_file_is_one_line_naming_the_key(tmp_path, data, phrase):
    f = tmp_path / "results.json"
    f.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as e:
        load_results(f)
    msg = str(e.value)
    assert msg.startswith(f"{f}: ") and phrase in msg and "\n" not in msg, msg


def _as_written_by_schema_1(data: dict) -> dict:
    """A results.json as ggml-patch wrote it before schema 2: the builds' keys were with_fix and
    without_fix in the training comparison and the attribution entries."""
    data["schema_version"] = 1
    for cell in data["cells"]:
        for entry in cell.get("attribution") or []:
            entry["with_fix"] = entry.pop("patched")
            entry["without_fix"] = entry.pop("control")
    return data


@pytest.mark.parametrize(
    "data, phrase",
    [
        (_as_written_by_schema_1(json.loads(VULKAN.read_text())), "schema_version 1, expected 3"),
        (edited(lambda d: d.update(schema_version="3\x1b[2J" * 30)), "schema_version '3\\x1b"),
    ],
    ids=["schema-1", "odd-version"],
)
def test_a_results_file_of_another_schema_is_refused_in_one_line_saying_re_run(
    tmp_path, data, phrase
):
    f = tmp_path / "results.json"
    f.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as e:
        load_results(f)
    msg = str(e.value)
    assert msg.startswith(f"{f}: ") and phrase in msg and "\n" not in msg, msg
    assert msg.endswith("re-run `ggml-patch matrix`"), msg
    assert "\x1b" not in msg and len(msg) < len(str(f)) + 150, msg


def test_schema_2_names_the_builds_patched_and_control():
    data = json.loads(VULKAN.read_text())
    entry = data["cells"][0]["attribution"][0]
    assert (entry["patched"], entry["control"]) == (
        "crashed (SIGABRT) while testing it",
        "crashed (SIGABRT) while testing it",
    )
    # the old key under today's version is an unknown key, never read as the new one
    entry["with_fix"] = entry.pop("patched")
    with pytest.raises(ConfigError, match=r"attribution\[0\]: unknown key 'with_fix'"):
        results_of(data, "r.json")


@pytest.mark.parametrize(
    "text, phrase",
    [
        ("{\n  nope", "results.json:2: not valid JSON"),
        (b"\xff\xfe", "not UTF-8 text"),
    ],
)
def test_unreadable_results_are_one_line(tmp_path, text, phrase):
    f = tmp_path / "results.json"
    f.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError, match=phrase):
        load_results(f)
    with pytest.raises(ConfigError, match="no such results file"):
        load_results(tmp_path / "absent.json")


def test_status_json_and_known_limits_go_through_json_and_their_schemas():
    """`status --json` and patches/known-limits.yaml are
    records too: declared once, schema from them."""
    jsonschema = pytest.importorskip("jsonschema")
    from orchestrator.drift.status import Conflict, PatchResult, StatusReport, TargetStatus
    from orchestrator.verdicts.known_limits import KnownLimit, KnownLimits

    report = StatusReport(
        profile="live",
        targets=[
            TargetStatus(
                target="t",
                layout="ggml",
                source=M.Provenance(kind="git", description="u main"),
                status="conflict",
                base="c" * 40,
                patches=[PatchResult(name="0001-a.patch", result="conflict", detail="d")],
                conflict=Conflict(patch="0001-a.patch", file="f", hunk="@@", lines=((1, 5),)),
            )
        ],
    )
    limits = KnownLimits(
        limits=[
            KnownLimit(
                id="a-b",
                file="src/x.c",
                function="f",
                what="w",
                status="not changed by this series",
                confirmed="c",
            )
        ]
    )
    for doc in (report, limits):
        text = json.dumps(doc.to_json())
        assert json.dumps(type(doc).model_validate_json(text, strict=True).to_json()) == text
        jsonschema.validate(json.loads(text), type(doc).model_json_schema())
    assert report.to_json()["targets"][0]["conflict"]["lines"] == [[1, 5]]


def test_a_utc_timestamp_with_z_reads_on_every_admitted_python():
    """The tool writes `...Z`; Python 3.10's fromisoformat takes only `+00:00` (3.11 both):
    requires-python admits 3.10, so both spellings mean the same instant there too."""
    import datetime as dt

    from orchestrator.model.values import parse_datetime

    utc = dt.datetime(2026, 11, 30, 0, 39, 51, tzinfo=dt.timezone.utc)
    assert parse_datetime("2026-11-30T00:39:51Z") == utc
    assert parse_datetime("2026-11-30T00:39:51+00:00") == utc
    with pytest.raises(ValueError):
        parse_datetime("2026-11-30T00:39:51ZZ")
