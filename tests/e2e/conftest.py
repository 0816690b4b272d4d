"""The e2e tier's tool cache: one per session, its downloads (and the Vulkan SDK, when
orchestrator/scripts/setup-vulkan-lavapipe.sh has run) linked from the user's cache, only read;
whatever is missing is fetched into the session's own cache."""

import os

import pytest

from ..conftest import SHARED_CACHE


@pytest.fixture(scope="session")
def tool_cache(tmp_path_factory, shared_downloads):
    cache = tmp_path_factory.mktemp("tool-cache")
    if shared_downloads.is_dir():
        for folder in shared_downloads.iterdir():
            if not folder.is_dir():
                continue
            (cache / "downloads" / folder.name).mkdir(parents=True)
            for f in folder.iterdir():
                os.symlink(f, cache / "downloads" / folder.name / f.name)
    sdk = SHARED_CACHE / "vulkan-sdk"
    if sdk.is_dir():
        os.symlink(sdk, cache / "vulkan-sdk")
    with pytest.MonkeyPatch.context() as mp:
        # a new cache path each session, and tests that build in caches of their own (seeded
        # ones): ccache hashes paths relative to the session's whole temporary folder, so the
        # same tree built in any of them hits
        mp.setenv("CCACHE_BASEDIR", str(tmp_path_factory.getbasetemp()))
        yield cache


@pytest.fixture(scope="session")
def vulkan_missing(repo_root, tool_cache):
    """Why the vulkan cells cannot run here, or None. A machine meant to run Vulkan sets
    GGML_PATCH_REQUIRE_BACKEND=vulkan (the tool's own --require-backend): a matrix run there then
    fails (exit 9) instead of skipping it."""
    from orchestrator import backends
    from orchestrator.config import load_matrix

    backend = load_matrix(repo_root / "matrix.yaml").backend("vulkan")
    module = backends.get("vulkan", tool_cache)
    return module.missing_toolchain(backend) or module.missing_device(backend)
