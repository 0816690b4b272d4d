"""Combining per-cell results (one CI leg each) into one
Results, as one run would have made. Pure."""

from __future__ import annotations

import time
from typing import Iterable, Optional, Sequence

from ..errors import ConfigError
from ..model.results import Parallel, Results, overall_exit_code


def merge_results(
    parts: Sequence[tuple[str, Results]], order: Optional[Iterable[str]] = None
) -> Results:
    """parts: (where it came from, for messages; results). Cells follow `order` (cell ids,
    e.g. the matrix's own order), then any others in the order given. duration_s is the sum of
    the parts' (machine time, not wall time: legs run in parallel)."""
    if not parts:
        raise ConfigError("merge-results: no results to merge")
    first_name, first = parts[0]
    for name, res in parts[1:]:
        if res.series.sha256 != first.series.sha256:
            raise ConfigError(
                f"{name}: made from series sha256 {res.series.sha256[:16]}, but {first_name} from "
                f"{first.series.sha256[:16]}: results of different series cannot be merged"
            )
    seen: dict[str, str] = {}
    for name, res in parts:
        for cell in res.cells:
            if cell.cell in seen:
                raise ConfigError(
                    f"{name}: cell {cell.cell} is also in "
                    f"{seen[cell.cell]}: a cell can be merged once"
                )
            seen[cell.cell] = name
    cells = [c for _, res in parts for c in res.cells]
    rank = {cell_id: i for i, cell_id in enumerate(dict.fromkeys(order or ()))}
    cells.sort(key=lambda c: rank.get(c.cell, len(rank)))  # stable: unranked keep their order
    cell_rank = {c.cell: i for i, c in enumerate(cells)}
    records = sorted(
        (r for _, res in parts for r in res.records),
        key=lambda r: cell_rank.get(r.cell, len(cell_rank)),
    )
    stamps = sorted(res.started_at for _, res in parts if res.started_at)
    return Results(
        series=first.series,
        cells=cells,
        records=records,
        schema_version=first.schema_version,
        tool=first.tool,
        matrix=first.matrix,
        profile=",".join(dict.fromkeys(res.profile for _, res in parts)),
        started_at=stamps[0] if stamps else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        duration_s=round(sum(res.duration_s or 0 for _, res in parts), 2),
        orchestrator_cpu_s=round(sum(res.orchestrator_cpu_s or 0 for _, res in parts), 2),
        parallel=Parallel(legs=len(parts)),
        exit_code=int(overall_exit_code(cells)),
    )
