"""The goals, each measured number against its goal, and bench.json and bench.md."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .common import ONE_TOPIC
from .newcomer import by_hand_reference_s

GOALS = {
    "cold_vs_by_hand": 0.15,  # issue 35 (issue 24's 0.3 before: the 0.13x measured then kept)
    "control_vs_one_file": 1.2,
    "mutant_vs_by_hand": 1.2,
    "rerun_s": 1.0,
    "own_time_share": 0.05,
    "evidence_rerun_s": 1.0,
    "evidence_cold_s": 900.0,
    # issue 20's 1.5; issue 35: control, known-wrong and competing fix <= 1.2x quiet, 1.5x loaded
    "competing_vs_by_hand": 1.2,
    "checks_ms": 50.0,  # issue 23: the untrusted-input checks in a cached no-change run
    # issue 24: the newcomer's run (2 cores) and the ratios under two busy loops of the bench's own
    # issue 35: as ratios to the by-hand first answer measured in the same run under the same
    # load (absolute seconds do not carry between machines); loaded: within 1.5x of the quiet goal
    "newcomer_first_verdict_vs_by_hand": 1.3,
    "newcomer_total_vs_by_hand": 3.5,
    "newcomer_loaded_first_verdict_vs_by_hand": round(1.3 * 1.5, 2),
    "newcomer_loaded_total_vs_by_hand": round(3.5 * 1.5, 2),
    "newcomer_rerun_s": 1.0,
    "newcomer_loaded_rerun_s": 2.0,
    "loaded_control_vs_one_file": 1.5,
    "loaded_mutant_vs_by_hand": 1.5,
    "loaded_competing_vs_by_hand": 1.5,
    # issue 21: the workflow in act costs little more than the same cells by `nox -s matrix`
    "act_vs_matrix": 1.3,
    "loaded_act_vs_matrix": 1.3,
    # the same, literally as the issue names it: `nox -s matrix` with its own session install
    "act_vs_nox_matrix": 1.3,
    "loaded_act_vs_nox_matrix": 1.3,
    # issue 31: a topic's control, known-wrong fix and competing fix against the same variant by
    # hand, and the default run of the whole queue against a run of its first topic alone
    "topic_control_vs_by_hand": 1.2,
    "topic_mutant_vs_by_hand": 1.2,
    "topic_competing_vs_by_hand": 1.2,
    "three_topics_vs_one": 1.3,
    # the ratio holds on a loaded machine too: both runs under the same two busy loops
    "loaded_three_topics_vs_one": 1.3,
}


def _max_topic_ratio(topics: dict, kind: str):
    found = [
        row[kind]["ratio"]
        for cell in topics.values()
        for row in cell.values()
        if kind in row and row[kind]["ratio"] is not None
    ]
    return max(found) if found else None


def _max_ratio(d: dict):
    return max((v["ratio"] or 0) for v in d.values()) if d else None


def finish(report: dict, out: Path) -> int:
    """The ratios against their goals into bench.json and bench.md; 0 when every goal is met."""
    # another process's builds skew every number
    report["machine"]["loadavg_end"] = list(os.getloadavg())
    report["ratios"] = ratios(report)
    report["met"] = {
        k: report["ratios"][k] is not None and report["ratios"][k] <= GOALS[k]
        for k in GOALS
        if k in report["ratios"]
    }
    (out / "bench.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "bench.md").write_text(markdown(report))
    print((out / "bench.md").read_text())
    return 0 if all(report["met"].values()) else 1


def ratios(report: dict) -> dict:
    """Each measured number against its goal's key (absent: not measured in this run)."""
    r: dict = {}
    if "tool_cold" in report:
        t_cold, t_mutants = report["tool_cold"]["wall_s"], report["tool_cold"]["mutants_s"]
        if "by_hand" in report and "control" in report:
            by_hand_total = sum(v["total_s"] for v in report["by_hand"].values())
            r["cold_vs_by_hand"] = round((t_cold - t_mutants) / by_hand_total, 3)
        if "control" in report:
            r["control_vs_one_file"] = _max_ratio(report["control"])
            r["mutant_vs_by_hand"] = _max_ratio(report["mutants"])
            if report.get("competing"):
                r["competing_vs_by_hand"] = _max_ratio(report["competing"])
        r["rerun_s"] = report["rerun_s"]
        if "checks" in report:
            r["checks_ms"] = report["checks"]["checks_ms"]
        r["own_time_share"] = round((report["tool_cold"]["orchestrator_cpu_s"] or 0.0) / t_cold, 4)
    if "loaded" in report:
        r["loaded_control_vs_one_file"] = _max_ratio(report["loaded"]["control"])
        r["loaded_mutant_vs_by_hand"] = _max_ratio(report["loaded"]["mutants"])
        if report["loaded"].get("competing"):
            r["loaded_competing_vs_by_hand"] = _max_ratio(report["loaded"]["competing"])
    for name, prefix in (("quiet", ""), ("loaded", "loaded_")):
        if name in report.get("act", {}):
            r[f"{prefix}act_vs_matrix"] = report["act"][name]["ratio"]
            # records before it have only the first
            if "ratio_vs_nox_matrix" in report["act"][name]:
                r[f"{prefix}act_vs_nox_matrix"] = report["act"][name]["ratio_vs_nox_matrix"]
    if "topics" in report:
        r["topic_control_vs_by_hand"] = _max_topic_ratio(report["topics"], "control")
        r["topic_mutant_vs_by_hand"] = _max_topic_ratio(report["topics"], "mutants")
        r["topic_competing_vs_by_hand"] = _max_topic_ratio(report["topics"], "competing")
    if "topics_vs_one" in report:
        r["three_topics_vs_one"] = report["topics_vs_one"]["ratio"]
    if "topics_vs_one_loaded" in report:
        r["loaded_three_topics_vs_one"] = report["topics_vs_one_loaded"]["ratio"]
    if "evidence" in report:
        r["evidence_rerun_s"] = report["evidence"]["cached"]["wall_s"]
        r["evidence_cold_s"] = report["evidence"]["cold"]["wall_s"]
    for name, n in report.get("newcomer", {}).items():
        prefix = "newcomer_" if name == "quiet" else "newcomer_loaded_"
        r[f"{prefix}first_verdict_vs_by_hand"] = n.get("first_verdict_vs_by_hand")
        r[f"{prefix}total_vs_by_hand"] = n.get("total_vs_by_hand")
        r[f"{prefix}rerun_s"] = n["rerun_s"]
    return r


