"""Two real CPU cells run apart (as two CI legs) and merged equal one run over both."""

import json
import xml.etree.ElementTree as ET

from ..helpers.tools import run_tool

_VOLATILE = {
    "started_at",
    "duration_s",
    "timings",
    "log",
    "orchestrator_cpu_s",
    "parallel",
    "cached",
}


def _comparable(x):
    """Results without what differs between two runs of the same cells (times, where logs went)."""
    if isinstance(x, dict):
        return {k: _comparable(v) for k, v in x.items() if k not in _VOLATILE}
    if isinstance(x, list):
        return [_comparable(v) for v in x]
    return x


def test_two_cells_run_apart_and_merged_equal_one_run_over_both(repo_root, tool_cache, tmp_path):
    """Real runs (warm cache: about 20 s): `matrix` for each CPU cell on its own, as two CI legs
    do, merged, against one `matrix` over both cells."""
    common = [
        "--matrix",
        str(repo_root / "matrix.yaml"),
        "--cache",
        str(tool_cache),
        "--backend",
        "cpu",
    ]
    runs = {}
    for name, targets in (
        ("llama", ["llama.cpp"]),
        ("ggml", ["ggml"]),
        ("both", ["llama.cpp", "ggml"]),
    ):
        args = [a for t in targets for a in ("--target", t)]
        proc = run_tool("matrix", *common, *args, "--results", str(tmp_path / name), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[name] = tmp_path / name
    out = tmp_path / "merged"
    proc = run_tool(
        "merge-results",
        "--matrix",
        str(repo_root / "matrix.yaml"),
        "--out",
        str(out),
        str(runs["ggml"]),
        str(runs["llama"]),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    merged = json.loads((out / "results.json").read_text())
    whole = json.loads((runs["both"] / "results.json").read_text())
    assert [c["status"] for c in whole["cells"]] == ["passed", "passed"]
    assert _comparable(merged) == _comparable(whole)

    # junit.xml agrees too, apart from times
    def cases(p):
        return sorted(
            (c.get("classname"), c.get("name"), tuple(sorted(k.tag for k in c)))
            for c in ET.parse(p).getroot().iter("testcase")
        )

    assert cases(out / "junit.xml") == cases(runs["both"] / "junit.xml")
