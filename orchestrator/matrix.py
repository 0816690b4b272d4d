"""The matrix run: for each target x backend cell, fetch, apply, build, test, then the
negative control on the same build tree. Errors in one cell are recorded; the others go on."""
from __future__ import annotations

import concurrent.futures
import json
import resource
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from . import __version__, attribution, backends, classify, cmake, resultcache, sources, toolchain, training
from .cache import Cache, slug
from .config import Backend, Matrix, Target
from .errors import BuildFailed, ExitCode, GgmlPatchError, SeriesDoesNotApply
from .layout import GATE_TEST, TESTS, UPSTREAM_TEST, BuildPlan, build_plan, get_layout
from .progress import Reporter
from .series import Series, render
from .series_files import load_series, write_patches
from .snapshots import SnapshotRepo, Worktree
from .testrun import TestRun, run_test


@dataclass
class RunOptions:
    matrix: Matrix
    cache: Cache
    results_dir: Path
    profile: str = "default"
    targets: list[str] = field(default_factory=list)
    backends: list[str] = field(default_factory=list)
    build_only: bool = False  # build (not skip) cells whose toolchain is here but whose device is not
    rerun: bool = False  # ignore cached cell results
    parallel: Optional[int] = None  # cells at once (default: as many as cores, at most the cells)
    require_backends: tuple[str, ...] = ()  # a skip of these is a failure (a CI runner meant to have them)


