"""The upstream bundle: refusals, PR_BODY.md numbers against results.json, the manifest, and
(end to end) a real run bundled, its series applied with plain `git am` to a clean base."""
import copy
import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from orchestrator.upstream import bundle as B
from orchestrator.errors import ConfigError, ExitCode

from .conftest import run_tool

SAMPLE = Path(__file__).parent / "data" / "results-cpu-sample.json"
GATE, UPSTREAM = "test-opt-dynamic-accum", "test-opt"
TOKEN = "ghp_bundleTEST_7f3c9a1e5b2d4f60"  # unique: scanned for in every output


def sample() -> dict:
    return json.loads(SAMPLE.read_text())


def current_series_sha(repo_root) -> str:
    from orchestrator.config import load_matrix
    from orchestrator.patchset.files import load_series

    return load_series(load_matrix(repo_root / "matrix.yaml")).sha256


def control_survived(results: dict, cell: str = "ggml/cpu") -> dict:
    """The run as it would be if the gate passed without the fix (it would not be a gate)."""
    r = copy.deepcopy(results)
    rec = next(x for x in r["records"] if x["cell"] == cell and x["variant"] == "control")
    gate = rec["tests"][GATE]
    n = len(gate["rows"])
    gate.update(outcome="passed", exit_code=0, failure_line=None,
                summary_line=f"{n}/{n} device*opt_period passed, 0 skipped",
                rows=[{"device": x["device"], "opt_period": x["opt_period"], "status": "OK"} for x in gate["rows"]])
    rec.update(status="survived", verdict="survived", failure_line=None,
               verdict_reason="the gate test passed without the fix: it is not a gate")
    c = next(x for x in r["cells"] if x["cell"] == cell)
    c.update(status="failed", exit_code=7,
             reason="negative control survived: the gate test passed without the fix: it is not a gate")
    return r


def gate_regressed(results: dict, cell: str = "llama.cpp/cpu") -> dict:
    r = copy.deepcopy(results)
    rec = next(x for x in r["records"] if x["cell"] == cell and x["variant"] == "patched")
    rec["tests"][GATE].update(outcome="failed", exit_code=1)
    c = next(x for x in r["cells"] if x["cell"] == cell)
    c.update(status="failed", exit_code=6, reason=f"with the fix: {GATE} failed")
    return r


# ---------------------------------------------------------------- parsing PR_BODY.md back

def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table(body: str, heading: str) -> list[dict]:
    section = body.split(heading, 1)[1].split("\n#", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("|")]
    header = _cells(lines[0])
    assert set(lines[1].replace("|", "")) == {"-"}
    return [dict(zip(header, _cells(ln))) for ln in lines[2:]]


def _value(text: str):
    if text == "—":
        return None
    return text.strip("`")


def parsed_outcomes(body: str) -> list[dict]:
    rows = []
    for r in _table(body, "### Outcomes: backend × device × optimizer"):
        num = lambda k, f: None if _value(r[k]) is None else f(r[k])  # noqa: E731
        rows.append({"backend": r["backend"], "device": r["device"], "test": _value(r["test"]),
                     "optimizer": _value(r["optimizer"]), "opt_period": num("opt_period", int),
                     "with_fix": r["with the fix"], "reverted": _value(r["fix reverted"]),
                     "step": num("first wrong step", int), "w": num("w", float), "expected": num("expected w", float)})
    return rows


def expected_outcomes(results: dict, target: str) -> list[dict]:
    """Straight from results.json, independently of the code under test."""
    rows = []
    for cell in (c for c in results["cells"] if c["target"] == target):
        recs = {r["variant"]: r for r in results["records"] if r["cell"] == cell["cell"]}
        if "patched" not in recs:
            continue
        for test, key in ((UPSTREAM, "optimizer"), (GATE, "opt_period")):
            for row in recs["patched"]["tests"].get(test, {}).get("rows", []):  # none in a build-only cell
                ctl = next(x for x in recs["control"]["tests"][test]["rows"]
                           if x["device"] == row["device"] and x[key] == row[key])
                rows.append({"backend": cell["backend"], "device": row["device"], "test": test,
                             "optimizer": row.get("optimizer"), "opt_period": row.get("opt_period"),
                             "with_fix": row["status"], "reverted": ctl["status"], "step": ctl.get("step"),
                             "w": ctl.get("actual"), "expected": ctl.get("expected")})
    return rows


