"""What a run's results.json proves for a bundle: the problems that stop it from backing a pull
request (a stale series, a cell that did not pass, a control not killed), and the refusal that
names them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..errors import ConfigError
from ..model.results import Cell, CellStatus, Outcome, Results, Verdict, load_results
from .views import NOT_RUN, one_line


@dataclass(frozen=True)
class Problem:
    target: Optional[str]  # None: the whole run (e.g. a stale series)
    text: str


def load_results_dir(results_dir: Path) -> tuple[Results, str]:
    """results.json (validated) and the sha256 of its bytes (what the manifest names)."""
    path = Path(results_dir) / "results.json"
    if not path.exists():
        raise ConfigError(
            f"{path}: no results; run `ggml-patch matrix --results {results_dir}` first"
        )
    return load_results(path)


def problems(
    results: Results, current_series_sha256: str, topic: Optional[str] = None
) -> list[Problem]:
    """Everything that stops these results from backing a pull request; empty when they do.
    `current_series_sha256`: the series of the run's topics as patches/ gives it now; `topic`:
    the topic the bundle carries (the run must have carried it; `results` is then that topic's
    view of the run, views.topic_results)."""
    found, ran, now = [], results.series.sha256, current_series_sha256
    run_topics = results.series.topics
    if topic and run_topics and topic not in run_topics:
        found.append(
            Problem(
                None,
                f"results.json was made from the topics {', '.join(run_topics)}; a bundle of "
                f"{topic} needs a run that carries it: `ggml-patch matrix --topic {topic}`",
            )
        )
    elif ran != now:
        stale = (
            f"results.json was made from series {ran[:12]}, "
            f"the series in patches/ is now {now[:12]}"
        )
        found.append(Problem(None, f"{stale}: re-run `ggml-patch matrix`"))
    for target in results.targets():
        cells = results.cells_of(target)
        if all(c.status in NOT_RUN for c in cells):
            why = "no cell ran its tests (skipped or build-only), so nothing was proven"
            found.append(Problem(target, f"{target}: {why}"))
        found += [
            Problem(target, t)
            for c in cells
            if c.status not in NOT_RUN
            for t in _cell_problems(results, c)
        ]
    return found


def _cell_problems(results: Results, cell: Cell) -> list[str]:
    cid = cell.cell
    recs = results.records_of(cid)
    patched, control = recs.get("patched"), results.control_of(cid)
    found = []
    if patched is None:
        found.append(f"{cid}: nothing was tested ({cell.status}: {one_line(cell.reason)})")
    elif not (patched.build and patched.build.ok):
        found.append(f"{cid}: the patched variant did not build")
    else:
        bad = [
            f"{n} {t.outcome}"
            for n, t in patched.tests.items()
            if t.outcome not in (Outcome.PASSED, Outcome.SKIPPED)
        ]
        if bad:  # skipped: the backend's, with its reason
            found.append(f"{cid}: with the fix {', '.join(bad)}")
    if patched is not None and control is None:
        found.append(f"{cid}: the negative control did not run")
    elif control is not None and control.verdict != Verdict.KILLED:
        found.append(
            f"{cid}: the negative control was not killed "
            f"({control.verdict}: {one_line(control.verdict_reason)})"
        )
    if not found and cell.status != CellStatus.PASSED:
        found.append(f"{cid}: {cell.status}: {one_line(cell.reason)}")
    return found


def refusal_message(found: list[Problem], topic: str = "") -> str:
    anyway = "--allow-incomplete bundles anyway, with a warning at the top of PR_BODY.md"
    which = f" {topic}" if topic else ""
    return f"refusing to bundle{which}: {'; '.join(p.text for p in found)} ({anyway})"
