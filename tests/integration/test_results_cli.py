"""The commands refuse a malformed results.json with exit 2, in one line."""

import json

import pytest

from ..helpers.samples import edited
from ..helpers.tools import run_tool


@pytest.mark.parametrize("command", ["merge-results", "bundle"])
def test_commands_refuse_a_malformed_results_file_with_exit_2(tmp_path, repo_root, command):

    d = tmp_path / "r"
    d.mkdir()
    (d / "results.json").write_text(json.dumps(edited(lambda x: x["cells"][0].update(status=7))))
    # HOME has no git identity
    args = (
        ["--out", str(tmp_path / "out"), str(d)]
        if command == "merge-results"
        else ["--results", str(d), "--author", "Ada Contributor <ada@example.org>"]
    )
    proc = run_tool(
        command,
        "--matrix",
        str(repo_root / "matrix.yaml"),
        "--cache",
        str(tmp_path / "cache"),
        *args,
    )
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip()
    assert "\n" not in err and "cells[0].status: 7 is not one of" in err and "Traceback" not in err