_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")


def numbers_in(text: str) -> set[float]:
    return {float(m) for m in _NUMBER.findall(text)}


def numbers_of(results) -> set[float]:
    """Every number in results.json: its values, and the numbers inside its strings."""
    found = set()
    if isinstance(results, bool) or results is None:
        return found
    if isinstance(results, (int, float)):
        return {float(results)}
    if isinstance(results, str):
        return numbers_in(results)
    items = results.values() if isinstance(results, dict) else results
    for v in items:
        found |= numbers_of(v)
    return found


def evidence_section(body: str) -> str:
    return body.split("## Evidence from the run", 1)[1].split("\n## ", 1)[0]


def check_body_against_results(body: str, results: dict, target: str) -> None:
    assert parsed_outcomes(body) == expected_outcomes(results, target)
    cells = {r["cell"]: r for r in _table(body, "### Cells")}
    for c in (c for c in results["cells"] if c["target"] == target):
        row = cells[c["cell"]]
        recs = {r["variant"]: r for r in results["records"] if r["cell"] == c["cell"]}
        assert row["status"] == c["status"]
        assert _value(row["negative control"]) == recs.get("control", {}).get("verdict")
        assert _value(row["test-opt with the fix"]) == recs.get("patched", {}).get("tests", {}).get(UPSTREAM, {}).get("summary_line")
        assert _value(row["gate with the fix"]) == recs.get("patched", {}).get("tests", {}).get(GATE, {}).get("summary_line")
        assert _value(row["gate with the fix reverted"]) == recs.get("control", {}).get("tests", {}).get(GATE, {}).get("summary_line")
        for col, key in (("build with the fix (s)", "build_patched"), ("control rebuild (s)", "build_control")):
            got = _value(row[col])
            assert (None if got is None else float(got)) == c["timings"].get(key)
        control = recs.get("control")
        if control and control.get("failure_line"):
            assert f"\n{control['failure_line']}\n" in body
    stray = numbers_in(evidence_section(body)) - numbers_of(results)
    assert not stray, f"numbers in PR_BODY.md's evidence that results.json does not hold: {stray}"
    sha = next(c for c in results["cells"] if c["target"] == target)["source"]["base_commit"]
    assert f"`{sha}`" in body
    check_training_table(body, results, target)


def check_training_table(body: str, results: dict, target: str) -> None:
    """The loss table holds exactly the shown cell's epochs from results.json, both variants."""
    trained = [c for c in results["cells"] if c["target"] == target and (c.get("training") or {}).get("with_fix")]
    if not trained:
        assert "### Training" not in body
        return
    cell = sorted(trained, key=lambda c: c["backend"] != "cpu")[0]
    section = body.split(f"### Training: loss per epoch with and without the fix ({cell['cell']})", 1)[1]
    rows = [line for line in section.splitlines() if re.match(r"^\| \d+ \|", line)]
    got = [[float(x) for x in row.strip("| ").split(" | ")] for row in rows]
    t = cell["training"]
    want = [[a["epoch"], a["train_loss"], a["eval_loss"], b["train_loss"], b["eval_loss"]]
            for a, b in zip(t["with_fix"], t["without_fix"])]
    assert got == want
    assert "![train and eval loss per epoch, with and without the fix](training-loss.png)" in section


# ---------------------------------------------------------------- pure: refusals

def test_sample_results_back_a_pull_request():
    r = sample()
    assert B.problems(r, r["series"]["sha256"]) == []


def test_a_control_that_survived_is_a_problem():
    r = control_survived(sample())
    found = B.problems(r, r["series"]["sha256"])
    assert [p.target for p in found] == ["ggml"]
    assert "ggml/cpu: the negative control was not killed (survived" in found[0].text


def test_a_regressed_cell_and_a_stale_series_are_problems():
    r = gate_regressed(sample())
    texts = [p.text for p in B.problems(r, "0" * 64)]
    assert texts[0].startswith("results.json was made from series 870f45871ade, the series in patches/ is now 000000000000")
    assert f"llama.cpp/cpu: with the fix {GATE} failed" in texts


def test_a_target_whose_cells_were_all_skipped_proves_nothing():
    r = sample()
    for c in r["cells"]:
        if c["target"] == "ggml":
            c.update(status="skipped", reason="no device")
    r["records"] = [x for x in r["records"] if x["target"] != "ggml"]
    assert [p.text for p in B.problems(r, r["series"]["sha256"])] == [
        "ggml: no cell ran its tests (skipped or build-only), so nothing was proven"]


