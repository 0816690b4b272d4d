"""The GitHub Actions matrix workflow, generated from matrix.yaml so the two never drift.

Pure: a Matrix in, a workflow dict and its YAML text out. Jobs:
  plan       every git ref resolved to one commit (its `pins` output), so a branch moving during
             the run changes nothing
  cell       one leg per (profile, target, backend) cell; honest: on a runner meant to have its
             backend a skip is a failure, a hosted CUDA leg only builds. Only `default` legs must pass
  aggregate  per profile: merge, summary, upload, bundle, upload; each upload guarded by its own
             step's outcome, so a failing live profile never costs the default one its artifacts
  report     the drift issue (ci/drift_issue.py): the one job with `issues: write`
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Optional

import yaml

from ..config import Matrix, _line_for
from ..errors import ConfigError
from . import common
from .actions import DEFAULT_PINS, Pins, uses
from .runners import retired_message

DEFAULT_PATH = ".github/workflows/ggml-patch-matrix.yml"
# Monday and Thursday 04:17 UTC: off the hour, when scheduled jobs pile up; never 7 days apart,
# so the legs' ccache and download caches are used before GitHub evicts them (7 days unused).
CRON = "17 4 * * 1,4"
LEG_TIMEOUT_MIN = 120  # a cold CUDA compile alone is ~18 min at -j2; Vulkan ~4 min
VULKAN_SETUP = "scripts/setup-vulkan-lavapipe.sh"
CUDA_SETUP = "scripts/setup-cuda-pypi.sh"
DEFAULT_PROFILE = "default"  # its legs must pass; other profiles' legs report, never fail the run
# '+' cannot appear in a profile, target or backend name (config._NAME), so an artifact's
# name splits back into its cell unambiguously and one profile's glob never matches another's.
ARTIFACT_PREFIX = "results"
ARTIFACT_SEP = "+"
# a backend's further runners' legs: results+<profile>@<runner>+<target>+<backend>, which the
# profile's glob (results+<profile>+*) never matches
GROUP_SEP = "@"
LEG_RESULTS = "ci-results"  # a leg writes ci-results/<artifact>/ and uploads ci-results/
# GitHub-hosted runner labels (and the preset labels of every self-hosted runner); any other
# `runs_on` label in matrix.yaml is a custom self-hosted one, declared to actionlint.
_HOSTED = re.compile(
    r"^(ubuntu|macos|windows)-[A-Za-z0-9.-]+$|^(self-hosted|linux|macos|windows|x64|arm|arm64)$",
    re.I,
)
ACTIONLINT_CONFIG_PATH = ".github/actionlint.yaml"


def cell_session(target: str, backend: str) -> str:
    """The nox session name of one cell, exactly as nox spells a parametrized session."""
    return f"cell(target={target!r}, backend={backend!r})"


def _labels(runs_on: str) -> list[str]:
    """matrix.yaml's `runs_on`: one label, or a self-hosted runner's "self-hosted, linux, gpu" (all must match)."""
    return [s.strip() for s in runs_on.split(",") if s.strip()]


def all_cells(
    matrix: Matrix, profiles: Optional[Iterable[str]] = None
) -> list[tuple[str, str, str]]:
    """(profile, target, backend) for every cell of the given profiles (default: all), in matrix.yaml's order."""
    names = list(profiles) if profiles else list(matrix.profiles)
    return [(p, t.name, b.name) for p in names for t, b in matrix.cells(p)]


