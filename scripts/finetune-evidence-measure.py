#!/usr/bin/env python3
"""Measure the fine-tuning evidence by hand (issue 17, phase 1), until `ggml-patch evidence` exists.

From a pristine llama.cpp tree (e.g. vendor/llama.cpp of the llama-cpp-python 0.3.36 sdist) and
the fix as a patch file, in WORK (default /work/tmp-evidence; nothing outside it is written):
  1. WORK/llama.cpp: a git copy of the tree (branch `base`), a branch `fix-<patch sha8>` with the
     patch applied (made once per patch, so a reworked patch gets its own branch);
  2. WORK/models/tiny-llama-<seed>.gguf: the tiny llama model (orchestrator.finetune.tiny_model);
  3. WORK/build: native_tests/llama-harness configured once (Ninja, Release, ccache), target
     finetune-opt-dynamic built with the fix (timed);
  4. every case run with the fix; then the fix's hunks reverted in the working tree
     (`git apply -R`), the target rebuilt (timed: one TU + relinks), every case run again, and the
     tree restored;
  5. OUT (default WORK/results-<patch sha8>): finetune.json, finetune.md, finetune-loss.png,
     timings.json and each run's output.

  scripts/finetune-evidence-measure.py --snapshot DIR --patch patches/0001-*.patch [--case adamw:1e-3:128:128:8 ...]

A case is OPTIMIZER:LR:N_BATCH:N_UBATCH:EPOCHS (opt_period = N_BATCH / N_UBATCH).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from orchestrator.finetune import results as ft  # noqa: E402
from orchestrator.finetune import tiny_model as tm  # noqa: E402

from orchestrator.run.toolchain import versions as toolchain_versions  # noqa: E402

DEFAULT_CASES = [
    # ggml-opt's own default AdamW step (alpha 1e-3); SGD at 0.1, where the fixed run learns at a
    # similar pace (at ggml's default 1e-3 the fixed SGD run barely moves from ln(32000))
    "adamw:1e-3:128:128:6", "adamw:1e-3:256:128:6",
    "sgd:1e-1:128:128:6", "sgd:1e-1:256:128:6",
    # finetune.cpp's own defaults (AdamW, lr 1e-5, wd 0, 2 epochs), made for pretrained models
    "adamw:1e-5:128:128:4", "adamw:1e-5:256:128:4",
]
VAL_SPLIT = 0.1
THREADS = 2
cpu_seconds: dict[str, float] = {}  # per run: user + system CPU seconds of the program
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": "evidence",
           "GIT_AUTHOR_EMAIL": "evidence@localhost", "GIT_COMMITTER_NAME": "evidence",
           "GIT_COMMITTER_EMAIL": "evidence@localhost", "GIT_AUTHOR_DATE": "2026-11-30T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-11-30T00:00:00Z"}


def sh(argv: list[str], cwd: Path | None = None, log: Path | None = None, env: dict | None = None) -> float:
    """Run, fail loudly with the log's tail, return the wall seconds."""
    t0, r0 = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_seconds[log.stem if log else Path(argv[0]).name] = round(
        (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), 2)
    if log:
        log.write_text(out.stdout + out.stderr)
    if out.returncode != 0:
        sys.exit(f"error: {' '.join(argv)} exited {out.returncode}:\n{(out.stdout + out.stderr)[-3000:]}")
    return time.monotonic() - t0


def git(tree: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=tree, capture_output=True, text=True, env={**os.environ, **GIT_ENV})
    if out.returncode != 0:
        sys.exit(f"error: git {' '.join(args)} in {tree}: {out.stderr.strip()}")
    return out.stdout.strip()


