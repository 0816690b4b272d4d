"""The tool's measures: the cold run (b), its variants against the by-hand routes ((c), (f), (i),
(l)), the re-runs ((d), after a change), the queue against one topic (m), the untrusted-input
checks (j) and the fine-tuning evidence (g)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from orchestrator.cache import Cache, default_cache_dir

from .common import (
    BUSY_LOOPS,
    CHECK_MODULES,
    NO_CCACHE,
    ONE_TOPIC,
    ROOT,
    BusyLoops,
    _children_cpu,
    linked_downloads,
    load_note,
    tool,
)
from .report import GOALS, evidence_markdown
from .routes import (
    BY_HAND_TARGETS,
    LOADED_RERUN_ARGS,
    by_hand,
    competing_by_hand,
    mutants_by_hand,
    one_file_recompile,
    topic_controls_by_hand,
)


def _per_topic(entries: list[dict], keys: tuple[str, ...]) -> dict[str, float]:
    """Seconds per variant of each topic, from by-hand entries (each with its topic)."""
    sums: dict[str, list[float]] = {}
    for e in entries:
        sums.setdefault(e["topic"], []).append(sum(e[k] for k in keys))
    return {t: round(sum(v) / len(v), 3) for t, v in sums.items()}


def _ratio(tool_s, hand_s):
    return round(tool_s / hand_s, 2) if tool_s is not None and hand_s else None


def topic_costs(cold_cache: Path, cold: dict, matrix) -> dict:
    """(l) issue 31's cost: per cell and topic, its control, each of its known-wrong fixes and
    each of its competing fixes in the tool (the cell's timings: control / control_TOPIC,
    mutants_TOPIC, competing_TOPIC over the variants run) against the same variant by hand in the
    same tree (`git apply` + ninja + its tests)."""
    from orchestrator.verdicts.competing import load_competing
    from orchestrator.verdicts.mutants import load_mutants

    # a variant's topic, by its record's name
    topic_of = {f"mutant:{m.name}": m.topic for m in load_mutants(matrix)}
    topic_of.update({f"competing:{c.name}": c.topic for c in load_competing(matrix)})
    out: dict = {}
    for c in cold["cells"]:
        if c["status"] == "skipped" or not any(k.startswith("control_") for k in c["timings"]):
            continue
        recs = [r for r in cold["records"] if r["cell"] == c["cell"]]
        timings = c["timings"]
        controls = topic_controls_by_hand(cold_cache, c, matrix)
        mutants = _per_topic(
            mutants_by_hand(cold_cache, c, matrix)["mutants"], ("apply_s", "build_s", "gate_s")
        )
        competing = _per_topic(
            competing_by_hand(cold_cache, c, matrix)["fixes"], ("apply_s", "build_s", "tests_s")
        )
        row: dict = {}
        for topic, hand_s in controls.items():
            tool_s = timings.get(f"control_{topic}")
            row[topic] = {"control": {"tool_s": tool_s, "by_hand_s": hand_s}}
            row[topic]["control"]["ratio"] = _ratio(tool_s, hand_s)
        for kind, prefix, hand in (
            ("mutants", "mutant:", mutants),
            ("competing", "competing:", competing),
        ):
            for topic, hand_each in hand.items():
                ran = [
                    r
                    for r in recs
                    if r["variant"].startswith(prefix)
                    and r.get("status") != "skipped"
                    and topic_of.get(r["variant"]) == topic
                ]
                step_s = timings.get(f"{kind}_{topic}")
                tool_each = step_s / len(ran) if ran and step_s else None
                row.setdefault(topic, {})[kind] = {
                    "variants": len(ran),
                    "tool_per_variant_s": round(tool_each, 3) if tool_each else None,
                    "by_hand_per_variant_s": hand_each,
                    "ratio": _ratio(tool_each, hand_each),
                }
        out[c["cell"]] = row
    return out


def topics_vs_one(work: Path, targets: list[str], loops: int = 0) -> tuple[dict, Path, dict]:
    """(m) issue 31's cost of the queue: the default run (every active topic) against a run of one
    topic (`--topic accumulator-reset`), the same cells, each in a new cache holding only the
    downloaded sources, no ccache, one after the other, under `loops` busy loops. Also the default
    run's cache and results.json, whose trees (l) measures in."""
    walls, data = {}, {}
    with BusyLoops(loops):
        start = load_note(loops)
        for name, topics in (("default", []), ("one_topic", ["--topic", ONE_TOPIC])):
            cache = linked_downloads(work / f"{name}-cache")
            results = work / f"r-{name}"
            args = ["matrix", "--cache", str(cache), "--results", str(results), "--backend", "cpu"]
            for t in targets:
                args += ["--target", t]
            t_run, p = tool(*args, *topics, env=NO_CCACHE)
            if p.returncode != 0:
                why = f"({p.returncode}): {p.stderr[-800:]}"
                raise SystemExit(f"bench: (m) {name} run failed {why}")
            walls[name] = t_run
            data[name] = json.loads((results / "results.json").read_text())
        end = load_note(loops)
    out = {
        "load_start": start,
        "load_end": end,
        "default_s": round(walls["default"], 2),
        "one_topic_s": round(walls["one_topic"], 2),
        "ratio": round(walls["default"] / walls["one_topic"], 3),
        # each cell's steps: where the difference goes
        "cells": {name: {c["cell"]: c["timings"] for c in d["cells"]} for name, d in data.items()},
    }
    return out, work / "default-cache", data["default"]


