"""Issue 51 (security pass D), the hostile corpus's new cases: a secret in a commit message
reaches no bundle file, raw or escaped; a secret in a change refuses the bundle in one line.
Real git (the bundle's own reauthor, format-patch and `git am`), the real documents."""

from __future__ import annotations

import html
import json
import os
import time
from pathlib import Path

import pytest

from orchestrator import publish
from orchestrator.drift import confined
from orchestrator.drift import status as S
from orchestrator.drift.status import NOT_CHECKED
from orchestrator.errors import BundleRefused, ConfigError, ExitCode
from orchestrator.upstream import authorship as A
from orchestrator.upstream import bundle as B
from orchestrator.upstream import cover as C
from orchestrator.upstream import documents as D
from orchestrator.upstream import leaks
from orchestrator.vcs.snapshots import FIXED_IDENTITY, SnapshotRepo, Worktree

from ..helpers.tools import git
from ..unit.test_drift_issue_inert import assert_inert
from ..unit.test_pr_body import TOOLCHAIN, TREE, WRITTEN, llama_policy, sample

TOKEN = "ghp_passD_LIVE_0123456789abcdef"  # the run's own GITHUB_TOKEN: `_` in it, as in every one
OTHER = "ghp_" + "Q7x" * 12  # a GitHub token that is not this run's (a commit quoting one)
PASSWORD = "s3cr_et-Pa55"  # a URL's password, `_` in it too
URL = f"https://bob:{PASSWORD}@git.example.org/fork.git"
PLAIN_URL = "https://user:pass@host/x.git"  # the shape the issue names: a short password
MESSAGES = [
    f"ggml-opt : zero the accumulators {TOKEN}\n\nPushed from {URL} with {TOKEN}.\n",
    f"tests : add test-x\n\nThe old token was {OTHER}; see {URL} and {PLAIN_URL}\n",
]


def escaped_forms(secret: str) -> set[str]:
    """The secret as an escaping may have written it; each renders as the secret."""
    return {
        secret,
        secret.replace("_", "\\_"),
        secret.replace("_", "&#95;"),
        html.escape(secret),
        publish._escape_words(secret),
    }


def scan(files: dict[str, str | bytes]) -> None:
    for name, data in files.items():
        text = data if isinstance(data, str) else data.decode("utf-8", "replace")
        # "pass" alone is a word a file may hold; its URL is what must not be there
        for secret in (TOKEN, OTHER, PASSWORD, "user:pass@"):
            for form in escaped_forms(secret):
                assert form not in text, (name, form)


def _series(tmp_path, messages=MESSAGES, content=("int a = 1; // passes\n", "int a = 2;\n")):
    repo = SnapshotRepo(tmp_path / "snapshots.git")
    tree = tmp_path / "tree"
    (tree / "src").mkdir(parents=True)
    (tree / "src" / "a.cpp").write_text("int a = 0;\n")
    base = repo.import_tree(tree, "refs/snapshots/t", "snapshot")
    wt = Worktree(repo, tmp_path / "wt")
    wt.ensure(base)
    for text, msg in zip(content, messages, strict=True):
        (wt.path / "src" / "a.cpp").write_text(text)
        wt.git("commit", "-qa", "--cleanup=verbatim", "-m", msg, env=FIXED_IDENTITY)
    return repo, base, wt.head()


def _bundle_files(tmp_path, notices: list[str], **series) -> tuple[dict, SnapshotRepo, str, str]:
    """The files `bundle` writes for this series: its patches (from the re-made commits) and
    its documents (llama.cpp's real policy and template)."""
    repo, base, patched = _series(tmp_path, **series)
    who = A.parse_author("Ada Lovelace <ada@example.org>")
    head = A.reauthor(str(repo.path), base, patched, who, None, notices.append)
    patches = B.format_patch(repo, base, head)
    commits = [B.SeriesCommit(s, b, f) for _, s, b, f in repo.commits(base, head)]
    docs = D.documents(
        policy=llama_policy(),
        cover=C.parse_cover("patches/cover.md", WRITTEN),
        results=sample(),
        results_sha256="f" * 64,
        target="llama.cpp",
        commits=commits,
        patches=patches,
        toolchain=TOOLCHAIN,
        warnings=[f"a warning naming {TOKEN} and {URL}"],
        canonical_paths=[],
        read_file=TREE.get,
    )
    return {**dict(patches), **docs.files}, repo, base, head


@pytest.fixture
def live_token(monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)


