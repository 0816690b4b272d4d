"""The fixed costs of one variant (issue 24, point 4): what the control and a mutant pay besides the
compile, the link and the test run, before and after, in a built cell of the tool's cache.

Each row runs a piece `--repeat` times with the tree left as it was (no-op builds: ninja finds
nothing to do), quiet and under two busy loops of its own, and reports the median in milliseconds:

    ninja no-op (by hand)            ninja -C BUILD -j2 GATE
    cmake --build no-op (before)     cmake --build BUILD -j2 --target GATE
    control revert+restore (before)  git diff BASE HEAD -- FIX | git apply -R; git checkout
    HEAD -- FIX control revert+restore (after)   git restore --source=BASE --worktree -- FIX;
    the bytes written back mutant restore (before)          git cat-file -e HEAD:FIX; git
    checkout HEAD -- FIX mutant restore (after)           the bytes written back (after a
    change) process start                    /bin/true

Usage: python benchmarks/profile_variant.py CELL_DIR
[--repeat N]   (CELL_DIR: <cache>/cells/ggml-cpu)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench import BusyLoops, load_note  # noqa: E402

from orchestrator.run.cmake import cmake_exe, ninja_exe  # noqa: E402

GATE = "test-opt-dynamic-accum"


def run(*argv: str, cwd=None, input=None) -> None:
    subprocess.run(argv, cwd=cwd, input=input, capture_output=True, check=True, text=True)


def pieces(cell: Path) -> dict:
    src, build = cell / "src", cell / "build"
    base = json.loads((cell / "state.json").read_text())["base"]
    fix = "src/ggml-opt.cpp" if (src / "src" / "ggml-opt.cpp").exists() else "ggml/src/ggml-opt.cpp"
    patched = (src / fix).read_bytes()

    def control_before():
        diff = subprocess.run(
            ["git", "diff", "--full-index", base, "HEAD", "--", fix],
            cwd=src,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        run("git", "apply", "-R", cwd=src, input=diff)
        run("git", "checkout", "HEAD", "--", fix, cwd=src)

    def control_after():
        run("git", "restore", f"--source={base}", "--worktree", "--", fix, cwd=src)
        (src / fix).write_bytes(patched)

    def mutant_before():
        run("git", "cat-file", "-e", f"HEAD:{fix}", cwd=src)
        run("git", "checkout", "HEAD", "--", fix, cwd=src)

    def mutant_after():
        if (src / fix).read_bytes() != patched:
            (src / fix).write_bytes(patched)

    def noop_ninja():
        run(ninja_exe(), "-C", str(build), "-j2", GATE)

    def noop_cmake():
        run(cmake_exe(), "--build", str(build), "-j", "2", "--target", GATE)

    return {
        "ninja no-op (by hand, and the tool after)": noop_ninja,
        "cmake --build no-op (the tool before)": noop_cmake,
        "control revert+restore, before": control_before,
        "control revert+restore, after": control_after,
        "mutant restore, before": mutant_before,
        "mutant restore, after": mutant_after,
        "process start (/bin/true)": lambda: run("/bin/true"),
    }


def median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times) * 1000, 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cell", type=Path)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    ps = pieces(args.cell)
    ps[next(iter(ps))]()  # settle: the first no-op build may still have something to do
    out = {}
    for loops in (0, 2):
        with BusyLoops(loops):
            time.sleep(1 if loops else 0)
            out[f"{loops} busy loops"] = {
                "load": load_note(loops)["loadavg"],
                **{name: median_ms(fn, args.repeat) for name, fn in ps.items()},
            }
    names = list(ps)
    print("| piece (median ms) | " + " | ".join(out) + " |")
    print("|---|" + "---|" * len(out))
    for n in names:
        print(f"| {n} | " + " | ".join(str(v[n]) for v in out.values()) + " |")
    print("load average (1, 5, 15 min): " + "; ".join(f"{k}: {v['load']}" for k, v in out.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
