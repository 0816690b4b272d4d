"""The GitHub Actions matrix workflow, generated from matrix.yaml so the two never drift.

Pure: a Matrix in, a workflow dict and its YAML text out. Jobs:
  plan       every git ref resolved to one commit (its `pins` output), so a branch moving during
             the run changes nothing
  cell       one leg per (profile, target, backend) cell on a GitHub-hosted runner; honest: every
             leg requires its backend (a skip is a failure); its setup and build-only are the
             backend module's (ci_leg), which refuses a runner that can never run it.
             Only `default` legs with a recorded green run on github.com (ci/proven.py) must pass;
             the others run with continue-on-error and are reported "not yet proven on GitHub"
  aggregate  per profile: merge, summary, upload, bundle, upload; each upload guarded by its own
             step's outcome, so a failing live profile never costs the default one its artifacts
  status     `ggml-patch status` of the drift profile (it runs the targets' code): read-only, its
             status.json uploaded
  report     the drift issue (ci/drift_issue.py) from that artifact: the one job with `issues:
             write`, and it runs no target's code
Scheduled runs happen where the repository variable GGML_PATCH_SCHEDULE is 'true'.

Self-hosted runners' legs run in a workflow of their own (SELF_HOSTED_PATH), gated on the
variable GGML_PATCH_SELF_HOSTED: a missing runner leaves a job pending there, never holding this
workflow's aggregate, bundle or drift report.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Optional

import yaml

from ..backends import get as backend_module
from ..backends.base import BackendModule, CiSetup, NoCiLeg, Runner
from ..config import Matrix, _line_for
from ..errors import ConfigError
from . import common, proven
from .actions import DEFAULT_PINS, Pins, uses
from .outcomes import BUNDLED, OUTCOME_SCRIPT, outcomes_step, unproven_step
from .runners import retired_message

DEFAULT_PATH = ".github/workflows/ggml-patch-matrix.yml"
SELF_HOSTED_PATH = ".github/workflows/ggml-patch-self-hosted.yml"
# Monday and Thursday 04:17 UTC: off the hour, when scheduled jobs pile up; never 7 days apart,
# so the legs' ccache and download caches are used before GitHub evicts them (7 days unused).
CRON = "17 4 * * 1,4"
LEG_TIMEOUT_MIN = 120  # a cold CUDA compile alone is ~18 min at -j2; Vulkan ~4 min
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
    """matrix.yaml's `runs_on`: one label, or a self-hosted runner's "self-hosted, linux, gpu"
    (all must match)."""
    return [s.strip() for s in runs_on.split(",") if s.strip()]


def all_cells(
    matrix: Matrix, profiles: Optional[Iterable[str]] = None
) -> list[tuple[str, str, str]]:
    """(profile, target, backend) for every cell of the given profiles (default: all), in
    matrix.yaml's order."""
    names = list(profiles) if profiles else list(matrix.profiles)
    return [(p, t.name, b.name) for p in names for t, b in matrix.cells(p)]


def self_hosted(runs_on: str) -> bool:
    """Not one GitHub-hosted image label (ubuntu-24.04, macos-15): a runner of the adopter's own."""
    return not Runner.of(runs_on).hosted


def leg_facts(module: BackendModule, runs_on: str) -> tuple[dict[str, Any], Optional[CiSetup]]:
    """What a leg of this backend does on this runner, as the backend module says (ci_leg): the
    setup it runs first, build-only, and always --require-backend, so that its skip is a failure
    and no leg can pass by skipping. NoCiLeg where the module refuses the runner."""
    leg = module.ci_leg(Runner.of(runs_on))
    if leg.build_only and not module.build_only_ok:
        raise NoCiLeg(f"{module.name} cannot be built without its device (build_only_ok)")
    facts = {
        "setup": leg.setup.name if leg.setup else "",
        "require-backend": module.name,
        "build-only": leg.build_only,
    }
    return facts, leg.setup