def test_build_only_cells_are_shown_but_neither_evidence_nor_failure():
    r = sample()
    r["cells"].append({"cell": "ggml/cuda", "target": "ggml", "backend": "cuda", "layout": "ggml",
                       "status": "build-only", "reason": "built with and without the fix; tests not run: no GPU",
                       "exit_code": 0, "timings": {"build_patched": 1000.5, "build_control": 2.25},
                       "source": r["cells"][1]["source"], "patched_commit": r["cells"][1]["patched_commit"]})
    for variant in ("patched", "control"):
        r["records"].append({"cell": "ggml/cuda", "target": "ggml", "backend": "cuda", "variant": variant,
                             "status": "", "build": {"ok": True}, "tests": {}})
    assert B.problems(r, r["series"]["sha256"]) == []
    body = B.pr_body(r, "f" * 64, "ggml", COMMITS, TOOLCHAIN, [])
    check_body_against_results(body, r, "ggml")
    assert "- ggml/cuda build-only: built with and without the fix; tests not run: no GPU" in body


def test_the_refusal_is_one_line_naming_the_way_out():
    msg = B.refusal_message(B.problems(control_survived(sample()), sample()["series"]["sha256"]))
    assert "\n" not in msg and "--allow-incomplete" in msg


# ---------------------------------------------------------------- pure: PR_TITLE and PR_BODY.md

COMMITS = [B.Commit("ggml-opt : zero gradient accumulators each period with per-step graphs",
                    "The accumulators are never zeroed.", ("ggml/src/ggml-opt.cpp",)),
           B.Commit("tests : add test-opt-dynamic-accum for per-step gradient accumulation",
                    "The new test.", ("tests/CMakeLists.txt", "tests/test-opt-dynamic-accum.cpp"))]
TOOLCHAIN = {"cmake": "cmake version 4.4.5", "cxx_compiler": "GNU 12.2.0 (/usr/bin/c++)", "git": "git version 2.39.5"}


def test_title_is_the_fix_subject():
    assert B.pr_title(list(reversed(COMMITS))) == COMMITS[0].subject


@pytest.mark.parametrize("target", ["llama.cpp", "ggml"])
def test_every_number_in_the_body_is_the_one_in_results_json(target):
    r = sample()
    body = B.pr_body(r, "f" * 64, target, COMMITS, TOOLCHAIN, [])
    check_body_against_results(body, r, target)
    assert not body.startswith("> [!WARNING]")
    assert "## The bug and the fix" in body and "## The test" in body and "## Toolchain" in body
    assert "- CMake: cmake version 4.4.5" in body and "- C++ compiler: GNU 12.2.0" in body
    if target == "llama.cpp":
        assert "| upstream | `0c1e57098bba43ac29e6e3b677cdceebdd22334f` |" in body
        assert "-DLLAMA_BUILD_TESTS=ON" in body
    else:
        assert "| upstream | unknown" in body and "-DGGML_BUILD_TESTS=ON" in body


def test_the_body_check_catches_a_wrong_number():
    """The comparison itself can fail: change one number in the results and the body disagrees."""
    r = sample()
    body = B.pr_body(r, "f" * 64, "ggml", COMMITS, TOOLCHAIN, [])
    wrong = copy.deepcopy(r)
    rec = next(x for x in wrong["records"] if x["cell"] == "ggml/cpu" and x["variant"] == "control")
    rec["tests"][GATE]["rows"][0]["actual"] = 0.125
    with pytest.raises(AssertionError):
        check_body_against_results(body, wrong, "ggml")
    with pytest.raises(AssertionError, match="numbers in PR_BODY.md"):  # a number outside the tables too
        check_body_against_results(body.replace("exit code 1;", "exit code 41;"), r, "ggml")


def test_incomplete_evidence_opens_the_body_with_a_visible_warning():
    r = control_survived(sample())
    warnings = [p.text for p in B.problems(r, r["series"]["sha256"])]
    body = B.pr_body(r, "f" * 64, "ggml", COMMITS, TOOLCHAIN, warnings)
    first = body.splitlines()[:3]
    assert first[0] == "> [!WARNING]" and "--allow-incomplete" in first[1]
    assert "not killed (survived" in first[2]
    check_body_against_results(body, r, "ggml")


