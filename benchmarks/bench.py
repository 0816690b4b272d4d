"""Speed benchmark: the tool against the by-hand route, on the same machine, in one run.

(a) by hand: each upstream project's own test build, configured the standard way (llama.cpp with
    LLAMA_BUILD_TESTS, so test-opt links libllama; ggml with GGML_BUILD_TESTS), built and run once
    for the patched tree and once for the control tree, each in its own build directory, no ccache;
(b) the tool's cold run, empty cache, no ccache (its
    mutants step left out of the ratio: (f) has it);
(c) the control's marginal cost in the tool, against a one-file recompile + relink + test run by
    hand in the same build tree;
(d) a re-run with nothing changed;
(e) the orchestrator's own CPU time (everything but cmake, the compiler, git and the tests);
(f) the mutants' cost per mutant in the tool (its mutants step over the mutants it ran), against
    `git apply` of the same mutant + a ninja one-file rebuild of the gate target + a gate run by
    hand in the same build tree, no ccache in either.
(i) each competing fix (native_tests/competing/) in the tool against, by hand in the same tree: the
    fix's files back to the unfixed commit (not timed), `git apply`, ninja of both tests, both run.
(j) the untrusted-input checks (untrusted.py, outdir.py, redact.py) in a cached no-change run, from
    cProfile: every entry into those modules from outside them, cumulative.
(g) the fine-tuning evidence (`ggml-patch evidence`, issues 17 and 25) in the cold run's cache: cold
    (upstream's llama-finetune built in a new build tree without ccache, the model made and
    pre-trained, every case run in both variants, the noise runs), then again with nothing changed
    (the cached result); goals: cold under 15 minutes, the re-run under 1 s.
(h) the newcomer (issue 24): a fresh `git clone` of this repository into a temporary folder,
    an empty HOME (no tool cache, no ccache, no pip cache, no pip config: wheels and sdists
    from the package index), a new virtual environment, `pip install 'nox[uv]' && nox -s matrix` as
    the README says; wall time to the first printed verdict (a cell's result with its control)
    and to the end, each cell's time, then a re-run of `ggml-patch matrix` with nothing
    changed; once on the machine as it is and once under a load of two busy loops of the
    bench's own, the load average recorded for each. Before each, under the same load, the
    by-hand first answer (issue 35: the pinned ggml tree, patched, cmake Release + ninja
    test-opt + run it, no ccache): first verdict and total are reported as ratios to it.
(k) issue 21's cost: the generated matrix workflow in a real Actions engine (nektos/act, host mode,
    offline, as tests/e2e/test_act_matrix.py runs it: tests/helpers/act.py) on the default profile's
    cpu legs (plan, the legs, aggregate with its bundle, the drift report on a fake GitHub API)
    against `ggml-patch matrix` (what `nox -s matrix` runs) on the same cells of the same clone, and
    against `nox -s matrix -- <the same arguments>` as a user runs it in that clone (a new session
    venv, the tool installed with constraints.txt; pip's own cache as it is); all with the pinned
    sdists already downloaded, a tool cache otherwise new, and one ccache warmed by an untimed run
    of those cells first; quiet, then under two busy loops.
(l) issue 31's cost per topic, in the cold run's cells (the whole queue applied): each topic's
    control, each of its known-wrong fixes and each of its competing fixes in the tool against the
    same variant by hand in the same tree (`git apply` of it, or `git apply -R` of the topic's
    source hunks for its control, + ninja of both tests + both run).
(n) issue 46's cost of a test-backend-ops topic (benchmarks/speed/op_topic.py, --only-op-topic):
    the real op fix of tests/e2e/test_upstream_op_fix.py as a topic, its ggml/cpu cell cold against
    cmake + ninja test-backend-ops + its CONCAT cases by hand, no ccache on either side.
(m) issue 31's cost of the queue: the default run (every active topic) against a run of one topic
    (`--topic accumulator-reset`) on the same cpu cells, each in a new cache holding only the
    downloaded sources, no ccache, one after the other.
(c) and (f) are measured twice: as the machine is, then again (the tool re-run with --rerun in the
    same trees, the by-hand floors after it) under two busy loops of the bench's own.
Plus: the series' text changed (a nonce in a subject) re-runs every cell;
one backend's flags changed re-runs only that backend's cells. Writes
bench.json and bench.md with the ratios and the goals.

Usage: python benchmarks/bench.py [--out DIR]
[--skip-by-hand-llama] [--skip-evidence] [--evidence-case CASE]...
                                  [--only-evidence] [--skip-newcomer] [--only-newcomer]
                                  [--only-ratios] [--loads N,...] [--only-act]
                                  [--skip-act] [--act-cpus LIST] [--only-topics]
                                  [--only-op-topic]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.speed.act import act_vs_matrix  # noqa: E402
from benchmarks.speed.common import BUSY_LOOPS, DEFAULT_OUT  # noqa: E402
from benchmarks.speed.measures import measure_tool, only_evidence, only_topics  # noqa: E402
from benchmarks.speed.newcomer import newcomers  # noqa: E402
from benchmarks.speed.op_topic import op_topic  # noqa: E402
from benchmarks.speed.report import GOALS, finish  # noqa: E402
from benchmarks.speed.routes import main_plan  # noqa: E402
from orchestrator.config import load_matrix  # noqa: E402
from orchestrator.run.cmake import jobs  # noqa: E402


def parser() -> argparse.ArgumentParser:
    """The bench's options (`nox -s bench -- OPTIONS`)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument(
        "--plan",
        action="store_true",
        help="resolve every route's commands, targets and paths without building; "
        "exit 1 naming what no longer exists",
    )
    ap.add_argument(
        "--skip-by-hand-llama", action="store_true", help="skip the 3-4 minute libllama build"
    )
    ap.add_argument(
        "--skip-evidence",
        action="store_true",
        help="skip (g), the fine-tuning evidence (about 8 minutes)",
    )
    ap.add_argument(
        "--only-evidence",
        action="store_true",
        help="only (g), in a new cache whose downloads are linked "
        "from yours (a cold fetch, apply and build)",
    )
    ap.add_argument(
        "--evidence-case",
        action="append",
        default=[],
        metavar="CASE",
        help="the evidence's cases (`ggml-patch evidence --case`; default: its default cases)",
    )
    add_scope_options(ap)
    return ap