def downloads_key(matrix: Matrix, target: str) -> str:
    """A cache key that changes only with the target's pinned download (its sha256); '' for git,
    local."""
    src = matrix.target(target).source
    return (
        f"ggml-patch-downloads-{src['sha256'][:32]}"
        if src.kind in ("pypi-sdist", "tarball")
        else ""
    )


def runner_slug(runs_on: str) -> str:
    """A runner's labels as one name-safe word ("self-hosted, linux, gpu" ->
    self-hosted-linux-gpu)."""
    return "-".join(re.sub(r"[^A-Za-z0-9._-]", "_", lab) for lab in _labels(runs_on))


def proven_record(matrix: Matrix) -> proven.Proven:
    """.github/ggml-patch-proven.yaml beside matrix.yaml (none there: no leg proven)."""
    return proven.load(matrix.path.parent / proven.PATH)


def legs(matrix: Matrix, profiles: Optional[Iterable[str]] = None) -> list[dict[str, Any]]:
    """One strategy.matrix.include entry per cell and runner. A backend's first runner's legs form
    the profile's results; each further runner's legs are merged apart (`group`): a cell is merged
    once. The first runner must be GitHub-hosted (a self-hosted one's legs run in a workflow of
    their own, which nothing waits for). A runner label GitHub has retired is refused: every run
    on it would fail. `required`: a default leg with a recorded green run on github.com."""
    for b in matrix.backends.values():
        line = _line_for(matrix.lines, ("backends", b.name, "runs_on"))
        where = f"{matrix.path}:{line}: backends.{b.name}.runs_on"
        for label in (lab for runs_on in b.all_runners() for lab in _labels(runs_on)):
            if msg := retired_message(where, label):
                raise ConfigError(msg)
        if self_hosted(b.all_runners()[0]):
            raise ConfigError(
                f"{where}: {b.all_runners()[0]!r} is self-hosted; name a GitHub-hosted runner "
                f"first (e.g. [ubuntu-24.04, {b.all_runners()[0]!r}]): the self-hosted legs run "
                f"in {SELF_HOSTED_PATH}, which the bundle and the drift report never wait for"
            )
    proven_legs = proven.keys(proven_record(matrix))
    profiles = list(profiles) if profiles else None
    handing_over = bundle_legs(matrix, profiles)
    out = []
    for profile, target, backend in all_cells(matrix, profiles):
        runners = matrix.backend(backend).all_runners()
        for i, runs_on in enumerate(runners):
            facts, setup = _facts(matrix, backend, runs_on)
            group = profile if i == 0 else f"{profile}{GROUP_SEP}{runner_slug(runs_on)}"
            runner = ", ".join(_labels(runs_on))
            artifact = ARTIFACT_SEP.join((ARTIFACT_PREFIX, group, target, backend))
            on = f" on {runner_slug(runs_on)}" if len(runners) > 1 else ""
            labels = _labels(runs_on)
            leg = {
                "name": f"{target}/{backend}{on} ({profile})",
                "profile": profile,
                "target": target,
                "backend": backend,
                "runs-on": labels[0] if len(labels) == 1 else labels,
                "required": profile == DEFAULT_PROFILE
                and (profile, target, backend, runner) in proven_legs,
                "self-hosted": self_hosted(runs_on),
                **facts,
                "downloads-key": downloads_key(matrix, target),
                "git": matrix.target(target).source.kind == "git",
                "hand-over": i == 0 and handing_over.get(target) == (profile, backend),
                "results": f"{LEG_RESULTS}/{artifact}",
                "artifact": artifact,
                "group": group,
                "ci-setup": setup,  # its steps, once per workflow (not a matrix value)
            }
            out.append(leg)
    return out


def _facts(matrix: Matrix, backend: str, runs_on: str) -> tuple[dict, Optional[CiSetup]]:
    """leg_facts, a refusal as one line naming matrix.yaml's runs_on."""
    try:
        return leg_facts(backend_module(backend), runs_on)
    except NoCiLeg as why:
        line = _line_for(matrix.lines, ("backends", backend, "runs_on"))
        raise ConfigError(
            f"{matrix.path}:{line}: backends.{backend}.runs_on: {runs_on!r}: {why}"
        ) from None


