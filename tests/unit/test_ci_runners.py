"""The retired-runner table: labels GitHub no longer offers are named with their successor."""

import pytest

from orchestrator.ci.runners import RETIRED, retired, retired_message

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "label,successor",
    [
        ("macos-14", "macos-15"),
        ("macos-13", "macos-15"),
        ("MACOS-14", "macos-15"),
        ("macos-14-xlarge", "macos-15-xlarge"),
    ],
)
def test_retired_labels_name_their_successor(label, successor):
    r = retired(label)
    assert r is not None and r.successor == successor
    msg = retired_message("matrix.yaml:83: backends.metal.runs_on", label)
    assert msg is not None and "\n" not in msg
    assert msg.startswith("matrix.yaml:83: backends.metal.runs_on: runner ") and repr(label) in msg
    assert f"use {successor!r} instead" in msg and "actions/runner-images#" in msg


@pytest.mark.parametrize(
    "label", ["macos-15", "ubuntu-24.04", "self-hosted", "gpu", "macos-latest"]
)
def test_current_labels_pass(label):
    assert retired(label) is None and retired_message("x", label) is None


def test_the_table_is_dated_and_sourced():
    assert (
        RETIRED["macos-14"].since == "2026-11-02"
        and RETIRED["macos-14"].source == "actions/runner-images#13518"
    )
    for label, r in RETIRED.items():
        assert (
            r.since[:2] == "20"
            and len(r.since) == 10
            and r.source.startswith("actions/runner-images#")
        ), label
        assert retired(r.successor) is None, f"{label}'s successor {r.successor} is itself retired"