def add_scope_options(ap: argparse.ArgumentParser) -> None:
    """The options that leave measures out or run one alone, and the loads."""
    ap.add_argument(
        "--skip-newcomer",
        action="store_true",
        help="skip (h), the newcomer's fresh clone (about 10 minutes)",
    )
    ap.add_argument("--only-newcomer", action="store_true", help="only (h), quiet then loaded")
    ap.add_argument(
        "--only-op-topic",
        action="store_true",
        help="only (n): a test-backend-ops topic's cell against test-backend-ops by hand",
    )
    ap.add_argument(
        "--newcomer-args",
        default="",
        metavar="ARGS",
        help="(h) runs `nox -s matrix -- ARGS` (e.g. '--topic accumulator-reset': one topic's "
        "variants); default: the README's command as it is",
    )
    ap.add_argument(
        "--only-ratios",
        action="store_true",
        help="only (b) without the by-hand builds, (c) and (f) quiet and loaded, and (d)",
    )
    ap.add_argument(
        "--only-act",
        action="store_true",
        help="only (k), the matrix workflow in act against `ggml-patch matrix` (quiet and loaded)",
    )
    ap.add_argument("--skip-act", action="store_true", help="skip (k) (about 10 minutes)")
    ap.add_argument(
        "--only-topics",
        action="store_true",
        help="only (m) and (l): the default run (every topic) against a run of one topic, then "
        "each topic's variants in its trees against the same by hand",
    )
    ap.add_argument(
        "--act-cpus",
        default="0",
        metavar="LIST",
        help="the cores act and its legs may use (taskset; default 0, as the e2e test)",
    )
    ap.add_argument(
        "--loads",
        default=f"0,{BUSY_LOOPS}",
        metavar="N,...",
        help="busy loops of the measures, comma-separated "
        f"(default 0,{BUSY_LOOPS}: quiet, then loaded)",
    )


def main() -> int:
    args = parser().parse_args()
    out = Path(args.out)
    matrix = load_matrix(ROOT / "matrix.yaml")
    if args.plan:
        return main_plan(matrix, out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {
        "machine": {"cores": jobs(), "loadavg_start": list(os.getloadavg())},
        "goals": GOALS,
    }
    if args.only_evidence:
        return only_evidence(report, out, args.evidence_case)
    loads = sorted({int(x) for x in args.loads.split(",") if x.strip()})

    with tempfile.TemporaryDirectory(prefix="ggml-patch-bench-") as tmpdir:
        work = Path(tmpdir)
        if args.only_topics:
            only_topics(report, work, matrix, args, loads)
            return finish(report, out)
        if args.only_op_topic:  # writes op-topic.md and .json of its own
            op_topic(work, out)
            return 0
        if args.only_act:
            print("bench: (k) the matrix workflow in act against ggml-patch matrix", flush=True)
            report["act"] = act_vs_matrix(work, loads, args.act_cpus, out)
            return finish(report, out)
        if not args.only_newcomer:
            measure_tool(report, work, matrix, args, loads)
        if not args.skip_act and not args.only_ratios and not args.only_newcomer:
            print("bench: (k) the matrix workflow in act against ggml-patch matrix", flush=True)
            report["act"] = act_vs_matrix(work, loads, args.act_cpus, out)
        if not args.skip_newcomer and not args.only_ratios:
            report["newcomer"] = newcomers(work, matrix, loads, args.newcomer_args, out)

    return finish(report, out)


if __name__ == "__main__":
    sys.exit(main())
