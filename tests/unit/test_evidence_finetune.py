"""finetune-opt-dynamic's output parser, the verdict rules, the cache key, the results' JSON,
the table and the plot."""
from __future__ import annotations

import math

import pytest

from orchestrator.finetune import results as ft
from orchestrator.finetune.results import Epoch

OUTPUT = """\
config model=/c/tiny.gguf n_vocab=32000 n_ctx=256 n_batch=256 n_ubatch=128 opt_period=2 optimizer=adamw lr=0.0001 wd=0 tokens=3620 ndata=26 ndata_train=23 ndata_eval=3 threads=2
epoch=1 train_loss=10.364 eval_loss=10.2 train_acc=0.001 eval_acc=0.01 optimizer=adamw opt_period=2
llama_opt_init: n_ubatch (128) != n_ctx (256), the K and V projections will not receive gradients
epoch=2 train_loss=9.5 eval_loss=nan train_acc=0.02 eval_acc=nan optimizer=adamw opt_period=2
epoch=3 train_loss=inf eval_loss=-inf optimizer=adamw opt_period=2
epoch=4 train_loss=x eval_loss=1
done epochs=3 train_loss=inf eval_loss=-inf seconds=12.5
"""


def test_parser_reads_config_epochs_and_summary():
    out = ft.parse_output(OUTPUT)
    assert out.config["n_batch"] == 256 and out.config["optimizer"] == "adamw" and out.config["lr"] == 1e-4
    assert out.config["model"] == "/c/tiny.gguf"
    assert [e.epoch for e in out.epochs] == [1, 2, 3]  # epoch 4 has no number for its train loss
    assert out.epochs[0] == Epoch(1, 10.364, 10.2, 0.001, 0.01)
    assert math.isnan(out.epochs[1].eval_loss) and math.isnan(out.epochs[1].eval_acc)
    assert out.epochs[2].train_loss == math.inf and out.epochs[2].eval_loss == -math.inf
    assert out.epochs[2].train_acc is None
    assert out.done["seconds"] == 12.5
    assert out.complete


def test_parser_on_a_truncated_run():
    out = ft.parse_output("config a=1\nepoch=1 train_loss=1 eval_loss=2\nepoch=2 train_lo")
    assert [e.epoch for e in out.epochs] == [1]
    assert out.done == {} and not out.complete
    assert ft.parse_output("") == ft.ProgramOutput({}, (), {})


def test_pairs_reject_free_text():
    assert ft.parse_pairs("a=1 b=x c=") == {"a": 1, "b": "x", "c": ""}
    assert ft.parse_pairs("a=1 free text") == {}


def ep(train, evals):
    return [Epoch(i + 1, t, e) for i, (t, e) in enumerate(zip(train, evals))]


FIXED = ep([10.0, 8.0, 7.0, 6.5, 6.2], [9.0, 7.5, 7.0, 6.8, 6.7])


def test_moves_and_direction_changes():
    assert ft.moves([10, 9, 9.000001, 9.5, math.nan]) == [-1, 0, 1, 1]
    assert ft.direction_changes([-1, 0, 1, -1, -1, 0]) == 2
    assert ft.direction_changes([]) == 0


def test_overshoot_is_bug_visible_with_the_epoch_it_rose():
    # the original report's shape: learned faster early, then eval loss rises in epoch 3
    u = ep([9.0, 6.0, 5.5, 6.5, 8.0], [8.0, 6.9, 7.4, 8.5, 9.9])
    v = ft.verdict("adamw", 1, 1e-3, FIXED, u)
    assert v.label == "bug visible"
    assert v.differ and v.fixed_falls and not v.diverged and v.ends_worse
    assert v.rises_where_fixed_falls == (3, 4, 5)
    assert v.max_rel_diff == pytest.approx(abs(9.9 - 6.7) / 9.9)


def test_divergence_is_bug_visible():
    u = ep([10.0, 30.0, math.inf, math.nan, math.nan], [9.0, 40.0, math.nan, math.nan, math.nan])
    v = ft.verdict("sgd", 2, 1e-3, FIXED, u)
    assert v.label == "bug visible" and v.diverged and v.ends_worse


def test_oscillation_is_bug_visible():
    u = ep([10.0, 7.0, 7.9, 6.9, 7.8], [9.0, 7.2, 7.1, 6.9, 6.6])  # train loss down-up-down-up
    v = ft.verdict("sgd", 1, 1e-3, FIXED, u)
    assert v.oscillates and v.rises_where_fixed_falls == () and v.label == "bug visible"
    assert not v.ends_worse


