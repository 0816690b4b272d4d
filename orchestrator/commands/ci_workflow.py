"""ggml-patch ci-workflow: write (or --check) the GitHub
Actions workflows generated from matrix.yaml."""

from __future__ import annotations

import re
import shlex
import sys

from ..errors import ConfigError, ExitCode
from . import repeatable

HELP = (
    "write the GitHub Actions workflows generated from matrix.yaml (matrix, drift, the project's "
    "CI; --check: fail if the committed ones are stale)"
)
# an action pinned to a commit, with its version comment
_PIN = re.compile(r"@[0-9a-f]{40}(?: # [^\n]*)?")


def add_arguments(p) -> None:
    p.add_argument(
        "--output",
        metavar="PATH",
        help="where the matrix workflow goes (default: "
        ".github/workflows/ggml-patch-matrix.yml beside matrix.yaml; the other files go "
        "beside it when it is in a .github/workflows/ folder)",
    )
    repeatable(p, "--profile", "only this profile's cells (repeatable; default: every profile)")
    p.add_argument(
        "--check", action="store_true", help="write nothing; exit non-zero if a file differs"
    )


def regenerate_command(args) -> str:
    """The command that reproduces this output, for the --check
    message (--matrix after the command's name)."""
    words = ["ggml-patch", "ci-workflow"] + (
        ["--matrix", args.matrix] if args.matrix != "matrix.yaml" else []
    )
    words += (["--output", args.output] if args.output else []) + [
        w for p in args.profile for w in ("--profile", p)
    ]
    return shlex.join(words)


def run(args, matrix, cache) -> ExitCode:
    from ..ci.generate import generated, orphans
    from ..ci.workflow import legs
    from ..outdir import writable_file

    # a folder given: one line, exit 2
    output = writable_file(args.output, "--output") if args.output else None
    files = generated(matrix, output, args.profile or None)
    out, *others = files
    n, also = len(legs(matrix, args.profile or None)), "".join(f"; {p}" for p in others)
    for warning in unschedulable_targets(matrix, args.profile or None):
        print(f"ggml-patch: warning: {warning}", file=sys.stderr)
    if args.check:
        stale = []
        for path, text in files.items():
            problem = _stale(path, text, matrix.path)
            if problem:
                stale.append(problem)
        for path in orphans(matrix, output):
            stale.append(f"{path}: generated for a self-hosted runner matrix.yaml no longer names")
        if stale:
            verb = "generate" if all(p.endswith(": missing") for p in stale) else "regenerate"
            raise ConfigError("; ".join(stale) + f"; {verb} it with `{regenerate_command(args)}`")
        print(f"{out}: up to date ({n} legs){also}")
        return ExitCode.OK
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for path in orphans(matrix, output):
        path.unlink()  # ours (generated), for runners matrix.yaml no longer names
        also += f"; {path} removed (no self-hosted runner)"
    print(f"{out}: {n} legs written from {matrix.path}{also}")
    return ExitCode.OK


def _stale(path, text: str, matrix_path) -> str:
    """Why a committed file differs from what would be written ('' when it does not)."""
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return f"{path}: missing"
    if current == text:
        return ""
    if _PIN.sub("@PIN", current) == _PIN.sub("@PIN", text):
        return (
            f"{path}: its action pins differ from the other workflows' (a partial Dependabot bump?)"
        )
    return f"{path}: stale (does not match {matrix_path})"


def unschedulable_targets(matrix, profiles=None) -> list[str]:
    """Targets no GitHub runner can fetch (a `local` folder, a
    file:// URL): `source unavailable` on every run."""
    from ..ci.workflow import all_cells

    out = []
    for name in dict.fromkeys(t for _, t, _ in all_cells(matrix, profiles)):
        src = matrix.target(name).source
        url = str(src.get("url", "")) if src.kind == "git" else ""
        if src.kind == "local" or url.startswith("file:") or (url and "://" not in url):
            where = f"{matrix.path}:{matrix.lines.get(('targets', name, 'source'), 1)}"
            out.append(
                f"{where}: targets.{name}: a {src.kind} source on this "
                "machine; a GitHub runner cannot fetch it"
            )
    return out