def test_secrets_in_commit_messages_reach_no_bundle_file_raw_or_escaped(tmp_path, live_token):
    notices: list[str] = []
    files, repo, base, head = _bundle_files(tmp_path, notices)
    assert {"PR_TITLE", "PR_BODY.md", "ISSUE.md", "READINESS.md"} <= set(files)
    assert sum(n.endswith(".patch") for n in files) == 2
    scan(files)
    leaks.refuse_leaks(files, "t/llama.cpp")  # nothing left to refuse
    # one notice a commit, naming the patch, never the secret
    assert notices == [
        "commit 1's message held a secret (a token, a URL's credentials): "
        "written as *** in patch 0001",
        "commit 2's message held a secret (a token, a URL's credentials): "
        "written as *** in patch 0002",
    ]
    first = files[sorted(n for n in files if n.endswith(".patch"))[0]]
    assert "Pushed from https://***@git.example.org/fork.git with ***." in first
    # the redacted patches are the bundle's commits: a plain `git am` gives the tested tree
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--shared", "--no-checkout", str(repo.path), str(clone))
    git(clone, "checkout", "-q", "--detach", base)
    names = sorted(n for n in files if n.endswith(".patch"))
    for name in names:
        (tmp_path / name).write_text(files[name])
    git(clone, "am", "-q", *[str(tmp_path / n) for n in names])
    assert git(clone, "rev-parse", "HEAD^{tree}").strip() == repo.tree_of(head)


def test_a_message_without_a_secret_stays_byte_for_byte(tmp_path, live_token):
    notices: list[str] = []
    plain = ["ggml-opt : zero it\n\nA body_with_underscores.\n", "tests : x\n\nMore.\n"]
    files, *_ = _bundle_files(tmp_path, notices, messages=plain)
    assert notices == []
    assert "A body_with_underscores." in "".join(v for k, v in files.items() if ".patch" in k)


@pytest.mark.parametrize("where", ["change", "document"])
def test_a_secret_left_in_a_bundle_file_refuses_it_in_one_line(tmp_path, live_token, where):
    """A token in the change itself cannot be redacted without changing the tested tree; one an
    escaping hid from redaction (`ghp\\_...`) would render as the token: both refused, exit 20,
    the line naming the file and never the secret."""
    if where == "change":
        content = (f'const char * t = "{TOKEN}";\n', "int a = 2;\n")
        files, *_ = _bundle_files(tmp_path, [], content=content)
        name = sorted(n for n in files if n.endswith(".patch"))[0]
    else:
        files, name = {"READINESS.md": f"a line with {OTHER.replace('_', chr(92) + '_')}\n"}, ""
        name = "READINESS.md"
    with pytest.raises(BundleRefused) as e:
        leaks.refuse_leaks(files, "t/llama.cpp")
    line = str(e.value)
    assert e.value.exit_code == ExitCode.BUNDLE_REFUSED == 20
    assert line.startswith(f"t/llama.cpp/{name}: ") and "\n" not in line
    assert TOKEN not in line and OTHER not in line and "\\_" not in line


def test_escaping_never_turns_a_live_token_into_one_redaction_misses(live_token):
    for value in (TOKEN, f"see {TOKEN}", f"[{TOKEN}](x)", URL, f"{OTHER}_x"):
        shown = [
            publish.text(value),
            publish.cell(value),
            publish.code(value),
            publish.cell_with_code(f"`{value}` {value}"),
            *publish.lines_in_block([value]),
            *publish.inert_block(f"{value}\n{value}"),
            publish.link(value, URL),
        ]
        scan({"shown": "\n".join(shown)})


# ================================================================ target code confined (point 5)

PROBES = "tests.helpers.confined_probes"


