"""What `ggml-patch bundle` was asked for: the options every step of making a bundle reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from ..cache import Cache
from ..config import Matrix
from . import authorship


@dataclass
class BundleOptions:
    matrix: Matrix
    cache: Cache
    results_dir: Path
    out_dir: Path
    allow_incomplete: bool = False
    targets: list[str] = field(default_factory=list)
    log: Callable[[str], None] = lambda msg: None  # progress, one line each
    author: Optional[authorship.Identity] = None  # the contributor the commits carry
    assisted_by: Optional[str] = None  # the assistant named in an Assisted-by: trailer
    topics: list[str] = field(default_factory=list)  # --topic; none: every forwardable one