# ---------------------------------------------------------------- results.json and bundle files

def test_unreadable_results_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match="no results; run `ggml-patch matrix"):
        B.load_results(tmp_path)
    (tmp_path / "results.json").write_text("{\n  nope")
    with pytest.raises(ConfigError, match=r"results.json:2: not valid JSON"):
        B.load_results(tmp_path)
    (tmp_path / "results.json").write_text('{"cells": []}')
    with pytest.raises(ConfigError, match="key 'series' missing"):
        B.load_results(tmp_path)


def _fake_bundle(d: Path) -> None:
    d.mkdir()
    files = {"0001-x.patch": "From x\n", "PR_TITLE": "t\n", "PR_BODY.md": "b\n"}
    for n, t in files.items():
        (d / n).write_text(t)
    (d / "manifest.json").write_text(json.dumps({"target": "ggml", "files": {n: B.sha256_text(t) for n, t in files.items()}}))


def test_a_bundle_changed_after_it_was_made_is_rejected(tmp_path):
    _fake_bundle(tmp_path / "b")
    assert B.read_bundle(tmp_path / "b").title == "t"
    (tmp_path / "b" / "PR_BODY.md").write_text("edited\n")
    with pytest.raises(ConfigError, match="PR_BODY.md: changed since the bundle was made"):
        B.read_bundle(tmp_path / "b")
    (tmp_path / "b" / "0001-x.patch").unlink()
    with pytest.raises(ConfigError, match="0001-x.patch: listed in manifest.json but missing"):
        B.read_bundle(tmp_path / "b")


# ---------------------------------------------------------------- the command refuses, writing nothing

def _results_dir(tmp_path: Path, results: dict) -> Path:
    d = tmp_path / "results"
    d.mkdir()
    (d / "results.json").write_text(json.dumps(results, indent=2))
    return d


@pytest.mark.parametrize("edit, expected", [
    (control_survived, "ggml/cpu: the negative control was not killed (survived: the gate test passed without the fix"),
    (gate_regressed, f"llama.cpp/cpu: with the fix {GATE} failed"),
])
def test_bundle_refuses_results_that_do_not_prove_the_fix(tmp_path, repo_root, edit, expected):
    r = edit(sample())
    r["series"]["sha256"] = current_series_sha(repo_root)  # only the edit is wrong
    results = _results_dir(tmp_path, r)
    proc = run_tool("bundle", "--matrix", str(repo_root / "matrix.yaml"), "--results", str(results),
                    "--cache", str(tmp_path / "cache"), cwd=tmp_path)
    assert proc.returncode == ExitCode.BUNDLE_REFUSED == 20, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ggml-patch: error: refusing to bundle: "), proc.stderr
    assert expected in lines[0]
    assert not (results / "bundle").exists()
    assert not (tmp_path / "cache").exists()  # refused before touching anything


def test_bundle_refuses_results_of_another_series(tmp_path, repo_root):
    r = sample()
    r["series"]["sha256"] = "ab" * 32
    results = _results_dir(tmp_path, r)
    proc = run_tool("bundle", "--matrix", str(repo_root / "matrix.yaml"), "--results", str(results),
                    "--cache", str(tmp_path / "cache"), cwd=tmp_path)
    assert proc.returncode == 20, proc.stderr
    assert "results.json was made from series ababababab" in proc.stderr
    assert "re-run `ggml-patch matrix`" in proc.stderr
    assert not (results / "bundle").exists()


def test_bundle_names_an_unknown_target(tmp_path, repo_root):
    r = sample()
    r["series"]["sha256"] = current_series_sha(repo_root)
    results = _results_dir(tmp_path, r)
    proc = run_tool("bundle", "--matrix", str(repo_root / "matrix.yaml"), "--results", str(results),
                    "--target", "whisper.cpp", "--cache", str(tmp_path / "cache"), cwd=tmp_path)
    assert proc.returncode == 2 and "no cells for target 'whisper.cpp'" in proc.stderr


# ---------------------------------------------------------------- end to end: a real run, bundled

def _scan_for_token(paths: list[Path], texts: list[str]) -> None:
    for t in texts:
        assert TOKEN not in t
    for root in paths:
        for f in [root] if root.is_file() else root.rglob("*"):
            if f.is_file() and not f.is_symlink():
                assert TOKEN.encode() not in f.read_bytes(), f


