"""The series rendered for one target: fetch its base, map the series into its layout."""
from __future__ import annotations

from . import sources
from .cache import Cache
from .config import Matrix, Target
from .layout import get_layout
from .series import Series, render
from .series_files import load_series
from .snapshots import SnapshotRepo


def rendered_for_target(matrix: Matrix, cache: Cache, target: Target,
                        series: Series | None = None) -> tuple[Series, sources.Snapshot]:
    series = series or load_series(matrix)
    repo = SnapshotRepo(cache.snapshots_git)
    snap = sources.snapshot(target.source, cache, repo)
    rendered = render(series, get_layout(series.layout), get_layout(target.layout, target.prefix),
                      lambda p: repo.read_blob(snap.commit, p))
    return rendered, snap