def prepare_tree(snapshot: Path, tree: Path, patch: Path, branch: str) -> None:
    if not (tree / ".git").is_dir():
        shutil.copytree(snapshot, tree, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        git(tree, "init", "-q", "-b", "base")
        git(tree, "add", "-A")
        git(tree, "commit", "-qm", f"llama.cpp tree from {snapshot}")
    git(tree, "checkout", "-qf", "base")
    if branch not in git(tree, "branch", "--list", branch):
        git(tree, "checkout", "-qb", branch)
        git(tree, "apply", "--index", "--", str(patch))
        git(tree, "commit", "-qm", f"fix: {patch.name}")
    git(tree, "checkout", "-qf", branch)


def parse_case(text: str) -> dict:
    opt, lr, b, ub, epochs = text.split(":")
    if opt not in ("sgd", "adamw") or int(b) % int(ub):
        raise ValueError(f"case {text!r}: expected OPTIMIZER:LR:N_BATCH:N_UBATCH:EPOCHS with sgd|adamw and N_UBATCH | N_BATCH")
    return {"optimizer": opt, "lr": float(lr), "n_batch": int(b), "n_ubatch": int(ub), "epochs": int(epochs)}


def command(binary: Path, model: Path, data: list[Path], case: dict) -> list[str]:
    argv = [str(binary), "-m", str(model)]
    for f in data:
        argv += ["-f", str(f)]
    return argv + ["--optimizer", case["optimizer"], "--lr", f"{case['lr']:g}", "-b", str(case["n_batch"]),
                   "-ub", str(case["n_ubatch"]), "--epochs", str(case["epochs"]), "--val-split", f"{VAL_SPLIT:g}",
                   "-t", str(THREADS)]


def run_cases(variant: str, binary: Path, model: Path, data: list[Path], cases: list[dict], out: Path) -> list[ft.Run]:
    runs = []
    for c in cases:
        argv = command(binary, model, data, c)
        t0, r0 = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.run(argv, capture_output=True, text=True)
        secs, r1 = time.monotonic() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)  # wall time is at the mercy of other load
        cpu_seconds[f"{variant} {c['optimizer']} lr {c['lr']:g} p{c['n_batch'] // c['n_ubatch']}"] = round(cpu, 2)
        period = c["n_batch"] // c["n_ubatch"]
        name = f"{variant}-{c['optimizer']}-lr{c['lr']:g}-p{period}"
        (out / f"{name}.out").write_text(p.stdout)
        (out / f"{name}.err").write_text(p.stderr)
        parsed = ft.parse_output(p.stdout)
        runs.append(ft.Run(variant=variant, optimizer=c["optimizer"], opt_period=period, n_batch=c["n_batch"],
                           n_ubatch=c["n_ubatch"], lr=c["lr"], command=argv, epochs=list(parsed.epochs),
                           exit_code=p.returncode, seconds=round(secs, 2),
                           outcome="ok" if p.returncode == 0 and parsed.complete else "failed"))
        print(f"  {name}: exit {p.returncode}, {secs:.1f} s wall, {cpu:.1f} s CPU, eval " +
              " ".join(f"{e.eval_loss:.3f}" for e in parsed.epochs), flush=True)
    return runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--snapshot", type=Path, required=True, help="a pristine llama.cpp tree")
    ap.add_argument("--patch", type=Path, required=True, help="the fix, a git-style patch in llama.cpp's layout")
    ap.add_argument("--base", default="0c1e57098bba43ac29e6e3b677cdceebdd22334f", help="the snapshot's upstream commit")
    ap.add_argument("--work", type=Path, default=Path("/work/tmp-evidence"))
    ap.add_argument("--out", type=Path)
    ap.add_argument("--build", type=Path, help="the build folder (default WORK/build)")
    ap.add_argument("--case", action="append", help="OPTIMIZER:LR:N_BATCH:N_UBATCH:EPOCHS (repeatable)")
    ap.add_argument("--seed", type=int, default=tm.DEFAULT_SEED)
    a = ap.parse_args()
    cases = [parse_case(c) for c in (a.case or DEFAULT_CASES)]
    patch_sha = hashlib.sha256(a.patch.read_bytes()).hexdigest()
    work = a.work.resolve()
    out = (a.out or work / f"results-{patch_sha[:8]}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    tree, build = work / "llama.cpp", (a.build or work / "build").resolve()
    timings: dict[str, float] = {}

    prepare_tree(a.snapshot.resolve(), tree, a.patch.resolve(), f"fix-{patch_sha[:8]}")
    data = [tree / f for f in ft.DATA_FILES]
    data_sha = ft.data_digest((f, (tree / f).read_bytes()) for f in ft.DATA_FILES)

    model_path = work / "models" / f"tiny-llama-{a.seed}.gguf"
    t0 = time.monotonic()
    model = tm.make(tree / tm.DEFAULT_VOCAB, model_path, a.seed)
    timings["model_s"] = round(time.monotonic() - t0, 2)

    env = {"CCACHE_DIR": os.environ.get("CCACHE_DIR", str(work / "ccache"))}
    flags = {"CMAKE_BUILD_TYPE": "Release", "GGML_CCACHE": "ON", "LLAMA_BUILD_COMMON": "OFF",
             "LLAMA_BUILD_TESTS": "OFF", "LLAMA_BUILD_EXAMPLES": "OFF", "LLAMA_BUILD_SERVER": "OFF",
             "LLAMA_BUILD_TOOLS": "OFF"}
    if not (build / "build.ninja").exists():
        timings["configure_s"] = round(sh(["cmake", "-S", str(ROOT / "native_tests" / "llama-harness"), "-B", str(build),
                                           "-G", "Ninja", f"-DLLAMA_SOURCE_DIR={tree}"] +
                                          [f"-D{k}={v}" for k, v in flags.items()], log=out / "configure.log", env=env), 2)
    ninja = ["ninja", "-C", str(build), "-j2", ft.PROGRAM]
    timings["build_fix_s"] = round(sh(ninja, log=out / "build-fix.log", env=env), 2)
    binary = build / "bin" / ft.PROGRAM

    print(f"with the fix ({a.patch.name}):", flush=True)
    runs = run_cases("with_fix", binary, model_path, data, cases, out)
    git(tree, "apply", "-R", "--", str(a.patch.resolve()))
    try:
        timings["rebuild_without_fix_s"] = round(sh(ninja, log=out / "build-without-fix.log", env=env), 2)
        print("without the fix (its hunks reverted):", flush=True)
        runs += run_cases("without_fix", binary, model_path, data, cases, out)
    finally:
        git(tree, "checkout", "-qf", f"fix-{patch_sha[:8]}")
    timings["rebuild_fix_again_s"] = round(sh(ninja, log=out / "build-fix-again.log", env=env), 2)

    program_sha = hashlib.sha256((ROOT / "native_tests" / f"{ft.PROGRAM}.cpp").read_bytes() +
                                 (ROOT / "native_tests" / "llama-harness" / "CMakeLists.txt").read_bytes()).hexdigest()
    tools = toolchain_versions()
    case_params = [{**c, "val_split": VAL_SPLIT, "threads": THREADS} for c in cases]
    results = ft.FinetuneResults(
        target="llama-cpp-python-0.3.36 vendor/llama.cpp", base=a.base,
        model={"sha256": model.sha256, "seed": model.seed, "dims": model.dims.__dict__, "n_vocab": model.n_vocab,
               "n_params": model.n_params, "vocab_file": tm.DEFAULT_VOCAB, "vocab_sha256": model.vocab_sha256},
        data={"files": list(ft.DATA_FILES), "sha256": data_sha, "tokens": _config_tokens(out)},
        program={"name": ft.PROGRAM, "sha256": program_sha, "patch": a.patch.name, "patch_sha256": patch_sha},
        runs=runs,
        cache_key=ft.cache_key(base=a.base, series=patch_sha, model_sha256=model.sha256, data_sha256=data_sha,
                               program_sha256=program_sha, flags=flags, cases=case_params, toolchain=tools))
    (out / "finetune.json").write_text(results.to_json())
    (out / "timings.json").write_text(json.dumps({**timings, "runs": {f"{r.variant} {r.optimizer} lr {r.lr:g} p{r.opt_period}": r.seconds for r in runs},
                                                  "runs_cpu_s": cpu_seconds, "loadavg_end": os.getloadavg(),
                                                  "toolchain": tools}, indent=2) + "\n")
    (out / "finetune.md").write_text(ft.table_markdown(results))
    try:
        ft.plot(results, out / "finetune-loss.png")
    except RuntimeError as e:
        print(f"no plot: {e}")
    print(ft.table_markdown(results))
    print(json.dumps(timings))
    print(f"written: {out}")
    return 0


def _config_tokens(out: Path):
    """The token count the program reported (the same in every run)."""
    for f in sorted(out.glob("with_fix-*.out")):
        tokens = ft.parse_output(f.read_text()).config.get("tokens")
        if tokens:
            return tokens
    return None


if __name__ == "__main__":
    raise SystemExit(main())
