"""nox sessions: thin wrappers over `ggml-patch` (all logic lives in orchestrator/).

Only the standard library and nox here: right after `pip install nox` every session is listed
and runnable (each installs the tool into its own environment).
"""

import json
import sys
from pathlib import Path

import nox

HERE = Path(__file__).parent
# The cells of matrix.yaml, written beside the workflow by `ggml-patch ci-workflow` (the CI legs
# are the same cells): JSON, because nox brings no YAML parser and the tool's own dependencies
# are not installed where nox runs.
CELLS = HERE / ".github" / "ggml-patch-cells.json"

nox.options.sessions = ["matrix"]
nox.options.reuse_existing_virtualenvs = True
# uv where it is installed (`pip install 'nox[uv]'` brings it): the session's install of the tool
# in seconds instead of pip's; plain virtualenv + pip otherwise, nothing else changes
nox.options.default_venv_backend = "uv|virtualenv"
CONSTRAINTS = str(Path(__file__).parent / "constraints.txt")  # the versions CI tested
# uv installs no bytecode, and many shells and CI images set PYTHONDONTWRITEBYTECODE: the tool
# would compile its ~200 modules at every start (0.3 s of a 0.7 s re-run). Its first run writes
# them into the session's own environment (and the bench's into this checkout's __pycache__/).
TOOL_ENV = {"PYTHONDONTWRITEBYTECODE": ""}
# what `nox -s lint` runs ruff on (scripts/ holds shell only)
LINTED = ("orchestrator", "tests", "benchmarks", "noxfile.py")


def _install(session: nox.Session, extras: str = "") -> None:
    """ggml-patch (with `extras`) into the session, at the versions of constraints.txt."""
    session.install("-c", CONSTRAINTS, f".[{extras}]" if extras else ".")


@nox.session
def matrix(session: nox.Session) -> None:
    """Apply, build, test and control every cell of matrix.yaml (args go to `ggml-patch matrix`)."""
    _install(session)
    session.run("ggml-patch", "matrix", *session.posargs, env=TOOL_ENV)


@nox.session
def status(session: nox.Session) -> None:
    """Where the series applies on every target, building nothing (args go to `ggml-patch status`,
    e.g. `nox -s status -- --profile live --json`)."""
    _install(session)
    session.run("ggml-patch", "status", *session.posargs, env=TOOL_ENV)


def _cells() -> list[dict]:
    """One `cell` session per cell of matrix.yaml's profiles (one CI leg each)."""
    try:
        cells = json.loads(CELLS.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(
            f"noxfile: no cell sessions: {CELLS} is unreadable ({type(e).__name__}); "
            "regenerate it with `ggml-patch ci-workflow`",
            file=sys.stderr,
        )
        return []
    return cells


_CELLS = _cells()


@nox.session
@nox.parametrize(["target", "backend"], [(c["target"], c["backend"]) for c in _CELLS])
def cell(session: nox.Session, target: str, backend: str) -> None:
    """One matrix cell into results/cells/<target>-<backend> (args go to `ggml-patch matrix`)."""
    results = next(c["results"] for c in _CELLS if (c["target"], c["backend"]) == (target, backend))
    _install(session)
    session.run(
        "ggml-patch",
        "matrix",
        "--target",
        target,
        "--backend",
        backend,
        "--results",
        results,
        *session.posargs,
        env=TOOL_ENV,
    )


@nox.session
def bundle(session: nox.Session) -> None:
    """The upstream pull-request bundle from results/ (args go to `ggml-patch bundle`)."""
    _install(session)
    session.run("ggml-patch", "bundle", *session.posargs, env=TOOL_ENV)


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite, every tier: tests/unit, tests/integration, tests/e2e (the real CPU matrix end
    to end). Args go to pytest, e.g. `nox -s tests -- -m unit`."""
    # lint: the project CI's checks job runs ruff and mypy in act
    _install(session, "test,plot,lint")
    session.run("pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check, mypy, then ruff format --check (configured in pyproject.toml): the tool, its
    tests, the bench and this file."""
    _install(session, "lint")
    session.run("ruff", "check", *LINTED)
    session.run("mypy")
    session.run("ruff", "format", "--check", *LINTED)


@nox.session
def workflows(session: nox.Session) -> None:
    """The generated workflows current, actionlint (with shellcheck) and zizmor on .github/."""
    _install(session, "test")
    session.run("ggml-patch", "ci-workflow", "--check")
    session.run("actionlint")
    session.run("zizmor", "--offline", ".github", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Speed benchmark against the by-hand route and the newcomer's fresh clone, quiet and under two
    busy loops and the matrix workflow in act against `nox -s matrix` (about 45 minutes on 2 cores;
    `-- --only-newcomer`, `--only-ratios`, `--only-act`, `--loads 0` split it; `-- --plan` checks
    every route without building); writes bench-results/, outside the tool's results/ (the tool
    refuses a results folder holding files it did not make). The test extra brings act."""
    _install(session, "test")
    session.run("python", "benchmarks/bench.py", *session.posargs, env=TOOL_ENV)


@nox.session
def evidence(session: nox.Session) -> None:
    """Upstream's own llama-finetune with and without the fix, fine-tuning pre-trained tiny llama
    models (3 seeds; the cases of training-evidence/predictions.yaml): results/evidence/
    (finetune.json, the plot) and a section of results/summary.md. Builds llama-finetune (minutes
    the first time; a re-run with nothing changed is cached). Not part of the default sessions.
    Args go to `ggml-patch evidence`, e.g. `nox -s evidence -- --case adamw:1e-5:2:8`; the real
    model (SmolLM2-135M, opt-in): `nox -s evidence -- --case-set real`."""
    _install(session, "plot")
    session.run("ggml-patch", "evidence", *session.posargs, env=TOOL_ENV)
