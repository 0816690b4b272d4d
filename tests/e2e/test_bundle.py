"""The bundle end to end: a real run bundled with the contributor's identity, its series applied
with plain `git am` to a clean base, PR_BODY.md checked against results.json and the template,
`pr --open` refused (exit 27) for llama.cpp (submit
manual) and ggml (none), nothing sent or pushed."""

import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from orchestrator.model.results import load_results

from ..helpers.bundle_checks import check_body_against_results
from ..helpers.patches import queue_topics
from ..helpers.samples import GATE, UPSTREAM, control_survived, results_dir
from ..helpers.tools import DATA, ROOT, run_tool

TOKEN = "ghp_bundleTEST_7f3c9a1e5b2d4f60"  # unique: scanned for in every output


def _scan_for_token(paths: list[Path], texts: list[str]) -> None:
    for t in texts:
        assert TOKEN not in t
    for root in paths:
        for f in [root] if root.is_file() else root.rglob("*"):
            if f.is_file() and not f.is_symlink():
                assert TOKEN.encode() not in f.read_bytes(), f


AUTHOR = "Ada Contributor <ada@example.org>"
ASSISTANT = "Test Assistant"


@pytest.fixture(scope="module")
def real_run(repo_root, tool_cache, tmp_path_factory):
    """The real CPU matrix once, then its bundle (the contributor's identity, an Assisted-by
    trailer), with GITHUB_TOKEN set to a value scanned for later."""
    results = tmp_path_factory.mktemp("bundle-e2e") / "results"
    matrix = str(repo_root / "matrix.yaml")
    run = run_tool(
        "matrix",
        "--matrix",
        matrix,
        "--results",
        str(results),
        "--cache",
        str(tool_cache),
        "--backend",
        "cpu",
        cwd=results.parent,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    os.environ["GITHUB_TOKEN"] = TOKEN
    try:
        proc = run_tool(
            "bundle",
            "--matrix",
            matrix,
            "--results",
            str(results),
            "--cache",
            str(tool_cache),
            "--author",
            AUTHOR,
            "--assisted-by",
            ASSISTANT,
            cwd=results.parent,
        )
    finally:
        del os.environ["GITHUB_TOKEN"]
    return results, proc


# one run of the whole queue (three active topics), one bundle per topic and target from it
TOPIC_1 = ("--topic", "accumulator-reset")
TOPICS = tuple(queue_topics())  # patches/queue.yaml's
PATCHES = sorted(p.name for p in (ROOT / "patches" / "accumulator-reset").glob("*.patch"))


def own_patches(topic: str) -> list[str]:
    return sorted(p.name for p in (ROOT / "patches" / topic).glob("*.patch"))


def bundle_of(results: Path, target: str, topic: str = TOPICS[0]) -> Path:
    return results / "bundle" / topic / target


def test_bundle_of_a_real_run(real_run):
    results, proc = real_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "6 bundle(s) in" in proc.stdout
    llama = bundle_of(results, "llama.cpp")
    from orchestrator.verdicts.training import can_plot

    plot = ["training-loss.png"] if can_plot() else []  # matplotlib is the `plot` extra
    assert sorted(p.name for p in llama.iterdir()) == sorted(
        PATCHES + ["ISSUE.md", "PR_BODY.md", "PR_TITLE", "READINESS.md", "manifest.json", *plot]
    )  # no COMMENT draft: no thread of the ported fix is known (one line in the PR's details)
    plan = (llama.parent.parent / "SUBMISSION.md").read_text()
    assert f"1. `{TOPICS[0]}/llama.cpp/`" in plan and "CONTRIBUTING.md:" in plan
    assert "ggml/src/ggml-opt.cpp" in plan and "@" in plan  # the CODEOWNERS owner
    if plot:
        assert (llama / "training-loss.png").read_bytes().startswith(b"\x89PNG")
    # ggml is verified through llama.cpp's sync: its series
    # in ggml's layout, no pull request of its own
    ggml = bundle_of(results, "ggml")
    assert sorted(p.name for p in ggml.iterdir()) == sorted(
        PATCHES + ["READINESS.md", "manifest.json"]
    )
    assert "accumulator-reset on ggml: verified through ggml-org/llama.cpp's sync" in proc.stdout
    # the other topics: each its own two commits, its own documents, no training plot or comment
    for topic in TOPICS[1:]:
        other = sorted(p.name for p in bundle_of(results, "llama.cpp", topic).iterdir())
        assert other == sorted(
            own_patches(topic)
            + ["ISSUE.md", "PR_BODY.md", "PR_TITLE", "READINESS.md", "manifest.json"]
        )
        assert len(own_patches(topic)) == 2
    for topic in TOPICS:
        for target in ("llama.cpp", "ggml"):
            # the verification time, for the record (warm cache: a second or two)
            found = re.search(
                rf"^{topic} on {re.escape(target)}: .*verified in [\d.]+ s.*$", proc.stdout, re.M
            )
            assert found, proc.stdout
            print(found.group(0))


@pytest.mark.parametrize("topic", TOPICS)
@pytest.mark.parametrize("target", ["llama.cpp", "ggml"])
def test_the_series_applies_with_plain_git_am_to_a_clean_base_and_the_gate_passed_there(
    real_run, tool_cache, tmp_path, target, topic
):
    """Each topic's bundle alone on the clean base: its own commits, its tree, its tests."""
    results, _ = real_run
    d = bundle_of(results, target, topic)
    man = json.loads((d / "manifest.json").read_text())
    data = json.loads((results / "results.json").read_text())
    cell = next(c for c in data["cells"] if c["target"] == target)
    base, patched = cell["source"]["base_commit"], man["patched_commit"]
    assert man["base"]["snapshot_commit"] == base and man["topic"] == topic
    assert patched != cell["patched_commit"]  # the topic alone, not the whole queue the run tested
    assert man["base"]["upstream_commit"] == cell["source"].get("upstream_commit")

    clone = tmp_path / "clean"
    # the snapshot repository has no HEAD: "empty" is expected
    subprocess.run(
        [
            "git",
            "clone",
            "-q",
            "--shared",
            "--no-checkout",
            str(tool_cache / "snapshots.git"),
            str(clone),
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", "--detach", base], check=True)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_COMMITTER_NAME": "maintainer",
        "GIT_COMMITTER_EMAIL": "m@example.org",
    }
    # a topic that follows others (topic.yaml after:) applies on theirs: their bundles first, as
    # its PR's own commands say
    for dep in man.get("after") or []:
        earlier = sorted(str(p) for p in bundle_of(results, target, dep).glob("*.patch"))
        am = subprocess.run(
            ["git", "-C", str(clone), "am", *earlier], capture_output=True, text=True, env=env
        )
        assert am.returncode == 0, am.stderr
    start = subprocess.run(
        ["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    patches = sorted(str(p) for p in d.glob("*.patch"))
    am = subprocess.run(
        ["git", "-C", str(clone), "am", *patches], capture_output=True, text=True, env=env
    )
    assert am.returncode == 0, am.stderr

    def tree(rev: str, where: Path) -> str:
        return subprocess.run(
            ["git", "-C", str(where), "rev-parse", f"{rev}^{{tree}}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    assert tree("HEAD", clone) == tree(patched, clone)  # exactly the tree the matrix proved
    # upstream's AGENTS.md: no new file under tests/; 0001 touches only the reset
    added = subprocess.run(
        ["git", "-C", str(clone), "diff", "--name-status", "--diff-filter=A", base, "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert added == "", added
    # the contributor's commits: their identity, the assistant
    # named with Assisted-by, never Co-authored-by
    log = subprocess.run(
        ["git", "-C", str(clone), "log", "--format=%an <%ae>%n%B%x00", f"{start}..HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    commits = [c.strip() for c in log.split("\x00") if c.strip()]
    assert len(commits) == len(patches)
    for c in commits:
        assert c.splitlines()[0] == AUTHOR and c.splitlines()[-1] == f"Assisted-by: {ASSISTANT}"
    assert "Co-authored-by" not in log
    assert man["authorship"] == {
        "author": AUTHOR,
        "from": "--author",
        "assisted_by": ASSISTANT,
        "committer": "ggml-patch <ggml-patch@localhost>",
    }

    v = man["verification"]  # the bundle's own git am + build + run on a fresh copy of the base
    assert (
        v["head_is_bundle_commit"]
        and v["tree_is_patched_tree"]
        and v["head"] == man["bundle_commit"]
    )
    assert v["tests"][UPSTREAM]["outcome"] == "passed"
    # the verification ran the commands the PR body shows (issue 49 point 3): the project's own
    # gate only where the bundle carries the patch that adds it upstream
    if any(GATE in p for p in man["series"]["patches"]):
        assert v["tests"][GATE]["outcome"] == "passed"
        assert "29/29 device*case passed" in Path(v["tests"][GATE]["log"]).read_text()
    else:
        assert GATE not in v["tests"]
    body = (d / "PR_BODY.md").read_text() if (d / "PR_BODY.md").exists() else ""
    for c in v["commands"]:
        assert c["exit_code"] == 0
        assert not body or f"\n{c['line']}\n" in body
    # each test's passing line, quoted by the body, is in that test's own log
    tested = [c for c in v["commands"] if c["line"].startswith("./build/bin/")]
    assert tested and all(c["shown"] in Path(c["log"]).read_text() for c in tested)
    # test-opt's cases of the topic ran in the bundle's own verification
    ran = Path(v["tests"][UPSTREAM]["log"]).read_text()
    assert {TOPICS[1]: "test_grad_non_static", TOPICS[2]: "test_reset"}.get(topic, "") in ran


def test_body_title_issue_and_manifest_come_from_the_run_and_the_template(real_run, repo_root):
    results, _ = real_run
    d = bundle_of(results, "llama.cpp")
    data = json.loads((results / "results.json").read_text())
    body = (d / "PR_BODY.md").read_text()
    check_body_against_results(body, load_results(results / "results.json")[0], "llama.cpp")
    template = (
        DATA / "upstream-policy" / "llama.cpp" / ".github" / "pull_request_template.md"
    ).read_text()
    heads = lambda t: [ln for ln in t.splitlines() if ln.startswith("## ")]  # noqa: E731
    assert (
        heads(body)
        == heads(template)
        == ["## Overview", "## Additional information", "## Requirements"]
    )
    assert body.isascii() and (d / "ISSUE.md").read_text().isascii()
    # patches/cover.md is still the template's placeholders: a draft, said at the top
    assert body.startswith("> [!CAUTION]\n> DRAFT (ggml-patch readiness)")
    from orchestrator.upstream.readiness import message_of

    assert (d / "PR_TITLE").read_text() == message_of(
        PATCHES[0], (d / PATCHES[0]).read_text()
    ).subject + "\n"
    man = json.loads((d / "manifest.json").read_text())
    assert man["draft"] is True and any("cover.md" in r for r in man["draft_reasons"])
    assert man["policy"]["submit"]["value"] == "manual"
    assert man["policy"]["rules"]["automated_submission_forbidden"]["citations"][0] == {
        "file": "AGENTS.md",
        "line": 49,
        "text": "- Automated commits or PR submissions (may result in contributor ban)",
    }
    assert (
        man["results"]["sha256"]
        == hashlib.sha256((results / "results.json").read_bytes()).hexdigest()
    )
    assert man["series"]["results_series_sha256"] == data["series"]["sha256"]
    assert set(man["files"]) == {p.name for p in d.iterdir()} - {"manifest.json"}
    for name, digest in man["files"].items():
        assert hashlib.sha256((d / name).read_bytes()).hexdigest() == digest
    assert man["incomplete"] is False and man["warnings"] == []
    # the compiler in the tested line; no tool versions, no machine path in the body
    assert re.search(r"^Tested on CPU \(\w+, gcc \d+\)", body, re.M)
    assert "cmake version" not in body and "/usr/" not in body and "sha256" not in body
    readiness = (d / "READINESS.md").read_text()
    assert (
        "| cover-written | warn |" in readiness
        and "| role | pass | pull request to ggml-org/llama.cpp" in readiness
    )
    ggml = json.loads((bundle_of(results, "ggml") / "manifest.json").read_text())
    assert ggml["policy"]["role"]["value"]["text"] == "verified through ggml-org/llama.cpp's sync"
    sync = next(c for c in ggml["readiness"]["checks"] if c["name"] == "sync")
    assert sync["rule"][0]["file"] == "scripts/sync-llama-am.sh"


SERIES_OWN_TEXT = (
    "ascii-commit-messages",
    "ascii-added-lines",
    "comment-length",
    "comment-wrap",
    "subject",
    "trailers",
)


def test_readiness_has_no_fail_for_the_series_own_text(real_run):
    results, _ = real_run
    for topic in TOPICS:
        for target in ("llama.cpp", "ggml"):
            man = json.loads((bundle_of(results, target, topic) / "manifest.json").read_text())
            got = {c["name"]: c["status"] for c in man["readiness"]["checks"]}
            wanted = {k: "pass" for k in SERIES_OWN_TEXT}
            assert {k: got[k] for k in SERIES_OWN_TEXT} == wanted, (topic, target, got)


CONTRIBUTORS_WORDS = {
    "cover-written",
    "disclosure",
    "issue-referenced",
    "related-pr-referenced",
    "commit-messages",  # the series' messages are the project's draft until `messages: own`
}


def test_readiness_lists_only_the_contributor_s_words_as_open(real_run):
    results, _ = real_run
    man = json.loads((bundle_of(results, "llama.cpp") / "manifest.json").read_text())
    got = {c["name"]: c["status"] for c in man["readiness"]["checks"]}
    assert {n for n, st in got.items() if st != "pass"} <= CONTRIBUTORS_WORDS, got
    assert got["new-test-files"] == "pass" and got["related-pr-referenced"] == "warn"
    assert got["commit-messages"] == "fail" and got["issue-referenced"] == "warn"
    for name in ("pr-body-words", "pr-body-length", "cut-words", "issue-form"):
        assert got[name] == "pass", (name, got)
    readiness = (bundle_of(results, "llama.cpp") / "READINESS.md").read_text()
    assert (
        "https://github.com/ggml-org/llama.cpp/pull/22705" in readiness
        and "CONTRIBUTING.md:" in readiness
    )
    body = (bundle_of(results, "llama.cpp") / "PR_BODY.md").read_text()
    # the project's own record stays out of the PR: no known-wrong fixes, no gate, no digests
    assert "known-wrong" not in body and "killed" not in body and GATE not in body
    # the failing line of test-opt's new cases before the fix, visible
    assert (
        "\n"
        "test_opt_period_non_static(high_level=no, schedule=TTTTTT, opt_period=1, "
        "subtest=weights, optimizer=adamw): FAIL\n"
    ) in body.split("<details>", 1)[0]
    shown = body.split("<details>", 1)[0]
    assert re.search(r"^Tested on CPU \(\w+, gcc \d+\)[;.]", shown, re.M), shown
    assert "\nWith the fix:\n\n```\n2/2 backend*optimizer passed\n```\n" in shown
    # other people's fixes: never judged in the PR or the issue; without a known thread one
    # neutral line in the PR's details, no comment draft
    issue = (bundle_of(results, "llama.cpp") / "ISSUE.md").read_text()
    for text in (body, issue):
        assert "| competing fix |" not in text and "qlora" not in text and "**wrong**" not in text
    other_work = body.split("<summary>Other work on the same code</summary>", 1)[1]
    assert "0eb92d8f033fbc86c7f2ec9bc32f61f75fed88d4" in other_work.split("</details>", 1)[0]
    assert not list(bundle_of(results, "llama.cpp").glob("COMMENT-*"))
    # ISSUE.md: upstream's bug form from the pinned tree, upstream's words by file:line, no digest
    assert "follows the bug form .github/ISSUE_TEMPLATE/019-bug-misc.yml" in issue
    assert "### Problem description & steps to reproduce" in issue
    assert '`ggml/include/ggml-opt.h:114`: "by default the forward graph' in issue
    assert "(llama_opt_epoch)" in issue and "(ggml_opt_prepare_alloc)" in issue
    data = json.loads((results / "results.json").read_text())
    cell = next(c for c in data["cells"] if c["target"] == "llama.cpp")
    assert cell["source"]["base_commit"] not in issue
    assert cell["source"]["sdist_sha256"] not in issue
    # each other topic's ISSUE.md says its own problem, never topic 1's, and names its cover.md
    for topic in TOPICS[1:]:
        other = (bundle_of(results, "llama.cpp", topic) / "ISSUE.md").read_text()
        assert "never resets the gradient accumulators" not in other
        assert f"patches/{topic}/cover.md" in other
        other_body = (bundle_of(results, "llama.cpp", topic) / "PR_BODY.md").read_text()
        assert GATE not in other_body and "This is pull request" in other_body
        # every ISSUE.md: a symptom for title, its steps and its log
        assert "### Relevant log output\n\n_No response_" not in other
        assert "Apply the test commit of the fix alone" in other
    grad = (bundle_of(results, "llama.cpp", TOPICS[1]) / "PR_BODY.md").read_text()
    shown = grad.split("<details>", 1)[0]
    assert "```\ntest-opt: SIGSEGV in test_grad_non_static\n```" in shown
    assert "\nWith the fix:\n\n```\n2/2 backend*optimizer passed\n```\n" in shown


def test_the_token_appears_nowhere(real_run, tool_cache):
    results, proc = real_run
    _scan_for_token([results, tool_cache / "bundle"], [proc.stdout, proc.stderr])


def test_a_run_whose_control_survived_is_refused_then_bundled_with_a_warning(
    real_run, repo_root, tool_cache, tmp_path
):
    results, _ = real_run
    r = control_survived(load_results(results / "results.json")[0], "llama.cpp/cpu")
    edited = results_dir(tmp_path, r)
    args = [
        "bundle",
        "--matrix",
        str(repo_root / "matrix.yaml"),
        "--results",
        str(edited),
        "--cache",
        str(tool_cache),
        "--author",
        AUTHOR,
        *TOPIC_1,
    ]
    refused = run_tool(*args, cwd=tmp_path)
    assert (
        refused.returncode == 20
        and "llama.cpp/cpu: the negative control was not killed (survived" in refused.stderr
    )
    assert not (edited / "bundle").exists()

    made = run_tool(*args, "--allow-incomplete", "--target", "llama.cpp", cwd=tmp_path)
    assert made.returncode == 0, made.stderr[-3000:]
    assert (
        "warning: llama.cpp: incomplete results: "
        "llama.cpp/cpu: the negative control was not killed" in made.stderr
    )
    body = (bundle_of(edited, "llama.cpp") / "PR_BODY.md").read_text()
    assert "> [!WARNING]\n> Incomplete results" in body
    check_body_against_results(body, r, "llama.cpp")
    man = json.loads((bundle_of(edited, "llama.cpp") / "manifest.json").read_text())
    assert man["incomplete"] is True and "survived" in man["warnings"][0]
    assert not bundle_of(edited, "ggml").exists()


@pytest.mark.parametrize("target", ["llama.cpp", "ggml"])
def test_pr_open_on_the_real_bundle_exits_27_sending_and_pushing_nothing(
    real_run, repo_root, tool_cache, tmp_path, target
):
    from pytest_httpserver import HTTPServer

    results, _ = real_run
    d = bundle_of(results, target)
    fork = tmp_path / "fork.git"
    subprocess.run(["git", "init", "-q", "--bare", str(fork)], check=True)
    api = HTTPServer(host="127.0.0.1", port=0)
    api.start()
    try:
        os.environ["GITHUB_TOKEN"] = TOKEN
        try:
            proc = run_tool(
                "pr",
                "--matrix",
                str(repo_root / "matrix.yaml"),
                "--cache",
                str(tool_cache),
                "--bundle",
                str(d),
                "--repo",
                "ggml-org/llama.cpp",
                "--head-remote",
                str(fork),
                "--head-owner",
                "me",
                "--branch",
                "ggml-opt-accumulators",
                "--api-url",
                api.url_for("/"),
                "--open",
                cwd=tmp_path,
            )
        finally:
            del os.environ["GITHUB_TOKEN"]
        assert proc.returncode == 27, proc.stderr
        assert api.log == []  # no request made
    finally:
        api.clear()
        api.stop()
    refs = subprocess.run(
        ["git", f"--git-dir={fork}", "for-each-ref"], capture_output=True, text=True, check=True
    )
    assert refs.stdout == ""  # nothing pushed
    if target == "llama.cpp":
        assert f"push {fork} HEAD:refs/heads/ggml-opt-accumulators" in proc.stdout
        assert (
            "/ggml-org/llama.cpp/compare/master...me:ggml-opt-accumulators?expand=1" in proc.stdout
        )
    else:
        assert "takes no pull request: verified through ggml-org/llama.cpp's sync" in proc.stdout
    _scan_for_token([tmp_path], [proc.stdout, proc.stderr])
