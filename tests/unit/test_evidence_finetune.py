"""llama-finetune's output parser, the noise floor, the verdict rule (on synthetic curves), the
fix's provenance markers, stale-series detection, the run plan, the cache key, the plot."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from orchestrator.finetune import results as ft
from orchestrator.finetune.results import Epoch
from orchestrator.finetune.runner import plan_runs

DATA = Path(__file__).parent / "data"


def bar(kind: str, i: int, n: int, loss: str, acc: str = "8.59") -> str:
    # ggml_opt_epoch_callback_progress_bar's format (ggml-opt.cpp), redrawn with \r
    head = "train: [" if kind == "train" else "val:   ["
    return (
        f"{head}\u2588\u2588\u2588\u2589    ] data={i:07d}/{n:07d} loss={loss}\u00b10.01234 "
        f"acc={acc}\u00b10.50% t=00:00:01 ETA=00:00:00 \r"
    )


def epoch_text(train: str, val: str) -> str:
    return (
        bar("train", 1, 2, "9.99999")
        + bar("train", 2, 2, train)
        + "\n"
        + bar("val", 1, 1, val)
        + "\n\n"
    )


def test_the_parser_reads_each_epoch_s_final_train_and_val_lines():
    text = (
        "llama_context: n_ctx = 256\n"
        "0.00.075.783 W opt_init: the K and V projections will not receive gradients\n"
        + epoch_text("6.12345", "6.54321")
        + epoch_text("5.50000", "nan")
        + "llama_model_save_to_file: done\n"
    )
    out = ft.parse_output(text)
    assert [(e.epoch, e.train_loss) for e in out.epochs] == [(1, 6.12345), (2, 5.5)]
    assert out.epochs[0].eval_loss == 6.54321 and math.isnan(out.epochs[1].eval_loss)
    assert out.epochs[0].train_acc == pytest.approx(0.0859)
    assert out.warnings == ("W opt_init: the K and V projections will not receive gradients",)
    assert out.complete(2) and not out.complete(3)


def test_the_parser_on_a_truncated_run_and_on_noise():
    # killed before epoch 2's val line
    text = epoch_text("6.1", "6.5") + bar("train", 2, 2, "5.0") + "\n"
    assert [e.epoch for e in ft.parse_output(text).epochs] == [1]
    assert ft.parse_output("loss=1 data=1/1\nrandom text\n").epochs == ()


@pytest.mark.skipif(
    not (DATA / "llama-finetune-0.3.36.out").is_file(), reason="no recorded llama-finetune output"
)
def test_the_parser_on_a_real_llama_finetune_output():
    """llama-finetune's real output (llama.cpp 0c1e5709, 2 epochs): what the runner parses."""
    out = ft.parse_output((DATA / "llama-finetune-0.3.36.out").read_text())
    assert len(out.epochs) == 2 and all(
        math.isfinite(e.train_loss) and math.isfinite(e.eval_loss) for e in out.epochs
    )


# ----------------------------------------------------------------
# the verdict rule on synthetic curves


def ep(evals, train=None):
    train = train or [e + 0.1 for e in evals]
    return [
        Epoch(epoch=i + 1, train_loss=t, eval_loss=e)
        for i, (t, e) in enumerate(zip(train, evals, strict=True))
    ]


FIXED = ep([6.00, 5.90, 5.80, 5.70, 5.60, 5.50])
FLOOR = 0.002


def label(unfixed, fixed=FIXED, floor=FLOOR):
    return ft.finetune_verdict("adamw", 1, 1e-5, fixed, unfixed, floor).label


def test_better_at_every_epoch_but_one_is_not_bug_visible():
    # the old rule called this "bug visible" (one uptick); it ends better: the signed verdict says
    # the control ends lower (it was "differs, no harm shown" before the verdicts had a sign)
    u = ep([5.90, 5.80, 5.95, 5.60, 5.50, 5.40])
    v = ft.finetune_verdict("adamw", 1, 1e-5, FIXED, u, FLOOR)
    assert (
        v.label == "control lower"
        and v.better_epochs == 5
        and v.worse_epochs == 1
        and v.end_diff < 0
    )


def test_worse_at_the_end_by_more_than_the_floor_and_the_minimum_effect_is_bug_visible():
    u = ep([5.90, 5.80, 5.85, 5.90, 6.00, 6.20])
    v = ft.finetune_verdict("adamw", 1, 1e-5, FIXED, u, FLOOR)
    assert (
        v.label == "bug visible"
        and v.end_diff == pytest.approx(0.70)
        and v.end_diff_rel == pytest.approx(0.7 / 5.5)
    )


def test_worse_at_the_end_beyond_the_floor_but_below_the_minimum_effect_is_no_harm_shown():
    u = ep([6.00, 5.90, 5.80, 5.70, 5.60, 5.50 + 0.5 * ft.MIN_EFFECT * 5.50])
    assert label(u) == "differs, no clear effect"


