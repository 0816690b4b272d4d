"""Pins: `resolve-refs` names one commit per git target (git ls-remote against local remotes, no
network), and `--pins`/`--pin` make every command use that commit even after the branch moved
(what lets a CI run's aggregate bundle the commit its legs tested)."""

import json
import shutil
from pathlib import Path

import pytest

from orchestrator import pins as pinning
from orchestrator import sources
from orchestrator.cache import Cache
from orchestrator.config import load_matrix
from orchestrator.errors import ConfigError
from orchestrator.vcs.snapshots import SnapshotRepo

from ..helpers.forks import ROOT, git
from ..helpers.tools import run_tool


def _upstream(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README").write_text("one\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "one")
    git(path, "tag", "-a", "v1", "-m", "annotated")
    return path


def _head(path: Path) -> str:
    return git(path, "rev-parse", "HEAD").strip()


def _matrix(tmp: Path, up: Path) -> Path:
    if not (tmp / "patches").exists():
        shutil.copytree(ROOT / "patches", tmp / "patches")
        shutil.copytree(ROOT / "native_tests", tmp / "native_tests")
    m = tmp / "matrix.yaml"
    m.write_text(f"""queue: {{path: patches, layout: llama.cpp}}
targets:
  pypi: {{layout: ggml, source: {{kind: pypi-sdist, package: x, version: "1",
                                  sha256: \"{"0" * 64}\"}}}}
  tip: {{layout: ggml, source: {{kind: git, url: "{up}", ref: main}}}}
  dflt: {{layout: ggml, source: {{kind: git, url: "{up}", ref: HEAD}}}}
  tag: {{layout: ggml, source: {{kind: git, url: "{up}", ref: v1}}}}
backends:
  cpu: {{}}
profiles:
  default: {{targets: [pypi], backends: [cpu]}}
  live: {{targets: [tip, dflt, tag], backends: [cpu]}}
""")
    return m


def test_resolve_refs_prints_one_commit_per_git_target(tmp_path):
    up = _upstream(tmp_path / "up")
    first = _head(up)
    m = _matrix(tmp_path, up)
    proc = run_tool("resolve-refs", "--matrix", str(m), "--out", str(tmp_path / "pins.json"))
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    assert "\n" not in proc.stdout.strip()  # one line: a job output
    assert printed == json.loads((tmp_path / "pins.json").read_text())
    assert printed["pins"] == {
        "tip": {"commit": first, "ref": "main", "remote_ref": "refs/heads/main", "url": str(up)},
        "dflt": {"commit": first, "ref": "HEAD", "remote_ref": "refs/heads/main", "url": str(up)},
        # peeled, not the tag object
        "tag": {"commit": first, "ref": "v1", "remote_ref": "refs/tags/v1", "url": str(up)},
    }
    assert f"tip: main -> {first} (refs/heads/main)" in proc.stderr
    # --profile narrows: the default profile has no git target
    only = run_tool("resolve-refs", "--matrix", str(m), "--profile", "default")
    assert only.returncode == 0 and json.loads(only.stdout)["pins"] == {}
    assert "no git targets" in only.stderr


def test_a_pinned_target_stays_on_its_commit_after_the_branch_moves(tmp_path):
    up = _upstream(tmp_path / "up")
    first = _head(up)
    m = _matrix(tmp_path, up)
    pins = pinning.resolve_reachable(load_matrix(m), ["tip"])[0]
    (up / "README").write_text("two\n")
    git(up, "commit", "-qam", "upstream moved on")
    second = _head(up)
    cache = Cache(tmp_path / "cache")
    repo = SnapshotRepo(cache.snapshots_git)
    matrix = load_matrix(m)
    # unpinned: the tip
    assert sources.snapshot(matrix.target("tip").source, cache, repo).commit == second
    snap = sources.snapshot(pinning.pinned(matrix, pins).target("tip").source, cache, repo)
    assert snap.commit == first
    assert snap.provenance == {
        "url": str(up),
        "ref": "main",
        "resolved_ref": "refs/heads/main",
        "upstream_commit": first,
    }
    assert snap.description.endswith(f"main ({first[:12]})")
    # through the command line: --pins FILE and --pin TARGET=COMMIT, status sees the pinned commit
    (tmp_path / "pins.json").write_text(json.dumps(pinning.pins_json(pins)))
    for extra in (["--pins", str(tmp_path / "pins.json")], ["--pin", f"tip={first}"]):
        proc = run_tool(
            "status",
            "--matrix",
            str(m),
            "--cache",
            str(tmp_path / "cache"),
            "--profile",
            "live",
            "--target",
            "tip",
            "--json",
            *extra,
        )
        assert proc.stdout, proc.stderr
        row = json.loads(proc.stdout)["targets"][0]
        assert row["base"] == first and row["source"]["ref"] == "main", proc.stderr
    proc = run_tool(
        "status",
        "--matrix",
        str(m),
        "--cache",
        str(tmp_path / "cache"),
        "--profile",
        "live",
        "--target",
        "tip",
        "--json",
    )
    assert json.loads(proc.stdout)["targets"][0]["base"] == second