NAMES = {
    "cold_vs_by_hand": "cold tool run, mutants excluded / by-hand route",
    "control_vs_one_file": "control / one-file rebuild by hand",
    "mutant_vs_by_hand": "per mutant / git apply + gate rebuild + gate run by hand",
    "competing_vs_by_hand": "per competing fix / git apply on the unfixed tree + "
    "both tests rebuilt and run by hand",
    "checks_ms": "untrusted-input checks in that re-run (ms, cProfile wall, imports apart)",
    "rerun_s": "re-run with nothing changed (s)",
    "own_time_share": "orchestrator's own time / cold run",
    "evidence_rerun_s": "evidence re-run with nothing changed (s)",
    "evidence_cold_s": "evidence cold, default cases (s)",
    "newcomer_first_verdict_vs_by_hand": "newcomer, quiet: first verdict / by hand (ggml "
    "patched, cmake Release + ninja test-opt + run, no ccache; the mean of before and after), "
    "same load",
    "newcomer_total_vs_by_hand": "newcomer, quiet: whole `pip install 'nox[uv]' && nox -s "
    "matrix` / by hand",
    "newcomer_rerun_s": "newcomer: `ggml-patch matrix` again, nothing changed (s)",
    "newcomer_loaded_first_verdict_vs_by_hand": "newcomer, 2 busy loops: first verdict / by "
    "hand under the same loops",
    "newcomer_loaded_total_vs_by_hand": "newcomer, 2 busy loops: whole run / by hand",
    "newcomer_loaded_rerun_s": "newcomer, 2 busy loops: nothing changed re-run (s)",
    "loaded_control_vs_one_file": "2 busy loops: control / one-file rebuild by hand",
    "loaded_mutant_vs_by_hand": "2 busy loops: per mutant / by hand",
    "loaded_competing_vs_by_hand": "2 busy loops: per competing fix / by hand",
    "act_vs_matrix": "the matrix workflow in act / `ggml-patch "
    "matrix`, default cpu legs, warm ccache",
    "loaded_act_vs_matrix": "2 busy loops: the matrix workflow in act / `ggml-patch matrix`",
    "act_vs_nox_matrix": "the matrix workflow in act / `nox -s matrix` (its session "
    "install included), default cpu legs, warm ccache",
    "loaded_act_vs_nox_matrix": "2 busy loops: the matrix workflow in act / `nox -s matrix`",
    "topic_control_vs_by_hand": "a topic's control / git apply -R of its hunks + both tests "
    "rebuilt and run by hand (worst topic and cell)",
    "topic_mutant_vs_by_hand": "a topic's known-wrong fix / git apply + both tests rebuilt "
    "and run by hand (worst topic and cell)",
    "topic_competing_vs_by_hand": "a topic's competing fix / the same by hand (worst topic "
    "and cell)",
    "three_topics_vs_one": f"the default run (every topic), cold / --topic {ONE_TOPIC}, cold",
    "loaded_three_topics_vs_one": f"2 busy loops: the default run, cold / --topic {ONE_TOPIC}, "
    "cold",
}


