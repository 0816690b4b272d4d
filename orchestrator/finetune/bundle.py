"""The fine-tuning evidence in a bundle: results/evidence/finetune.json (`ggml-patch evidence`,
the tiny models) and results/evidence-real/finetune.json (`--case-set real`, SmolLM2-135M), each
read as untrusted input, used only when it is of the bundle's target, base and series."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable, Optional

from ..errors import ConfigError
from .plot import plot
from .record import FinetuneResults, staleness

FILE = Path("evidence") / "finetune.json"
PLOT = "finetune-loss.png"
# per case set: where `ggml-patch evidence` writes its record, and the plot's name in a bundle
FILES = {"tiny": FILE, "real": Path("evidence-real") / "finetune.json"}
PLOTS = {"tiny": PLOT, "real": "finetune-loss-real.png"}
# far above what the tool writes (about 10 KB a case): a larger file is not its own
MAX_BYTES = 4 << 20


def load(results_dir: Path, case_set: str = "tiny") -> Optional[FinetuneResults]:
    """RESULTS/evidence/finetune.json (or the case set's) validated, or None when there is none;
    one line (exit 2) when it is there but not what `ggml-patch evidence` writes."""
    path = Path(results_dir) / FILES[case_set]
    if not path.is_file():
        return None
    try:
        if (size := path.stat().st_size) > MAX_BYTES:
            raise ValueError(f"{size} bytes, more than the {MAX_BYTES} a finetune.json can have")
        with path.open(
            "rb"
        ) as f:  # never more than the cap read, should the file grow after the check
            return FinetuneResults.from_json(f.read(MAX_BYTES + 1).decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(
            f"{path}: not UTF-8 text; not a finetune.json of `ggml-patch evidence`"
        ) from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror or e}") from None
    except ValueError as e:
        raise ConfigError(
            f"{path}: {e}; re-run `ggml-patch evidence` (or remove the file)"
        ) from None


def of_target(
    results_dir: Path,
    target: str,
    base: str,
    series_sha256: str,
    log: Callable[[str], None],
) -> tuple[FinetuneResults, ...]:
    """Every case set's evidence that was made on this target's base with this series (the tiny
    models first), each checked as for_target does."""
    found = (
        for_target(load(results_dir, case_set), target, base, series_sha256, log)
        for case_set in FILES
    )
    return tuple(f for f in found if f is not None)


def for_target(
    found: Optional[FinetuneResults],
    target: str,
    base: str,
    series_sha256: str,
    log: Callable[[str], None],
) -> Optional[FinetuneResults]:
    """The evidence when it was made on this target's base with this series; else None, said in one
    line."""
    if found is None or found.target != target:
        return None
    if why := staleness(found, base, series_sha256):
        where = FILES[found.case_set]
        log(f"{target}: {where} left out of the bundle: {why} (re-run `ggml-patch evidence`)")
        return None
    return found


def plot_name(results: FinetuneResults) -> str:
    """The record's plot in a bundle (one file per case set)."""
    return PLOTS[results.case_set]


def plot_png(results: FinetuneResults) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        return plot(results, Path(tmp) / plot_name(results)).read_bytes()