def honesty(backend: str, runs_on: str) -> dict[str, Any]:
    """What a leg of this backend does on this runner so that it can never pass by skipping:
    the setup it runs, the backend it requires (its skip is then a failure), build-only."""
    labels = [lab.lower() for lab in _labels(runs_on)]
    # a GitHub-hosted runner: one label such as ubuntu-24.04 or macos-14
    on_hosted = len(labels) == 1 and labels[0].startswith(("ubuntu-", "macos-", "windows-"))
    linux = (on_hosted and labels[0].startswith("ubuntu-")) or "linux" in labels
    mac = (on_hosted and labels[0].startswith("macos-")) or "macos" in labels
    build_only = (
        backend == "cuda" and on_hosted and linux
    )  # no GPU: compile it with PyPI's toolkit, run nothing
    # a self-hosted Vulkan runner brings its driver, a self-hosted CUDA one its GPU
    required = build_only or {"vulkan": linux, "metal": mac, "cuda": "self-hosted" in labels}.get(
        backend, False
    )
    # Mesa's lavapipe on hosted Linux runners
    setup = (
        {"vulkan": "vulkan-lavapipe", "cuda": "cuda-pypi"}.get(backend, "")
        if required and on_hosted
        else ""
    )
    return {
        "setup": setup,
        "require-backend": backend if required else "",
        "build-only": build_only,
    }


def downloads_key(matrix: Matrix, target: str) -> str:
    """A cache key that changes only with the target's pinned download (its sha256); '' for git, local."""
    src = matrix.target(target).source
    return (
        f"ggml-patch-downloads-{src['sha256'][:32]}"
        if src.kind in ("pypi-sdist", "tarball")
        else ""
    )


def runner_slug(runs_on: str) -> str:
    """A runner's labels as one name-safe word ("self-hosted, linux, gpu" -> self-hosted-linux-gpu)."""
    return "-".join(re.sub(r"[^A-Za-z0-9._-]", "_", lab) for lab in _labels(runs_on))


def legs(matrix: Matrix, profiles: Optional[Iterable[str]] = None) -> list[dict[str, Any]]:
    """One strategy.matrix.include entry per cell and runner. A backend's first runner's legs form the
    profile's results; each further runner's legs are merged apart (`group`): a cell is merged once.
    A runner label GitHub has retired is refused: every run on it would fail."""
    for b in matrix.backends.values():
        where = f"{matrix.path}:{_line_for(matrix.lines, ('backends', b.name, 'runs_on'))}: backends.{b.name}.runs_on"
        for label in (lab for runs_on in b.all_runners() for lab in _labels(runs_on)):
            if msg := retired_message(where, label):
                raise ConfigError(msg)
    profiles = list(profiles) if profiles else None
    handing_over = bundle_legs(matrix, profiles)
    out = []
    for profile, target, backend in all_cells(matrix, profiles):
        runners = matrix.backend(backend).all_runners()
        for i, runs_on in enumerate(runners):
            group = profile if i == 0 else f"{profile}{GROUP_SEP}{runner_slug(runs_on)}"
            artifact = ARTIFACT_SEP.join((ARTIFACT_PREFIX, group, target, backend))
            on = f" on {runner_slug(runs_on)}" if len(runners) > 1 else ""
            labels = _labels(runs_on)
            leg = {
                "name": f"{target}/{backend}{on} ({profile})",
                "profile": profile,
                "target": target,
                "backend": backend,
                "runs-on": labels[0] if len(labels) == 1 else labels,
                "required": profile == DEFAULT_PROFILE,
                **honesty(backend, runs_on),
                "downloads-key": downloads_key(matrix, target),
                "git": matrix.target(target).source.kind == "git",
                "hand-over": i == 0 and handing_over.get(target) == (profile, backend),
                "results": f"{LEG_RESULTS}/{artifact}",
                "artifact": artifact,
                "group": group,
            }
            out.append(leg)
    return out


_PLAN = """pins=$(ggml-patch resolve-refs --out pins.json)
echo "pins=$pins" >> "$GITHUB_OUTPUT"
{ echo '### The commits this run builds'; echo; echo '```json'; cat pins.json; echo '```'; } >> "$GITHUB_STEP_SUMMARY"
"""


def _plan_job(matrix: Matrix, pins: Pins) -> dict:
    guard = common.owner_only(
        matrix
    )  # scheduled runs only where the schedule belongs; manual runs anywhere
    head = {"if": f"github.event_name != 'schedule' || {guard}"} if guard else None
    steps = [
        *common.first_steps(pins),
        {"name": "Resolve every git ref to a commit", "id": "pins", "run": _PLAN},
    ]
    return common.job(
        "Plan: one commit per git ref",
        15,
        steps,
        head,
        outputs={"pins": "${{ steps.pins.outputs.pins }}"},
    )