_PLAN = """pins=$(ggml-patch resolve-refs --out pins.json)
echo "pins=$pins" >> "$GITHUB_OUTPUT"
{
  echo '### The commits this run builds'; echo; echo '```json'; cat pins.json; echo '```'
} >> "$GITHUB_STEP_SUMMARY"
"""


def _plan_job(pins: Pins, guard: str = common.SCHEDULED_GUARD) -> dict:
    # every other job needs the plan: where it is skipped, the whole run is
    head = {"if": guard}
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


_RUN_CELL = f"""args=(--pins "{common.PINS_FILE}" --profile "$PROFILE" --target "$TARGET"
      --backend "$BACKEND" --results "$RESULTS")
if [ -n "$REQUIRE_BACKEND" ]; then args+=(--require-backend "$REQUIRE_BACKEND"); fi
if [ "$BUILD_ONLY" = true ]; then args+=(--build-only); fi
ggml-patch matrix "${{args[@]}}"
"""


CCACHE_DIR = "${{ github.workspace }}/.ccache"
RUN_ID = "${{ github.run_id }}"
DOWNLOADS_PATH = f"{common.WORKSPACE_CACHE}/downloads"
# paths relative to the workspace: the aggregate's bundle builds (bundle/<target>/) hit the objects
# of the cpu legs (cells/<target>-cpu/), whose ccache it restores
CCACHE_ENV = {
    "CCACHE_DIR": CCACHE_DIR,
    "CCACHE_MAXSIZE": "1G",  # a cold CUDA leg's objects fit; most legs need far less
    "CCACHE_BASEDIR": "${{ github.workspace }}",
}
# the job's start, so that the eviction below keeps exactly what this job's build used
# A self-hosted runner without ccache and without passwordless sudo builds without it (warned),
# rather than failing every leg over a cache.
_INSTALL_CCACHE = """echo "CCACHE_JOB_START=$(date +%s)" >> "$GITHUB_ENV"
if command -v ccache >/dev/null; then exit 0; fi
if [ "$RUNNER_OS" = macOS ]; then brew install ccache
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  sudo apt-get update -qq && sudo apt-get install -y -qq --no-install-recommends ccache
else
  echo "::warning title=ccache::not installed and no passwordless sudo: building without ccache"
fi
"""
# ccache (4.4+) touches what a build hits: what this job did not use goes before the save,
# so the saved cache never grows past one build's objects (ggml-org/ccache-action's
# evict-old-files: job)
_EVICT = """if ! command -v ccache >/dev/null; then exit 0; fi
age=$(( $(date +%s) - CCACHE_JOB_START + 60 ))
ccache --evict-older-than "${age}s"
ccache --show-stats
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


def ccache_key(artifact: str) -> str:
    """A leg's ccache key (one per leg: its artifact's name), less this run's id (a new key on
    each saving run, the latest one restored; saved only by the default branch's scheduled runs,
    so GitHub's 7-day eviction keeps about two per leg)."""
    return f"ccache-${{{{ runner.os }}}}-{artifact}{ARTIFACT_SEP}"  # '+' ends the name: no prefix


def _setup_steps(leg_list: list[dict], pins: Pins) -> list[dict]:
    """Each backend's setup (its module's CiSetup), once, run by the legs that name it."""
    steps = []
    setups = {leg["ci-setup"].name: leg["ci-setup"] for leg in leg_list if leg["ci-setup"]}
    for setup in setups.values():
        when = f"matrix.setup == '{setup.name}'"
        if setup.cache_path:
            cache = common.cache_step(
                setup.cache_title, setup.cache_path, setup.cache_key, pins, action="cache"
            )
            steps.append(common.with_if(cache, when))
        steps.append({"name": setup.title, "if": when, "run": setup.run})
    return steps