def _alive(marker: str) -> list[int]:
    """The processes whose command line holds `marker` (a sleep's unique length)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            state = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != b"Z":
            found.append(int(name))
    return found


def _gone(marker: str, within: float = 5.0) -> bool:
    t0 = time.monotonic()
    while _alive(marker) and time.monotonic() - t0 < within:
        time.sleep(0.1)
    return not _alive(marker)


@pytest.fixture
def work(tmp_path):
    root = tmp_path / "work"
    root.mkdir()
    return root


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_a_target_whose_cmake_sleeps_is_stopped_at_the_deadline_with_its_sleep(tmp_path, work):
    marker = f"600.{os.getpid()}1"
    project = tmp_path / "project"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        f"cmake_minimum_required(VERSION 3.16)\nproject(p NONE)\n"
        f'file(WRITE "{tmp_path}/started" "")\n'
        f"execute_process(COMMAND sleep {marker})\n"
    )
    t0 = time.monotonic()
    inputs = {"project": str(project), "build": str(tmp_path / "build")}
    found, kept = confined.run(f"{PROBES}:configure", inputs, work, 6)
    seconds = time.monotonic() - t0
    assert found.outcome == NOT_CHECKED and not kept
    assert "ran past its 6 s deadline (GGML_PATCH_BEHAVIOUR_DEADLINE_S)" in found.detail
    assert 6 <= seconds < 20, seconds
    assert (tmp_path / "started").exists()  # the sleep had begun
    assert _gone(marker), "the CMake's sleep kept running"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_a_test_in_its_own_session_and_its_daemons_are_killed_at_the_deadline(tmp_path, work):
    """run_program starts a test in a session of its own; the test starts a child, a daemon in
    yet another session, then hangs: the deadline kills all three."""
    marker = f"61{os.getpid()}"
    script = tmp_path / "t.sh"
    script.write_text(
        f"sleep {marker}.1 &\nsetsid sleep {marker}.2 >/dev/null 2>&1 &\n"
        f": > {tmp_path}/started\nexec sleep {marker}.3\n"
    )
    inputs = {"script": str(script), "log": str(tmp_path / "t.log")}
    found, kept = confined.run(f"{PROBES}:run_test_program", inputs, work, 6)
    assert found.outcome == NOT_CHECKED and not kept and "deadline" in found.detail
    assert (tmp_path / "started").exists()
    assert _gone(marker), _alive(marker)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_a_daemon_left_behind_by_a_check_that_ended_is_killed(work):
    marker = f"62{os.getpid()}.5"
    found, kept = confined.run(f"{PROBES}:orphan", {"marker": marker}, work, 60)
    assert (found.outcome, found.detail, kept) == ("passed", "left a daemon", True)
    assert _gone(marker), _alive(marker)


def test_target_code_sees_no_secret_and_its_homes_in_its_work_folder(tmp_path, work, monkeypatch):
    user_home = tmp_path / "user-home"
    user_home.mkdir()
    secrets = {
        "GITHUB_TOKEN": TOKEN,
        "GH_TOKEN": "gho_" + "k" * 36,
        "ACTIONS_RUNTIME_TOKEN": "actions-runtime-9f8e",
        "ACTIONS_ID_TOKEN_REQUEST_URL": "https://x.example/?sig=abcd1234",
        "DB_PASSWORD": PASSWORD,
        "MY_API_SECRET": "api-secret-77aa",
        "NPM_TOKEN": "npm-token-55bb",
    }
    for k, v in {**secrets, "HOME": str(user_home), "CCACHE_DIR": str(tmp_path / "cc")}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    out = tmp_path / "seen.txt"
    found, kept = confined.run(f"{PROBES}:environment", {"out": str(out)}, work, 60)
    assert found.outcome == "passed" and kept
    seen = out.read_text()
    for name, value in secrets.items():
        assert value not in seen and f"{name}=" not in seen, name
    spawned, confined_own = seen.split("\n---\n", 1)
    for part in (spawned, confined_own):
        assert f"HOME={work / 'home'}\n" in part
        assert f"CCACHE_DIR={tmp_path / 'cc'}\n" in part  # the compile cache, named explicitly
    assert f"XDG_CACHE_HOME={work / 'home' / '.cache'}\n" in confined_own
    assert f"TMPDIR={work / 'tmp'}\n" in confined_own
    assert not any(user_home.iterdir())  # nothing written to the user's home


def test_the_default_ccache_folder_is_the_callers_named_explicitly(tmp_path, work):
    env = confined.confined_env(work, {"HOME": str(tmp_path / "u"), "PATH": "/bin"})
    assert env["CCACHE_DIR"] == str(tmp_path / "u" / ".cache" / "ccache")
    assert env["HOME"] == str(work / "home") and (work / "home").is_dir()


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "soon"])
def test_a_bad_deadline_is_one_line_exit_2(value, monkeypatch):
    monkeypatch.setenv(confined.DEADLINE_ENV, value)
    with pytest.raises(ConfigError) as e:
        confined.deadline()
    assert e.value.exit_code == ExitCode.CONFIG == 2
    assert str(e.value).startswith(f"{confined.DEADLINE_ENV}=")
    monkeypatch.setenv(confined.DEADLINE_ENV, "12.5")
    assert confined.deadline() == 12.5


def test_the_real_check_runs_in_the_confined_process(tmp_path, monkeypatch):
    """status's own behaviour check on a tiny target, through the confined process: its inputs
    (the matrix, the target, the snapshot, the rendered series) cross to it, its answer comes
    back validated and is kept."""
    from orchestrator import sources
    from orchestrator.cache import Cache
    from orchestrator.config import load_matrix
    from orchestrator.drift.behaviour import check_topic, result_file
    from orchestrator.patchset.files import load_queue

    from ..helpers.security import tiny_matrix

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    matrix = load_matrix(tiny_matrix(tmp_path))
    cache = Cache(tmp_path / "cache")
    repo = SnapshotRepo(cache.snapshots_git)
    target = matrix.target("tiny")
    snap = sources.snapshot(target.source, cache, repo)
    topic = load_queue(matrix).chosen(None)[0]
    found = check_topic(matrix, cache, repo, target, snap, topic)
    assert found.outcome == NOT_CHECKED
    assert found.detail.startswith("its test patch 0002 does not apply there: ")
    assert result_file(cache, target, topic.name).is_file()  # the tree's answer: kept
    home = cache.root / "status" / "behaviour" / "ggml" / "home"
    assert home.is_dir()  # the confined process's HOME, in its work folder


# ================================================================ the command line (point 6)
# the corpus's World: the command in this process, live tokens set, a time bound, no secret in
# any output or file written, nothing written outside the command's folders


@pytest.fixture
def world(tmp_path, monkeypatch):
    from .test_hostile_corpus import World

    return World(tmp_path, monkeypatch)


def _payloads(out: str) -> list[dict]:
    """The JSON bodies a dry run prints after each request line."""
    found, decoder = [], json.JSONDecoder()
    for i, line in enumerate(out.splitlines(keepends=True)):
        if line == "{\n":
            start = sum(len(x) for x in out.splitlines(keepends=True)[:i])
            found.append(decoder.raw_decode(out[start:])[0])
    return found


@pytest.mark.parametrize("topics", [8, 2000])
def test_drift_issue_dry_run_of_a_hostile_status_is_inert_and_bounded(world, topics):
    """A status whose profile is a team mention, whose base holds backticks and a mention, with
    up to 2,000 topics: exit 0, and the issue body the dry run would send renders inert and stays
    at most 65,000 characters, one line saying what was left out."""
    from .test_hostile_corpus import MATRIX

    world.mp.delenv("GITHUB_TOKEN")  # a dry run without it contacts nothing
    kinds = [S.UPSTREAM, S.THREE_WAY, S.CONFLICT, S.CLEAN]
    status = world.tmp / "status.json"
    row = {
        "target": "ggml-live",
        "status": S.CONFLICT,
        "detail": f"git said @octocat <b>x</b> [l](https://evil.example) {TOKEN}",
        "base": "a`b`` @octocat ```",
        "topics": {f"topic-{i:04d}": {"status": kinds[i % 4]} for i in range(topics)},
    }
    status.write_text(json.dumps({"profile": "@ggml-org/maintainers", "targets": [row]}))
    res = world.run(
        "drift-issue",
        "--matrix",
        MATRIX,
        "--cache",
        world.cache,
        "--repo",
        "o/r",
        "--dry-run",
        "--status",
        status,
        bound=30,
    )
    assert res.code == 0, res.err
    bodies = [p["body"] for p in _payloads(res.out) if "body" in p]
    assert len(bodies) == 1
    body = bodies[0]
    assert len(body) <= publish.BODY_MAX
    assert_inert(body)
    cut = [line for line in body.splitlines() if "left out of this issue" in line]
    assert len(cut) == (1 if topics == 2000 else 0), cut


def test_status_with_a_bad_behaviour_deadline_is_one_line_exit_2(world):
    from ..helpers.security import tiny_matrix

    world.mp.setenv(confined.DEADLINE_ENV, "forever")
    res = world.run("status", "--matrix", tiny_matrix(world.tmp), "--cache", world.cache)
    line = res.one_line(ExitCode.CONFIG)
    assert f"{confined.DEADLINE_ENV}='forever': expected a number of seconds above 0" in line
    # --no-behaviour runs no check: the deadline is not read
    res = world.run(
        "status",
        "--matrix",
        tiny_matrix(world.tmp),
        "--cache",
        world.cache,
        "--no-behaviour",
        may_write=(world.cache,),
        bound=60,
    )
    assert res.code in (0, 4), res.err


def _conflicting_tiny(world, cmake: str) -> Path:
    """A tiny ggml-layout target where the first topic's fix conflicts (its code is not there),
    the per-step API is, and its test patch applies: `status` runs the behaviour check, which
    configures the target's own (hostile) CMakeLists.txt."""
    from ..helpers.security import ROOT, TESTS_CMAKE, tiny_matrix

    tree = world.tmp / "tiny"
    for d in ("src", "tests", "include"):
        (tree / d).mkdir(parents=True)
    (tree / "src" / "ggml-opt.cpp").write_text("// not the code the fix changes\n")
    (tree / "include" / "ggml-opt.h").write_text(f"void {S.PER_STEP_API}(void);\n")
    (tree / "tests" / "CMakeLists.txt").write_text(TESTS_CMAKE)
    # test-opt.cpp: what the topic's test patch expects around each of its hunks
    patch = next((ROOT / "patches" / TOPIC).glob("0002-*.patch")).read_text()
    text, hunk = "", False
    for line in patch.splitlines():
        if line.startswith("@@"):
            text, hunk = text + "// upstream's own lines\n" * 5, True
        elif hunk and line[:1] in (" ", "-"):
            text += line[1:] + "\n"
        elif line.startswith("--"):
            hunk = False
    (tree / "tests" / "test-opt.cpp").write_text(text)
    (tree / "CMakeLists.txt").write_text(cmake)
    return tiny_matrix(world.tmp)