_RUN_CELL = f"""args=(--pins "{common.PINS_FILE}" --profile "$PROFILE" --target "$TARGET" --backend "$BACKEND" --results "$RESULTS")
if [ -n "$REQUIRE_BACKEND" ]; then args+=(--require-backend "$REQUIRE_BACKEND"); fi
if [ "$BUILD_ONLY" = true ]; then args+=(--build-only); fi
ggml-patch matrix "${{args[@]}}"
"""
_CUDA_SETUP = f"""root=$(bash {CUDA_SETUP} "$RUNNER_TEMP/cuda")
echo "CUDA_HOME=$root" >> "$GITHUB_ENV"
echo "$root/bin" >> "$GITHUB_PATH"
"""


CCACHE_DIR = "${{ github.workspace }}/.ccache"
RUN_ID = "${{ github.run_id }}"
DOWNLOADS_PATH = f"{common.WORKSPACE_CACHE}/downloads"
# paths relative to the workspace: the aggregate's bundle builds (bundle/<target>/) hit the objects
# of the cpu legs (cells/<target>-cpu/), whose ccache it restores
CCACHE_ENV = {
    "CCACHE_DIR": CCACHE_DIR,
    "CCACHE_MAXSIZE": "2G",
    "CCACHE_BASEDIR": "${{ github.workspace }}",
}
_INSTALL_CCACHE = """if command -v ccache >/dev/null; then exit 0; fi
if [ "$RUNNER_OS" = macOS ]; then brew install ccache
else sudo apt-get update -qq && sudo apt-get install -y -qq --no-install-recommends ccache
fi
"""
INSTALL_CCACHE = {"name": "Install ccache", "run": _INSTALL_CCACHE}


def bundle_legs(
    matrix: Matrix, profiles: Optional[Iterable[str]] = None
) -> dict[str, tuple[str, str]]:
    """target -> (profile, "cpu"): the leg whose ccache and snapshots the aggregate's bundle of a
    pinned target restores (a git target's leg ran a fork's build scripts: never shared)."""
    legs: dict[str, tuple[str, str]] = {}
    for p, t, b in all_cells(matrix, profiles):
        if b == "cpu" and matrix.target(t).source.kind != "git":
            legs.setdefault(t, (p, b))
    return legs


SNAPSHOTS_PATH = f"{common.WORKSPACE_CACHE}/snapshots.git"


def snapshots_key(profile: str, target: str) -> str:
    """This run's hand-over of a leg's snapshot repository (never another run's: the bundle trusts
    its base commits as the leg's own import of the pinned source)."""
    return f"ggml-patch-snapshots-{profile}-{target}-${{{{ runner.os }}}}-{RUN_ID}"


def ccache_key(profile: str, target: str, backend: str) -> str:
    """A leg's ccache key, less this run's id (a new key each run, the latest one restored)."""
    return f"ccache-{profile}-{target}-{backend}-${{{{ runner.os }}}}-"