def _cell_job(leg_list: list[dict], pins: Pins) -> dict:
    ccache = ccache_key("${{ matrix.artifact }}")
    always = "${{ !cancelled() }}"
    saves = f"${{{{ !cancelled() && {common.SAVES_CACHE} }}}}"
    downloads = common.cache_step(
        "Source downloads", DOWNLOADS_PATH, "${{ matrix.downloads-key }}", pins, action="cache"
    )
    # Through env, not ${{ }} inside the script: the values stay data, never shell code.
    keys = ("profile", "target", "backend", "results", "require-backend", "build-only")
    cell_env = {k.upper().replace("-", "_"): f"${{{{ matrix.{k} }}}}" for k in keys}
    # after the cell, for the aggregate's bundle: its snapshot repository, not imported again
    snapshots = snapshots_key("${{ matrix.profile }}", "${{ matrix.target }}")
    hand_over = common.cache_step(
        "Hand the snapshots to the bundle", SNAPSHOTS_PATH, snapshots, pins, action="cache/save"
    )
    summary = (
        'if [ -f "$RESULTS/summary.md" ]; then '
        'cat "$RESULTS/summary.md" >> "$GITHUB_STEP_SUMMARY"; fi\n'
    )
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
        "strategy": {"fail-fast": False, "matrix": {"include": _include(leg_list)}},
        "env": {**common.CACHE_ENV, **CCACHE_ENV},
        "steps": [
            # a leg that builds a fork's code (git) neither restores nor saves the shared pip cache
            *common.first_steps(pins, cache="${{ !matrix.git && 'pip' || '' }}"),
            INSTALL_CCACHE,
            # Per leg: each cell compiles a different tree
            common.cache_step("ccache", CCACHE_DIR, ccache + RUN_ID, pins, ccache),
            common.with_if(downloads, "matrix.downloads-key != ''"),
            common.restore_mirrors(pins, when="matrix.git"),
            *_setup_steps(leg_list, pins),
            common.PINS_FILE_STEP,
            {"name": "Run the cell", "id": "cell", "env": cell_env, "run": _RUN_CELL},
            {
                "name": "The leg's outcome, for the aggregate",
                "if": always,
                "env": {"OUTCOME": "${{ steps.cell.outcome }}", "RESULTS": "${{ matrix.results }}"},
                "run": OUTCOME_SCRIPT,
            },
            {"name": "Keep only what this build used (ccache)", "if": saves, "run": _EVICT},
            common.with_if(
                common.cache_step(
                    "Save ccache", CCACHE_DIR, ccache + RUN_ID, pins, action="cache/save"
                ),
                saves,
            ),
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


def _group_steps(p: str, pins: Pins, leg_list: list[dict]) -> list[dict]:
    """One group's merge, summary and upload; a profile's (not a further runner's) bundle too."""
    steps: list[dict] = []
    merge, bundle = common.step_id("merge", p), common.step_id("bundle", p)
    # extra: a further runner's legs, merged apart
    extra = GROUP_SEP in p
    # only the default profile's legs must pass
    fatal = p == DEFAULT_PROFILE
    soft = {} if fatal else {"continue-on-error": True}
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
        return steps
    when, results = merged, f"merged/{p}"
    if fatal:
        # from the legs' own outcomes: the proven legs must all pass, the others' failures
        # are listed and left out of the bundle's results
        steps.append(outcomes_step(p, leg_list, ARTIFACT_SEP))
        outcomes = common.step_id("outcomes", p)
        when = f"${{{{ !cancelled() && steps.{outcomes}.outputs.bundle == 'true' }}}}"
        results = f"{BUNDLED}/{p}"
    run = (
        f'ggml-patch bundle --pins "{common.PINS_FILE}" --results {results} --out bundle/{p} '
        f"{BUNDLE_AUTHOR}\n"
    )
    bundled_ok = f"${{{{ !cancelled() && steps.{bundle}.outcome == 'success' }}}}"
    steps.append({"name": f"Bundle ({p})", "id": bundle, "if": when, **soft, "run": run})
    steps.append(
        common.upload_step(
            f"the bundle ({p})", bundled_ok, f"ggml-patch-bundle-{p}", f"bundle/{p}", pins
        )
    )
    return steps


def _aggregate_job(matrix: Matrix, groups: list[str], pins: Pins, leg_list: list[dict]) -> dict:
    profiles = list(dict.fromkeys(g.split(GROUP_SEP)[0] for g in groups))
    steps: list[dict] = [*common.first_steps(pins, extra="plot")]  # the bundle's training-loss plot
    # each pinned target's cpu leg's ccache (the bundle's verification build hits its objects) and
    # snapshot repository (each sdist imported once per run: several legs' repositories merge, their
    # objects and refs named by content)
    bundled = bundle_legs(matrix, profiles).items()
    ccache = [
        (
            f"ccache (the {t}/cpu leg's)",
            ccache_key(ARTIFACT_SEP.join((ARTIFACT_PREFIX, p, t, "cpu"))),
        )
        for t, (p, _) in bundled
    ]
    steps += [INSTALL_CCACHE] if ccache else []
    steps += [common.cache_step(name, CCACHE_DIR, key + RUN_ID, pins, key) for name, key in ccache]
    steps += [
        common.cache_step(
            f"Snapshots (the {t}/cpu leg's)", SNAPSHOTS_PATH, snapshots_key(p, t), pins
        )
        for t, (p, _) in bundled
    ]
    keys: list[str] = []
    for p in profiles:
        for t, _ in matrix.cells(p):
            key = downloads_key(matrix, t.name)
            if key and key not in keys:
                keys.append(key)
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
        steps += _group_steps(p, pins, leg_list)
    if unproven := [leg["name"] for leg in leg_list if not leg["required"]]:
        steps.append(unproven_step(unproven))
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
    "if [ -f merged/{default}/results.json ]; then\n"
    "  args+=(--results merged/{default} --proven {proven})\n"
    "fi\n"
)


