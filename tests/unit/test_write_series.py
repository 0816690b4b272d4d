"""refresh's writing of patches/: only the files whose
bytes differ are written, stale ones removed."""

import shutil

from orchestrator.drift.refresh import write_series
from orchestrator.patchset.series import parse_series

from ..helpers.forks import ROOT


def test_write_series_writes_only_what_differs_and_removes_stale_patches(tmp_path):
    series = parse_series(
        "llama.cpp", [(p.name, p.read_text()) for p in sorted((ROOT / "patches").glob("*.patch"))]
    )
    d = tmp_path / "patches"
    shutil.copytree(ROOT / "patches", d)
    (d / "0003-stale.patch").write_text("old\n")
    (d / "README").write_text("not a patch\n")
    first = series.patches[0].name
    (d / first).write_text("edited\n")
    assert write_series(d, series) == ([first], ["0003-stale.patch"])
    # other files stay: the README, cover.md (the contributor's words),
    # known-limits.yaml and related-upstream.yaml (their data), the other topics' folders
    topics = [p.name for p in (ROOT / "patches").iterdir() if p.is_dir()]
    assert sorted(p.name for p in d.iterdir()) == sorted(
        [p.name for p in series.patches]
        + ["README", "cover.md", "known-limits.yaml", "related-upstream.yaml"]
        + topics
    )
    assert all(
        (d / p.name).read_bytes() == (ROOT / "patches" / p.name).read_bytes()
        for p in series.patches
    )
    assert write_series(d, series) == ([], [])
