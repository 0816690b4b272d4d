"""The fine-tuning evidence in a bundle: results/evidence/finetune.json (from `ggml-patch
evidence`), read as untrusted input, used only when it is of the bundle's target, base and
series."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable, Optional

from ..errors import ConfigError
from . import results as ft

FILE = Path("evidence") / "finetune.json"
PLOT = "finetune-loss.png"
MAX_BYTES = (
    4 << 20
)  # far above what the tool writes (about 10 KB a case): a larger file is not its own


def load(results_dir: Path) -> Optional[ft.FinetuneResults]:
    """RESULTS/evidence/finetune.json validated, or None when there is none; one line (exit 2) when
    it is there but not what `ggml-patch evidence` writes."""
    path = Path(results_dir) / FILE
    if not path.is_file():
        return None
    try:
        if (size := path.stat().st_size) > MAX_BYTES:
            raise ValueError(f"{size} bytes, more than the {MAX_BYTES} a finetune.json can have")
        with path.open(
            "rb"
        ) as f:  # never more than the cap read, should the file grow after the check
            return ft.FinetuneResults.from_json(f.read(MAX_BYTES + 1).decode("utf-8"))
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


def for_target(
    found: Optional[ft.FinetuneResults],
    target: str,
    base: str,
    series_sha256: str,
    log: Callable[[str], None],
) -> Optional[ft.FinetuneResults]:
    """The evidence when it was made on this target's base with this series; else None, said in one
    line."""
    if found is None or found.target != target:
        return None
    if why := ft.staleness(found, base, series_sha256):
        log(f"{target}: {FILE} left out of the bundle: {why} (re-run `ggml-patch evidence`)")
        return None
    return found


def plot_png(results: ft.FinetuneResults) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        return ft.plot(results, Path(tmp) / PLOT).read_bytes()