def test_a_difference_within_the_floor_is_no_difference():
    u = ep([e.eval_loss + FLOOR * 0.9 for e in FIXED])
    assert label(u) == "no difference"
    assert label(u, floor=FLOOR * 0.5) != "no difference"  # the same curves above a smaller floor
    # a large effect within a larger floor is not "bug visible" either
    worse = ep([e.eval_loss + 0.2 for e in FIXED])
    assert label(worse) == "bug visible" and label(worse, floor=0.3) == "no difference"


def test_a_non_finite_end_without_the_fix_is_bug_visible_and_identical_curves_are_no_difference():
    u = ep([5.9, 5.8, 5.7, 9.0, 50.0, math.inf], [6, 5.9, 5.8, 9, 50, math.nan])
    v = ft.finetune_verdict("sgd", 1, 1e-4, FIXED, u, FLOOR)
    assert v.label == "bug visible" and v.diverged and v.end_diff == math.inf
    assert label(list(FIXED)) == "no difference"
    assert ft.finetune_verdict("sgd", 1, 1e-4, FIXED, [], FLOOR).label == "undecided"


def test_the_verdict_compares_the_common_epochs_only():
    # stopped after 3 epochs
    v = ft.finetune_verdict("adamw", 1, 1e-5, FIXED, ep([5.9, 5.8, 6.5]), FLOOR)
    assert v.epochs == 3 and v.label == "bug visible" and v.end_diff == pytest.approx(0.7)


# ----------------------------------------------------------------
# the determinism floor, from the results' own runs


def run(variant, evals, threads=ft.THREADS, repeat=0, lr=1e-5, opt="adamw", period=1, outcome="ok"):
    return ft.Run(
        variant=variant,
        optimizer=opt,
        opt_period=period,
        n_batch=256,
        n_ubatch=256 // period,
        lr=lr,
        command=[],
        epochs=ep(evals),
        exit_code=0,
        outcome=outcome,
        threads=threads,
        repeat=repeat,
        compared=threads == ft.THREADS and repeat == 0,
    )


OTHER_THREADS = 2  # the determinism floor's other thread count


def results(runs) -> ft.FinetuneResults:
    return ft.FinetuneResults(
        target="llama.cpp", base="0c1e5709", model={}, data={}, program={}, runs=runs
    )


def test_the_determinism_floor_is_the_largest_same_build_difference_never_below_print_resolution():
    evals = [6.0, 5.9, 5.8]
    r = results(
        [
            run("patched", evals),
            run("control", [6.0, 5.9, 5.9]),
            run("patched", evals, repeat=1),
            run("patched", [6.0, 5.903, 5.8], threads=OTHER_THREADS),
        ]
    )
    n = ft.determinism_floor(r)
    assert (
        n.floor == pytest.approx(0.003) and n.measured == pytest.approx(0.003) and len(n.pairs) == 2
    )
    assert "t1 vs t2" in n.pairs[1] and "repeat 1" in n.pairs[0]
    # the determinism runs are not compared as cases; the verdict uses the floor
    (v,) = ft.verdicts(r)
    assert v.floor == n.floor and v.label == "bug visible"  # 0.1 worse at the end: > floor, > 1 %
    assert ft.determinism_floor(results([run("patched", evals)])) == ft.Determinism(
        floor=ft.PRINT_RESOLUTION, measured=None, pairs=()
    )
    failed = results(
        [run("patched", evals), run("patched", [9, 9, 9], threads=OTHER_THREADS, outcome="crashed")]
    )
    assert ft.determinism_floor(failed).measured is None  # an unfinished run measures nothing


def test_a_record_made_before_the_compared_field_compares_its_two_thread_runs():
    """Records of schema 4 without `compared` (training-evidence/ before 2026-12-02) compared their
    2-thread runs; the 1-thread run measured the floor."""
    legacy = [
        r.model_copy(update={"compared": None})
        for r in (run("patched", [6.0], threads=2), run("patched", [6.0], threads=1))
    ]
    assert [r.primary for r in legacy] == [True, False]
    assert run("patched", [6.0]).primary and not run("patched", [6.0], threads=2).primary


def test_the_run_plan_is_fixed_before_any_result():
    cases = tuple(ft.parse_cases([]))
    seeds = ft.SEEDS
    plan = [(c.name, v, t, rep, s) for c, v, t, rep, s in plan_runs(cases, seeds)]
    # every case from every seed's model in both variants, then the determinism runs
    both = [(c.name, v, 1, 0, s) for c in cases for s in seeds for v in ft.VARIANTS]
    assert plan[: len(both)] == both and len(both) == 2 * 3 * 2
    first = (cases[0].name, "patched")
    assert plan[len(both) :] == [(*first, 1, 1, seeds[0]), (*first, 2, 0, seeds[0])]
    assert cases[0] == ft.Case("adamw", 1e-5, 1, 8)  # finetune.cpp's defaults are the first case
    assert cases[1] == ft.Case("adamw", 1e-4, 1, 16)  # the overshoot regime (predictions.yaml)
    assert plan_runs(()) == []