def _status_job(matrix: Matrix, pins: Pins) -> dict:
    """`ggml-patch status` of the drift profile at the plan's commits: it fetches the targets and
    runs their code (the behaviour check), so it holds no write token; it uploads status.json."""
    profile = drift_profile(matrix)
    git = any(t.source.kind == "git" for t, _ in matrix.cells(profile))
    steps = [*common.first_steps(pins), *([common.restore_mirrors(pins)] if git else [])]
    status = common.STATUS.format(f'--pins "{common.PINS_FILE}" --profile "{profile}" --json')
    steps += [common.PINS_FILE_STEP, *common.status_steps(pins, status)]
    head = {"needs": "plan", "if": "${{ !cancelled() && needs.plan.result == 'success' }}"}
    name = f"Status of the {profile} profile at the plan's commits (read-only)"
    return common.job(name, 30, steps, head, env=common.CACHE_ENV)


def _report_job(matrix: Matrix, pins: Pins) -> dict:
    """The drift issue from the status job's artifact and the default profile's merged results:
    no target's code runs here."""
    merged = {"name": f"ggml-patch-results-{DEFAULT_PROFILE}", "path": f"merged/{DEFAULT_PROFILE}"}
    download = {"continue-on-error": True, "uses": uses("download-artifact", pins), "with": merged}
    steps = [{"name": f"The merged results ({DEFAULT_PROFILE})", **download}]
    run_if = "${{ !cancelled() && needs.status.result == 'success' }}"
    head = {"needs": ["plan", "aggregate", "status"], "if": run_if}
    args = _REPORT_ISSUE.format(default=DEFAULT_PROFILE, proven=proven.PATH)
    return common.issue_job("Drift issue", 15, pins, steps, {}, args, **head)


def workflow(
    matrix: Matrix, profiles: Optional[Iterable[str]] = None, pins: Optional[Pins] = None
) -> dict:
    pins = pins or DEFAULT_PINS
    all_legs = legs(matrix, profiles)
    leg_list = [leg for leg in all_legs if not leg["self-hosted"]]
    used = list(dict.fromkeys(leg["group"] for leg in leg_list))
    if not leg_list:
        raise ConfigError(f"{matrix.path}: no cells to put in the workflow")
    jobs = {
        "plan": _plan_job(pins),
        "cell": _cell_job(leg_list, pins),
        "aggregate": _aggregate_job(matrix, used, pins, leg_list),
        "status": _status_job(matrix, pins),
        "report": _report_job(matrix, pins),
    }
    on: dict[str, Any] = {"schedule": [{"cron": CRON}], "workflow_dispatch": None}
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