def markdown(r: dict) -> str:
    load = " ".join(
        f"{k.split('_')[1]} {' '.join(f'{x:.2f}' for x in v)}"
        for k, v in r["machine"].items()
        if k.startswith("loadavg")
    )
    lines = [
        "# ggml-patch speed benchmark",
        "",
        f"Machine: {r['machine']['cores']} cores; load average (1, 5, 15 min): "
        f"{load or 'not recorded'}.",
        "",
        "| measure | value | goal | met |",
        "|---|---|---|---|",
    ]
    for k, goal in r["goals"].items():
        if k not in r["ratios"]:
            continue
        lines.append(
            f"| {NAMES[k]} | {r['ratios'][k]} | <= {goal} | {'yes' if r['met'][k] else 'NO'} |"
        )
    if "checks" in r:
        c = r["checks"]
        lines += [
            "",
            f"Untrusted-input checks in a cached re-run (cProfile): {c['checks_ms']} ms wall, "
            f"{c.get('checks_cpu_ms')} ms CPU; their modules' own imports apart: "
            f"{c.get('imports_ms')} ms wall.",
        ]
    if "newcomer" in r:
        lines += newcomer_markdown(r["newcomer"])
    if "by_hand" in r:
        lines += [
            "",
            "## By hand (s)",
            "",
            "| target | variant | configure | build | tests |",
            "|---|---|---|---|---|",
        ]
        for t, v in r["by_hand"].items():
            for variant in ("patched", "control"):
                x = v[variant]
                lines.append(
                    f"| {t} | {variant} | {x['configure_s']} | {x['build_s']} | {x['tests_s']} |"
                )
    if "tool_cold" in r:
        lines += [
            "",
            f"Tool cold run: {r['tool_cold']['wall_s']} s wall, of which mutants "
            f"{r['tool_cold'].get('mutants_s', 0.0)} s; orchestrator CPU "
            f"{r['tool_cold']['orchestrator_cpu_s']} s.",
        ]
        if "control" in r:
            lines += ratio_tables(r["control"], r["mutants"], "")
        if r.get("competing"):
            lines += competing_table(r["competing"], "")
    if "loaded" in r:
        ld = r["loaded"]
        how = (
            f", under {ld['load_start']['busy_loops']} busy loops "
            f"(load average {ld['load_start']['loadavg']} -> {ld['load_end']['loadavg']}; "
            f"the tool re-run with {' '.join(ld.get('tool_args', [])) or 'no options'})"
        )
        lines += ratio_tables(ld["control"], ld["mutants"], how)
        if ld.get("competing"):
            lines += competing_table(ld["competing"], how)
    if "invalidation" in r:
        lines += ["", "## Re-runs after a change", ""]
        for k, v in r["invalidation"].items():
            lines.append(f"- {k.replace('_', ' ')}: {', '.join(v) or 'none'}")
    if "topics" in r:
        lines += topics_markdown(r["topics"], r.get("topics_vs_one"), r.get("topics_vs_one_loaded"))
    if "act" in r:
        lines += act_markdown(r["act"])
    if "evidence" in r:
        lines += evidence_markdown(r["evidence"])
    return "\n".join(lines) + "\n"


