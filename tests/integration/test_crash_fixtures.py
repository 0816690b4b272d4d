"""Test binaries that abort, segfault or hang (compiled here) are each named for what they did,
and none of them can make a negative control count as killed."""

import shutil
import subprocess

import pytest

from orchestrator.run.testrun import run_program
from orchestrator.verdicts import classify

LINE = 'puts("device=CPU opt_period=1: FAIL at step 2: w=0.25 expected 0.5"); fflush(stdout);'
PROGRAMS = {
    "abort": f"#include <stdio.h>\n#include <stdlib.h>\nint main(void) {{ {LINE} abort(); }}\n",
    "segfault": f"#include <stdio.h>\nint main(void) {{ {LINE} "
    "volatile int *p = 0; return *p; }\n",
    "hang": "#include <stdio.h>\n#include <unistd.h>\nint "
    f"main(void) {{ {LINE} for (;;) sleep(1); }}\n",
    "own-check": f"#include <stdio.h>\nint main(void) {{ {LINE} return 1; }}\n",
    "silent-fail": "int main(void) { return 1; }\n",
}


@pytest.fixture(scope="module")
def binaries(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler (cc) to build the fixture binaries")
    d = tmp_path_factory.mktemp("bins")
    out = {}
    for name, src in PROGRAMS.items():
        (d / f"{name}.c").write_text(src)
        subprocess.run([cc, "-O0", "-o", str(d / name), str(d / f"{name}.c")], check=True)
        out[name] = d / name
    return out


@pytest.mark.parametrize(
    "name,outcome,signal,verdict",
    [
        ("abort", "crashed", "SIGABRT", "invalid"),
        ("segfault", "crashed", "SIGSEGV", "invalid"),
        ("hang", "timeout", None, "invalid"),
        ("silent-fail", "failed", None, "invalid"),
        ("own-check", "failed", None, "killed"),
    ],
)
def test_classified_by_name(binaries, tmp_path, name, outcome, signal, verdict):
    r = run_program(name, [str(binaries[name])], 1.5, {}, tmp_path / f"{name}.log")
    assert classify.outcome(r.exit_code, r.timed_out) == outcome
    assert r.signal == signal
    v = classify.control_verdict(
        True, classify.outcome(r.exit_code, r.timed_out), r.exit_code, r.output, "passed"
    )
    assert v.verdict == verdict, v
    if verdict == "invalid" and signal:
        assert signal in v.reason
    if name == "hang":
        assert "timed out" in v.reason
