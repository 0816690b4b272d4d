"""nox sessions: thin wrappers over `ggml-patch` (all logic lives in orchestrator/)."""
import nox

nox.options.sessions = ["matrix"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def matrix(session: nox.Session) -> None:
    """Apply, build, test and control every cell of matrix.yaml (args go to `ggml-patch matrix`)."""
    session.install(".")
    session.run("ggml-patch", "matrix", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite, end-to-end run of the real CPU matrix included (args go to pytest)."""
    session.install(".[test]")
    session.run("pytest", *session.posargs)