def test_the_one_thread_runs_go_two_at_a_time_longest_first_and_the_others_alone_after():
    """On 2 cores: never more threads than cores at once; results in plan order whatever order
    they ran in."""
    import threading
    import time

    from orchestrator.cancel import CancelToken
    from orchestrator.finetune.runner import side_by_side

    cases = tuple(ft.parse_cases(["adamw:1e-5:1:2", "adamw:1e-4:1:4"]))
    plan = plan_runs(cases, (1, 2))
    lock, busy, peak, started = threading.Lock(), [0], [0], []

    def one(p):
        case, variant, threads, repeat, seed = p
        with lock:
            busy[0] += threads
            peak[0] = max(peak[0], busy[0])
            started.append((case.epochs, threads))
        time.sleep(0.02)
        with lock:
            busy[0] -= threads
        return run(variant, [6.0] * case.epochs, threads=threads, repeat=repeat)

    got = side_by_side(plan, one, 2, CancelToken())
    assert peak[0] == 2  # two 1-thread runs at once, the 2-thread run alone
    assert [(len(r.epochs), r.threads, r.repeat) for r in got] == [
        (c.epochs, t, rep) for c, _, t, rep, _ in plan
    ]
    assert started[0][0] == 4 and started[-1] == (2, 2)  # the longest first; the wide one last
    one_core = []
    side_by_side(plan, lambda p: one_core.append(p) or one(p), 1, CancelToken())
    assert peak[0] == 2 and len(one_core) == len(plan)  # one core: one at a time (2: alone)


# ---------------------------------------------------------------- provenance and staleness


FIX = """\
--- a/ggml/src/ggml-opt.cpp
+++ b/ggml/src/ggml-opt.cpp
@@ -1,3 +1,4 @@
-    GGML_ASSERT(ok && "an old message that is removed");
+    GGML_ASSERT(n == m &&
+        "per-step graph node count differs from the graph");
+    GGML_ASSERT(ok && "an old message that is removed");
+    printf("short");
"""


def test_the_fix_markers_are_the_string_literals_it_adds():
    assert ft.fix_markers(FIX) == ["per-step graph node count differs from the graph"]
    assert ft.fix_markers("+    x = 1;\n") == []


def test_a_binary_holds_the_fix_when_it_has_every_marker():
    m = ["per-step graph node count differs from the graph", "another marker text"]
    assert ft.holds_fix(b"\0" + m[0].encode() + b"\0" + m[1].encode(), m) is True
    assert ft.holds_fix(b"\0nothing\0", m) is False
    assert ft.holds_fix(m[0].encode(), m) is None  # half: not what either build should be
    assert ft.holds_fix(b"anything", []) is None


def test_check_provenance_refuses_swapped_or_unfixed_binaries(tmp_path):
    from orchestrator.errors import BuildFailed
    from orchestrator.finetune.provenance import check_provenance

    marker = "per-step graph node count differs from the graph"
    fixed, unfixed = tmp_path / "a", tmp_path / "b"
    fixed.write_bytes(b"\0" + marker.encode())
    unfixed.write_bytes(b"\0plain")
    got = check_provenance({"patched": fixed, "control": unfixed}, (marker,))
    assert got["patched"].holds_fix is True and got["control"].holds_fix is False
    assert got["patched"].checked and len(got["patched"].sha256) == 64
    with pytest.raises(BuildFailed, match="the with fix binary lacks the fix"):
        check_provenance({"patched": unfixed, "control": fixed}, (marker,))
    with pytest.raises(BuildFailed, match="the without fix binary holds the fix"):
        check_provenance({"patched": fixed, "control": fixed}, (marker,))


def built(blob, expected, obj):
    f = "ggml/src/ggml-opt.cpp"
    return ft.BuiltFrom(blobs={f: blob}, expected={f: expected}, objects={f: obj})