def plan_parallelism(n_cells: int, cores: int, parallel: Optional[int]) -> tuple[int, int]:
    """(cells at once, compile jobs per cell): never more compile jobs than cores in all."""
    workers = max(1, min(parallel or cores, n_cells, cores))
    return workers, max(1, cores // workers)


def run_matrix(opts: RunOptions, reporter: Optional[Reporter] = None) -> dict:
    series = load_series(opts.matrix)
    cells = opts.matrix.cells(opts.profile, opts.targets, opts.backends)
    reporter = reporter or Reporter(len(cells))
    repo = SnapshotRepo(opts.cache.snapshots_git)
    started = time.time()
    cpu0 = _own_cpu_s()
    workers, n_jobs = plan_parallelism(len(cells), cmake.jobs(), opts.parallel)
    if workers == 1:
        done = [run_cell(opts, series, repo, t, b, reporter, n_jobs) for t, b in cells]
    else:
        done = _run_parallel(opts, series, repo, cells, reporter, workers, n_jobs)
    cell_results = [c for c, _ in done]
    records = [r for _, recs in done for r in recs]
    return {
        "schema_version": 1,
        "tool": "ggml-patch",
        "matrix": str(opts.matrix.path),
        "profile": opts.profile,
        "series": series_info(series),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "duration_s": round(time.time() - started, 2),
        "orchestrator_cpu_s": round(_own_cpu_s() - cpu0, 2),  # this process only: not git, cmake, compilers, tests
        "parallel": {"cells_at_once": workers, "jobs_per_build": n_jobs},
        "exit_code": int(overall_exit_code(cell_results)),
        "cells": cell_results,
        "records": records,
    }


def _run_parallel(opts, series, repo, cells, reporter: Reporter, workers: int, n_jobs: int) -> list:
    """Independent cells overlap (one fetches or links while another compiles); results keep the
    matrix's order. On Ctrl-C or SIGTERM (raised in this thread) the other cells stop at their next
    step or build line: their compilers are killed and a reverted tree is put back."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(run_cell, opts, series, repo, t, b, reporter, n_jobs) for t, b in cells]
        try:
            return [f.result() for f in futures]
        except BaseException:
            reporter.cancel()
            for f in futures:
                f.cancel()
            concurrent.futures.wait(futures)
            raise


def _own_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def series_info(series: Series) -> dict:
    return {"layout": series.layout, "sha256": series.sha256,
            "patches": [{"name": p.name, "subject": p.subject, "author": p.author} for p in series.patches]}


def overall_exit_code(cells: list[dict]) -> ExitCode:
    codes = [c["exit_code"] for c in cells if c["exit_code"]]
    return ExitCode(min(codes)) if codes else ExitCode.OK


def run_cell(opts: RunOptions, series: Series, repo: SnapshotRepo, target: Target, backend: Backend,
             reporter: Reporter, n_jobs: Optional[int] = None) -> tuple[dict, list[dict]]:
    cell_id = f"{target.name}/{backend.name}"
    reporter.start_cell(cell_id)
    cell = {"cell": cell_id, "target": target.name, "backend": backend.name, "layout": target.layout,
            "status": "error", "reason": "", "exit_code": int(ExitCode.TOOL_ERROR), "timings": {}}
    records: list[dict] = []
    module = backends.get(backend.name, opts.cache.root)
    action, why = cell_action(module.missing_toolchain(backend), module.missing_device(backend),
                              module.build_only_ok, opts.build_only)
    if action == "skip" and backend.name in opts.require_backends:
        why = f"{backend.name} is required here (--require-backend {backend.name}) but cannot run: {why}"
        reporter.cell_result("failed", why)
        cell.update(status="failed", reason=why, exit_code=int(ExitCode.BACKEND_MISSING))
        return cell, records
    if action == "skip":
        reporter.skip(why)
        cell.update(status="skipped", reason=why, exit_code=0)
        return cell, records
    cell["device"] = module.device_info(backend)
    logs = opts.results_dir / "logs" / slug(cell_id)
    try:
        with opts.cache.lock(f"cell-{cell_id}"):
            _run_cell_locked(opts, series, repo, target, backend, module, reporter, cell, records, logs,
                             build_only_reason=why if action == "build-only" else None, n_jobs=n_jobs)
    except BuildFailed as e:
        cell.update(status="failed", reason=str(e), exit_code=int(e.exit_code))
    except GgmlPatchError as e:
        cell.update(status="error", reason=str(e), exit_code=int(e.exit_code))
    reporter.cell_result(cell["status"], cell["reason"])
    return cell, records


def cell_action(no_toolchain: Optional[str], no_device: Optional[str], build_only_ok: bool,
                build_only: bool) -> tuple[str, str]:
    """("run" | "build-only" | "skip", why). A skip's reason names everything missing; a cell whose
    toolchain is here but whose device is not is built on request (--build-only) where that means
    something (CUDA), and never counts as passed."""
    if no_toolchain:
        also = f"; {no_device}" if no_device and no_device not in no_toolchain else ""
        return "skip", no_toolchain + also
    if no_device:
        if build_only and build_only_ok:
            return "build-only", no_device
        return "skip", no_device
    return "run", ""


def _timed(cell: dict, name: str, t0: float) -> None:
    cell["timings"][name] = round(time.monotonic() - t0, 2)


def _run_cell_locked(opts, series, repo, target, backend, module, reporter, cell, records, logs,
                     build_only_reason: Optional[str] = None, n_jobs: Optional[int] = None) -> None:
    layout = get_layout(target.layout, target.prefix)
    src_layout = get_layout(series.layout)

    reporter.step("fetch", f"{target.source.kind} {target.source.key}")
    t0 = time.monotonic()
    snap = sources.snapshot(target.source, opts.cache, repo)
    cell["source"] = {"kind": target.source.kind, "description": snap.description, **snap.provenance,
                      "base_commit": snap.commit}
    _timed(cell, "fetch", t0)
    reporter.done(snap.description)

    reporter.step("apply", f"{len(series.patches)} patches, layout {layout.name}")
    t0 = time.monotonic()
    rendered = render(series, src_layout, layout, lambda p: repo.read_blob(snap.commit, p))
    cell_dir = opts.cache.cell_dir(cell["cell"])
    env = module.test_env(backend)
    key = resultcache.cell_key({
        "tool": __version__, "base": snap.commit, "series": rendered.sha256, "layout": [layout.name, layout.prefix],
        "harness": _harness_files(opts.matrix.native_tests_dir),
        "flags": module.configure_flags(backend), "env": env, "timeout": backend.timeout,
        "build_only": build_only_reason is not None, "toolchain": toolchain.versions()})
    cell["cache_key"] = key
    if not opts.rerun and _reuse_cached(opts.cache, key, cell, records, logs):
        _timed(cell, "apply", t0)
        reporter.done(f"cached result, nothing changed (key {key[:12]}; --rerun to run it again)")
        return
    worktree = Worktree(repo, cell_dir / "src")
    try:
        head = apply_series(worktree, snap.commit, rendered, cell_dir)
    except SeriesDoesNotApply as e:
        raise SeriesDoesNotApply(f"the series does not apply to {snap.description}: {e}") from None
    cell["patched_commit"] = head
    _timed(cell, "apply", t0)
    reporter.done(f"patched commit {head[:12]}")

    plan = build_plan(layout, str(worktree.path), str(_harness(opts.matrix.native_tests_dir, cell_dir)))
    build_dir = cell_dir / "build"
    reporter.step("configure", f"cmake {module.name}")
    t0 = time.monotonic()
    step = cmake.configure(plan, build_dir, module.configure_flags(backend), logs / "configure.log", env)
    _timed(cell, "configure", t0)
    cmake.require(step, "cmake configure")
    reporter.done("reused" if step.skipped else "configured")

    fix_paths = rendered.fix_paths()
    run_tests = build_only_reason is None
    patched = _variant(cell, "patched", plan, build_dir, backend, env, logs, reporter, run_tests, n_jobs)
    records.append(patched)

    reporter.step("control", f"revert {', '.join(fix_paths)}, keep the test")
    t0 = time.monotonic()
    diff = worktree.diff(snap.commit, fix_paths)
    worktree.apply_reverse(diff)
    try:
        control = _variant(cell, "control", plan, build_dir, backend, env, logs, reporter, run_tests, n_jobs)
    finally:
        worktree.restore(fix_paths)  # the tree is left patched whatever happened
    _timed(cell, "control", t0)  # the control's whole marginal cost: revert, rebuild, tests, restore
    control["reverted"] = fix_paths
    if not run_tests:
        records.append(control)
        _finish_build_only(cell, control, build_only_reason, records)
        _store_cached(opts.cache, key, cell, records, logs)
        return

    # each test failing with the fix, against the same test (and device) without it
    entries = attribution.attribute(patched["tests"], control["tests"], control["build"]["ok"])
    cell["attribution"] = entries
    opt_pre = attribution.pre_existing_only(entries, UPSTREAM_TEST)
    v = classify.control_verdict(
        control["build"]["ok"], _outcome(control, GATE_TEST), _exit(control, GATE_TEST),
        control["tests"].get(GATE_TEST, {}).get("output", ""), _outcome(control, UPSTREAM_TEST),
        attribution.describe([e for e in entries if e["test"] == UPSTREAM_TEST], labels=False) if opt_pre else None)
    control.update(status=v.verdict, verdict=v.verdict, verdict_reason=v.reason,
                   failure_line=classify.gate_failure_line(control["tests"].get(GATE_TEST, {}).get("output", "")))
    records.append(control)

    if "training" in patched and "training" in control:
        p_ep, c_ep = patched["training"]["epochs"], control["training"]["epochs"]
        cell["training"] = {"with_fix": p_ep, "without_fix": c_ep,
                            "diverges_as_predicted": training.diverges_as_predicted(p_ep, c_ep)}
    patched_outcomes = {n: t["outcome"] for n, t in patched["tests"].items()}
    kind = attribution.failure_kind(entries)
    if kind:
        cell["failure_kind"] = kind
    status, reason = classify.cell_status(patched["build"]["ok"], patched_outcomes, v, attribution.summary(entries))
    code = ExitCode.OK
    if status != classify.PASSED:
        if not patched["build"]["ok"]:
            code = ExitCode.BUILD_FAILED
        elif any(o != classify.PASSED for o in patched_outcomes.values()):
            code = ExitCode.EXPECTATIONS_NOT_MET
        else:
            code = ExitCode.CONTROL_NOT_KILLED
    cell.update(status=status, reason=reason, exit_code=int(code))
    for rec in records:
        for t in rec["tests"].values():
            t.pop("output", None)
    _store_cached(opts.cache, key, cell, records, logs)


def _results_dir(cache: Cache) -> Path:
    return cache.root / "results"


def _store_cached(cache: Cache, key: str, cell: dict, records: list[dict], logs: Path) -> None:
    """Keep a finished cell's result and logs, to be reused while nothing it depends on changes."""
    entry_logs = _results_dir(cache) / f"{key}-logs"
    if entry_logs.exists():
        shutil.rmtree(entry_logs)
    if logs.exists():
        shutil.copytree(logs, entry_logs)
    resultcache.store(_results_dir(cache), key, {"cell": cell, "records": records, "logs": str(logs)})


def _reuse_cached(cache: Cache, key: str, cell: dict, records: list[dict], logs: Path) -> bool:
    entry = resultcache.load(_results_dir(cache), key)
    if not entry:
        return False
    entry_logs = _results_dir(cache) / f"{key}-logs"
    if entry_logs.exists():
        shutil.copytree(entry_logs, logs, dirs_exist_ok=True)
    old = entry.get("logs", "")
    text = json.dumps({"cell": entry["cell"], "records": entry["records"]})
    restored = json.loads(text.replace(json.dumps(old)[1:-1], json.dumps(str(logs))[1:-1]) if old else text)
    timings = dict(cell["timings"])
    cell.update({k: v for k, v in restored["cell"].items() if k not in ("timings",)})
    cell["timings"] = timings
    cell["cached"] = {"key": key, "timings_of_the_run": restored["cell"].get("timings", {})}
    records.extend(restored["records"])
    return True


def _finish_build_only(cell: dict, control: dict, no_device: str, records: list[dict]) -> None:
    if not control["build"]["ok"]:
        cell.update(status="failed", exit_code=int(ExitCode.BUILD_FAILED),
                    reason=f"built with the fix, but the control (fix reverted) did not build: {control['build']['error']}")
    else:
        cell.update(status="build-only", exit_code=0,
                    reason=f"built with and without the fix; tests not run: {no_device}")
    for rec in records:
        for t in rec["tests"].values():
            t.pop("output", None)


_HARNESS_FILES = ("CMakeLists.txt", "extra-programs.cmake", "train-opt-dynamic.cpp")


def _harness_files(native_tests: Path) -> dict[str, str]:
    return {name: (native_tests / name).read_text(encoding="utf-8") for name in _HARNESS_FILES}


def _harness(native_tests: Path, cell_dir: Path) -> Path:
    """The CMake harness and the training program, copied into the cell so the build tree does
    not depend on where this checkout lives (a second clone reuses the same build tree).
    Unchanged files are not rewritten, so nothing recompiles."""
    out = cell_dir / "harness"
    out.mkdir(parents=True, exist_ok=True)
    for name, text in _harness_files(native_tests).items():
        dst = out / name
        if not dst.exists() or dst.read_text(encoding="utf-8") != text:
            dst.write_text(text, encoding="utf-8")
    return out


def _outcome(rec: dict, test: str) -> Optional[str]:
    return rec["tests"].get(test, {}).get("outcome")


def _exit(rec: dict, test: str) -> Optional[int]:
    return rec["tests"].get(test, {}).get("exit_code")


def apply_series(worktree: Worktree, base: str, rendered: Series, cell_dir: Path) -> str:
    """Put the worktree on base + series. A tree already there is left untouched (no file
    times change, so nothing recompiles)."""
    state_file = cell_dir / "state.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    if state.get("base") == base and state.get("series") == rendered.sha256 and state.get("head"):
        if worktree.path.exists() and worktree.head() == state["head"] and worktree.is_clean():
            return state["head"]
    files = write_patches(rendered, cell_dir / "series")
    state_file.unlink(missing_ok=True)
    worktree.ensure(base)
    head = worktree.am(files)
    state_file.write_text(json.dumps({"base": base, "series": rendered.sha256, "head": head}))
    return head


def _variant(cell: dict, variant: str, plan: BuildPlan, build_dir: Path, backend: Backend,
             env: dict[str, str], logs: Path, reporter: Reporter, run_tests: bool = True,
             n_jobs: Optional[int] = None) -> dict:
    rec = {"cell": cell["cell"], "target": cell["target"], "backend": cell["backend"], "variant": variant,
           "status": "", "build": {}, "tests": {}}
    targets = plan.targets + plan.programs
    reporter.step(f"build {variant}", f"targets {' '.join(targets)}")
    step = cmake.build(build_dir, targets, logs / f"build-{variant}.log", env, reporter.build_progress, n_jobs)
    rec["build"] = {"ok": step.ok, "duration_s": round(step.duration_s, 2), "log": step.log, "error": step.error}
    cell["timings"][f"build_{variant}"] = round(step.duration_s, 2)
    if not step.ok:
        rec["status"] = "build-failed"
        reporter.done(f"build failed: {step.error}")
        if variant == "patched":
            raise BuildFailed(f"{cell['cell']}: build failed: {step.error} (log: {step.log})")
        return rec
    reporter.done("built")
    if not run_tests:
        rec["status"] = "built"
        return rec
    for test in TESTS:
        reporter.step(f"test {variant}", test)
        run = run_test(test, test_argv(build_dir / "bin" / test), backend.timeout, env,
                       logs / f"{variant}-{test}.log")
        rec["tests"][test] = _test_record(run)
        reporter.done(rec["tests"][test]["outcome"])
    outcomes = [t["outcome"] for t in rec["tests"].values()]
    rec["status"] = classify.PASSED if all(o == classify.PASSED for o in outcomes) else classify.FAILED
    for program in plan.programs:
        reporter.step(f"train {variant}", program)
        run = run_test(program, test_argv(build_dir / "bin" / program), backend.timeout, env,
                       logs / f"{variant}-{program}.log")
        rec["training"] = {"program": program, "outcome": classify.outcome(run.exit_code, run.timed_out),
                           "duration_s": round(run.duration_s, 3), "log": run.log,
                           "epochs": training.epochs(run.output)}
        reporter.done(f"{len(rec['training']['epochs'])} epochs")
    return rec


def test_argv(binary: Path) -> list[str]:
    """The test's command line. Line-buffered through stdbuf where there is one: a test that
    crashes (abort in a driver) would otherwise lose its buffered stdout, and with it the
    per-device rows that say where it crashed."""
    stdbuf = shutil.which("stdbuf")
    if stdbuf and sys.platform.startswith("linux") and binary.exists():
        return [stdbuf, "-oL", "-eL", str(binary)]
    return [str(binary)]


def _test_record(run: TestRun) -> dict:
    outcome = classify.outcome(run.exit_code, run.timed_out)
    rec = {"outcome": outcome, "exit_code": run.exit_code, "signal": run.signal,
           "duration_s": round(run.duration_s, 3), "log": run.log, "output": run.output}
    if run.name == GATE_TEST:
        rec["rows"] = classify.gate_rows(run.output)
        rec["failure_line"] = classify.gate_failure_line(run.output)
    else:
        rec["rows"] = classify.test_opt_rows(run.output)
    if outcome != classify.PASSED:
        rec["stopped_on"] = attribution.crash_device(rec)  # the device it was on when it died, if any
    rec["summary_line"] = _summary_line(run.output)
    return rec


def _summary_line(output: str) -> Optional[str]:
    for line in reversed(output.splitlines()):
        if "passed" in line:
            return line.strip()
    return None