TOPIC = "accumulator-reset"


def test_status_stops_a_target_whose_cmake_sleeps_and_keeps_it_out_of_home(world):
    """The review's repro through the command line: the behaviour check configures a target
    whose CMake writes into $HOME, reads the token and sleeps. `status` ends at the deadline
    (exit 4: the conflict), says why, nothing of the target's code is left running, the user's
    HOME is untouched and no file holds the token."""
    marker = f"63{os.getpid()}.7"
    matrix = _conflicting_tiny(
        world,
        "cmake_minimum_required(VERSION 3.16)\nproject(p NONE)\n"
        'file(WRITE "$ENV{HOME}/pwned" "token=$ENV{GITHUB_TOKEN}")\n'
        f"execute_process(COMMAND sleep {marker})\n",
    )
    world.mp.setenv(confined.DEADLINE_ENV, "10")  # room for the check to reach the CMake
    t0 = time.monotonic()
    res = world.run(
        "status",
        "--matrix",
        matrix,
        "--cache",
        world.cache,
        "--json",
        "--topic",
        TOPIC,
        may_write=(world.cache,),
        bound=90,
    )
    assert res.code == ExitCode.SERIES_DOES_NOT_APPLY == 4, res.err
    assert time.monotonic() - t0 < 60
    on = json.loads(res.out)["targets"][0]["topics"][TOPIC]
    assert on["status"] == S.CONFLICT
    assert on["behaviour"]["outcome"] == NOT_CHECKED
    assert "ran past its 10 s deadline" in on["behaviour"]["detail"]
    # the CMake ran (it wrote before it slept): in its own home, without the token
    planted = list(world.cache.rglob("pwned"))
    assert len(planted) == 1 and planted[0].read_text() == "token=", planted
    assert planted[0].parent.name == "home"
    assert _gone(marker), _alive(marker)
    assert not any(world.home.iterdir())  # the user's HOME: nothing written


