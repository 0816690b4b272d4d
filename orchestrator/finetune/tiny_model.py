"""A tiny llama-architecture model made from scratch, deterministically, for the fine-tuning
evidence: the tokenizer metadata copied byte for byte from one of the tree's vocab-only GGUF files
(`models/ggml-vocab-*.gguf`), F32 weights from a seeded generator; pure but for the two files.

Same seed, vocab file and gguf-py: same bytes. numpy's legacy `RandomState` stream is frozen by its
compatibility policy (NEP 19); gguf-py writes in the order given, fixed alignment, no timestamps."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from ..sources.base import sha256_of

if (
    TYPE_CHECKING
):  # numpy is imported where the weights are made: a cached evidence run never needs it
    import numpy as np

ARCH = "llama"
# the snapshot's llama-spm vocab: 32,000 tokens, the smallest llama-architecture vocab file there
DEFAULT_VOCAB = "models/ggml-vocab-llama-spm.gguf"
DEFAULT_SEED = 20261130


@dataclass(frozen=True)
class Dims:
    """Model dimensions. n_ctx 256 is the smallest context llama_context accepts (it pads to
    256)."""

    n_layer: int = 2
    n_embd: int = 64
    n_head: int = 4
    n_head_kv: int = 4
    n_ff: int = 128
    n_ctx: int = 256
    rms_eps: float = 1e-5
    rope_freq_base: float = 10000.0
    init_std: float = 0.02

    def problems(self) -> list[str]:
        """What makes these dimensions unusable by llama.cpp's llama architecture (empty: fine)."""
        sizes = {
            n: getattr(self, n)
            for n in ("n_layer", "n_embd", "n_head", "n_head_kv", "n_ff", "n_ctx")
        }
        out = [f"{name} must be >= 1, got {size}" for name, size in sizes.items() if size < 1]
        if not out:
            if self.n_embd % self.n_head:
                out.append(f"n_embd {self.n_embd} is not a multiple of n_head {self.n_head}")
            elif (self.n_embd // self.n_head) % 2:
                out.append(f"head size {self.n_embd // self.n_head} must be even (rope)")
            if self.n_head % self.n_head_kv:
                out.append(f"n_head {self.n_head} is not a multiple of n_head_kv {self.n_head_kv}")
        if not self.init_std > 0:
            out.append(f"init_std must be > 0, got {self.init_std}")
        return out


@dataclass(frozen=True)
class KV:
    """One GGUF metadata entry: key, value, value type and (for arrays) element type (gguf
    enums)."""

    key: str
    value: Any
    vtype: Any
    sub_type: Any = None


@dataclass(frozen=True)
class Vocab:
    """The tokenizer metadata of a vocab GGUF (every `tokenizer.*` entry, in file order)."""

    n_vocab: int
    entries: tuple[KV, ...]
    source_sha256: str = ""


@dataclass(frozen=True)
class TinyModel:
    """The content of a model: metadata in write order and (name, F32 array) tensors in write
    order."""

    kv: tuple[KV, ...]
    tensors: tuple[tuple[str, np.ndarray], ...] = field(repr=False)


@dataclass(frozen=True)
class WrittenModel:
    path: Path
    sha256: str
    seed: int
    dims: Dims
    n_vocab: int
    vocab_sha256: str
    n_params: int


def read_vocab(path: Path) -> Vocab:
    """The `tokenizer.*` metadata of a GGUF file, values as raw as gguf-py gives them (strings as
    bytes)."""
    import gguf  # gguf and numpy: heavy, loaded only when a model is written

    reader = gguf.GGUFReader(path)
    entries = []
    for key, f in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = gguf.GGUFValueType(f.types[0])
        sub = gguf.GGUFValueType(f.types[-1]) if vtype == gguf.GGUFValueType.ARRAY else None
        if gguf.GGUFValueType.STRING in (vtype, sub):  # strings as bytes: copied exactly, no decode
            value = (
                tuple(bytes(f.parts[i]) for i in f.data)
                if sub is not None
                else bytes(f.parts[f.data[0]])
            )
        else:
            value = tuple(f.contents()) if sub is not None else f.contents()
        entries.append(KV(key, value, vtype, sub))
    tokens = [e for e in entries if e.key == "tokenizer.ggml.tokens"]
    if not tokens:
        raise ValueError(f"{path}: no tokenizer.ggml.tokens: not a vocab GGUF")
    return Vocab(
        n_vocab=len(tokens[0].value), entries=tuple(entries), source_sha256=sha256_of(path)
    )


def model_kv(dims: Dims, vocab: Vocab, seed: int) -> tuple[KV, ...]:
    """The model's metadata: llama hyper-parameters, then the vocab's tokenizer entries unchanged.
    `general.architecture` is not here: the gguf writer adds it first by itself."""
    # gguf and numpy: heavy, loaded only when a model is written
    from gguf import GGUFValueType as T

    hp: dict[str, float] = {
        "vocab_size": vocab.n_vocab,
        "context_length": dims.n_ctx,
        "embedding_length": dims.n_embd,
    }
    hp |= {
        "block_count": dims.n_layer,
        "feed_forward_length": dims.n_ff,
        "attention.head_count": dims.n_head,
    }
    hp |= {
        "attention.head_count_kv": dims.n_head_kv,
        "attention.layer_norm_rms_epsilon": float(dims.rms_eps),
    }
    hp |= {
        "rope.dimension_count": dims.n_embd // dims.n_head,
        "rope.freq_base": float(dims.rope_freq_base),
    }
    head = [KV("general.name", f"ggml-patch tiny llama seed {seed}", T.STRING)]
    head += [KV("general.file_type", 0, T.UINT32)]  # LLAMA_FTYPE_ALL_F32
    # in this order; the floats (epsilon, rope base) as FLOAT32, every size as UINT32
    head += [
        KV(f"{ARCH}.{k}", v, T.FLOAT32 if isinstance(v, float) else T.UINT32) for k, v in hp.items()
    ]
    return tuple(head) + vocab.entries


Shape = tuple[int, ...]  # numpy's: ggml's ne reversed


def tensor_shapes(dims: Dims, n_vocab: int) -> list[tuple[str, Shape]]:
    """(GGUF tensor name, numpy shape) in write order."""
    e, ff = dims.n_embd, dims.n_ff
    e_kv = dims.n_head_kv * (e // dims.n_head)
    layer: dict[str, Shape] = {
        "attn_norm": (e,),
        "attn_q": (e, e),
        "attn_k": (e_kv, e),
        "attn_v": (e_kv, e),
    }
    layer |= {
        "attn_output": (e, e),
        "ffn_norm": (e,),
        "ffn_gate": (ff, e),
        "ffn_down": (e, ff),
        "ffn_up": (ff, e),
    }
    out: list[tuple[str, Shape]] = [("token_embd.weight", (n_vocab, e))]
    out += [
        (f"blk.{i}.{name}.weight", shape)
        for i in range(dims.n_layer)
        for name, shape in layer.items()
    ]
    return out + [("output_norm.weight", (e,)), ("output.weight", (n_vocab, e))]


def model_tensors(dims: Dims, n_vocab: int, seed: int) -> tuple[tuple[str, np.ndarray], ...]:
    """F32 weights for a seed: norms are ones, every matrix is N(0, init_std) drawn in write
    order."""
    import numpy as np  # gguf and numpy: heavy, loaded only when a model is written

    rng = np.random.RandomState(
        seed
    )  # legacy generator: its stream is frozen across numpy versions
    out = []
    for name, shape in tensor_shapes(dims, n_vocab):
        t = np.ones(shape) if len(shape) == 1 else rng.standard_normal(shape) * dims.init_std
        out.append((name, t.astype(np.float32)))
    return tuple(out)


def tiny_model(vocab: Vocab, dims: Dims = Dims(), seed: int = DEFAULT_SEED) -> TinyModel:
    """The metadata and tensors of the tiny model for a seed (pure)."""
    if bad := dims.problems():
        raise ValueError("tiny model dimensions: " + "; ".join(bad))
    return TinyModel(
        kv=model_kv(dims, vocab, seed), tensors=model_tensors(dims, vocab.n_vocab, seed)
    )


def write_gguf(model: TinyModel, path: Path) -> str:
    """Write the model to `path` atomically (this process's temporary file, then a rename): its
    sha256."""
    import gguf  # gguf and numpy: heavy, loaded only when a model is written

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        w = gguf.GGUFWriter(tmp, ARCH)
        for kv in model.kv:
            w.add_key_value(
                kv.key,
                list(kv.value) if isinstance(kv.value, tuple) else kv.value,
                kv.vtype,
                kv.sub_type,
            )
        for name, t in model.tensors:
            w.add_tensor(name, t)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        digest = sha256_of(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return digest


def make(
    vocab_file: Path, out: Path, seed: int = DEFAULT_SEED, dims: Dims = Dims()
) -> WrittenModel:
    """Read the vocab, compute the model for `seed`, write it to `out`."""
    vocab = read_vocab(vocab_file)
    model = tiny_model(vocab, dims, seed)
    n_params = sum(int(t.size) for _, t in model.tensors)
    return WrittenModel(
        out, write_gguf(model, out), seed, dims, vocab.n_vocab, vocab.source_sha256, n_params
    )


def cli(argv: Optional[list[str]] = None) -> int:
    """`python -m orchestrator.finetune.tiny_model VOCAB.gguf OUT.gguf [--seed N]`: prints the
    sha256."""
    import argparse  # only when run as a script

    p = argparse.ArgumentParser(
        prog="python -m orchestrator.finetune.tiny_model", description=cli.__doc__
    )
    p.add_argument("vocab", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--n-embd", type=int, default=Dims.n_embd)
    p.add_argument("--n-layer", type=int, default=Dims.n_layer)
    p.add_argument("--n-ff", type=int, default=Dims.n_ff)
    a = p.parse_args(argv)
    if not a.vocab.is_file():
        print(f"error: {a.vocab}: no such vocab file")
        return 2
    try:
        m = make(a.vocab, a.out, a.seed, Dims(n_embd=a.n_embd, n_layer=a.n_layer, n_ff=a.n_ff))
    except ValueError as e:
        print(f"error: {e}")
        return 2
    print(
        " ".join(
            f"{k}={getattr(m, k)}"
            for k in ("sha256", "path", "seed", "n_vocab", "n_params", "vocab_sha256")
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