def _cell_job(leg_list: list[dict], pins: Pins) -> dict:
    ccache = ccache_key("${{ matrix.profile }}", "${{ matrix.target }}", "${{ matrix.backend }}")
    always = "${{ !cancelled() }}"
    downloads = common.cache_step(
        "Source downloads", DOWNLOADS_PATH, "${{ matrix.downloads-key }}", pins, action="cache"
    )
    setup, cuda = "matrix.setup", "CUDA toolkit from PyPI (nvcc, cuBLAS; no GPU: build only)"
    # Through env, not ${{ }} inside the script: the values stay data, never shell code.
    keys = ("profile", "target", "backend", "results", "require-backend", "build-only")
    cell_env = {k.upper().replace("-", "_"): f"${{{{ matrix.{k} }}}}" for k in keys}
    # after the cell, for the aggregate's bundle: its snapshot repository, not imported again
    snapshots = snapshots_key("${{ matrix.profile }}", "${{ matrix.target }}")
    hand_over = common.cache_step(
        "Hand the snapshots to the bundle", SNAPSHOTS_PATH, snapshots, pins, action="cache/save"
    )
    summary = 'if [ -f "$RESULTS/summary.md" ]; then cat "$RESULTS/summary.md" >> "$GITHUB_STEP_SUMMARY"; fi\n'
    # no junit reporter: `ggml-patch matrix` annotates each failed cell itself (::error with
    # matrix.yaml's line); a second reporter would annotate every failure twice
    # LEG_RESULTS holds one folder, named as the artifact: downloads never collide
    month = {"retention-days": 30}
    upload = common.upload_step(
        "the cell's results", always, "${{ matrix.artifact }}", LEG_RESULTS, pins, **month
    )
    return {
        "name": "${{ matrix.name }}",
        "needs": "plan",
        "runs-on": "${{ matrix.runs-on }}",
        "timeout-minutes": LEG_TIMEOUT_MIN,
        # a live profile's leg (a diverged fork is expected to fail) is reported, never fatal
        "continue-on-error": "${{ !matrix.required }}",
        "permissions": {"contents": "read"},
        "strategy": {"fail-fast": False, "matrix": {"include": leg_list}},
        "env": {**common.CACHE_ENV, **CCACHE_ENV},
        "steps": [
            # a leg that builds a fork's code (git) neither restores nor saves the shared pip cache
            *common.first_steps(pins, cache="${{ !matrix.git && 'pip' || '' }}"),
            INSTALL_CCACHE,
            # Per leg: each cell compiles a different tree
            common.cache_step("ccache", CCACHE_DIR, ccache + RUN_ID, pins, ccache, action="cache"),
            common.with_if(downloads, "matrix.downloads-key != ''"),
            common.restore_mirrors(pins, when="matrix.git"),
            {
                "name": "Vulkan (Mesa lavapipe)",
                "if": f"{setup} == 'vulkan-lavapipe'",
                "run": f"bash {VULKAN_SETUP}",
            },
            {"name": cuda, "if": f"{setup} == 'cuda-pypi'", "run": _CUDA_SETUP},
            common.PINS_FILE_STEP,
            {"name": "Run the cell", "env": cell_env, "run": _RUN_CELL},
            common.with_if(hand_over, "matrix.hand-over"),
            {
                "name": "Job summary",
                "if": always,
                "env": {"RESULTS": "${{ matrix.results }}"},
                "run": summary,
            },
            upload,
        ],
    }


# the bundle's commits carry an identity: the user who started the run (GitHub's no-reply address)
BUNDLE_AUTHOR = '--author "$GITHUB_ACTOR <$GITHUB_ACTOR_ID+$GITHUB_ACTOR@users.noreply.github.com>"'