def test_only_faster_learning_is_no_harm_shown():
    u = ep([9.0, 7.0, 6.0, 5.5, 5.2], [8.5, 7.0, 6.5, 6.3, 6.2])
    v = ft.verdict("adamw", 2, 1e-3, FIXED, u)
    assert v.label == "differs, no harm shown" and v.differ and not v.ends_worse


def test_identical_curves_are_no_difference():
    u = ep([10.0, 8.0, 7.0, 6.5, 6.2000001], [9.0, 7.5, 7.0, 6.8, 6.7])
    v = ft.verdict("adamw", 1, 1e-3, FIXED, u)
    assert v.label == "no difference" and not v.differ


def test_a_fixed_run_that_does_not_learn_is_undecided():
    flat = ep([10.0, 10.0, 10.0], [9.0, 9.0, 9.0])
    rising = ep([10.0, 10.5, 11.0], [9.0, 9.5, 10.0])
    assert ft.verdict("sgd", 1, 1e-3, flat, ep([10, 12, 14], [9, 11, 13])).label == "undecided"
    assert ft.verdict("sgd", 1, 1e-3, rising, ep([10, 12, 14], [9, 11, 13])).label == "undecided"
    assert ft.verdict("sgd", 1, 1e-3, FIXED[:1], ep([11], [12])).label == "undecided"  # one epoch: no curve


def test_verdict_compares_the_common_epochs_only():
    u = ep([9.0, 6.0, 5.5], [8.0, 6.9, 7.4])  # the run without the fix stopped after 3 epochs
    v = ft.verdict("adamw", 1, 1e-3, FIXED, u)
    assert v.epochs == 3 and v.rises_where_fixed_falls == (3,)


def results(runs=None) -> ft.FinetuneResults:
    def run(variant, opt, period, epochs):
        return ft.Run(variant=variant, optimizer=opt, opt_period=period, n_batch=128 * period, n_ubatch=128,
                      lr=1e-4, command=["bin/finetune-opt-dynamic", "-m", "m.gguf"], epochs=epochs, exit_code=0,
                      seconds=3.5)
    runs = runs or [run("with_fix", "sgd", 1, FIXED), run("without_fix", "sgd", 1, ep([9, 6, 5.5, 6.5, math.nan], [8, 6.9, 7.4, 8.5, math.inf])),
                    run("with_fix", "adamw", 2, FIXED), run("without_fix", "adamw", 2, FIXED)]
    return ft.FinetuneResults(target="llama-cpp-python-0.3.36", base="0c1e57098bba43ac29e6e3b677cdceebdd22334f",
                              model={"sha256": "ab" * 32, "seed": 1}, data={"files": list(ft.DATA_FILES), "sha256": "cd" * 32},
                              program={"name": ft.PROGRAM}, runs=runs, cache_key="ef" * 32)


def test_results_round_trip_through_json_with_nan_and_inf():
    r = results()
    back = ft.FinetuneResults.from_json(r.to_json())
    assert back.to_json() == r.to_json()
    assert math.isnan(back.runs[1].epochs[4].train_loss) and back.runs[1].epochs[4].eval_loss == math.inf
    assert back.cases() == [("sgd", 1, 1e-4), ("adamw", 2, 1e-4)]
    assert back.run("without_fix", "adamw", 2).epochs == FIXED
    assert back.run("without_fix", "adamw", 3) is None
    assert back.run("without_fix", "adamw", 2, 1e-3) is None


def test_results_of_another_schema_are_refused():
    text = results().to_json().replace('"schema_version": 1', '"schema_version": 99')
    with pytest.raises(ValueError, match="schema_version 99, expected 1"):
        ft.FinetuneResults.from_json(text)


def test_verdicts_per_case_and_the_table():
    r = results()
    assert [(v.optimizer, v.opt_period, v.lr, v.label) for v in ft.verdicts(r)] == [
        ("sgd", 1, 1e-4, "bug visible"), ("adamw", 2, 1e-4, "no difference")]
    md = ft.table_markdown(r)
    assert "| sgd | 0.0001 | 1 | 5 | **bug visible** |" in md
    assert "| adamw | 0.0001 | 2 | 5 | **no difference** | 0 | none | no | no | no |" in md
    assert "**sgd, lr 0.0001, opt_period 1** (n_batch 128, n_ubatch 128)" in md
    assert "| 5 | 6.2000 | 6.7000 | nan | inf |" in md


BASE = dict(base="0c1e5709", series="s" * 64, model_sha256="m" * 64, data_sha256="d" * 64, program_sha256="p" * 64,
            flags={"CMAKE_BUILD_TYPE": "Release", "threads": 2}, cases=[{"optimizer": "sgd", "n_batch": 128}],
            toolchain={"gcc": "12.2.0", "cmake": "4.4.5"})