def _include(leg_list: list[dict]) -> list[dict]:
    """strategy.matrix.include: what a leg's steps read (not how it is grouped or placed)."""
    apart = ("group", "self-hosted", "ci-setup")
    return [{k: v for k, v in leg.items() if k not in apart} for leg in leg_list]


SELF_HOSTED_GUARD = f"vars.{common.SELF_HOSTED_VAR} == 'true'"


def self_hosted_workflow(
    matrix: Matrix, profiles: Optional[Iterable[str]] = None, pins: Optional[Pins] = None
) -> Optional[dict]:
    """The self-hosted runners' legs, apart: plan, the legs, a merge per runner (no bundle, no
    issue). Gated on GGML_PATCH_SELF_HOSTED: a fork without the runners never queues a job for
    them, and a runner that is away leaves a job pending here (for up to a day), not in the
    matrix workflow. None where matrix.yaml names no self-hosted runner."""
    pins = pins or DEFAULT_PINS
    leg_list = [leg for leg in legs(matrix, profiles) if leg["self-hosted"]]
    if not leg_list:
        return None
    steps: list[dict] = [*common.first_steps(pins)]
    download = {
        "pattern": f"{ARTIFACT_PREFIX}{ARTIFACT_SEP}*",
        "path": "cells",
        "merge-multiple": True,
    }
    steps.append(
        {
            "name": "Download every leg's results",
            "uses": uses("download-artifact", pins),
            "with": download,
        }
    )
    for g in dict.fromkeys(leg["group"] for leg in leg_list):
        merge = common.step_id("merge", g)
        artifacts = ARTIFACT_SEP.join((ARTIFACT_PREFIX, g, "*"))
        run = f"ggml-patch merge-results --out merged/{g} cells/{artifacts}\n"
        steps.append({"name": f"Merge ({g})", "id": merge, "if": "${{ !cancelled() }}", "run": run})
        merged = f"${{{{ !cancelled() && steps.{merge}.outcome == 'success' }}}}"
        summary = f'cat merged/{g}/summary.md >> "$GITHUB_STEP_SUMMARY"\n'
        steps.append({"name": f"Summary ({g})", "if": merged, "run": summary})
        name = f"ggml-patch-results-{common.step_id('self-hosted', g)}"
        steps.append(
            common.upload_step(f"the merged results ({g})", merged, name, f"merged/{g}", pins)
        )
    head = {
        "needs": ["plan", "cell"],
        "if": "${{ !cancelled() && needs.plan.result == 'success' }}",
    }
    guard = f"({common.SCHEDULED_GUARD}) && {SELF_HOSTED_GUARD}"
    return {
        "name": "ggml-patch self-hosted",
        "on": {"schedule": [{"cron": CRON}], "workflow_dispatch": None},
        "permissions": {},
        # its own group: a pending leg (its runner away) holds this workflow only
        "concurrency": {
            "group": "ggml-patch-self-hosted-${{ github.ref }}",
            "cancel-in-progress": False,
        },
        "jobs": {
            "plan": _plan_job(pins, guard),
            "cell": _cell_job(leg_list, pins),
            "merge": common.job("Merge and summary per runner", 30, steps, head),
        },
    }


def actionlint_config(matrix: Matrix) -> str:
    """.github/actionlint.yaml: matrix.yaml's custom runner labels, which actionlint rejects
    undeclared."""
    runners = (r for b in matrix.backends.values() for r in b.all_runners())
    labels = sorted({lab for r in runners for lab in _labels(r) if not _HOSTED.match(lab)})
    body = {"self-hosted-runner": {"labels": labels}}
    return common.HEADER + "\n" + yaml.dump(body, sort_keys=False, default_flow_style=False)


def nox_cells_json(matrix: Matrix) -> str:
    """.github/ggml-patch-cells.json: the noxfile's `cell` sessions, readable with the standard
    library alone."""
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