def _aggregate_job(matrix: Matrix, groups: list[str], pins: Pins) -> dict:
    profiles = list(dict.fromkeys(g.split(GROUP_SEP)[0] for g in groups))
    steps: list[dict] = [*common.first_steps(pins, extra="plot")]  # the bundle's training-loss plot
    # each pinned target's cpu leg's ccache (the bundle's verification build hits its objects) and
    # snapshot repository (each sdist imported once per run: several legs' repositories merge, their
    # objects and refs named by content)
    bundled = bundle_legs(matrix, profiles).items()
    ccache = [(f"ccache (the {t}/cpu leg's)", ccache_key(p, t, "cpu")) for t, (p, _) in bundled]
    steps += [INSTALL_CCACHE] if ccache else []
    steps += [common.cache_step(name, CCACHE_DIR, key + RUN_ID, pins, key) for name, key in ccache]
    steps += [
        common.cache_step(
            f"Snapshots (the {t}/cpu leg's)", SNAPSHOTS_PATH, snapshots_key(p, t), pins
        )
        for t, (p, _) in bundled
    ]
    keys = dict.fromkeys(
        k for p in profiles for t, _ in matrix.cells(p) if (k := downloads_key(matrix, t.name))
    )
    steps += [common.cache_step("Source downloads", DOWNLOADS_PATH, k, pins) for k in keys]
    if any(t.source.kind == "git" for p in profiles for t, _ in matrix.cells(p)):
        steps.append(common.restore_mirrors(pins))
    # every artifact holds one folder named as itself: merged into cells/ they never collide
    download = {
        "pattern": f"{ARTIFACT_PREFIX}{ARTIFACT_SEP}*",
        "path": "cells",
        "merge-multiple": True,
    }
    steps += [
        common.PINS_FILE_STEP,
        {
            "name": "Download every cell's results",
            "uses": uses("download-artifact", pins),
            "with": download,
        },
    ]
    for p in groups:
        merge, bundle = common.step_id("merge", p), common.step_id("bundle", p)
        extra, fatal = (
            GROUP_SEP in p,
            p == DEFAULT_PROFILE,
        )  # extra: a further runner's legs, merged apart
        soft = (
            {} if fatal else {"continue-on-error": True}
        )  # only the default profile's legs must pass
        merged = f"${{{{ !cancelled() && steps.{merge}.outcome == 'success' }}}}"
        expect = "" if extra else f"--expect-profile {p} "
        # a leg that never uploaded (timed out, died) is listed as an error, not left out
        artifacts = ARTIFACT_SEP.join((ARTIFACT_PREFIX, p, "*"))
        run = f"ggml-patch merge-results {expect}--out merged/{p} cells/{artifacts}\n"
        steps.append(
            {"name": f"Merge ({p})", "id": merge, "if": "${{ !cancelled() }}", **soft, "run": run}
        )
        if not extra:
            summary = f'cat merged/{p}/summary.md >> "$GITHUB_STEP_SUMMARY"\n'
            steps.append({"name": f"Summary ({p})", "if": merged, "run": summary})
        steps.append(
            common.upload_step(
                f"the merged results ({p})", merged, f"ggml-patch-results-{p}", f"merged/{p}", pins
            )
        )
        if extra:
            continue
        # the default profile's bundle also needs every leg done: a leg that uploaded nothing
        # (a timeout) is missing from the merge, not failed in it
        when = merged.replace(" }}", " && needs.cell.result == 'success' }}") if fatal else merged
        run = f'ggml-patch bundle --pins "{common.PINS_FILE}" --results merged/{p} --out bundle/{p} {BUNDLE_AUTHOR}\n'
        bundled_ok = f"${{{{ !cancelled() && steps.{bundle}.outcome == 'success' }}}}"
        steps.append({"name": f"Bundle ({p})", "id": bundle, "if": when, **soft, "run": run})
        steps.append(
            common.upload_step(
                f"the bundle ({p})", bundled_ok, f"ggml-patch-bundle-{p}", f"bundle/{p}", pins
            )
        )
    others = [p for p in groups if p != DEFAULT_PROFILE and GROUP_SEP not in p]
    if others:
        ids = (common.step_id(k, p) for p in others for k in ("merge", "bundle"))
        failed = " || ".join(f"steps.{i}.outcome == 'failure'" for i in ids)
        warning = (
            'echo "::warning title=ggml-patch::a merge or bundle of a profile other than '
            f"{DEFAULT_PROFILE} failed: see its step above (the {DEFAULT_PROFILE} profile's "
            'artifacts are unaffected)"\n'
        )
        when = f"${{{{ !cancelled() && ({failed}) }}}}"
        steps.append(
            {"name": "Report the other profiles' failures (not fatal)", "if": when, "run": warning}
        )
    # after every leg, failed ones too, but not for a cancelled run or one whose plan failed
    head = {
        "needs": ["plan", "cell"],
        "if": "${{ !cancelled() && needs.plan.result == 'success' }}",
    }
    env = {**common.CACHE_ENV, **CCACHE_ENV} if ccache else common.CACHE_ENV
    return common.job("Merge, summary and bundle per profile", 90, steps, head, env=env)


def drift_profile(matrix: Matrix) -> str:
    """The profile whose targets the drift issue reports: `live` when there is one."""
    return "live" if "live" in matrix.profiles else DEFAULT_PROFILE