def test_junit_xml_redacts_a_log_tail_before_escaping_it(tmp_path, monkeypatch):
    """A password with `&` met in a source URL, then alone in a failing test's log: junit.xml
    (whose XML escaping would write `&amp;`) holds neither form."""
    from orchestrator import redact as redact_module
    from orchestrator.model.results import results_of
    from orchestrator.report.summary import write_results

    from ..helpers.tools import DATA

    secret = "pa&ss'w0rd9"  # legal in a URL's userinfo; XML writes & as &amp;
    monkeypatch.setattr(redact_module, "_SEEN", set())
    data = json.loads((DATA / "results-cpu-sample.json").read_text())
    data["cells"][0]["source"]["description"] = f"git https://u:{secret}@host/r"
    out = tmp_path / "r"
    (out / "logs").mkdir(parents=True)
    log = out / "logs" / "gate.log"
    log.write_text(f"the server said {secret}\nFAIL\n")
    record = next(r for r in data["records"] if r["variant"] == "patched")
    gate = record["tests"]["test-opt-dynamic-accum"]
    gate.update(outcome="failed", exit_code=1, failure_line="FAIL", log=str(log))
    write_results(results_of(data), out)
    xml = (out / "junit.xml").read_text()
    assert "the server said ***" in xml
    for form in (secret, html.escape(secret), html.escape(secret, quote=False)):
        assert form not in xml, form
