"""The tiny llama model writer: a valid GGUF that gguf-py reads back, the same bytes for the same
seed, other bytes for another seed. The vocab file is made here with gguf-py (the snapshot's own
vocab files are used by the e2e tier)."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest

from orchestrator.finetune import tiny_model as tm
from orchestrator.sources.base import sha256_of

N_VOCAB = 300


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory) -> Path:
    """A vocab-only GGUF shaped like
    models/ggml-vocab-llama-spm.gguf, with non-ASCII token bytes."""
    path = tmp_path_factory.mktemp("vocab") / "ggml-vocab-test.gguf"
    w = gguf.GGUFWriter(path, "llama")
    w.add_uint32("llama.vocab_size", N_VOCAB)
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_token_list(["<unk>", "<s>", "</s>"] + [f"\u2581t{i}\u00e9" for i in range(3, N_VOCAB)])
    w.add_token_scores([float(-i) / 7 for i in range(N_VOCAB)])
    w.add_token_types([2, 3, 3] + [1] * (N_VOCAB - 3))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


DIMS = tm.Dims(n_layer=2, n_embd=16, n_head=2, n_head_kv=2, n_ff=32)


def test_written_model_reads_back_with_the_vocab_and_weights(vocab_file, tmp_path):
    out = tm.make(vocab_file, tmp_path / "m.gguf", seed=7, dims=DIMS)
    r = gguf.GGUFReader(out.path)
    assert r.fields["general.architecture"].contents() == "llama"
    assert r.fields["llama.embedding_length"].contents() == 16
    assert r.fields["llama.block_count"].contents() == 2
    assert r.fields["llama.attention.head_count"].contents() == 2
    assert r.fields["llama.rope.dimension_count"].contents() == 8
    assert r.fields["llama.context_length"].contents() == 256
    assert r.fields["general.file_type"].contents() == 0
    # the tokenizer copied unchanged, byte for byte
    src = gguf.GGUFReader(vocab_file)
    for key in (
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.scores",
        "tokenizer.ggml.token_type",
        "tokenizer.ggml.model",
        "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.add_bos_token",
    ):
        assert r.fields[key].contents() == src.fields[key].contents(), key
    assert r.fields["tokenizer.ggml.tokens"].contents()[5] == "\u2581t5\u00e9"
    # every tensor F32 with llama's names and ggml shapes (ne = numpy shape reversed)
    tensors = {t.name: t for t in r.tensors}
    assert len(tensors) == 1 + 9 * 2 + 2
    assert all(t.tensor_type == gguf.GGMLQuantizationType.F32 for t in r.tensors)
    assert list(tensors["token_embd.weight"].shape) == [16, N_VOCAB]
    assert list(tensors["output.weight"].shape) == [16, N_VOCAB]
    assert list(tensors["blk.1.ffn_down.weight"].shape) == [32, 16]
    assert list(tensors["blk.0.ffn_up.weight"].shape) == [16, 32]
    expected = dict(tm.model_tensors(DIMS, N_VOCAB, 7))
    for name, t in tensors.items():
        assert np.array_equal(np.asarray(t.data).reshape(expected[name].shape), expected[name]), (
            name
        )
    assert np.all(np.asarray(tensors["output_norm.weight"].data) == 1.0)
    assert 0.015 < float(np.std(expected["output.weight"])) < 0.025  # N(0, 0.02)
    assert out.n_params == sum(int(np.prod(s)) for _, s in tm.tensor_shapes(DIMS, N_VOCAB))
    assert out.sha256 == sha256_of(out.path)


def test_same_seed_same_bytes_other_seed_other_bytes(vocab_file, tmp_path):
    a = tm.make(vocab_file, tmp_path / "a.gguf", seed=1, dims=DIMS)
    b = tm.make(vocab_file, tmp_path / "b.gguf", seed=1, dims=DIMS)
    c = tm.make(vocab_file, tmp_path / "c.gguf", seed=2, dims=DIMS)
    assert a.path.read_bytes() == b.path.read_bytes()
    assert a.sha256 == b.sha256
    assert c.sha256 != a.sha256
    assert a.path.stat().st_size == c.path.stat().st_size  # only the weights (and the name) differ


def test_content_is_a_pure_function_of_the_seed(vocab_file):
    v = tm.read_vocab(vocab_file)
    m1, m2 = tm.tiny_model(v, DIMS, 3), tm.tiny_model(v, DIMS, 3)
    assert m1.kv == m2.kv
    assert [n for n, _ in m1.tensors] == [n for n, _ in m2.tensors]
    assert all(np.array_equal(x, y) for (_, x), (_, y) in zip(m1.tensors, m2.tensors, strict=True))
    assert v.n_vocab == N_VOCAB and len(v.source_sha256) == 64


def test_bad_dimensions_are_named(vocab_file):
    v = tm.read_vocab(vocab_file)
    with pytest.raises(ValueError, match="n_embd 30 is not a multiple of n_head 4"):
        tm.tiny_model(v, tm.Dims(n_embd=30, n_head=4), 1)
    assert tm.Dims(n_head=4, n_head_kv=3).problems() == [
        "n_head 4 is not a multiple of n_head_kv 3"
    ]
    assert tm.Dims().problems() == []


def test_a_file_without_tokens_is_not_a_vocab(tmp_path):
    path = tmp_path / "empty.gguf"
    w = gguf.GGUFWriter(path, "llama")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ValueError, match="no tokenizer.ggml.tokens"):
        tm.read_vocab(path)


def test_cli_prints_the_sha256_and_refuses_a_missing_vocab(vocab_file, tmp_path, capsys):
    assert (
        tm.cli(
            [
                str(vocab_file),
                str(tmp_path / "m.gguf"),
                "--seed",
                "5",
                "--n-embd",
                "16",
                "--n-ff",
                "32",
            ]
        )
        == 0
    )
    line = capsys.readouterr().out
    assert f"sha256={sha256_of(tmp_path / 'm.gguf')}" in line
    assert tm.cli([str(tmp_path / "nope.gguf"), str(tmp_path / "x.gguf")]) == 2
    assert capsys.readouterr().out.strip() == f"error: {tmp_path / 'nope.gguf'}: no such vocab file"
