"""The results model (report/model.py): results.json read and written with today's keys and
meanings, unknown keys kept, a malformed file refused in one line."""
import copy
import hashlib
import json

import pytest

from orchestrator.errors import ConfigError
from orchestrator.report.model import (AttributionLabel, CellStatus, Outcome, RecordStatus, Results, RowStatus,
                                       Verdict, dump_results, load_results)

from ..helpers.samples import CPU_SAMPLE as CPU
from ..helpers.samples import VULKAN_SAMPLE as VULKAN
from ..helpers.samples import edited, key_paths


def test_the_words_are_results_json_strings():
    assert CellStatus.BUILD_ONLY == "build-only" and f"{CellStatus.BUILD_ONLY}" == "build-only"
    assert json.dumps([Outcome.NOT_BUILT, Verdict.KILLED, AttributionLabel.PRE_EXISTING, RowStatus.FAIL]) == \
        '["not-built", "killed", "pre-existing", "FAIL"]'
    assert RecordStatus("") is RecordStatus.PENDING


def test_a_results_json_of_today_is_written_back_byte_for_byte(tmp_path):
    results, sha = load_results(VULKAN)
    assert dump_results(results, tmp_path / "r.json").read_bytes() == VULKAN.read_bytes()
    assert sha == hashlib.sha256(VULKAN.read_bytes()).hexdigest()
    cell = results.cells[0]
    assert cell.status is CellStatus.FAILED and cell.failure_kind is AttributionLabel.PRE_EXISTING
    control = results.records_of(cell.cell)["control"]
    assert control.verdict is Verdict.KILLED and control.tests["test-opt"].stopped_on == "Vulkan0"


def test_the_older_sample_keeps_every_key_and_value():
    data = json.loads(CPU.read_text())
    again = Results.from_dict(data).to_dict()
    assert key_paths(again) >= key_paths(data)

    def without_added(x):  # what the model adds to an older file: a failing test's stopped_on (null)
        if isinstance(x, dict):
            return {k: without_added(v) for k, v in x.items() if not (k == "stopped_on" and v is None)}
        return [without_added(v) for v in x] if isinstance(x, list) else x
    assert without_added(again) == data


def test_keys_the_model_does_not_know_are_kept():
    data = json.loads(CPU.read_text())
    data["mutants_summary"] = {"killed": 3}
    data["cells"][0]["readiness"] = "ready"
    data["records"][1]["mutants"] = [{"name": "01-x", "verdict": "killed"}]
    data["records"][1]["tests"]["test-opt"]["sanitizer"] = "asan"
    data["records"][1]["tests"]["test-opt"]["rows"][0]["note"] = "n"
    again = Results.from_dict(copy.deepcopy(data)).to_dict()
    assert again["mutants_summary"] == {"killed": 3} and again["cells"][0]["readiness"] == "ready"
    assert again["records"][1]["mutants"] == [{"name": "01-x", "verdict": "killed"}]
    assert again["records"][1]["tests"]["test-opt"]["sanitizer"] == "asan"
    assert again["records"][1]["tests"]["test-opt"]["rows"][0]["note"] == "n"


@pytest.mark.parametrize("data, phrase", [
    ([], "expected a JSON object"),
    (edited(lambda d: d.pop("series")), "key 'series' missing"),
    (edited(lambda d: d["series"].pop("sha256")), "series: key 'sha256' missing"),
    (edited(lambda d: d["cells"][1].update(status="great")), "cells[1].status: 'great' is not one of 'passed'"),
    (edited(lambda d: d["cells"].append("x")), "cells[2]: expected object, got str"),
    (edited(lambda d: d["records"][0].pop("variant")), "records[0]: key 'variant' missing"),
    (edited(lambda d: d["records"][0]["tests"]["test-opt"].update(outcome=None)),
     "records[0].tests.test-opt.outcome: None is not one of"),
    (edited(lambda d: d["records"][1]["tests"]["test-opt-dynamic-accum"]["rows"][0].update(step="2")),
     "records[1].tests.test-opt-dynamic-accum.rows[0].step: expected integer, got str"),
    (edited(lambda d: d["records"][1].update(verdict="maybe")), "records[1].verdict: 'maybe' is not one of"),
])
def test_a_malformed_results_file_is_one_line_naming_the_key(tmp_path, data, phrase):
    f = tmp_path / "results.json"
    f.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as e:
        load_results(f)
    msg = str(e.value)
    assert msg.startswith(f"{f}: ") and phrase in msg and "\n" not in msg, msg


@pytest.mark.parametrize("text, phrase", [
    ("{\n  nope", "results.json:2: not valid JSON"),
    (b"\xff\xfe", "not UTF-8 text"),
])
def test_unreadable_results_are_one_line(tmp_path, text, phrase):
    f = tmp_path / "results.json"
    f.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError, match=phrase):
        load_results(f)
    with pytest.raises(ConfigError, match="no such results file"):
        load_results(tmp_path / "absent.json")


