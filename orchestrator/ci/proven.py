"""The legs with a recorded green run on github.com (.github/ggml-patch-proven.yaml, kept by hand).

Only those legs are required; every other one runs with `continue-on-error` and is reported "not
yet proven on GitHub" (in the run's summary and the drift issue): a leg tested only in act may
still fail on a real runner for reasons of the runner alone (a package, a driver), and must not
withhold the bundle or redden every scheduled run until someone has seen it pass there.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import Field

from ..errors import ConfigError
from ..records import Record, parse

PATH = ".github/ggml-patch-proven.yaml"
WHAT = "a record of legs proven on github.com (README: Adopting the CI)"
RunUrl = Annotated[str, Field(pattern=r"^https://\S+/actions/runs/\d+")]


class ProvenLeg(Record):
    """One leg's first green run on github.com."""

    profile: str
    target: str
    backend: str
    runs_on: str  # the runner as matrix.yaml names it ("self-hosted, linux, gpu" for several)
    run: RunUrl
    date: _dt.date


class Proven(Record):
    proven: list[ProvenLeg] = []


def load(path: Path) -> Proven:
    """The record; none (no leg proven) where the file is absent."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Proven()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot be read ({type(e).__name__}); expected {WHAT}") from None
    try:
        # every scalar a string: the date is checked as one, never turned into YAML's own date
        data = yaml.load(text, Loader=yaml.BaseLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f":{mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}{at}: not YAML; expected {WHAT}") from None
    return parse(Proven, data if data is not None else {}, str(path), WHAT)


def keys(record: Proven) -> set[tuple[str, str, str, str]]:
    """(profile, target, backend, runs_on) of every proven leg."""
    return {(x.profile, x.target, x.backend, _runner(x.runs_on)) for x in record.proven}


def cells(record: Proven, profile: str) -> set[str]:
    """The proven cells ("target/backend") of a profile, as results.json names them."""
    return {f"{x.target}/{x.backend}" for x in record.proven if x.profile == profile}


def _runner(runs_on: str) -> str:
    return ", ".join(s.strip() for s in runs_on.split(",") if s.strip())
