"""Issue 45: tests read the queue from patches/queue.yaml, they do not list its topics. A copy of
this checkout gets one more topic with `ggml-patch topic new` (as a contributor adds one), then
the tests that read the real queue run there, on the copy's own tool and queue: all pass."""

import os
import subprocess
import sys
from pathlib import Path

import yaml

from ..helpers.tools import ROOT, git

NAME = "added-topic"
OPT = "ggml/src/ggml-opt.cpp"
TEST = "tests/test-opt.cpp"
# the tests that read the real queue: they call a helper of tests/helpers/patches.py, or read
# patches/queue.yaml themselves (all but this one)
READERS = ("queue_topics(", "real_queue(", 'ROOT / "patches" / "queue.yaml"')
# and those that export the whole queue through a matrix of their own
ALSO = ("tests/integration/test_outdir.py",)


def _copy_of_this_checkout(dest: Path) -> None:
    """The checkout's files (tracked and new, not ignored): the tool, its tests, the queue."""
    listed = git(ROOT, "ls-files", "-co", "--exclude-standard", "-z").split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(src.read_bytes())


def _fork(path: Path) -> Path:
    """A fork whose last two commits fix ggml-opt.cpp and add the fix's case to test-opt.cpp."""
    (path / "ggml" / "src").mkdir(parents=True)
    (path / "tests").mkdir()
    (path / OPT).write_text("int ggml_opt_added(void) {\n    return 0;\n}\n")
    (path / TEST).write_text("int main(void) {\n    return 0;\n}\n")
    git(path, "init", "-q", "-b", "master")
    git(path, "add", ".")
    git(path, "commit", "-qm", "base")
    (path / OPT).write_text("int ggml_opt_added(void) {\n    return 1;\n}\n")
    git(path, "commit", "-qam", "ggml-opt : return 1 from ggml_opt_added")
    (path / TEST).write_text(
        "static std::pair<int, int> test_added_topic(void) {\n"
        "    return std::make_pair(ggml_opt_added(), 1);\n}\n"
        "int main(void) {\n    return test_added_topic().first != 1;\n}\n"
    )
    git(path, "commit", "-qam", "tests : add test_added_topic")
    return path


def test_a_topic_added_with_topic_new_breaks_no_test_that_reads_the_queue(tmp_path):
    copy = tmp_path / "project"
    _copy_of_this_checkout(copy)
    env = {**os.environ, "PYTHONPATH": str(copy)}  # the copy's tool and tests, not this one's
    fork = _fork(tmp_path / "fork")
    new = subprocess.run(
        [sys.executable, "-m", "orchestrator", "topic", "new", NAME, "--from", "HEAD~2..HEAD"]
        + ["--repo", str(fork), "--matrix", str(copy / "matrix.yaml")]
        + ["--cache", str(tmp_path / "cache")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert new.returncode == 0, new.stderr
    queue = yaml.safe_load((copy / "patches" / "queue.yaml").read_text(encoding="utf-8"))
    shipped = yaml.safe_load((ROOT / "patches" / "queue.yaml").read_text(encoding="utf-8"))
    assert queue["topics"] == [*shipped["topics"], NAME]
    readers = {
        str(p.relative_to(copy))
        for tier in ("unit", "integration")
        for p in (copy / "tests" / tier).glob("test_*.py")
        if p.name != Path(__file__).name
        and any(r in p.read_text(encoding="utf-8") for r in READERS)
    }
    readers = sorted(readers | set(ALSO))
    # the ones this issue changed, at least: a rename must not empty the selection
    assert {"tests/unit/test_queue.py", "tests/integration/test_bench_plan.py"} <= set(readers)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *readers],
        cwd=copy,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "failed" not in run.stdout