@pytest.fixture(scope="module")
def real_run(repo_root, tool_cache, tmp_path_factory):
    """The real CPU matrix once, then its bundle, with GITHUB_TOKEN set to a value scanned for later."""
    results = tmp_path_factory.mktemp("bundle-e2e") / "results"
    matrix = str(repo_root / "matrix.yaml")
    run = run_tool("matrix", "--matrix", matrix, "--results", str(results), "--cache", str(tool_cache),
                   "--backend", "cpu", cwd=results.parent)
    assert run.returncode == 0, run.stderr[-3000:]
    os.environ["GITHUB_TOKEN"] = TOKEN
    try:
        proc = run_tool("bundle", "--matrix", matrix, "--results", str(results), "--cache", str(tool_cache),
                        cwd=results.parent)
    finally:
        del os.environ["GITHUB_TOKEN"]
    return results, proc


e2e = pytest.mark.e2e


@e2e
def test_bundle_of_a_real_run(real_run):
    results, proc = real_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 bundle(s) in" in proc.stdout
    for target in ("llama.cpp", "ggml"):
        d = results / "bundle" / target
        assert sorted(p.name for p in d.iterdir()) == [
            "0001-ggml-opt-zero-gradient-accumulators-each-period-with.patch",
            "0002-tests-add-test-opt-dynamic-accum-for-per-step-gradie.patch",
            "PR_BODY.md", "PR_TITLE", "manifest.json", "training-loss.png"]
        assert (d / "training-loss.png").read_bytes().startswith(b"\x89PNG")
        # the verification time, for the record (warm cache: a second or two)
        print(re.search(rf"^{re.escape(target)}: .*verified in [\d.]+ s.*$", proc.stdout, re.M).group(0))


@e2e
@pytest.mark.parametrize("target", ["llama.cpp", "ggml"])
def test_the_series_applies_with_plain_git_am_to_a_clean_base_and_the_gate_passed_there(real_run, tool_cache, tmp_path, target):
    results, _ = real_run
    d = results / "bundle" / target
    man = json.loads((d / "manifest.json").read_text())
    data = json.loads((results / "results.json").read_text())
    cell = next(c for c in data["cells"] if c["target"] == target)
    base, patched = cell["source"]["base_commit"], cell["patched_commit"]
    assert man["base"]["snapshot_commit"] == base and man["patched_commit"] == patched
    assert man["base"]["upstream_commit"] == cell["source"].get("upstream_commit")

    clone = tmp_path / "clean"
    subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(tool_cache / "snapshots.git"), str(clone)],
                   check=True, capture_output=True)  # the snapshot repository has no HEAD: "empty" is expected
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", "--detach", base], check=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_COMMITTER_NAME": "maintainer", "GIT_COMMITTER_EMAIL": "m@example.org"}
    patches = sorted(str(p) for p in d.glob("*.patch"))
    am = subprocess.run(["git", "-C", str(clone), "am", *patches], capture_output=True, text=True, env=env)
    assert am.returncode == 0, am.stderr
    tree = lambda rev, where: subprocess.run(["git", "-C", str(where), "rev-parse", f"{rev}^{{tree}}"],  # noqa: E731
                                             capture_output=True, text=True, check=True).stdout.strip()
    assert tree("HEAD", clone) == tree(patched, clone)  # exactly the tree the matrix proved

    v = man["verification"]  # the bundle's own git am + build + run on a fresh copy of the base
    assert v["head_is_patched_commit"] and v["tree_is_patched_tree"]
    assert v["tests"][GATE]["outcome"] == "passed" and v["tests"][UPSTREAM]["outcome"] == "passed"
    assert "3/3 device*opt_period passed" in Path(v["tests"][GATE]["log"]).read_text()


