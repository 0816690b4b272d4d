"""The commands a contributor runs for a bundle, made in one place: PR_BODY.md and ISSUE.md show
them, and the bundle's verification (verification.py) runs their build and test lines exactly as
shown, so the two cannot drift apart. The tests are the topic's own (topic.yaml `tests:`), with
the arguments the matrix passes on a CPU; a program of native_tests/ only where the bundle
carries the patch that adds it upstream. Pure."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from ..model.layout import GATE_TEST, UPSTREAM_TEST
from ..model.testspec import BACKEND_OPS, TestSpec, programs
from ..verdicts import backend_ops

# the device test-backend-ops compares on a contributor's machine without a GPU: the CPU
# backend's ops_device (backends/base.py), as run/variants.py run_test passes it with -b
CPU_DEVICE = "CPU"
BUILD_DIR = "build"
BIN_PREFIX = f"./{BUILD_DIR}/bin/"
# a bundle's tests when its topic declares none (older records): upstream's test-opt, the gate
DEFAULT_TESTS = (TestSpec(UPSTREAM_TEST), TestSpec(GATE_TEST))


@dataclass(frozen=True)
class Commands:
    """The lines in the order a contributor types them."""

    checkout: tuple[str, ...]  # git checkout and git am: the verification's own git am does these
    build: tuple[str, ...]  # CMake's configure and build, run as they are
    tests: tuple[str, ...]  # each test program with its arguments, run as it is

    @property
    def lines(self) -> list[str]:
        return [*self.checkout, *self.build, *self.tests]

    @property
    def run_lines(self) -> list[str]:
        """What the verification runs after its git am, in the worktree."""
        return [*self.build, *self.tests]


def shown_tests(
    tests: tuple[TestSpec, ...], patch_names: list[str], natives: tuple[str, ...] = (GATE_TEST,)
) -> tuple[TestSpec, ...]:
    """The topic's declared tests as a contributor on a CPU runs them: test-backend-ops with
    `-b CPU` (as the matrix's CPU cell), a native program only where a patch of the bundle adds
    it (its name in the patch's file name, as the gate's upstream patch has it)."""
    out: list[TestSpec] = []
    for t in tests or DEFAULT_TESTS:
        if t.program in natives and not any(t.program in n for n in patch_names):
            continue  # the project's own test: not in the contributor's tree
        args = backend_ops.backend_args(t.args, CPU_DEVICE) if t.program == BACKEND_OPS else t.args
        out.append(TestSpec(t.program, tuple(args)))
    return tuple(dict.fromkeys(out))


def build_option(layout: str) -> str:
    """The CMake option that builds the tests in `layout`'s own CMake project."""
    return "GGML_BUILD_TESTS" if layout == "ggml" else "LLAMA_BUILD_TESTS"


def commands(
    layout: str,
    base: str,
    applied: list[str],
    tests: tuple[TestSpec, ...],
    prior: tuple[str, ...] = (),
) -> Commands:
    """`applied` on `base` (after `prior`: the patches of the pull requests it follows), then
    `tests` (shown_tests) built with the project's own CMake and run: only their targets built."""
    return Commands(
        checkout=(
            f"git checkout --detach {base}",
            *([f"git am {' '.join(prior)}  # the pull requests this one follows"] if prior else []),
            f"git am {' '.join(applied)}",
        ),
        build=(
            f"cmake -B {BUILD_DIR} -D{build_option(layout)}=ON",
            f"cmake --build {BUILD_DIR} --target {' '.join(programs(tests))}",
        ),
        tests=tuple(f"{BIN_PREFIX}{t.name}" for t in tests),
    )


def argv(line: str) -> list[str]:
    """A shown line as the argv the verification runs (never through a shell)."""
    return shlex.split(line)


def program_of(line: str) -> str:
    """The test program a test line runs ("./build/bin/test-opt" -> "test-opt")."""
    first = argv(line)[0]
    return first[len(BIN_PREFIX) :] if first.startswith(BIN_PREFIX) else first