@pytest.mark.parametrize(
    "args, expected",
    [
        (
            ["--pin", "tip=abc"],
            "--pin 'tip=abc': expected TARGET=COMMIT with a full 40-hex commit id",
        ),
        (["--pin", f"nope={'a' * 40}"], "unknown target 'nope'"),
        (
            ["--pin", f"pypi={'a' * 40}"],
            "pin for 'pypi': its source is pypi-sdist, already pinned by matrix.yaml",
        ),
        (["--pins", "missing.json"], "missing.json: no such pins file"),
        (["--pins", "bad.json"], "bad.json: pins.tip: expected a full 40-hex commit id"),
    ],
)
def test_bad_pins_are_one_line_errors(tmp_path, args, expected):
    up = _upstream(tmp_path / "up")
    m = _matrix(tmp_path, up)
    (tmp_path / "bad.json").write_text(json.dumps({"pins": {"tip": {"commit": "main"}}}))
    proc = run_tool("resolve-refs", "--matrix", str(m), *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], proc.stderr


def test_missing_ref_and_unreachable_remote(tmp_path):
    up = _upstream(tmp_path / "up")
    with pytest.raises(
        ConfigError, match=r"targets.t.source.ref: 'nope' is not a branch, tag or full commit id"
    ):
        pinning.ls_remote(str(up), "nope", "targets.t.source")
    with pytest.raises(
        sources.SourceUnreachable, match=r"targets.t.source.url: .*/absent is unreachable"
    ):
        pinning.ls_remote(str(tmp_path / "absent"), "main", "targets.t.source")
    sha = "1" * 40
    # a full commit needs no network
    assert pinning.ls_remote("https://unreachable.invalid/x", sha, "k") == (sha, sha)


def test_an_unreachable_target_is_recorded_and_its_cells_report_it(tmp_path):
    """One remote gone (as a deleted or private fork is): the others are pinned, exit 0; the gone
    one's status and cells say `source unavailable` (exit 3) at once, from the pins file."""
    up = _upstream(tmp_path / "up")
    first = _head(up)
    m = _matrix(tmp_path, up)
    gone_url = tmp_path / "deleted-fork"
    m.write_text(
        m.read_text()
        .replace(
            "  tag: {layout: ggml",
            "  gone: {layout: ggml, source: {kind: git, url: "
            f'"{gone_url}", ref: main}}}}\n  tag: {{layout: ggml',
        )
        .replace("targets: [tip, dflt, tag]", "targets: [tip, gone]")
    )
    proc = run_tool("resolve-refs", "--matrix", str(m), "--out", str(tmp_path / "pins.json"))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["pins"]["tip"]["commit"] == first and "gone" not in data["pins"]
    assert (
        data["unreachable"]["gone"]["url"] == str(gone_url)
        and "unreachable" in data["unreachable"]["gone"]["reason"]
    )
    assert "gone: unreachable, its cells will report it" in proc.stderr
    pins = str(tmp_path / "pins.json")
    st = run_tool(
        "status",
        "--matrix",
        str(m),
        "--cache",
        str(tmp_path / "cache"),
        "--profile",
        "live",
        "--pins",
        pins,
        "--json",
    )
    assert st.returncode == 3, st.stderr
    rows = {r["target"]: r for r in json.loads(st.stdout)["targets"]}
    assert (
        rows["tip"]["status"] != "source unreachable"
        and rows["gone"]["status"] == "source unreachable"
    )
    assert "found by the run's plan" in rows["gone"]["detail"]
    res = tmp_path / "results"
    cell = run_tool(
        "matrix",
        "--matrix",
        str(m),
        "--cache",
        str(tmp_path / "cache"),
        "--profile",
        "live",
        "--target",
        "gone",
        "--pins",
        pins,
        "--results",
        str(res),
    )
    assert cell.returncode == 3, cell.stderr
    got = json.loads((res / "results.json").read_text())["cells"]
    assert [(c["cell"], c["status"]) for c in got] == [("gone/cpu", "error")]
    assert got[0]["reason"].startswith("source unavailable: ")


def test_a_pins_file_with_a_malformed_unreachable_entry_is_refused(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps({"pins": {}, "unreachable": {"x": "no reason"}}))
    with pytest.raises(ConfigError, match="unreachable: expected"):
        pinning.read_pins_file(tmp_path / "p.json")