@e2e
@pytest.mark.parametrize("target", ["llama.cpp", "ggml"])
def test_body_title_and_manifest_come_from_the_run(real_run, target):
    results, _ = real_run
    d = results / "bundle" / target
    data = json.loads((results / "results.json").read_text())
    body = (d / "PR_BODY.md").read_text()
    check_body_against_results(body, data, target)
    assert (d / "PR_TITLE").read_text() == "ggml-opt : zero gradient accumulators each period with per-step graphs\n"
    man = json.loads((d / "manifest.json").read_text())
    assert man["results"]["sha256"] == hashlib.sha256((results / "results.json").read_bytes()).hexdigest()
    assert man["series"]["results_series_sha256"] == data["series"]["sha256"]
    assert set(man["files"]) == {p.name for p in d.iterdir()} - {"manifest.json"}
    for name, digest in man["files"].items():
        assert hashlib.sha256((d / name).read_bytes()).hexdigest() == digest
    assert man["incomplete"] is False and man["warnings"] == []
    assert re.search(r"^- C\+\+ compiler: \S+ \d+\.\d+", body, re.M)
    assert "- CMake: cmake version" in body and "- git: git version" in body


@e2e
def test_the_token_appears_nowhere(real_run, tool_cache):
    results, proc = real_run
    _scan_for_token([results, tool_cache / "bundle"], [proc.stdout, proc.stderr])


@e2e
def test_a_run_whose_control_survived_is_refused_then_bundled_with_a_warning(real_run, repo_root, tool_cache, tmp_path):
    results, _ = real_run
    r = control_survived(json.loads((results / "results.json").read_text()))
    edited = _results_dir(tmp_path, r)
    args = ["bundle", "--matrix", str(repo_root / "matrix.yaml"), "--results", str(edited), "--cache", str(tool_cache)]
    refused = run_tool(*args, cwd=tmp_path)
    assert refused.returncode == 20 and "ggml/cpu: the negative control was not killed (survived" in refused.stderr
    assert not (edited / "bundle").exists()

    made = run_tool(*args, "--allow-incomplete", "--target", "ggml", cwd=tmp_path)
    assert made.returncode == 0, made.stderr[-3000:]
    assert "warning: ggml: incomplete evidence: ggml/cpu: the negative control was not killed" in made.stderr
    body = (edited / "bundle" / "ggml" / "PR_BODY.md").read_text()
    assert body.startswith("> [!WARNING]\n> **Incomplete evidence")
    check_body_against_results(body, r, "ggml")
    man = json.loads((edited / "bundle" / "ggml" / "manifest.json").read_text())
    assert man["incomplete"] is True and "survived" in man["warnings"][0]
    assert not (edited / "bundle" / "llama.cpp").exists()


@e2e
def test_pr_pushes_the_real_bundle_to_a_fork_and_opens_the_pull_request(real_run, repo_root, tool_cache, tmp_path):
    from pytest_httpserver import HTTPServer

    results, _ = real_run
    d = results / "bundle" / "ggml"
    fork = tmp_path / "fork.git"
    subprocess.run(["git", "init", "-q", "--bare", str(fork)], check=True)
    api = HTTPServer(host="127.0.0.1", port=0)
    api.start()
    try:
        api.expect_request("/repos/ggml-org/ggml/pulls", method="POST").respond_with_json(
            {"html_url": "https://github.com/ggml-org/ggml/pull/7"}, status=201)
        os.environ["GITHUB_TOKEN"] = TOKEN
        try:
            proc = run_tool("pr", "--matrix", str(repo_root / "matrix.yaml"), "--cache", str(tool_cache),
                            "--bundle", str(d), "--repo", "ggml-org/ggml", "--head-remote", str(fork),
                            "--head-owner", "me", "--branch", "ggml-opt-accumulators", "--api-url", api.url_for("/"),
                            "--open", cwd=tmp_path)
        finally:
            del os.environ["GITHUB_TOKEN"]
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip().endswith("pull request opened: https://github.com/ggml-org/ggml/pull/7")
        (request, _), = api.log
        sent = json.loads(request.get_data(as_text=True))
        assert sent["body"] == (d / "PR_BODY.md").read_text() and sent["head"] == "me:ggml-opt-accumulators"
    finally:
        api.clear()
        api.stop()
    man = json.loads((d / "manifest.json").read_text())
    rev = lambda where, r: subprocess.run(["git", f"--git-dir={where}", "rev-parse", r],  # noqa: E731
                                          capture_output=True, text=True, check=True).stdout.strip()
    assert rev(fork, "refs/heads/ggml-opt-accumulators^{tree}") == rev(tool_cache / "snapshots.git",
                                                                        f"{man['patched_commit']}^{{tree}}")
    _scan_for_token([tmp_path, tool_cache / "pr" / "ggml"], [proc.stdout, proc.stderr])