def topics_markdown(topics: dict, vs_one, vs_one_loaded=None) -> list[str]:
    """(l) per cell and topic, (m) in one line (and one more under busy loops)."""
    lines = [
        "",
        "## Per topic: the tool against the same variant by hand (s, no ccache)",
        "",
        "| cell | topic | control: tool / by hand (ratio) | known-wrong fixes: n, tool / by "
        "hand per fix (ratio) | competing fixes: n, tool / by hand per fix (ratio) |",
        "|---|---|---|---|---|",
    ]
    for cell, rows in topics.items():
        for topic, row in rows.items():
            cols = []
            c = row.get("control")
            cols.append(f"{c['tool_s']} / {c['by_hand_s']} ({c['ratio']})" if c else "-")
            for kind in ("mutants", "competing"):
                v = row.get(kind)
                cols.append(
                    f"{v['variants']}, {v['tool_per_variant_s']} / {v['by_hand_per_variant_s']} "
                    f"({v['ratio']})"
                    if v
                    else "-"
                )
            lines.append(f"| {cell} | {topic} | {' | '.join(cols)} |")
    if vs_one:
        lines += [
            "",
            f"The default run (every topic) {vs_one['default_s']} s against `--topic "
            f"{ONE_TOPIC}` {vs_one['one_topic_s']} s, cold, same cells: {vs_one['ratio']}x "
            f"(load average {vs_one['load_start']['loadavg']} -> {vs_one['load_end']['loadavg']}).",
        ]
    if vs_one_loaded:
        v = vs_one_loaded
        lines += [
            "",
            f"Under {v['load_start']['busy_loops']} busy loops: {v['default_s']} s against "
            f"{v['one_topic_s']} s: {v['ratio']}x (load average {v['load_start']['loadavg']} -> "
            f"{v['load_end']['loadavg']}).",
        ]
    return lines


