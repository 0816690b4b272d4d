"""The training evidence's command lines: upstream's unmodified `llama-finetune`
(examples/training/finetune.cpp), its fixed options, the pre-training run, the build commands a
reader runs, and how a run ended. Pure."""

from __future__ import annotations

from typing import Literal, Optional, Sequence

from .cases import N_CTX, Case

PROGRAM = "llama-finetune"  # the target's own examples/training/finetune.cpp, unmodified
PROGRAM_SOURCE = "examples/training/finetune.cpp"
# the two builds, as the matrix names them: with the fix, and with only the fix reverted
Variant = Literal["patched", "control"]
VARIANTS: tuple[Variant, Variant] = ("patched", "control")
# how the progress lines and the tables say them
VARIANT_LABELS: dict[Variant, str] = {"patched": "with fix", "control": "without fix"}

# The texts, shipped in the llama.cpp tree (paths relative to its root): the model is pre-trained
# on one and fine-tuned on the other, so fine-tuning starts from a model that has learned something.
PRETRAIN_FILES = ("CONTRIBUTING.md",)
DATA_FILES = ("docs/docker.md",)
# finetune.cpp's other defaults (the cases, n_ctx and the limits: finetune/cases.py, light for
# `--help`)
# finetune.cpp's default is 0.05 (2 eval windows of docs/docker.md); 0.3 gives 10, of which the
# 9 after the first share no token with training (output.py): the held-out split
VAL_SPLIT = 0.3
# the pre-training keeps finetune.cpp's default split (seed 1's model is the earlier records' one)
PRETRAIN_VAL_SPLIT = 0.05
# Each compared run on one core, two of them side by side (runs.py): on 2 cores a pair of
# 8-epoch runs took 41 s against 2 x 23.5 s one after the other on 2 threads. The losses move by
# the print resolution at most: the floor's 2-thread run differed by 0; the committed 2-thread
# record of the same cases by 2e-5 at most.
THREADS = 1
# records made before (schema 4 without `compared`) compared their 2-thread runs
LEGACY_THREADS = 2
# pre-training runs alone, one model after another, on every core of a 2-core machine
PRETRAIN_THREADS = 2
# Pre-training (once per model, data and build, cached by a content hash): the fixed build, AdamW
# at ggml-opt's own default step 1e-3, -c = -b = -ub.
PRETRAIN = Case("adamw", 1e-3, 1, 8)
# The determinism floor: the same fixed build, case and seed run again (run to run) and at other
# thread counts (summation order); the first case is measured so, before any verdict is drawn. It
# measures determinism only; variation across models is the seed spread (verdict.py).
DETERMINISM_THREADS = (1, 2)
PRETRAINED = "pretrained.gguf"
TREE = "$LLAMA_CPP"  # the llama.cpp tree, in the commands a reader runs
BINARY = f"./build/bin/{PROGRAM}"  # ... and the program built from it

# llama-finetune built from a llama.cpp tree as the evidence builds it (only that target)
BUILD_COMMANDS = (
    f"cmake -S {TREE} -B build -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF "
    "-DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=ON "
    "-DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF",
    f"cmake --build build --target {PROGRAM} llama-quantize",
)


def command(
    binary: str,
    model: str,
    data: Sequence[str],
    case: Case,
    threads: int = THREADS,
    out: str = "",
    val_split: float = VAL_SPLIT,
) -> list[str]:
    """llama-finetune's command line for a case: -c = -b = 256, -ub = 256 / opt_period; -f takes
    one file."""
    if len(data) != 1:
        raise ValueError("llama-finetune reads one -f file")
    opts = {
        "-m": model,
        "-f": data[0],
        "-c": N_CTX,
        "-b": N_CTX,
        "-ub": case.n_ubatch,
        "-opt": case.optimizer,
        "-lr": f"{case.lr:g}",
        "-epochs": case.epochs,
        "-val-split": f"{val_split:g}",
        "-t": threads,
        "-o": out or "/dev/null",
    }
    argv = [binary]
    for option, value in opts.items():
        argv += [option, str(value)]
    return argv


def pretrain_command(binary: str, model: str, data: Sequence[str], out: str) -> list[str]:
    return command(binary, model, data, PRETRAIN, PRETRAIN_THREADS, out, PRETRAIN_VAL_SPLIT)


def run_outcome(exit_code: Optional[int], timed_out: bool, complete: bool) -> str:
    """How a run ended: ok (exit 0 and its last line), timed out, crashed (a signal), or failed."""
    if timed_out:
        return "timed out"
    if exit_code is not None and exit_code < 0:
        return "crashed"
    return "ok" if exit_code == 0 and complete else "failed"