def test_cache_key_is_stable_and_covers_every_part():
    k = ft.cache_key(**BASE)
    assert len(k) == 64 and k == ft.cache_key(**{**BASE, "flags": {"threads": 2, "CMAKE_BUILD_TYPE": "Release"}})
    changed = {"base": "0c1e570a", "series": "t" * 64, "model_sha256": "n" * 64, "data_sha256": "e" * 64,
               "program_sha256": "q" * 64, "flags": {"CMAKE_BUILD_TYPE": "Debug", "threads": 2},
               "cases": [{"optimizer": "adamw", "n_batch": 128}], "toolchain": {"gcc": "13.1.0", "cmake": "4.4.5"}}
    keys = {ft.cache_key(**{**BASE, name: value}) for name, value in changed.items()}
    assert len(keys) == len(changed) and k not in keys


def test_data_digest_covers_names_order_and_bytes():
    a = ft.data_digest([("LICENSE", b"MIT"), ("CONTRIBUTING.md", b"x")])
    assert a == ft.data_digest([("LICENSE", b"MIT"), ("CONTRIBUTING.md", b"x")])
    assert a != ft.data_digest([("CONTRIBUTING.md", b"x"), ("LICENSE", b"MIT")])
    assert a != ft.data_digest([("LICENSE", b"MIT "), ("CONTRIBUTING.md", b"x")])
    assert a != ft.data_digest([("LICENCE", b"MIT"), ("CONTRIBUTING.md", b"x")])


def test_plot_writes_a_png_with_one_panel_per_case_and_same_bytes_twice(tmp_path):
    pytest.importorskip("matplotlib", reason="the [plot] extra is not installed")
    r = results()
    p1 = ft.plot(r, tmp_path / "a" / "finetune-loss.png")
    p2 = ft.plot(r, tmp_path / "b" / "finetune-loss.png")
    data = p1.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data == p2.read_bytes()
    fig = ft.figure(r)
    assert len(fig.axes) == 4  # 2 optimizers x 2 periods, the missing panels empty
    assert fig.axes[0].get_title() == "sgd lr 0.0001, opt_period 1"
    assert len(fig.axes[0].lines) == 4 and len(fig.axes[1].lines) == 0


RECORDED = __import__("pathlib").Path(__file__).parent / "data" / "finetune-llama-0.3.36"


def recorded_results() -> ft.FinetuneResults:
    """finetune-opt-dynamic's real output on llama.cpp 0c1e5709 (llama-cpp-python 0.3.36), with patches/0001
    and with its hunks reverted (benchmarks/records/2026-11-30-finetune-evidence)."""
    runs = []
    for path in sorted(RECORDED.glob("*.out")):
        out = ft.parse_output(path.read_text())
        c = out.config
        assert out.complete and c["threads"] == 2, path.name
        runs.append(ft.Run(variant=path.name.split("-")[0], optimizer=c["optimizer"], opt_period=c["opt_period"],
                           n_batch=c["n_batch"], n_ubatch=c["n_ubatch"], lr=c["lr"], command=[],
                           epochs=list(out.epochs), exit_code=0))
    return ft.FinetuneResults(target="llama-cpp-python-0.3.36", base="0c1e5709", model={}, data={}, program={}, runs=runs)


def test_verdicts_on_the_recorded_runs():
    r = recorded_results()
    assert len(r.runs) == 12
    got = {(v.optimizer, v.lr, v.opt_period): (v.label, v.rises_where_fixed_falls) for v in ft.verdicts(r)}
    assert got == {
        # at ggml-opt's default AdamW step the run without the fix is ahead after epoch 1, then its eval loss rises
        ("adamw", 1e-3, 1): ("bug visible", (2, 3, 4, 5, 6)),
        ("adamw", 1e-3, 2): ("bug visible", (3, 4, 5)),
        ("sgd", 0.1, 1): ("bug visible", (2, 3, 4, 5, 6)),
        ("sgd", 0.1, 2): ("bug visible", (3, 5, 6)),
        # finetune.cpp's default lr 1e-5: the run without the fix only learns faster in 4 epochs
        ("adamw", 1e-5, 1): ("differs, no harm shown", ()),
        ("adamw", 1e-5, 2): ("differs, no harm shown", ()),
    }
    first = r.run("without_fix", "adamw", 1, 1e-3).epochs
    fixed = r.run("with_fix", "adamw", 1, 1e-3).epochs
    assert first[0].eval_loss < fixed[0].eval_loss  # "learned faster early"
    assert first[-1].eval_loss > first[0].eval_loss  # "then overshot"