def act_markdown(a: dict) -> list[str]:
    lines = [
        "",
        "## The matrix workflow in act against `ggml-patch matrix` (default cpu legs, warm ccache)",
        "",
        "Both from a new tool cache holding only the downloaded sdists, one ccache warmed "
        f"by an untimed `ggml-patch matrix` of the same cells ({a['warm_up']['wall_s']} "
        f"s); act pinned to cores {a['act_cpus']}.",
        "",
        "| run | load average start -> end | `ggml-patch matrix` (s) | ccache hits/misses | act "
        "(s) | ccache hits/misses | act's jobs (s) | ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    tail = [
        "",
        "Beyond the cells, act's run also bundles (its aggregate job, from a new tool cache "
        "holding the downloads and the snapshot repositories the cpu legs hand over through "
        "the Actions cache: each base checked out again, the series applied and verified by "
        "a build and both tests) and reports; `ggml-patch bundle` after `ggml-patch "
        "matrix`, in that run's cache, for comparison:",
        "",
        "| run | `ggml-patch bundle` (s) | act's Bundle "
        "(default) step (s) | act / (matrix + bundle) |",
        "|---|---|---|---|",
    ]
    handed = []
    for name in ("quiet", "loaded"):
        if name not in a:
            continue
        x = a[name]
        m, t = x["matrix"], x["act"]
        jobs_s = ", ".join(f"{k} {v}" for k, v in t["jobs_s"].items())
        lines.append(
            f"| {name} ({x['load_start']['busy_loops']} busy loops) | {x['load_start']['loadavg']} "
            f"-> {x['load_end']['loadavg']} | {m['wall_s']} | "
            f"{m['ccache']['hits']}/{m['ccache']['misses']} | {t['wall_s']} | "
            f"{t['ccache']['hits']}/{t['ccache']['misses']} | {jobs_s} | {x['ratio']} |"
        )
        tail.append(
            f"| {name} | {m.get('bundle_s')} | "
            f"{t.get('bundle_step_s')} | {x.get('ratio_with_bundle')} |"
        )
        if t.get("handover_s") or t.get("restores_s"):
            handed.append(
                f"| {name} | {_steps(t.get('handover_s'))} | {_steps(t.get('restores_s'))} |"
            )
    if handed:
        tail += [
            "",
            "The hand-over's own cost in act (the cache stand-in: hard links in, a copy out):",
            "",
            "| run | the legs' saves (s) | the aggregate's restores (s) |",
            "|---|---|---|",
            *handed,
        ]
    return lines + tail + nox_matrix_markdown(a)


def _steps(by_job: dict | None) -> str:
    return ", ".join(f"{k} {v}" for k, v in (by_job or {}).items()) or "-"


