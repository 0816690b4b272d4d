"""ggml-patch bundle refuses, in one line and writing nothing, results that do not prove the fix."""

import pytest

from orchestrator.errors import ExitCode

from ..helpers.samples import (
    GATE,
    control_survived,
    current_series_sha,
    gate_regressed,
    results_dir,
    sample,
)
from ..helpers.tools import run_tool

AUTHOR = "Ada Contributor <ada@example.org>"  # HOME is the test's own: no git identity there

# a bundle documents one topic; the queue has three active (patches/queue.yaml)
TOPIC_1 = ("--topic", "accumulator-reset")


@pytest.mark.parametrize(
    "edit, expected",
    [
        (
            control_survived,
            "ggml/cpu: the negative control was not killed "
            "(survived: the gate test passed without the fix",
        ),
        (gate_regressed, f"llama.cpp/cpu: with the fix {GATE} failed"),
    ],
)
def test_bundle_refuses_results_that_do_not_prove_the_fix(tmp_path, repo_root, edit, expected):
    r = edit(sample())
    r.series.sha256 = current_series_sha()  # only the edit is wrong
    results = results_dir(tmp_path, r)
    proc = run_tool(
        "bundle",
        "--matrix",
        str(repo_root / "matrix.yaml"),
        "--results",
        str(results),
        "--cache",
        str(tmp_path / "cache"),
        "--author",
        AUTHOR,
        *TOPIC_1,
        cwd=tmp_path,
    )
    assert proc.returncode == ExitCode.BUNDLE_REFUSED == 20, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "ggml-patch: error: refusing to bundle accumulator-reset: "
    ), proc.stderr
    assert expected in lines[0]
    assert not (results / "bundle").exists()
    assert not (tmp_path / "cache").exists()  # refused before touching anything


def test_bundle_refuses_results_of_another_series(tmp_path, repo_root):
    r = sample()
    r.series.sha256 = "ab" * 32
    results = results_dir(tmp_path, r)
    proc = run_tool(
        "bundle",
        "--matrix",
        str(repo_root / "matrix.yaml"),
        "--results",
        str(results),
        "--cache",
        str(tmp_path / "cache"),
        "--author",
        AUTHOR,
        *TOPIC_1,
        cwd=tmp_path,
    )
    assert proc.returncode == 20, proc.stderr
    assert "results.json was made from series ababababab" in proc.stderr
    assert "re-run `ggml-patch matrix`" in proc.stderr
    assert not (results / "bundle").exists()


def test_bundle_names_an_unknown_target(tmp_path, repo_root):
    r = sample()
    r.series.sha256 = current_series_sha()
    results = results_dir(tmp_path, r)
    proc = run_tool(
        "bundle",
        "--matrix",
        str(repo_root / "matrix.yaml"),
        "--results",
        str(results),
        "--target",
        "whisper.cpp",
        "--cache",
        str(tmp_path / "cache"),
        "--author",
        AUTHOR,
        *TOPIC_1,
        cwd=tmp_path,
    )
    assert proc.returncode == 2 and "no cells for target 'whisper.cpp'" in proc.stderr
