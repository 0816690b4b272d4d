"""`ggml-patch evidence`'s pure parts: the cases, the command line, the cache key of a run's inputs,
finetune.json validated as untrusted input, summary.md's section (added, replaced, kept by a matrix
run), and the data the bundle puts in PR_BODY.md and ISSUE.md."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.finetune import bundle as UF
from orchestrator.finetune import results as ft
from orchestrator.finetune import section as S
from orchestrator.finetune.record import Inputs
from orchestrator.finetune.results import Epoch
from orchestrator.upstream import pr_body as PB

BASE = "4f2c5210becd5d7cc7bbb1b66faedb92498fef98"
SERIES = "6a" * 32


# ---------------------------------------------------------------- cases


def test_a_case_names_optimizer_lr_opt_period_and_epochs():
    c = ft.parse_case("adamw:1e-3:2:4")
    assert (c.optimizer, c.lr, c.opt_period, c.epochs, c.n_batch, c.n_ubatch) == (
        "adamw",
        1e-3,
        2,
        4,
        256,
        128,
    )
    assert ft.parse_case("sgd:0.1:1").epochs == 8  # the default
    assert ft.parse_case("sgd:0.1:4").n_ubatch == 64
    assert c.key() == {
        "optimizer": "adamw",
        "lr": 1e-3,
        "n_batch": 256,
        "n_ubatch": 128,
        "epochs": 4,
    }


@pytest.mark.parametrize(
    "text, says",
    [
        ("adamw:1e-3", "expected OPTIMIZER:LR:OPT_PERIOD[:EPOCHS]"),
        ("adam:1e-3:1", "optimizer 'adam': expected one of sgd, adamw"),
        ("sgd:x:1", "learning rate 'x'"),
        ("sgd:-1:1", "learning rate '-1'"),
        ("sgd:nan:1", "learning rate 'nan'"),
        ("sgd:inf:1", "learning rate 'inf'"),
        ("sgd:0.1:3", "opt_period '3': expected one of 1, 2, 4"),
        ("sgd:0.1:0", "opt_period '0'"),
        ("sgd:0.1:1:0", "epochs '0'"),
        ("sgd:0.1:1:101", "epochs '101'"),
        ("sgd:0.1:1:2.5", "epochs '2.5'"),
    ],
)
def test_a_bad_case_is_one_line_naming_what_is_wrong(text, says):
    with pytest.raises(ValueError) as e:
        ft.parse_case(text)
    assert says in str(e.value) and text in str(e.value) and "\n" not in str(e.value)


def test_the_default_cases_and_repeats():
    # finetune.cpp's defaults (AdamW lr 1e-5, -c = -b = -ub), then the overshoot regime (lr 1e-4,
    # 16 epochs), as training-evidence/predictions.yaml pre-registered them (issue 34; the earlier
    # defaults adamw:1e-5:2:8 and sgd:1e-4:1:8 run with --case)
    assert [c.name for c in ft.parse_cases([])] == [
        "adamw:1e-05:1:8",
        "adamw:0.0001:1:16",
    ]
    assert [c.name for c in ft.parse_cases([], "real")] == ["adamw:1e-05:1:3"]
    with pytest.raises(ValueError, match="--case-set 'huge': expected one of tiny, real"):
        ft.parse_cases([], "huge")
    assert [c.name for c in ft.parse_cases(["sgd:0.1:1:2", "sgd:1e-1:1:2"])] == ["sgd:0.1:1:2"]
    with pytest.raises(ValueError, match="the same case with two epoch counts"):
        ft.parse_cases(["sgd:0.1:1:2", "sgd:0.1:1:3"])


def test_the_program_s_command_line():
    argv = ft.command(
        "/b/llama-finetune",
        "/c/m.gguf",
        ["/d/docker.md"],
        ft.parse_case("sgd:0.1:2:3"),
        1,
        "/o.gguf",
    )
    assert argv == [
        "/b/llama-finetune",
        "-m",
        "/c/m.gguf",
        "-f",
        "/d/docker.md",
        "-c",
        "256",
        "-b",
        "256",
        "-ub",
        "128",
        "-opt",
        "sgd",
        "-lr",
        "0.1",
        "-epochs",
        "3",
        "-val-split",
        "0.3",
        "-t",
        "1",
        "-o",
        "/o.gguf",
    ]
    pre = ft.pretrain_command("/b/llama-finetune", "/c/r.gguf", ["/d/CONTRIBUTING.md"], "/c/p.gguf")
    # the cases' split is 0.3 (>= 8 held-out windows); the pre-training keeps finetune.cpp's 0.05
    assert pre[pre.index("-val-split") + 1] == "0.05"
    assert (
        pre[pre.index("-ub") + 1] == "256"
        and pre[pre.index("-lr") + 1] == "0.001"
        and pre[-1] == "/c/p.gguf"
    )


# ---------------------------------------------------------------- the cache key of a run's inputs


def random_model(sha256: str) -> ft.RandomModel:
    return ft.RandomModel(
        sha256=sha256,
        seed=1,
        dims={},
        n_vocab=8,
        vocab_sha256="0" * 64,
        n_params=8,
        vocab_file="models/v.gguf",
        gguf="0.19.0",
    )


def inputs(**changed) -> Inputs:
    parts = dict(
        base=BASE,
        series_sha256=SERIES,
        rendered_sha256="r" * 64,
        model=random_model("1" * 64),
        model_path=Path("/c/m.gguf"),
        pretrain_data=ft.DataInfo(sha256="3" * 64),
        pretrain_paths=(Path("/d/CONTRIBUTING.md"),),
        data=ft.DataInfo(sha256="5" * 64),
        data_paths=(Path("/d/LICENSE"),),
        program_sha256="p" * 64,
        flags=ft.BuildFlags(cmake=["-DGGML_CPU=ON"], program=ft.program_options()),
        toolchain={"cxx": "c++ 12.2.0"},
    )
    return Inputs(**{**parts, **changed})


def test_the_key_covers_base_series_model_data_program_flags_cases_and_toolchain():
    cases = tuple(ft.parse_cases([]))
    k = inputs().key(cases)
    assert k == inputs().key(cases) and len(k) == 64
    # where the files lie is not an input: a cache moved elsewhere gives the same key
    assert k == inputs(model_path=Path("/elsewhere/m.gguf"), data_paths=(Path("/x/LICENSE"),)).key(
        cases
    )
    changed = [
        inputs(base="0" * 40),
        inputs(rendered_sha256="s" * 64),
        inputs(model=random_model("2" * 64)),
        inputs(data=ft.DataInfo(sha256="6" * 64)),
        inputs(program_sha256="q" * 64),
        inputs(pretrain_data=ft.DataInfo(sha256="4" * 64)),
        inputs(flags=ft.BuildFlags(cmake=["-DGGML_CPU=ON", "-DX=1"], program=ft.program_options())),
        inputs(toolchain={"cxx": "c++ 13.1.0"}),
    ]
    keys = {i.key(cases) for i in changed}
    keys |= {inputs().key(cases[:1]), inputs().key(tuple(ft.parse_cases(["adamw:1e-3:1:5"])))}
    assert len(keys) == len(changed) + 2 and k not in keys


# ----------------------------------------------------------------
# finetune.json: written, read back, validated


def run(variant, opt, period, epochs, lr=1e-3) -> ft.Run:
    return ft.Run(
        variant=variant,
        optimizer=opt,
        opt_period=period,
        n_batch=256,
        n_ubatch=256 // period,
        lr=lr,
        command=["/c/bin/llama-finetune", "-m", "/c/m.gguf"],
        epochs=epochs,
        exit_code=0,
        seconds=12.5,
        cpu_seconds=12.2,
        compared=True,
    )


def ep(train, evals):
    return [
        Epoch(epoch=i + 1, train_loss=t, eval_loss=e, train_acc=0.1, eval_acc=0.2)
        for i, (t, e) in enumerate(zip(train, evals, strict=True))
    ]


FIXED = ep([9.35, 6.57, 6.12], [7.70, 6.97, 6.85])
UNFIXED = ep([9.20, 6.20, 6.52], [7.45, 8.00, 8.35])


def sample(**changed) -> ft.FinetuneResults:
    parts = dict(
        target="llama.cpp",
        base=BASE,
        cache_key="ab" * 32,
        model={
            "sha256": "3b" * 32,
            "random_sha256": "3c" * 32,
            "seed": 20261130,
            "n_vocab": 32000,
            "n_params": 4178240,
            "pretrained": True,
            "pretrain": {
                "files": ["CONTRIBUTING.md"],
                "optimizer": "adamw",
                "lr": 1e-3,
                "epochs": 8,
                "eval_loss": [9.5, 7.25],
            },
            "dims": {"n_layer": 2, "n_embd": 64, "n_head": 4, "n_ff": 128, "n_ctx": 256},
            "vocab_file": "models/ggml-vocab-llama-spm.gguf",
            "vocab_sha256": "16" * 32,
        },
        data={"files": ["docs/docker.md"], "sha256": "7e" * 32},
        program={"name": ft.PROGRAM, "source": ft.PROGRAM_SOURCE, "sha256": "eb" * 32},
        provenance={
            "patched": {"sha256": "01" * 32, "holds_fix": True},
            "control": {"sha256": "02" * 32, "holds_fix": False},
        },
        source={
            "description": "llama-cpp-python==0.3.36 (vendor/llama.cpp)",
            "upstream_commit": "0c1e57098bba43ac29e6e3b677cdceebdd22334f",
        },
        series={
            "sha256": SERIES,
            "rendered_sha256": "aa" * 32,
            "patches": ["0001-a.patch", "0002-b.patch"],
        },
        toolchain={"cxx": "c++ (Debian 12.2.0-14) 12.2.0"},
        timings={"total_s": 60.5},
        runs=[
            run("patched", "adamw", 1, FIXED),
            run("control", "adamw", 1, UNFIXED),
            run("patched", "sgd", 2, FIXED, 0.1),
            run("control", "sgd", 2, ep([9, 30, math.inf], [8, 40, math.nan]), 0.1),
        ],
    )
    return ft.FinetuneResults(**{**parts, **changed})


def test_finetune_json_round_trips_with_the_verdicts_computed():
    r = sample()
    text = ft.finetune_json(r)
    back = ft.FinetuneResults.from_json(text)
    assert ft.finetune_json(back) == text
    d = json.loads(text)
    assert [v["label"] for v in d["verdicts"]] == ["bug visible", "bug visible"]
    assert back.runs[3].epochs[2].train_loss == math.inf and math.isnan(
        back.runs[3].epochs[2].eval_loss
    )


def test_stored_verdicts_are_never_trusted():
    d = json.loads(ft.finetune_json(sample()))
    d["verdicts"] = [{"label": "no difference"}]
    back = ft.FinetuneResults.from_json(json.dumps(d))
    assert [v.label for v in ft.verdicts(back)] == ["bug visible", "bug visible"]


def test_a_file_without_the_optional_objects_reads():
    d = json.loads(ft.finetune_json(sample()))
    for k in ("source", "series", "toolchain", "timings", "provenance"):
        d.pop(k)
    back = ft.FinetuneResults.from_json(json.dumps(d))
    assert back.series.sha256 is None and back.runs[0].epochs == FIXED


def edited(fn) -> str:
    d = json.loads(ft.finetune_json(sample()))
    fn(d)
    return json.dumps(d)


@pytest.mark.parametrize(
    "edit, says",
    [
        (lambda d: d.pop("runs"), "key 'runs' missing"),
        (lambda d: d.pop("base"), "key 'base' missing"),
        (lambda d: d.update(base="main; rm -rf /"), "base: string should match pattern"),
        (lambda d: d.update(target="../x"), "target: string should match pattern"),
        (lambda d: d.update(written_by="a later version"), "unknown key 'written_by'"),
        (
            lambda d: d["runs"][0].update(variant="maybe"),
            "runs[0].variant: 'maybe' is not one of 'patched' or 'control'",
        ),
        (
            lambda d: d["runs"][0].update(optimizer="lion"),
            "runs[0].optimizer: 'lion' is not one of",
        ),
        (
            lambda d: d["runs"][0].update(lr=-1),
            "runs[0].lr: input should be greater than 0 (got -1)",
        ),
        (
            lambda d: d["runs"][0].update(opt_period="2"),
            "runs[0].opt_period: expected integer, got str",
        ),
        (lambda d: d["runs"][0].update(gpu="none"), "runs[0]: unknown key 'gpu'"),
        (
            lambda d: d["runs"][0]["epochs"][1].update(train_loss="low"),
            "runs[0].epochs[1].train_loss: expected number",
        ),
        (
            lambda d: d["runs"][0]["epochs"][1].update(note="x"),
            "runs[0].epochs[1]: unknown key 'note'",
        ),
        (
            lambda d: d["runs"][0]["epochs"].reverse(),
            "runs[0].epochs: epochs [3, 2, 1] are not numbered 1, 2, ...",
        ),
        (
            lambda d: d["runs"].append(dict(d["runs"][0])),
            "runs[4]: a second patched run of adamw lr 0.001 opt_period 1 at 1",
        ),
        (
            lambda d: d["runs"][0].update(threads=0),
            "runs[0].threads: input should be greater than or equal to 1",
        ),
        (
            lambda d: d["data"].update(files=["../../etc/passwd"]),
            "data.files[0]: string should match pattern",
        ),
        (lambda d: d["model"].update(sha256="x"), "model.sha256: string should match pattern"),
        (
            lambda d: d["runs"][0].update(command=["x"] * 65),
            "runs[0].command: list should have at most 64 items",
        ),
        (lambda d: d.update(schema_version=1), "schema_version 1, expected 4"),
    ],
)
def test_a_tampered_file_is_refused_naming_the_field(edit, says):
    with pytest.raises(ValueError) as e:
        ft.FinetuneResults.from_json(edited(edit))
    assert says in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("text", ["", "[]", "{", '{"schema_version": 2}', "1e999999"])
def test_what_is_not_a_finetune_json_is_refused(text):
    with pytest.raises(ValueError):
        ft.FinetuneResults.from_json(text)


def test_the_bundle_reads_the_file_as_untrusted_input(tmp_path):
    assert UF.load(tmp_path) is None  # no evidence run: nothing, no error
    (tmp_path / "evidence").mkdir()
    path = tmp_path / "evidence" / "finetune.json"
    path.write_text(ft.finetune_json(sample()))
    assert UF.load(tmp_path).runs[0].epochs == FIXED
    path.write_text(edited(lambda d: d["runs"][0].update(optimizer="lion")))
    with pytest.raises(
        ConfigError,
        match=r"finetune.json: runs\[0\].optimizer: 'lion' .*re-run `ggml-patch evidence`",
    ):
        UF.load(tmp_path)
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="not UTF-8"):
        UF.load(tmp_path)


def test_the_bundle_says_in_one_line_what_is_wrong_with_a_file_too_big_or_not_utf8(
    tmp_path, monkeypatch
):
    (tmp_path / "evidence").mkdir()
    path = tmp_path / "evidence" / "finetune.json"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError) as e:
        UF.load(tmp_path)
    assert str(e.value) == f"{path}: not UTF-8 text; not a finetune.json of `ggml-patch evidence`"
    path.write_text(ft.finetune_json(sample()))
    monkeypatch.setattr(UF, "MAX_BYTES", 100)
    with pytest.raises(ConfigError) as e:
        UF.load(tmp_path)
    size = path.stat().st_size
    assert str(e.value) == (
        f"{path}: {size} bytes, more than the 100 a finetune.json can have; re-run "
        "`ggml-patch evidence` (or remove the file)"
    )


def test_the_bundle_uses_the_evidence_only_for_its_target_base_and_series():
    said: list[str] = []
    r = sample()
    assert UF.for_target(r, "llama.cpp", BASE, SERIES, said.append) is r and not said
    # another target's: silent
    assert UF.for_target(r, "ggml", BASE, SERIES, said.append) is None and not said
    assert UF.for_target(r, "llama.cpp", "0" * 40, SERIES, said.append) is None
    assert UF.for_target(r, "llama.cpp", BASE, "5" * 64, said.append) is None
    assert len(said) == 2 and "left out of the bundle: made on base 4f2c5210becd" in said[0]
    assert (
        "left out of the bundle: STALE: made with series "
        "6a6a6a6a6a6a, the current series is 555555555555" in said[1]
    )
    assert "re-run `ggml-patch evidence`" in said[1]
    assert UF.for_target(None, "llama.cpp", BASE, SERIES, said.append) is None


# ---------------------------------------------------------------- summary.md's section


def test_the_section_is_added_replaced_and_kept_by_a_matrix_run():
    one = S.marked(ft.summary_section(sample(), "Plot: evidence/finetune-loss.png."))
    assert one.startswith(S.BEGIN) and one.endswith(S.END)
    assert (
        "| adamw:0.001:1:3 | 1 | **bug visible** |" in one
        and "| model | tiny llama PRE-TRAINED here" in one
    )
    assert S.splice(None, one) == one + "\n"  # no summary yet: the section alone
    matrix = "# ggml-patch matrix: 2/2 cells passed\n\n| cell |\n"
    both = S.splice(matrix, one)
    assert both.startswith(matrix) and both.endswith(one + "\n")
    two = S.marked("## other numbers")
    again = S.splice(both, two)
    assert again == both.replace(one, two) and one not in again  # replaced, the rest untouched
    rewritten = "# ggml-patch matrix: 1/2 cells passed\n"
    # a matrix run keeps the evidence section
    assert S.keep(again, rewritten) == S.splice(rewritten, two)
    assert S.keep(matrix, rewritten) == rewritten and S.keep(None, rewritten) == rewritten
    assert S.extract(f"{S.BEGIN} no end") is None


def test_a_matrix_run_keeps_the_evidence_section_in_summary_md(tmp_path):
    from orchestrator.model.results import load_results
    from orchestrator.report.summary import write_results

    results, _ = load_results(Path(__file__).parents[1] / "data" / "results-cpu-sample.json")
    section = S.marked(ft.summary_section(sample(), "no plot"))
    (tmp_path / "summary.md").write_text(S.splice("# an older matrix summary\n", section))
    write_results(results, tmp_path)
    text = (tmp_path / "summary.md").read_text()
    assert text.startswith("# ggml-patch matrix:") and text.count(S.BEGIN) == 1 and section in text
    assert "an older matrix summary" not in text


# ---------------------------------------------------------------- PR_BODY.md and ISSUE.md


def test_the_pr_data_are_ascii_tables_and_commands_from_validated_numbers():
    d = json.loads(ft.finetune_json(sample()))
    d["source"]["description"] = "llama.cpp \u2014 vendored | twice\nnew line"
    lines = PB.finetune_lines(ft.FinetuneResults.from_json(json.dumps(d)), "####")
    text = "\n".join(lines)
    assert text.isascii()
    assert lines[0] == (
        "#### Fine-tuning with upstream's llama-finetune: held-out eval loss per epoch with and "
        "without the fix"
    )
    # one cell, one line: the pipe escaped (publish.cell), shown as written
    assert "| target | llama.cpp: llama.cpp - vendored \\| twice new line |" in text
    assert "| adamw:0.001:1:3 | 1 | **bug visible** | +1.50000 |" in text
    # the loss tables: held-out eval loss per epoch, with and without the fix, per seed
    assert "| 3 | 6.85000 | 8.35000 |" in text
    assert (
        "tiny llama PRE-TRAINED here, sha256 `" + "3b" * 32 + "`" in text
        and "eval loss 9.5000 after epoch 1" in text
    )
    assert (
        "Determinism floor 1e-05 (largest same-build, same-seed difference measured: none" in text
    )
    assert (
        "with fix: holds the fix (binary sha256 `0101" in text
        and "without fix: lacks the fix" in text
    )
    assert (
        "\n"
        "./build/bin/llama-finetune -m pretrained-20261130.gguf -f $LLAMA_CPP/docs/docker.md "
        "-c 256 -b 256 -ub 128 -opt sgd -lr 0.1 -epochs 3 -val-split 0.3 -t 1 -o finetuned.gguf\n"
    ) in text
    assert (
        "```sh\n"
        "cmake -S $LLAMA_CPP -B build -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF "
        "-DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=ON "
        "-DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF\n"
        "cmake --build build --target llama-finetune llama-quantize\n"
        "python -m orchestrator.finetune.tiny_model $LLAMA_CPP/models/ggml-vocab-llama-spm.gguf "
        "tiny-llama-20261130.gguf --seed 20261130\n"
        "./build/bin/llama-finetune -m tiny-llama-20261130.gguf -f "
        "$LLAMA_CPP/CONTRIBUTING.md -c 256 -b 256 -ub 256 -opt adamw -lr 0.001 -epochs 8 "
        "-val-split 0.05 -t 2 -o pretrained-20261130.gguf\n"
    ) in text
    assert "/c/bin" not in text and "/c/m.gguf" not in text  # no path of the machine that ran it
    assert PB.finetune_lines(None, "##") == []


def test_pr_body_and_issue_carry_the_evidence_when_given():
    from orchestrator.upstream import cover as C
    from orchestrator.upstream import documents as D

    from .test_pr_body import CLEAN, COMMITS, TOOLCHAIN, WRITTEN, llama_policy

    # the real llama.cpp template, a sample results.json
    from .test_pr_body import sample as results_sample

    def docs(finetune):
        return D.documents(
            policy=llama_policy(),
            cover=C.parse_cover("patches/cover.md", WRITTEN),
            results=results_sample(),
            results_sha256="f" * 64,
            target="llama.cpp",
            commits=COMMITS,
            patches=CLEAN,
            toolchain=TOOLCHAIN,
            warnings=[],
            canonical_paths=[],
            read_file=lambda p: None,
            finetune=finetune,
        )

    plain = docs(())
    assert "llama-finetune" not in plain.files["PR_BODY.md"] + plain.files["ISSUE.md"]
    d = docs((sample(),))
    body, issue = d.files["PR_BODY.md"], d.files["ISSUE.md"]
    info = body.split("## Additional information\n", 1)[1].split("\n## ", 1)[0]
    assert "#### Fine-tuning with upstream's llama-finetune" in info and "**bug visible**" in info
    assert "## Fine-tuning with upstream's llama-finetune: held-out eval loss per epoch" in issue
    assert body.isascii() and issue.isascii()


# ----------------------------------------------------------------
# how a run ended, what the command exits with


def test_a_run_s_outcome():
    assert ft.run_outcome(0, False, True) == "ok"
    # exit 0 without its last line: not a whole run
    assert ft.run_outcome(0, False, False) == "failed"
    assert ft.run_outcome(2, False, False) == "failed"
    assert ft.run_outcome(-6, False, False) == "crashed"  # SIGABRT: a GGML_ASSERT
    assert ft.run_outcome(None, True, False) == "timed out"


def test_unfinished_runs_and_a_control_that_changed_nothing():
    r = sample()
    assert ft.unfinished(r) == [] and not ft.no_case_differs(r)
    r.runs[1].outcome = "crashed"
    assert ft.unfinished(r) == [r.runs[1]]
    same = sample(runs=[run("patched", "adamw", 1, FIXED), run("control", "adamw", 1, list(FIXED))])
    assert ft.no_case_differs(same)
    # no pair: no verdict
    assert not ft.no_case_differs(sample(runs=[run("patched", "adamw", 1, FIXED)]))


def test_the_key_covers_the_build_variables_so_a_changed_compiler_retrains(monkeypatch):
    """CC, CXX, CFLAGS, ... (buildenv.BUILD_VARIABLES) reach both builds: a change in one gives
    other keys (training's and pre-training's), so no stale training result is reused; none
    set gives the key of before (cached results stay valid); a token is never part of it."""
    cases = tuple(ft.parse_cases([]))
    for name in ("CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_not_in_the_key")
    plain = inputs()
    assert plain.build_env == {}
    assert plain.key(cases) == inputs(build_env={}).key(cases)
    monkeypatch.setenv("CFLAGS", "-O0")
    with_cflags = inputs()
    assert with_cflags.build_env == {"CFLAGS": "-O0"}
    assert with_cflags.key(cases) != plain.key(cases)
    assert with_cflags.pretrain_key() != plain.pretrain_key()
    monkeypatch.setenv("CC", "clang")
    with_cc = inputs()
    assert with_cc.key(cases) not in (plain.key(cases), with_cflags.key(cases))
    monkeypatch.setenv("CXX", "clang++")
    assert inputs().key(cases) not in (plain.key(cases), with_cc.key(cases))
    assert "ghp_not_in_the_key" not in json.dumps(inputs().build_env)
