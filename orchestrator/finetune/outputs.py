"""The training evidence's result cache entry and its outputs: results/evidence/ (finetune.json,
finetune.md, the plot) and the evidence section of results/summary.md.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Optional

from ..cache import Cache
from ..redact import redact
from ..run import resultcache
from ..run.cell import results_cache_dir as cell_results_cache_dir
from ..verdicts.training import can_plot
from . import predictions, section
from .bundle import PLOT
from .markdown import summary_section
from .plot import SWEEP_PLOT, plot, plot_sweep
from .record import FinetuneResults
from .sweep import sweep
from .verdict import finetune_json

RESULTS_SUBDIR = "evidence"
# --case-set real: its own folder (its own finetune.json and plot); summary.md keeps the tiny set's
REAL_SUBDIR = "evidence-real"
NO_PLOT = (
    "no plot: matplotlib is not installed (pip install 'ggml-patch[plot]'); "
    "the tables are all there is"
)


def results_cache_dir(cache: Cache) -> Path:
    """The training evidence's results: in the one result cache, beside the cells'."""
    return cell_results_cache_dir(cache)


def cached_result(directory: Path, key: str) -> Optional[FinetuneResults]:
    try:
        return FinetuneResults.from_json(json.dumps(resultcache.load(directory, key)))
    except (ValueError, TypeError):
        return None  # absent, half-written or of another version: not a hit


def write_outputs(
    results: FinetuneResults,
    entry: Path,
    out_dir: Path,
    results_dir: Path,
    predicted: Optional[list[dict]] = None,
) -> tuple[list[Path], str]:
    """results/evidence/ (finetune.json, .md, the plot with matplotlib) and the evidence section
    of results/summary.md (the rest untouched). `entry`: the result cache's `<key>` (.json,
    -logs, .png)."""
    json_path = out_dir / "finetune.json"
    compared = predictions.compare(predicted, results) if predicted is not None else None
    across = sweep(results)
    dumped = across.model_dump() if across else None
    resultcache.write_atomic(json_path, redact(finetune_json(results, compared, dumped)).encode())
    files = [json_path]
    swept = out_dir / SWEEP_PLOT
    swept.unlink(missing_ok=True)  # an older run's would not match these numbers
    if across is not None and can_plot():
        upstream = results.source.upstream_commit
        where = results.target + (f", upstream {upstream[:12]}" if upstream else "")
        files.append(plot_sweep(across, where, swept))
    png = out_dir / PLOT
    sub = out_dir.name
    data = f"[{sub}/finetune.json]({sub}/finetune.json)"
    if can_plot():
        made = Path(f"{entry}.png")
        # a cached result made where matplotlib was not installed: plotted now
        if not made.is_file():
            plot(results, made)
        shutil.copyfile(made, png)
        files.append(png)
        note = f"Plot: [{sub}/{PLOT}]({sub}/{PLOT}); data: {data}."
        if swept in files:
            note += f" Across rates: [{sub}/{SWEEP_PLOT}]({sub}/{SWEEP_PLOT})."
    else:
        png.unlink(missing_ok=True)  # an older run's plot would not match these numbers
        note = f"{NO_PLOT}. Data: {data}."
    markdown_section = redact(summary_section(results, note, compared))
    md = out_dir / "finetune.md"
    md.write_text(markdown_section, encoding="utf-8")
    if results.case_set == "real":
        return files + [md], (f"plot {png}" if png in files else NO_PLOT)
    summary = results_dir / "summary.md"
    old = None
    if summary.is_file():
        old = summary.read_text(encoding="utf-8", errors="replace")
    spliced = section.splice(old, section.marked(markdown_section))
    resultcache.write_atomic(summary, spliced.encode())
    return files + [md, summary], (f"plot {png}" if png in files else NO_PLOT)
