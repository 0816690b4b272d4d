"""A test that judges a topic, as topic.yaml declares it: a test program (a CMake target of
upstream's tests/, e.g. test-opt, or of native_tests/, e.g. test-opt-dynamic-accum) and its
arguments, one string ("test-backend-ops -o SOFT_MAX"). Pure."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from ..errors import ConfigError

# upstream's cross-backend check: each backend's ops against the CPU reference
BACKEND_OPS = "test-backend-ops"
PROGRAM = re.compile(r"^test-[a-z0-9][a-z0-9_-]*$")
# an argument: printable ASCII without quotes (it is never given to a shell, but it is shown)
_ARG = re.compile(r"^[\x21-\x7e]+$")


@dataclass(frozen=True)
class TestSpec:
    """One declared test: the program the build makes and the arguments it runs with."""

    __test__ = False  # not a pytest class

    program: str
    args: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """How results, logs and messages name it: the program, then its arguments."""
        return " ".join((self.program, *self.args))

    def __str__(self) -> str:
        return self.name

    @classmethod
    def parse(cls, text: str) -> TestSpec:
        """ "test-backend-ops -o SOFT_MAX" -> TestSpec; a ConfigError (one line) otherwise."""
        try:
            words = shlex.split(text)
        except ValueError as e:
            raise ConfigError(f"{text!r}: {e}") from None
        if not words:
            raise ConfigError("an empty test (expected a test program, e.g. test-opt)")
        program, *args = words
        if not PROGRAM.match(program):
            raise ConfigError(
                f"{program!r} is not a test program (expected test-<name>, a target of "
                "upstream's tests/ or of native_tests/)"
            )
        for a in args:
            if not _ARG.match(a):
                raise ConfigError(f"{text!r}: argument {a!r} is not printable ASCII without spaces")
        return cls(program, tuple(args))


def programs(tests: tuple[TestSpec, ...]) -> tuple[str, ...]:
    """The programs to build for `tests`, each once, in order."""
    return tuple(dict.fromkeys(t.program for t in tests))
