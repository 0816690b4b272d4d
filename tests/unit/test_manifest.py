"""The bundle's manifest.json is a record (upstream/manifest.py): what `bundle` writes goes through
JSON and its published schema unchanged, and an untrusted one with an unknown key, a wrong type or
an out-of-range value is refused in one line naming the file and the key."""

import json

import pytest

from orchestrator.errors import ConfigError
from orchestrator.model.results import load_results
from orchestrator.upstream import bundle as B
from orchestrator.upstream import manifest as M
from orchestrator.upstream import policy as P
from orchestrator.upstream.authorship import Identity
from orchestrator.verdicts.known_limits import KnownLimit

from ..helpers.samples import declared
from ..helpers.tools import ROOT
from .test_policy import llama


def written() -> dict:
    """A manifest as `bundle` writes it: every key filled."""
    results, _ = load_results(ROOT / "tests" / "data" / "results-cpu-sample.json")
    cell = results.cells[0]
    verification = M.Verification(
        worktree="/w",
        head="a" * 40,
        head_is_bundle_commit=True,
        tree_is_patched_tree=True,
        configure_reused=False,
        build_log="b.log",
        tests={"test-opt": M.VerifiedTest(outcome="passed", exit_code=0, log="t.log")},
        durations_s=M.Durations(apply=0.1, configure=1.0, build=2.0, tests=3.0, total=6.1),
    )
    limit = KnownLimit(
        id="a-b",
        file="src/x.c",
        function="f",
        what="w",
        status="not changed by this series",
        confirmed="c",
    )
    readiness = {
        "checks": [
            {
                "name": "cover-written",
                "status": "warn",
                "detail": "d",
                "where": ["x:1"],
                "rule": [{"file": "AGENTS.md", "line": 3, "text": "t"}],
            }
        ],
        "not_applicable": {"sync": "takes a pull request"},
        "summary": {"pass": 0, "warn": 1, "fail": 0},
    }
    return B.manifest(
        target=cell.target,
        layout="ggml",
        results=results,
        results_sha256="0" * 64,
        results_path="/r/results.json",
        source=cell.source.to_json(),
        patched_commit="1" * 40,
        patches=[("0001-x.patch", "From x\n")],
        files={"0001-x.patch": "2" * 64, "PR_TITLE": "3" * 64},
        verification=verification,
        toolchain={"cmake": "3.25"},
        warnings=[],
        known_limits=[limit.to_json()],
        policy=llama().to_json(),
        readiness=readiness,
        draft=False,
        draft_reasons=[],
        cover={"path": "patches/cover.md", "present": True},
        bundle_commit="4" * 40,
        authorship={
            "author": str(Identity("A B", "a@b.org", "--author")),
            "from": "--author",
            "assisted_by": None,
            "committer": "ggml-patch <ggml-patch@localhost>",
        },
    )


def test_a_written_manifest_goes_through_json_and_its_schema():
    jsonschema = pytest.importorskip("jsonschema")
    data = written()
    text = json.dumps(data)
    again = M.read_manifest(text, "manifest.json")
    assert json.dumps(again.to_json()) == text
    jsonschema.validate(data, M.Manifest.model_json_schema())
    assert data["authorship"]["from"] == "--author" and data["authorship"]["assisted_by"] is None
    assert data["policy"]["role"]["value"]["kind"] == "pull-request" and again.takes_pull_request
    assert again.verification.durations_s.total == 6.1 and again.known_limits[0].id == "a-b"


def test_a_verify_only_policy_takes_no_pull_request():
    data = written()
    data["policy"] = P.derive("t", "b" * 40, {}, declared("o/r", "none", "matrix.yaml:3")).to_json()
    assert not M.read_manifest(data, "manifest.json").takes_pull_request


@pytest.mark.parametrize(
    "edit, where",
    [
        (lambda m: m.update(extra=1), "manifest.json: unknown key 'extra'"),
        (lambda m: m["base"].update(extra=1), "manifest.json: base: unknown key 'extra'"),
        (lambda m: m.update(draft="yes"), "manifest.json: draft: expected boolean, got str"),
        (
            lambda m: m["results"].update(exit_code="0"),
            "manifest.json: results.exit_code: expected integer, got str",
        ),
        (
            lambda m: m.update(schema_version=3),
            "manifest.json: schema_version: input should be less than or equal to 2",
        ),
        (lambda m: m["policy"]["submit"].update(value=[]), "manifest.json: policy.submit.value"),
        (
            lambda m: m.update(patched_commit="HEAD"),
            "manifest.json: patched_commit: 'HEAD' is not a full 40-hex commit id",
        ),
    ],
)
def test_an_untrusted_manifest_is_refused_in_one_line(edit, where):
    data = written()
    edit(data)
    with pytest.raises(ConfigError) as e:
        M.read_manifest(json.dumps(data), "manifest.json")
    line = str(e.value)
    assert line.startswith(where) and "\n" not in line, line


def test_hostile_text_the_tool_writes_reads_back_and_the_same_text_in_a_file_is_refused():
    """Text the tool takes from elsewhere (a readiness detail from a policy file, a warning, a
    toolchain's version) is written safe (control characters shown, one line where one line is
    the rule), so `pr` reads its own manifest back; the raw text in a file is refused (36)."""
    data = written()
    said = "line one\n\x1b]0;title\x07## heading"
    data["warnings"] = [said]
    data["draft_reasons"] = [said]
    data["toolchain"] = {"cmake": said}
    data["readiness"]["checks"][0]["detail"] = said
    made = B.Manifest.model_validate(data).to_json()  # how bundle.manifest builds it
    back = M.read_manifest(json.dumps(made), "manifest.json")
    assert "\n" not in back.warnings[0] and "\x1b" not in back.warnings[0]
    assert "\x1b" not in back.readiness.checks[0].detail
    with pytest.raises(ConfigError) as e:
        M.read_manifest(json.dumps(data), "manifest.json")
    assert str(e.value).startswith("manifest.json: warnings[0]: a line break")
