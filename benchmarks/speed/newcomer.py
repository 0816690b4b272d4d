"""(h): the newcomer's fresh clone, empty HOME and `pip install 'nox[uv]' && nox -s matrix`, as
ratios to the by-hand first answer under the same load."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from orchestrator.cache import Cache, default_cache_dir

from .common import (
    NEWCOMER_NOX,
    ROOT,
    VERDICT,
    BusyLoops,
    _children_cpu,
    load_note,
    sh,
    timed_lines,
)
from .routes import by_hand


def newcomer_env(home: Path, venv: Path) -> dict:
    """The environment of a new user: an empty HOME (no tool cache, ccache, pip cache or pip
    config), nothing of this machine's tool settings, the new virtual environment first on PATH."""
    drop = (
        "GGML_PATCH_",
        "CCACHE_",
        "PIP_FIND_LINKS",
        "PIP_CACHE_DIR",
        "PIP_CONFIG_FILE",
        "VIRTUAL_ENV",
        "PYTHONPATH",
        "NOX",
        "XDG_",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    return {**env, "HOME": str(home), "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}


def newcomer(work: Path, loops: int, matrix_args: tuple[str, ...] = ()) -> dict:
    """(h): a fresh clone, an empty HOME, `pip install 'nox[uv]' && nox -s matrix` (the README's
    first command; `matrix_args` after `--`, e.g. one topic); times from the start of the pip
    install, then the tool's re-run with nothing changed."""
    clone, home, venv = work / "clone", work / "home", work / "venv"
    home.mkdir(parents=True)
    sh(["git", "clone", "-q", str(ROOT), str(clone)])
    commit = subprocess.run(
        ["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    sh([sys.executable, "-m", "venv", str(venv)])
    env = newcomer_env(home, venv)
    out: dict = {"commit": commit, "load_start": load_note(loops), "matrix_args": list(matrix_args)}
    with BusyLoops(loops):
        cpu0 = _children_cpu()
        t_pip, rc, lines = timed_lines(
            [str(venv / "bin" / "pip"), "install", "-q", NEWCOMER_NOX], clone, env
        )
        if rc != 0:
            raise SystemExit(f"bench: newcomer: pip install {NEWCOMER_NOX} failed: {lines[-3:]}")
        argv = [str(venv / "bin" / "nox"), "-s", "matrix"]
        argv += ["--", *matrix_args] if matrix_args else []
        t_nox, rc, lines = timed_lines(argv, clone, env)
        out["load_end"] = load_note(loops)
        # CPU seconds of the whole run (every process it started, not
        # the busy loops): what a load cannot inflate
        out["cpu_s"] = round(_children_cpu() - cpu0, 2)
    (work / "newcomer.log").write_text("\n".join(f"{s:8.2f} {line}" for s, line in lines) + "\n")
    if rc != 0:
        raise SystemExit(
            f"bench: newcomer: nox -s matrix failed ({rc}): {[x for _, x in lines[-15:]]}"
        )
    verdicts = [(s, line.strip()) for s, line in lines if VERDICT in line]
    # nox prints the command
    installed = next((s for s, line in lines if "ggml-patch matrix" in line), None)
    data = json.loads((clone / "results" / "results.json").read_text())
    ran = sorted(data["cells"], key=lambda c: c.get("timings", {}).get("total", 0.0))
    out.update(
        {
            "pip_install_nox_s": round(t_pip, 2),
            "nox_install_s": round(installed, 2) if installed is not None else None,
            "first_verdict_s": round(t_pip + verdicts[0][0], 2) if verdicts else None,
            "first_verdict": verdicts[0][1] if verdicts else None,
            "total_s": round(t_pip + t_nox, 2),
            "verdicts_s": [round(t_pip + s, 2) for s, _ in verdicts],
            "cells": {
                c["cell"]: {"status": c["status"], "total_s": c.get("timings", {}).get("total")}
                for c in ran
            },
        }
    )
    tool_exe = clone / ".nox" / "matrix" / "bin" / "ggml-patch"
    with BusyLoops(loops):
        t_rerun, rc, lines = timed_lines([str(tool_exe), "matrix", *matrix_args], clone, env)
    if rc != 0 or "cached result" not in "\n".join(x for _, x in lines):
        raise SystemExit(
            f"bench: newcomer: the re-run was not the cached result ({rc}): {lines[-5:]}"
        )
    out["rerun_s"] = round(t_rerun, 2)
    return out


def newcomer_with_reference(
    work: Path, matrix, loops: int, matrix_args: tuple[str, ...] = ()
) -> dict:
    """(h) with its reference under the same load: the by-hand first answer (the pinned ggml tree,
    patched, cmake Release + ninja test-opt + run it, no ccache) just before the newcomer and again
    just after it; the newcomer's first verdict and total as ratios to their mean."""

    def first_answer(name: str) -> dict:
        with BusyLoops(loops):
            return by_hand(
                work / name, matrix, Cache(default_cache_dir()), "ggml", ("patched",), ("test-opt",)
            )

    before = first_answer("byhand")
    out = newcomer(work, loops, matrix_args)
    out["by_hand_first_answer"] = before
    out["by_hand_first_answer_after"] = first_answer("byhand-after")
    out.update(newcomer_ratios(out))
    return out


def by_hand_reference_s(n: dict) -> float | None:
    """The newcomer's by-hand reference: the mean of the first answer measured before and after
    it (the host's other tenants come and go on a shared machine; records before the second
    measure have only the first)."""
    times = [
        n[k]["total_s"]
        for k in ("by_hand_first_answer", "by_hand_first_answer_after")
        if n.get(k) and n[k].get("total_s")
    ]
    return round(sum(times) / len(times), 2) if times else None


def newcomer_ratios(n: dict) -> dict:
    """The newcomer's first verdict and total as ratios to its by-hand reference."""
    t_hand = by_hand_reference_s(n)
    out: dict = {"by_hand_reference_s": t_hand}
    for key in ("first_verdict", "total"):
        seconds = n.get(f"{key}_s")
        out[f"{key}_vs_by_hand"] = round(seconds / t_hand, 3) if seconds and t_hand else None
    return out


def newcomers(work: Path, matrix, loads: list[int], newcomer_args: str, out: Path) -> dict:
    """(h) under each load, 0 first (the machine as it is, before the bench's own load); each
    run's log copied to `out`."""
    runs: dict = {}
    for loops in loads:
        print(
            f"bench: (h) newcomer: fresh clone, empty HOME, nox -s matrix ({loops} busy loops)",
            flush=True,
        )
        matrix_args = tuple(shlex.split(newcomer_args))
        runs["loaded" if loops else "quiet"] = newcomer_with_reference(
            work / f"newcomer-{loops}", matrix, loops, matrix_args
        )
        shutil.copy(
            work / f"newcomer-{loops}" / "newcomer.log",
            out / f"newcomer-{loops}-busy-loops.log",
        )
    return runs