def nox_matrix_markdown(a: dict) -> list[str]:
    """The `nox -s matrix` measure: its session install
    against its matrix, act's own install steps."""
    runs = [name for name in ("quiet", "loaded") if "nox_matrix" in a.get(name, {})]
    if not runs:
        return []
    lines = [
        "",
        "`nox -s matrix -- <the same arguments>` in the same clone, as a user runs it (a new "
        "session venv, the tool installed with constraints.txt, pip's cache as it was); "
        "act's install steps are its test stand-in (the tool comes from the bench's "
        "environment, offline), not a real `pip install`:",
        "",
        "| run | `nox -s matrix` (s) | its session install (s) | its `ggml-patch matrix` (s) | "
        "ccache hits/misses | act's install steps (s) | act / `nox -s matrix` |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in runs:
        x = a[name]
        n, steps = x["nox_matrix"], x["act"].get("install_steps_s") or {}
        installs = ", ".join(f"{k} {v}" for k, v in steps.items()) or "not in act's log"
        lines.append(
            f"| {name} | {n['wall_s']} | {n['install_s']} | {n['matrix_s']} "
            f"| {n['ccache']['hits']}/{n['ccache']['misses']} | {installs} "
            f"| {x['ratio_vs_nox_matrix']} |"
        )
    return lines


def competing_table(competing: dict, how: str) -> list[str]:
    lines = [
        "",
        f"## Competing fixes (s per fix, no ccache){how}",
        "",
        "| cell | fixes | tool, per fix | by hand: apply + both tests rebuilt and run | ratio |",
        "|---|---|---|---|---|",
    ]
    for c, v in competing.items():
        lines.append(
            f"| {c} | {v['fixes']} | {v['tool_per_fix_s']} | "
            f"{v['by_hand']['per_fix_s']} | {v['ratio']} |"
        )
    return lines


def ratio_tables(control: dict, mutants: dict, how: str) -> list[str]:
    lines = [
        "",
        f"## Control (s){how}",
        "",
        "| cell | tool | one-file rebuild by hand | ratio |",
        "|---|---|---|---|",
    ]
    for c, v in control.items():
        lines.append(f"| {c} | {v['tool_s']} | {v['one_file_by_hand_s']} | {v['ratio']} |")
    lines += [
        "",
        f"## Known-wrong fixes (s per mutant, no ccache){how}",
        "",
        "| cell | mutants | tool, per mutant | by hand: apply + gate rebuild + gate run | ratio |",
        "|---|---|---|---|---|",
    ]
    for c, v in mutants.items():
        lines.append(
            f"| {c} | {v['mutants']} | {v['tool_per_mutant_s']} | "
            f"{v['by_hand']['per_mutant_s']} | {v['ratio']} |"
        )
    return lines


def newcomer_markdown(n: dict) -> list[str]:
    lines = [
        "",
        "## Newcomer: fresh clone, empty HOME, `pip "
        "install 'nox[uv]' && nox -s matrix` (s from the start)",
        "",
        "| run | load average start -> end | pip install 'nox[uv]' | nox's own install done "
        "| first verdict | end | CPU of the run | re-run, nothing changed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, x in n.items():
        lines.append(
            f"| {name} ({x['load_start']['busy_loops']} busy loops) | {x['load_start']['loadavg']} "
            f"-> {x['load_end']['loadavg']} | {x['pip_install_nox_s']} | {x['nox_install_s']} | "
            f"{x['first_verdict_s']} | {x['total_s']} | {x.get('cpu_s')} | {x['rerun_s']} |"
        )
    for name, x in n.items():
        cells = ", ".join(f"{c} {v['total_s']} s ({v['status']})" for c, v in x["cells"].items())
        args = " ".join(x.get("matrix_args") or [])
        lines += [
            "",
            f"{name}: commit {x['commit'][:12]}"
            + (f"; ran `nox -s matrix -- {args}`" if args else "")
            + f"; first verdict: `{x['first_verdict']}`; cells: {cells}.",
        ]
        hand = x.get("by_hand_first_answer")
        if hand:  # records before issue 35 have no reference
            after = x.get("by_hand_first_answer_after")
            measured = f"{hand['total_s']} s"
            if after:
                measured += f" before, {after['total_s']} s after, mean {by_hand_reference_s(x)} s"
            lines.append(
                f"{name}: by hand (ggml patched, configure + ninja test-opt + run, no ccache) "
                f"{measured}: first verdict {x['first_verdict_vs_by_hand']}x, "
                f"total {x['total_vs_by_hand']}x."
            )
    return lines


def evidence_markdown(e: dict) -> list[str]:
    c, t = e["cold"], e["cold"]["timings"]
    return [
        "",
        "## Fine-tuning evidence (`ggml-patch evidence`)",
        "",
        f"Cases: {', '.join(e['cases'])}; {c['runs']} runs, {c['epochs']} epochs in all.",
        "",
        "| | wall (s) | CPU (s) |",
        "|---|---|---|",
        f"| cold: everything (no ccache, new build tree) | {c['wall_s']} | {c['cpu_s']} |",
        "| cold: llama-finetune (libllama, llama-common, the example), with the fix | "
        f"{t.get('build_patched_s')} | {t.get('build_patched_cpu_s')} |",
        f"| cold: the fix reverted, rebuilt | {t.get('build_control_s')} "
        f"| {t.get('build_control_cpu_s')} |",
        f"| cold: pre-training the tiny model (fixed build) | {t.get('pretrain_s')} | |",
        f"| cold: the runs | {t.get('runs_s')} | {t.get('runs_cpu_s')} |",
        f"| one epoch (CPU) | | {c['cpu_s_per_epoch']} |",
        f"| re-run with nothing changed (cached) | {e['cached']['wall_s']} | |",
        "",
        "| case | verdict |",
        "|---|---|",
    ] + [f"| {k} | {v} |" for k, v in e["verdicts"].items()]
