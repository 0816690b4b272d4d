"""The test tiers and the isolation every test runs in.

Tiers are folders; each test gets its folder's marker (so `-m unit`, `-m "not e2e"` select):
  unit/         pure, offline, no git or compilers
  integration/  git, fake servers, small fixtures (a fake CMake project, tarballs
  made here); offline e2e/          the pinned PyPI sdists and real builds of
  ggml (the only tier that may use the network)

HOME and GGML_PATCH_CACHE point at temporary folders for the whole session and again for each
test: no test reads or writes the user's cache. A test that needs the pinned sdists asks for
`shared_downloads` (the user's download cache, only read); ccache keeps the user's cache dir.
Helpers live in tests/helpers/ (imported by the tests, not from here).
"""

import os
from pathlib import Path

import pytest

from orchestrator import redact as redact_module
from orchestrator.cache import default_cache_dir

from .helpers.tools import ROOT

TIERS = ("unit", "integration", "e2e")
# the user's environment as it is before any test runs: read, never written
SHARED_CACHE = default_cache_dir()
# ccache's store for the builds of one session (patched, control and mutants share it); a developer
# may name a store to keep between sessions, but no test writes to the user's own by default
CCACHE_ENV = "GGML_PATCH_TEST_CCACHE_DIR"


def pytest_collection_modifyitems(config, items):
    for item in items:
        parts = Path(str(item.fspath)).relative_to(ROOT / "tests").parts
        if parts[0] not in TIERS:
            raise pytest.UsageError(
                f"{item.nodeid}: every test lives in one of tests/{{{','.join(TIERS)}}}/"
            )
        item.add_marker(getattr(pytest.mark, parts[0]))


def _isolate(mp: pytest.MonkeyPatch, home: Path, ccache_dir: Path) -> None:
    mp.setenv("HOME", str(home))
    mp.setenv("GGML_PATCH_CACHE", str(home / "ggml-patch-cache"))
    mp.setenv("CCACHE_DIR", str(ccache_dir))
    for var in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", *redact_module.SECRET_ENV):
        mp.delenv(var, raising=False)


@pytest.fixture(scope="session")
def ccache_dir(tmp_path_factory) -> Path:
    named = os.environ.get(CCACHE_ENV)
    return Path(named) if named else tmp_path_factory.mktemp("ccache")


@pytest.fixture(scope="session", autouse=True)
def isolated_session(tmp_path_factory, ccache_dir):
    """Session- and module-scoped fixtures run in a temporary HOME and tool cache too."""
    with pytest.MonkeyPatch.context() as mp:
        _isolate(mp, tmp_path_factory.mktemp("session-home"), ccache_dir)
        yield


@pytest.fixture(autouse=True)
def isolated_test(tmp_path_factory, monkeypatch, ccache_dir):
    """Each test: a HOME and a tool cache of its own, and no URL password met by an earlier
    test (the redaction remembers them for the process: one test's "user:pass@" would else be
    removed from every later test's output)."""
    _isolate(monkeypatch, tmp_path_factory.mktemp("home"), ccache_dir)
    monkeypatch.setattr(redact_module, "_SEEN", set())


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def shared_downloads() -> Path:
    """The user's download cache (the pinned sdists, checked by sha256 when used): only read."""
    return SHARED_CACHE / "downloads"