_REPORT_ISSUE = (
    "if [ -f merged/{default}/results.json ]; then args+=(--results merged/{default}); fi\n"
)


def _report_job(matrix: Matrix, pins: Pins) -> Optional[dict]:
    if not (guard := common.owner_only(matrix)):
        return None  # no owning repository named: no issue is ever written
    profile = drift_profile(matrix)
    steps = (
        [common.restore_mirrors(pins)]
        if any(t.source.kind == "git" for t, _ in matrix.cells(profile))
        else []
    )
    merged = {"name": f"ggml-patch-results-{DEFAULT_PROFILE}", "path": f"merged/{DEFAULT_PROFILE}"}
    download = {"continue-on-error": True, "uses": uses("download-artifact", pins), "with": merged}
    status = common.STATUS.format(f'--pins "{common.PINS_FILE}" --profile "{profile}" --json')
    steps += [
        common.PINS_FILE_STEP,
        {"name": f"The merged results ({DEFAULT_PROFILE})", **download},
        {"name": f"Status of the {profile} profile at the plan's commits", "run": status},
    ]
    run_if = f"${{{{ !cancelled() && needs.plan.result == 'success' && {guard} }}}}"
    head = {"needs": ["plan", "aggregate"], "if": run_if}
    return common.issue_job(
        "Drift issue", 30, pins, steps, {}, _REPORT_ISSUE.format(default=DEFAULT_PROFILE), **head
    )


def workflow(
    matrix: Matrix, profiles: Optional[Iterable[str]] = None, pins: Optional[Pins] = None
) -> dict:
    pins = pins or DEFAULT_PINS
    leg_list = legs(matrix, profiles)
    used = list(dict.fromkeys(leg["group"] for leg in leg_list))
    if not leg_list:
        raise ConfigError(f"{matrix.path}: no cells to put in the workflow")
    jobs = {
        "plan": _plan_job(matrix, pins),
        "cell": _cell_job(
            [{k: v for k, v in leg.items() if k != "group"} for leg in leg_list], pins
        ),
        "aggregate": _aggregate_job(matrix, used, pins),
    }
    if report := _report_job(matrix, pins):
        jobs["report"] = report
    on: dict[str, Any] = {"schedule": [{"cron": CRON}]} if matrix.ci_repository else {}
    on["workflow_dispatch"] = None
    return {
        "name": "ggml-patch matrix",
        "on": on,
        "permissions": {},  # each job names what it needs
        # A scheduled run and a manual one share cells' caches: let one finish before the next.
        "concurrency": {
            "group": "ggml-patch-matrix-${{ github.ref }}",
            "cancel-in-progress": False,
        },
        "jobs": jobs,
    }


def actionlint_config(matrix: Matrix) -> str:
    """.github/actionlint.yaml: matrix.yaml's custom runner labels, which actionlint rejects undeclared."""
    runners = (r for b in matrix.backends.values() for r in b.all_runners())
    labels = sorted({lab for r in runners for lab in _labels(r) if not _HOSTED.match(lab)})
    body = {"self-hosted-runner": {"labels": labels}}
    return common.HEADER + "\n" + yaml.dump(body, sort_keys=False, default_flow_style=False)


def nox_cells_json(matrix: Matrix) -> str:
    """.github/ggml-patch-cells.json: the noxfile's `cell` sessions, readable with the standard library alone."""
    once = dict.fromkeys((t, b) for _, t, b in all_cells(matrix))  # the `cell` session's params
    cells = [
        {
            "target": t,
            "backend": b,
            "session": cell_session(t, b),
            "results": f"results/cells/{t}-{b}",
        }
        for t, b in once
    ]
    doc = {
        "generated_by": "ggml-patch ci-workflow, from matrix.yaml: do not edit by hand",
        "cells": cells,
    }
    return json.dumps(doc, indent=2) + "\n"


def workflow_yaml(
    matrix: Matrix, profiles: Optional[Iterable[str]] = None, pins: Optional[Pins] = None
) -> str:
    return common.dump(workflow(matrix, profiles, pins), pins)
