"""refresh's writing of patches/: only the files whose
bytes differ are written, stale ones removed."""

import shutil

from orchestrator.drift.refresh import write_series
from orchestrator.patchset.series import parse_series

from ..helpers.forks import ROOT


def test_write_series_writes_only_what_differs_and_removes_stale_patches(tmp_path):
    series = parse_series(
        "llama.cpp",
        [
            (p.name, p.read_text())
            for p in sorted((ROOT / "patches" / "accumulator-reset").glob("*.patch"))
        ],
    )
    d = tmp_path / "patches"
    shutil.copytree(ROOT / "patches" / "accumulator-reset", d)
    (d / "0003-stale.patch").write_text("old\n")
    (d / "README").write_text("not a patch\n")
    first = series.patches[0].name
    (d / first).write_text("edited\n")
    assert write_series(d, series) == ([first], ["0003-stale.patch"])
    # other files stay: the README, cover.md (the contributor's words),
    # known-limits.yaml and related-upstream.yaml (their data), topic.yaml
    assert sorted(p.name for p in d.iterdir()) == sorted(
        [p.name for p in series.patches]
        + ["README", "cover.md", "known-limits.yaml", "related-upstream.yaml", "topic.yaml"]
    )
    assert all(
        (d / p.name).read_bytes() == (ROOT / "patches" / "accumulator-reset" / p.name).read_bytes()
        for p in series.patches
    )
    assert write_series(d, series) == ([], [])
