"""nox sessions: thin wrappers over `ggml-patch` (all logic lives in orchestrator/)."""
import sys
from pathlib import Path

import nox

sys.path.insert(0, str(Path(__file__).parent))  # orchestrator/, for the cells of matrix.yaml

nox.options.sessions = ["matrix"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def matrix(session: nox.Session) -> None:
    """Apply, build, test and control every cell of matrix.yaml (args go to `ggml-patch matrix`)."""
    session.install(".")
    session.run("ggml-patch", "matrix", *session.posargs)


@nox.session
def status(session: nox.Session) -> None:
    """Where the series applies on every target, building nothing (args go to `ggml-patch status`,
    e.g. `nox -s status -- --profile live --json`)."""
    session.install(".")
    session.run("ggml-patch", "status", *session.posargs)


def _cells() -> list[tuple[str, str]]:
    """(target, backend) of every cell of matrix.yaml's profiles: one `cell` session each, one
    CI leg each (.github/workflows/ggml-patch-matrix.yml). Empty where ggml-patch's own
    dependencies are not importable by nox's Python: the other sessions still work."""
    try:
        from orchestrator.config import load_matrix
        from orchestrator.errors import GgmlPatchError
        from orchestrator.ci.workflow import nox_cells
    except ImportError:
        return []
    try:
        return nox_cells(load_matrix(Path(__file__).parent / "matrix.yaml"))
    except GgmlPatchError:  # `nox -s matrix` reports a broken matrix.yaml in one line
        return []


@nox.session
@nox.parametrize(["target", "backend"], _cells())
def cell(session: nox.Session, target: str, backend: str) -> None:
    """One matrix cell into results/cells/<target>-<backend> (a CI leg; args go to `ggml-patch matrix`)."""
    from orchestrator.ci.workflow import cell_results_dir  # where the CI leg uploads from

    session.install(".")
    session.run("ggml-patch", "matrix", "--target", target, "--backend", backend,
                "--results", cell_results_dir(target, backend), *session.posargs)


@nox.session
def bundle(session: nox.Session) -> None:
    """The upstream pull-request bundle from results/ (args go to `ggml-patch bundle`)."""
    session.install(".")
    session.run("ggml-patch", "bundle", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite, every tier: tests/unit, tests/integration, tests/e2e (the real CPU matrix end to
    end). Args go to pytest, e.g. `nox -s tests -- -m unit`."""
    session.install(".[test]")
    session.run("pytest", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Speed benchmark against the by-hand route (about 10 minutes on 2 cores); writes results/bench/."""
    session.install(".")
    session.run("python", "benchmarks/bench.py", *session.posargs)