def test_check_provenance_by_the_fix_s_files_when_the_fix_adds_no_string(tmp_path):
    """patches/0001 adds no string literal: the sources each build was made from are checked."""
    from orchestrator.errors import BuildFailed
    from orchestrator.finetune.provenance import check_provenance

    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"fixed")
    b.write_bytes(b"unfixed")
    ok = {"patched": built("p1", "p1", "o1"), "control": built("b1", "b1", "o2")}
    got = check_provenance({"patched": a, "control": b}, (), ok)
    assert got["patched"].holds_fix is True and got["control"].holds_fix is False
    assert got["patched"].how == ["fix's files at build time"] and got["control"].checked
    wrong = {**ok, "control": built("p1", "b1", "o2")}  # the revert did not happen
    with pytest.raises(
        BuildFailed, match="the without fix binary was built from ggml/src/ggml-opt.cpp as neither"
    ):
        check_provenance({"patched": a, "control": b}, (), wrong)
    same = {**ok, "control": built("b1", "b1", "o1")}  # the same object: nothing was recompiled
    with pytest.raises(BuildFailed, match="reverting the fix changed nothing that was compiled"):
        check_provenance({"patched": a, "control": b}, (), same)
    with pytest.raises(BuildFailed, match="the same"):
        check_provenance({"patched": a, "control": a}, (), ok)
    unchecked = check_provenance({"patched": a, "control": b}, ())
    assert not unchecked["patched"].checked and unchecked["patched"].holds_fix is None


def test_stale_series_detection():
    r = results([run("patched", [6.0])])
    r.series = ft.SeriesInfo(sha256="6a" * 32)
    assert ft.staleness(r, "0c1e5709", "6a" * 32) is None
    why = ft.staleness(r, "0c1e5709", "b7" * 32)
    assert why is not None and why.startswith(
        "STALE: made with series 6a6a6a6a6a6a, the current series is b7b7b7b7b7b7"
    )
    assert "made on base 0c1e5709" in ft.staleness(r, "1111111", "6a" * 32)
    r.series = ft.SeriesInfo()
    assert "(none recorded)" in ft.staleness(r, "0c1e5709", "6a" * 32)


# ---------------------------------------------------------------- cache key, data digest, plot


KEY = dict(
    base="0c1e5709",
    series="s" * 64,
    model="m" * 64,
    data="d" * 64,
    program="p" * 64,
    flags={"CMAKE_BUILD_TYPE": "Release", "threads": 2},
    cases=[{"optimizer": "sgd", "n_batch": 128}],
    toolchain={"gcc": "12.2.0", "cmake": "4.4.5"},
    pretrain="k" * 64,
)


def test_cache_key_is_stable_and_covers_every_part():
    k = ft.cache_key(**KEY)
    assert len(k) == 64 and k == ft.cache_key(
        **{**KEY, "flags": {"threads": 2, "CMAKE_BUILD_TYPE": "Release"}}
    )
    changed = {
        "base": "0c1e570a",
        "series": "t" * 64,
        "model": "n" * 64,
        "data": "e" * 64,
        "program": "q" * 64,
        "flags": {"CMAKE_BUILD_TYPE": "Debug", "threads": 2},
        "cases": [{"optimizer": "adamw", "n_batch": 128}],
        "toolchain": {"gcc": "13.1.0", "cmake": "4.4.5"},
        "pretrain": "j" * 64,
    }
    keys = {ft.cache_key(**{**KEY, name: value}) for name, value in changed.items()}
    assert len(keys) == len(changed) and k not in keys


def test_data_digest_covers_names_order_and_bytes():
    a = ft.data_digest([("LICENSE", b"MIT"), ("CONTRIBUTING.md", b"x")])
    assert a == ft.data_digest([("LICENSE", b"MIT"), ("CONTRIBUTING.md", b"x")])
    assert a != ft.data_digest([("CONTRIBUTING.md", b"x"), ("LICENSE", b"MIT")])
    assert a != ft.data_digest([("LICENSE", b"MIT "), ("CONTRIBUTING.md", b"x")])
    assert a != ft.data_digest([("LICENCE", b"MIT"), ("CONTRIBUTING.md", b"x")])


def test_plot_writes_a_png_with_one_panel_per_case_and_same_bytes_twice(tmp_path):
    pytest.importorskip("matplotlib", reason="the [plot] extra is not installed")
    r = results(
        [
            run("patched", [6, 5.9]),
            run("control", [6, 5.8]),
            run("patched", [6, 5.9], opt="sgd", lr=1e-4, period=2),
            run("patched", [6, 5.9], threads=OTHER_THREADS),
        ]
    )
    p1 = ft.plot(r, tmp_path / "a" / "finetune-loss.png")
    p2 = ft.plot(r, tmp_path / "b" / "finetune-loss.png")
    data = p1.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data == p2.read_bytes()
    fig = ft.figure(r)
    # one panel per case, none empty (it was a grid of optimizers x periods with empty panels)
    assert len(fig.axes) == 2
    assert fig.axes[0].get_title() == "adamw lr 1e-05, opt_period 1"
    # each variant: its seed's run and the mean; the sgd case has a patched run only
    assert len(fig.axes[0].lines) == 4 and len(fig.axes[1].lines) == 2