def competing_ratios(cold_cache: Path, cold: dict, matrix) -> dict:
    """(i) each competing fix in the tool (its competing step over the fixes it ran) against
    competing_by_hand, per cell of a tool run (`cold`: its results.json) in `cold_cache`."""
    out = {}
    for c in cold["cells"]:
        ran = [
            r
            for r in cold["records"]
            if r["cell"] == c["cell"]
            and r["variant"].startswith("competing:")
            and r.get("status") != "skipped"
        ]
        if not ran or not c["timings"].get("competing"):
            continue
        tool_each = c["timings"]["competing"] / len(ran)
        hand = competing_by_hand(cold_cache, c, matrix)
        out[c["cell"]] = {
            "fixes": len(ran),
            "tool_per_fix_s": round(tool_each, 3),
            "by_hand": hand,
            "ratio": round(tool_each / hand["per_fix_s"], 2) if hand["per_fix_s"] else None,
        }
    return out


def checks_cost(cold_args: list[str]) -> dict:
    """(j) issue 23: the untrusted-input checks in a cached no-change run, from cProfile: the time
    spent in untrusted.py, outdir.py and redact.py entered from outside them, each function's
    time counted per outside caller (a recursive one such as redact_data counts too; before issue
    35 it was left out). Wall time (cProfile's clock, what a load stretches) and, from a second
    profile with a CPU clock, CPU time; the modules' own imports (their `<module>`: json,
    tempfile, ... loaded first there) apart, as `imports_ms`."""
    wall = _profiled(cold_args, "")
    cpu = _profiled(cold_args, "cpu")
    return {
        "profiled_wall_s": wall["wall_s"],
        "checks_ms": wall["checks_ms"],
        "checks_cpu_ms": cpu["checks_ms"],
        "imports_ms": wall["imports_ms"],
        "entries": wall["entries"],
    }


# a profile on the process's CPU clock (`-m cProfile` has no option for it): `-o OUT ARGS...`
_CPU_PROFILE = (
    "import cProfile, runpy, sys, time; out = sys.argv[2]; sys.argv = ['ggml-patch', *sys.argv[3:]]"
    "; p = cProfile.Profile(time.process_time); p.enable(); code = 0\n"
    "try: runpy.run_module('orchestrator', run_name='__main__', alter_sys=True)\n"
    "except SystemExit as e: code = e.code\n"
    "p.disable(); p.dump_stats(out); sys.exit(code)"
)


