"""(n) issue 46's cost of a test-backend-ops topic: the real op fix of
tests/e2e/test_upstream_op_fix.py (llama.cpp's CPU concat of quantized types, taken from two pinned
PyPI sdists) added with `topic new` to a copy of the project, then its cell on the ggml target
(`matrix --topic concat-quantized --target ggml --backend cpu --no-mutants --rerun`, a new cache,
no ccache) against the same tree by hand: cmake (Release, Ninja, GGML_BUILD_TESTS) + ninja
test-backend-ops + `test-backend-ops -b CPU -o CONCAT`, no ccache, before and after the tool."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from .common import NO_CCACHE, ROOT, linked_downloads, load_note, sh, tool

NAME = "concat-quantized"
GOAL = 1.3  # issue 46: the topic's cell against building and running test-backend-ops by hand


def _project(work: Path, diff: Path, cache: Path) -> Path:
    """A copy of the project with the op fix as a topic (its crash declared, as the README's
    walk does)."""
    project = work / "project"
    project.mkdir()
    for name in ("matrix.yaml", "patches", "native_tests"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, project / name)
    where = ("--matrix", str(project / "matrix.yaml"), "--cache", str(cache))
    _, made = tool("topic", "new", NAME, "--from-diff", str(diff), "--origin", "bench", *where)
    if made.returncode != 0:
        raise SystemExit(f"bench: topic new: {made.stderr.strip()[-300:]}")
    topic = project / "patches" / NAME / "topic.yaml"
    crash = "a quantized row is copied element by element, past the end of its buffers"
    topic.write_text(topic.read_text() + f"control_crash: {crash}\n")
    return project


def _by_hand(cache: Path, commit: str, work: Path, label: str) -> dict:
    """The patched tree (the cell's own commit) exported, then built and run as a contributor
    would, no ccache."""
    tree = work / f"by-hand-{label}"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "--git-dir", str(cache / "snapshots.git"), "archive", commit],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    build = tree / "build"
    configure = sh(
        [
            "cmake",
            "-S",
            str(tree),
            "-B",
            str(build),
            "-G",
            "Ninja",
            "-DCMAKE_BUILD_TYPE=Release",
            "-DGGML_BUILD_TESTS=ON",
        ],
        env=NO_CCACHE,
    )
    built = sh(
        ["ninja", "-C", str(build), "-j", str(os.cpu_count() or 2), "test-backend-ops"],
        env=NO_CCACHE,
    )
    run = sh([str(build / "bin" / "test-backend-ops"), "-b", "CPU", "-o", "CONCAT"])
    shutil.rmtree(tree)
    return {
        "configure": round(configure, 2),
        "build": round(built, 2),
        "run": round(run, 2),
        "total": round(configure + built + run, 2),
    }


def op_topic(work: Path, out: Path) -> dict:
    from tests.e2e.test_upstream_op_fix import upstream_fix  # the e2e test's own recipe

    cache = linked_downloads(work / "cache")
    (work / "diff").mkdir()
    diff = upstream_fix(cache, work / "diff")
    project = _project(work, diff, cache)
    results = work / "results"
    print("bench: (n) a test-backend-ops topic's cell against test-backend-ops by hand", flush=True)
    wall, ran = tool(
        "matrix",
        "--matrix",
        str(project / "matrix.yaml"),
        "--cache",
        str(cache),
        "--topic",
        NAME,
        "--target",
        "ggml",
        "--backend",
        "cpu",
        "--no-mutants",
        "--rerun",
        "--results",
        str(results),
        env=NO_CCACHE,
    )
    (out / "op-topic-matrix.log").write_text(ran.stdout + ran.stderr)
    if ran.returncode != 0:
        raise SystemExit(f"bench: matrix --topic {NAME} exited {ran.returncode}")
    data = json.loads((results / "results.json").read_text())
    (cell,) = data["cells"]
    load = load_note(0)
    first = _by_hand(cache, cell["patched_commit"], work, "before")
    second = _by_hand(cache, cell["patched_commit"], work, "after")
    hand = (first["total"] + second["total"]) / 2
    timings = cell["timings"]
    verdict_at = sum(
        v
        for k, v in timings.items()
        if k
        in ("step fetch", "step apply", "step plan", "step configure", "step build", "step test")
    )
    found = {
        "load": load,
        "tool_wall_s": round(wall, 2),
        "cell_timings": timings,
        "tool_patched_verdict_s": round(verdict_at, 2),
        "by_hand": {"before": first, "after": second, "mean_total": round(hand, 2)},
        "ratio_cell": round(wall / hand, 3),
        "ratio_first_verdict": round(verdict_at / hand, 3),
        "goal": GOAL,
    }
    _write(found, out)
    return found


def _write(found: dict, out: Path) -> None:
    (out / "op-topic.json").write_text(json.dumps(found, indent=2) + "\n")
    hand = found["by_hand"]
    lines = [
        "# (n) a test-backend-ops topic: its cell against test-backend-ops by hand",
        "",
        f"Load at the start: {found['load']['loadavg']}.",
        "",
        "| measure | value | goal | met |",
        "|---|---|---|---|",
        f"| the topic's whole cell (patched + control, `matrix` wall) / by hand | "
        f"{found['ratio_cell']} | <= {GOAL} | {'yes' if found['ratio_cell'] <= GOAL else 'NO'} |",
        f"| the patched tree's verdict (fetch to test) / by hand | "
        f"{found['ratio_first_verdict']} | <= {GOAL} | "
        f"{'yes' if found['ratio_first_verdict'] <= GOAL else 'NO'} |",
        "",
        f"By hand (configure + ninja test-backend-ops + run -b CPU -o CONCAT, no ccache): before "
        f"{hand['before']['total']} s, after {hand['after']['total']} s, mean "
        f"{hand['mean_total']} s. Tool: {found['tool_wall_s']} s wall; cell timings "
        f"{json.dumps(found['cell_timings'])}.",
    ]
    (out / "op-topic.md").write_text("\n".join(lines) + "\n")
