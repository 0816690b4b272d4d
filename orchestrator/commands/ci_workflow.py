"""ggml-patch ci-workflow: write (or --check) the GitHub Actions workflows generated from matrix.yaml."""

from __future__ import annotations

import shlex

from ..errors import ConfigError, ExitCode

HELP = (
    "write the GitHub Actions workflows generated from matrix.yaml (matrix, drift, the project's CI; "
    "--check: fail if the committed ones are stale)"
)


def add_arguments(p) -> None:
    p.add_argument(
        "--output",
        metavar="PATH",
        help="where the matrix workflow goes (default: .github/workflows/ggml-patch-matrix.yml beside "
        "matrix.yaml; the other files go beside it when it is in a .github/workflows/ folder)",
    )
    p.add_argument(
        "--profile",
        action="append",
        default=[],
        metavar="NAME",
        help="only this profile's cells (repeatable; default: every profile)",
    )
    p.add_argument("--check", action="store_true", help="write nothing; exit non-zero if a file differs")


def regenerate_command(args) -> str:
    """The command that reproduces this output, for the --check message (copy-paste runnable:
    --matrix is an option of the command, after its name)."""
    words = ["ggml-patch", "ci-workflow"]
    if args.matrix != "matrix.yaml":
        words += ["--matrix", args.matrix]
    if args.output:
        words += ["--output", args.output]
    for p in args.profile:
        words += ["--profile", p]
    return shlex.join(words)


def run(args, matrix, cache) -> ExitCode:
    from ..ci.generate import generated
    from ..ci.workflow import legs
    from ..outdir import writable_file

    output = writable_file(args.output, "--output") if args.output else None  # a folder given: one line, exit 2
    files = generated(matrix, output, args.profile or None)
    out = next(iter(files))
    n = len(legs(matrix, args.profile or None))
    if args.check:
        for path, text in files.items():
            try:
                current = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                raise ConfigError(f"{path}: missing; generate it with `{regenerate_command(args)}`") from None
            if current != text:
                raise ConfigError(
                    f"{path}: stale (does not match {matrix.path}); regenerate it with `{regenerate_command(args)}`"
                )
        print(f"{out}: up to date ({n} legs)" + "".join(f"; {p}" for p in list(files)[1:]))
        return ExitCode.OK
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    print(f"{out}: {n} legs written from {matrix.path}" + "".join(f"; {p}" for p in list(files)[1:]))
    return ExitCode.OK