def _profiled(cold_args: list[str], clock: str) -> dict:
    """One profiled re-run: its wall time and the checks' time (see checks_cost)."""
    import pstats

    with tempfile.TemporaryDirectory(prefix="ggml-patch-bench-prof-") as d:
        prof = Path(d) / "run.prof"
        if clock == "cpu":
            argv = [sys.executable, "-c", _CPU_PROFILE, "-o", str(prof), *cold_args]
        else:
            argv = [sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "orchestrator"]
            argv += cold_args
        t0 = time.monotonic()
        p = subprocess.run(
            argv,
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        wall = time.monotonic() - t0
        if p.returncode != 0:
            raise SystemExit(f"bench: profiled re-run failed ({p.returncode}): {p.stderr[-800:]}")
        stats = pstats.Stats(str(prof)).stats  # type: ignore[attr-defined]
    ours = {f for f in stats if f[0].endswith(CHECK_MODULES)}
    checks, imports, entries = 0.0, 0.0, set()
    for f in ours:
        # (calls, primitive calls, own time, cumulative time) per caller: outside ones only
        outside = sum(v[3] for caller, v in stats[f][4].items() if caller not in ours)
        # a private one is reached through a public one (even via re.sub): counted there
        if not outside or (f[2].startswith("_") and f[2] != "<module>"):
            continue
        entries.add(f"{Path(f[0]).name}:{f[2]}")
        if f[2] == "<module>":
            imports += outside
        else:
            checks += outside
    return {
        "wall_s": round(wall, 3),
        "checks_ms": round(checks * 1000, 1),
        "imports_ms": round(imports * 1000, 1),
        "entries": sorted(entries),
    }


def usable_backends(matrix, cache: Cache) -> list[str]:
    """cpu first (its flags get changed), then the others
    this machine can run (Vulkan on lavapipe)."""
    from orchestrator import backends

    out = []
    for name in matrix.backends:
        b, m = matrix.backend(name), backends.get(name, cache.root)
        if not m.missing_toolchain(b) and not m.missing_device(b):
            out.append(name)
    return sorted(out, key=lambda n: n != "cpu")


def reruns_after_change(base_cache: Path, work: Path, backends: list[str]) -> dict:
    """Copies of matrix.yaml + patches/: one byte in the series, then one backend's flags."""
    out = {}
    tmp = work / "edit"
    shutil.copytree(ROOT / "patches", tmp / "patches")
    text = (
        (ROOT / "matrix.yaml")
        .read_text()
        .replace("path: patches", f"path: {tmp / 'patches'}")
        .replace("native_tests: native_tests", f"native_tests: {ROOT / 'native_tests'}")
    )
    (tmp / "matrix.yaml").write_text(text)
    args = [
        "matrix",
        "--matrix",
        str(tmp / "matrix.yaml"),
        "--cache",
        str(base_cache),
        "--results",
        str(work / "r-edit"),
    ]
    args += [a for b in backends for a in ("--backend", b)]

    def fresh_cells(p):
        data = json.loads((work / "r-edit" / "results.json").read_text())
        return sorted(
            c["cell"] for c in data["cells"] if not c.get("cached") and c["status"] != "skipped"
        )

    def run(what: str) -> None:
        _, p = tool(*args)
        # 9: a backend required here could not run (its cell is failed, not stale)
        if p.returncode not in (0, 9):
            raise SystemExit(
                f"bench: re-run after {what} failed ({p.returncode}): {p.stderr[-800:]}"
            )

    run("nothing changed")  # settle: everything cached for this matrix copy
    # a change no earlier run made: the result cache is
    # content-addressed, so a repeated edit would hit it
    nonce = f"{time.time_ns():x}"
    p0 = sorted((tmp / "patches" / "accumulator-reset").glob("*.patch"))[0]
    text = p0.read_text()
    # in the subject
    edited = text.replace("gradient accumulators", f"gradient accumulators {nonce}", 1)
    if edited == text:
        raise SystemExit(f"bench: {p0.name} has no 'gradient accumulators' to change")
    p0.write_text(edited)
    run("a series change")
    out["series_changed_reran"] = fresh_cells(None)
    if backends:
        b = backends[0]
        (tmp / "matrix.yaml").write_text(
            (tmp / "matrix.yaml")
            .read_text()
            .replace(
                f"  {b}:\n    cmake_flags: [",
                f'  {b}:\n    cmake_flags: ["-DGGML_BENCH_FLAG={nonce}", ',
                1,
            )
        )
        run(f"a change of {b}'s flags")
        out[f"{b}_flags_changed_reran"] = fresh_cells(None)
    return out


def variant_ratios(cold_cache: Path, cold: dict, matrix) -> tuple[dict, dict]:
    """(c) the control against a one-file rebuild by hand and (f) each mutant
    against git apply + gate rebuild + gate run by hand, per cell of a tool run
    (`cold`: its results.json) in `cold_cache`."""
    control = {}
    for c in cold["cells"]:
        # the first topic's control (its records: control:<topic>; its time: control_<topic>)
        recs = [
            r
            for r in cold["records"]
            if r["cell"] == c["cell"] and r["variant"].startswith("control:")
        ][:1]
        topic = recs[0].get("topic") if recs else None
        tool_s = c["timings"].get(f"control_{topic}", 0.0)
        floor = one_file_recompile(cold_cache, c)
        control[c["cell"]] = {
            "tool_s": tool_s,
            "one_file_by_hand_s": round(floor, 2),
            "ratio": round(tool_s / floor, 2) if floor else None,
            "records": len(recs),
        }
    mutants = {}
    for c in cold["cells"]:
        ran = [
            r
            for r in cold["records"]
            if r["cell"] == c["cell"]
            and r["variant"].startswith("mutant:")
            and r.get("status") != "skipped"
        ]
        if not ran or not c["timings"].get("mutants"):
            continue
        tool_each = c["timings"]["mutants"] / len(ran)
        hand = mutants_by_hand(cold_cache, c, matrix)
        mutants[c["cell"]] = {
            "mutants": len(ran),
            "tool_s": c["timings"]["mutants"],
            "tool_per_mutant_s": round(tool_each, 3),
            "by_hand": hand,
            "ratio": round(tool_each / hand["per_mutant_s"], 2) if hand["per_mutant_s"] else None,
            "tool_builds_s": [r["build"].get("duration_s") for r in ran],
        }
    return control, mutants


def cold_run(work: Path, targets: list[str]) -> tuple[float, list[str], dict]:
    """(b): the tool in an empty cache, no ccache, the cpu cells of `targets`."""
    cold_cache = work / "cold-cache"
    cold_args = [
        "matrix",
        "--cache",
        str(cold_cache),
        "--results",
        str(work / "r-cold"),
        "--backend",
        "cpu",
    ]
    for t in targets:
        cold_args += ["--target", t]
    t_cold, p = tool(*cold_args, env=NO_CCACHE)
    if p.returncode != 0:
        raise SystemExit(f"bench: cold run failed ({p.returncode}): {p.stderr[-800:]}")
    return t_cold, cold_args, json.loads((work / "r-cold" / "results.json").read_text())


def loaded_ratios(work: Path, cold_args: list[str], matrix, loops: int) -> dict:
    """(c) and (f) again under `loops` busy loops: the tool re-run (--rerun) in the same trees, then
    the by-hand floors, all under the same load. The re-run takes one cell at a time
    (`--parallel 1`): by hand, one variant competes with the loops; in the default run two cells'
    variants would compete with each other too, a cost of sharing the machine, not of the tool."""
    cache = Path(cold_args[cold_args.index("--cache") + 1])
    args = [a if a != str(work / "r-cold") else str(work / "r-loaded") for a in cold_args]
    args += ["--rerun", *LOADED_RERUN_ARGS]
    with BusyLoops(loops):
        start = load_note(loops)
        t, p = tool(*args, env=NO_CCACHE)
        if p.returncode != 0:
            raise SystemExit(f"bench: loaded re-run failed ({p.returncode}): {p.stderr[-800:]}")
        run = json.loads((work / "r-loaded" / "results.json").read_text())
        control, mutants = variant_ratios(cache, run, matrix)
        competing = competing_ratios(cache, run, matrix)
        end = load_note(loops)
    return {
        "load_start": start,
        "load_end": end,
        "tool_args": list(LOADED_RERUN_ARGS),
        "tool_wall_s": round(t, 2),
        "control": control,
        "mutants": mutants,
        "competing": competing,
    }


def measure_tool(report: dict, work: Path, matrix, args, loads: list[int]) -> None:
    """(a) to (g): the tool against the by-hand route, in the bench's own caches."""
    warm = Cache(default_cache_dir())  # the by-hand route starts from sources already on disk
    targets = [t for t in BY_HAND_TARGETS if not (args.skip_by_hand_llama and t == "llama.cpp")]
    if not args.only_ratios:
        print("bench: (a) by-hand builds:", ", ".join(targets), flush=True)
        report["by_hand"] = {t: by_hand(work / "byhand", matrix, warm, t) for t in targets}
    print("bench: (b) tool cold run", flush=True)
    t_cold, cold_args, cold = cold_run(work, targets)
    # the by-hand route has no mutants: they are measured on their own in (f)
    per_cell = [c["timings"].get("mutants", 0.0) for c in cold["cells"]]
    # where the cells' mutants ran side by side (a cell per core, or sharing the cores), their
    # wall time is about the longest cell's, not the sum
    par = cold.get("parallel") or {}
    side_by_side = bool(par.get("shared_cores")) or (par.get("later_cells_at_once") or 1) > 1
    t_mutants = max(per_cell, default=0.0) if side_by_side else sum(per_cell)
    report["tool_cold"] = {
        "wall_s": round(t_cold, 2),
        "mutants_s": round(t_mutants, 2),
        "orchestrator_cpu_s": cold.get("orchestrator_cpu_s"),
        "cells": {c["cell"]: c["timings"] for c in cold["cells"]},
    }
    print(
        "bench: (c) control marginal cost, (f) mutants: per mutant in the tool and by hand",
        flush=True,
    )
    report["control"], report["mutants"] = variant_ratios(work / "cold-cache", cold, matrix)
    print("bench: (i) competing fixes: per fix in the tool and by hand", flush=True)
    report["competing"] = competing_ratios(work / "cold-cache", cold, matrix)
    measure_topics(report, work, matrix, targets, cold, loads)
    if BUSY_LOOPS in loads:
        print(f"bench: (c) and (f) again under {BUSY_LOOPS} busy loops", flush=True)
        report["loaded"] = loaded_ratios(work, cold_args, matrix, BUSY_LOOPS)
    if 0 not in loads:  # only the loaded measures were asked for: the quiet ones are not reported
        del report["control"], report["mutants"], report["competing"]
    print("bench: (d) re-run with nothing changed", flush=True)
    # the median of three: one start of the interpreter is noisy on a shared machine
    reruns = sorted(tool(*cold_args)[0] for _ in range(3))
    report["rerun_s"] = round(reruns[1], 2)
    print("bench: (j) the untrusted-input checks in that re-run (cProfile)", flush=True)
    report["checks"] = checks_cost(cold_args)
    if args.only_ratios:
        return
    print("bench: re-runs after a change", flush=True)
    report["invalidation"] = reruns_after_change(warm.root, work, usable_backends(matrix, warm))
    if not args.skip_evidence:
        print("bench: (g) fine-tuning evidence, cold then cached", flush=True)
        report["evidence"] = evidence(work / "cold-cache", work, args.evidence_case)


def measure_topics(
    report: dict, work: Path, matrix, targets, cold: dict | None, loads: list[int]
) -> None:
    """(m), then (l) in the cold run (b)'s trees (`cold`: its results.json), or in (m)'s default
    run's without one; then (m) again under two busy loops when `loads` has them."""
    print(f"bench: (m) the default run (every topic) against --topic {ONE_TOPIC}", flush=True)
    report["topics_vs_one"], cache, default = topics_vs_one(work, targets)
    if cold is not None:
        cache, default = work / "cold-cache", cold
    print("bench: (l) each topic's control, known-wrong and competing fixes, tool and by hand")
    report["topics"] = topic_costs(cache, default, matrix)
    if BUSY_LOOPS in loads:
        print(f"bench: (m) again under {BUSY_LOOPS} busy loops", flush=True)
        loaded, _, _ = topics_vs_one(work / "loaded-topics", targets, BUSY_LOOPS)
        report["topics_vs_one_loaded"] = loaded


def only_topics(report: dict, work: Path, matrix, args, loads: list[int]) -> None:
    """--only-topics: (m), then (l) in the trees of (m)'s default run."""
    targets = [t for t in BY_HAND_TARGETS if not (args.skip_by_hand_llama and t == "llama.cpp")]
    measure_topics(report, work, matrix, targets, None, loads)


def only_evidence(report: dict, out: Path, cases: list[str]) -> int:
    """(g) alone: a new cache, the pinned sdists linked
    from the user's (only read), nothing else."""
    with tempfile.TemporaryDirectory(prefix="ggml-patch-bench-") as tmpdir:
        work = Path(tmpdir)
        cache = work / "cold-cache"
        shared = default_cache_dir() / "downloads"
        for folder in shared.iterdir() if shared.is_dir() else []:
            (cache / "downloads" / folder.name).mkdir(parents=True)
            for f in folder.iterdir():
                os.symlink(f, cache / "downloads" / folder.name / f.name)
        print("bench: (g) fine-tuning evidence, cold then cached", flush=True)
        report["evidence"] = evidence(cache, work, cases)
        # the cold run's own documents (finetune.json, .md, the plot): a fresh evidence record
        shutil.copytree(work / "r-evidence", out / "evidence-results", dirs_exist_ok=True)
    report["ratios"] = {
        "evidence_rerun_s": report["evidence"]["cached"]["wall_s"],
        "evidence_cold_s": report["evidence"]["cold"]["wall_s"],
    }
    report["met"] = {k: report["ratios"][k] <= GOALS[k] for k in report["ratios"]}
    (out / "bench.json").write_text(json.dumps(report, indent=2) + "\n")
    text = (
        "\n".join(
            [
                "# ggml-patch speed benchmark: the fine-tuning evidence only",
                "",
                f"Machine: {report['machine']['cores']} cores.",
            ]
            + evidence_markdown(report["evidence"])
        )
        + "\n"
    )
    (out / "bench.md").write_text(text)
    print(text)
    return 0 if all(report["met"].values()) else 1


def evidence(cache: Path, work: Path, cases: list[str]) -> dict:
    """`ggml-patch evidence` cold (a new build tree, no ccache) in the cold run's
    cache (the sdist and the cell's worktree are there), then with nothing
    changed. Its own timings come from finetune.json."""
    results = work / "r-evidence"
    args = ["evidence", "--cache", str(cache), "--results", str(results)] + [
        a for c in cases for a in ("--case", c)
    ]
    shutil.rmtree(cache / "cells" / "llama.cpp-cpu" / "build-finetune", ignore_errors=True)
    # the model made and pre-trained again
    shutil.rmtree(cache / "evidence" / "models", ignore_errors=True)
    r0 = _children_cpu()
    t_cold, p = tool(*args, env=NO_CCACHE)
    cpu_cold = _children_cpu() - r0
    if p.returncode != 0:
        raise SystemExit(f"bench: evidence cold run failed ({p.returncode}): {p.stderr[-800:]}")
    data = json.loads((results / "evidence" / "finetune.json").read_text())
    t_cached, p = tool(*args)
    if p.returncode != 0 or "cached result" not in p.stderr:
        raise SystemExit(
            f"bench: evidence re-run was not the cached result ({p.returncode}): {p.stderr[-800:]}"
        )
    timings = data.get("timings", {})
    epochs = sum(len(r["epochs"]) for r in data["runs"])
    return {
        "cases": sorted(
            {
                f"{r['optimizer']}:{r['lr']:g}:{r['opt_period']}:{len(r['epochs'])}"
                for r in data["runs"]
            }
        ),
        "cold": {
            "wall_s": round(t_cold, 2),
            "cpu_s": round(cpu_cold, 2),
            "timings": timings,
            "runs": len(data["runs"]),
            "epochs": epochs,
            "cpu_s_per_epoch": round(timings.get("runs_cpu_s", 0) / max(epochs, 1), 2),
        },
        "cached": {"wall_s": round(t_cached, 2)},
        "verdicts": {
            f"{v['optimizer']} lr {v['lr']:g} opt_period {v['opt_period']}": v["label"]
            for v in data.get("verdicts", [])
        },
    }
