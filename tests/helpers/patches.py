"""The real series in patches/ and small texts the series tests share."""

import unidiff

from orchestrator.config import load_matrix
from orchestrator.model.layout import LAYOUTS, register_gate_test
from orchestrator.patchset.files import load_queue, load_series
from orchestrator.patchset.queue import Queue
from orchestrator.patchset.series import FileDiff, Series, parse_series, unified_file_diff

from .tools import ROOT

PATCH_DIR = ROOT / "patches" / "accumulator-reset"  # topic 1 of the queue


NATIVE_TEST = ROOT / "native_tests" / "test-opt-dynamic-accum.cpp"


GGML = LAYOUTS["ggml"]


LLAMA = LAYOUTS["llama.cpp"]


WHISPER = LAYOUTS["whisper.cpp"]


def real_queue() -> Queue:
    """patches/queue.yaml as the tool reads it. Tests take the queue's topics from here, never from
    a list of names: a topic added with `ggml-patch topic new` breaks none of them."""
    return load_queue(load_matrix(ROOT / "matrix.yaml"))


def queue_topics() -> list[str]:
    """The topics a run without --topic applies (the queue's active ones, or its `default:`), in
    the order they apply."""
    return [t.name for t in real_queue().chosen()]


def real_series_of_queue() -> Series:
    """The series a run without --topic applies (every topic's patches, in queue order)."""
    return load_series(load_matrix(ROOT / "matrix.yaml"))


def read_patch(name: str) -> str:
    return (PATCH_DIR / name).read_bytes().decode("utf-8")  # no newline translation


GATE_PATCH = (
    ROOT
    / "native_tests"
    / "accumulator-reset"
    / "upstream-gate"
    / "0003-tests-add-test-opt-dynamic-accum-for-per-step-gradie.patch"
)


def upstream_series(layout: str = "llama.cpp") -> Series:
    """patches/ as it is: the fix and test-opt's new cases."""
    names = sorted(p.name for p in PATCH_DIR.glob("*.patch"))
    return parse_series(layout, [(n, read_patch(n)) for n in names])


def real_series(layout: str = "llama.cpp") -> Series:
    """The fix and the gate test's own patch (registration + new file): the series the rendering
    of a registration is tested on (the bundle adds that patch once maintainers approve it)."""
    fix = sorted(PATCH_DIR.glob("0001-*.patch"))[0]
    return parse_series(
        layout,
        [
            (fix.name, read_patch(fix.name)),
            (GATE_PATCH.name, GATE_PATCH.read_bytes().decode("utf-8")),
        ],
    )


def pre_image(fd: FileDiff) -> str:
    """A file the diff applies to exactly: the hunks' old
    side at their line numbers, filler between."""
    pf = unidiff.PatchSet(fd.text)[0]
    out = []
    for hunk in pf:
        while len(out) < hunk.source_start - 1:
            out.append(f"// filler {len(out) + 1}\n")
        out += [line.value for line in hunk if line.is_context or line.is_removed]
    return "".join(out + ["// end of file\n"])


# ggml's tests/CMakeLists.txt as upstream has it: its set_property lines are over 100 characters
GGML_CMAKE = """\
add_definitions(-UNDEBUG)

#
# test-backend-ops

set(TEST_TARGET test-backend-ops)
add_executable(${TEST_TARGET} ${TEST_TARGET}.cpp)
target_link_libraries(${TEST_TARGET} PRIVATE ggml Threads::Threads)
add_test(NAME ${TEST_TARGET} COMMAND $<TARGET_FILE:${TEST_TARGET}>)
set_property(TEST ${TEST_TARGET} PROPERTY ENVIRONMENT "LLVM_PROFILE_FILE=${TEST_TARGET}.profraw")


if (NOT GGML_BACKEND_DL)
    #
    # test-opt
    set(TEST_TARGET test-opt)
    add_executable(${TEST_TARGET} ${TEST_TARGET}.cpp)
    target_link_libraries(${TEST_TARGET} PRIVATE ggml)
    add_test(NAME ${TEST_TARGET} COMMAND $<TARGET_FILE:${TEST_TARGET}>)
    set_property(TEST ${TEST_TARGET} PROPERTY ENVIRONMENT "LLVM_PROFILE_FILE=${TEST_TARGET}.profraw")

    #
    # test-quantize-fns

    set(TEST_TARGET test-quantize-fns)
    add_executable(${TEST_TARGET} ${TEST_TARGET}.cpp)
    target_link_libraries(${TEST_TARGET} PRIVATE ggml)
    add_test(NAME ${TEST_TARGET} COMMAND $<TARGET_FILE:${TEST_TARGET}>)
    set_property(TEST ${TEST_TARGET} PROPERTY ENVIRONMENT "LLVM_PROFILE_FILE=${TEST_TARGET}.profraw")
endif()
"""  # noqa: E501


class BaseFiles:
    """base_file callback that records what it was asked for."""

    def __init__(self, files: dict):
        self.files = files
        self.calls = []

    def __call__(self, path: str):
        self.calls.append(path)
        return self.files.get(path)


HDR = "From: A <a@example.com>\nSubject: [PATCH] x\n\nbody\n\n"


LINES = "".join(f"line {i}\n" for i in range(1, 31))


DIFF_CASES = {
    "insert-middle": (LINES, LINES.replace("line 10\n", "line 10\ninserted\n")),
    "delete-middle": (LINES, LINES.replace("line 15\n", "")),
    "change-first": (LINES, LINES.replace("line 1\n", "LINE ONE\n", 1)),
    "append": (LINES, LINES + "appended\n"),
    "two-hunks": (LINES, LINES.replace("line 2\n", "two\n").replace("line 28\n", "twenty-eight\n")),
    "old-no-newline-at-eof": ("a\nb", "a\nb\n"),
    "new-no-newline-at-eof": ("a\nb\n", "a\nb\nc"),
    "both-no-newline-at-eof": ("a\nb", "a\nc"),
    "from-empty": ("", "first\n"),
    "to-empty": ("only\n", ""),
    "registration": (GGML_CMAKE, register_gate_test(GGML, GGML_CMAKE)),
}


OPT = "ggml/src/ggml-opt.cpp"  # in the series' (llama.cpp) layout


def mutant_text(name: str, old: str, new: str, title: str = "no reset", path: str = OPT) -> str:
    """A mutant file (native_tests/mutants/ format) turning `old` into `new` at `path`."""
    return f"Mutant: {title}\nWhy it is wrong: {name} is wrong on purpose\n\n" + unified_file_diff(
        path, old, new
    )


TOPIC_YAML = """\
summary: a test topic
origin: tests
last_update: 2026-12-02
state: local
"""


def bare_queue(directory, topic: str = "t"):
    """A queue of one topic at `directory` (queue.yaml, the topic's topic.yaml): the topic's folder,
    for a test to put its patches in."""
    d = directory / topic
    d.mkdir(parents=True, exist_ok=True)
    (directory / "queue.yaml").write_text(f"topics: [{topic}]\n")
    (d / "topic.yaml").write_text(TOPIC_YAML)
    return d
