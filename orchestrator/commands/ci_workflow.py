"""ggml-patch ci-workflow: write (or --check) the GitHub Actions workflow generated from matrix.yaml."""
from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError, ExitCode

HELP = "write the GitHub Actions workflow generated from matrix.yaml (--check: fail if the committed one is stale)"


def add_arguments(p) -> None:
    p.add_argument("--output", metavar="PATH",
                   help="where the workflow goes (default: .github/workflows/ggml-patch-matrix.yml beside matrix.yaml)")
    p.add_argument("--profile", action="append", default=[], metavar="NAME",
                   help="only this profile's cells (repeatable; default: every profile)")
    p.add_argument("--check", action="store_true", help="write nothing; exit non-zero if the file differs")


def _regenerate_command(args) -> str:
    """The command that reproduces this output, for the --check message."""
    words = ["ggml-patch"]
    if args.matrix != "matrix.yaml":
        words += ["--matrix", args.matrix]
    words.append("ci-workflow")
    if args.output:
        words += ["--output", args.output]
    for p in args.profile:
        words += ["--profile", p]
    return " ".join(words)


def _outputs(args, matrix) -> dict[Path, str]:
    """The workflow, and beside it (in a .github/workflows/ folder) the actionlint config that
    declares matrix.yaml's self-hosted runner labels."""
    from ..ci.workflow import DEFAULT_PATH, actionlint_config, workflow_yaml

    out = Path(args.output) if args.output else matrix.path.parent / DEFAULT_PATH
    files = {out: workflow_yaml(matrix, args.profile or None)}
    if out.parent.name == "workflows" and out.parent.parent.name == ".github":
        files[out.parent.parent / "actionlint.yaml"] = actionlint_config(matrix)
    return files


def run(args, matrix, cache) -> ExitCode:
    from ..ci.workflow import legs

    files = _outputs(args, matrix)
    out = next(iter(files))
    n = len(legs(matrix, args.profile or None))
    if args.check:
        for path, text in files.items():
            try:
                current = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                raise ConfigError(f"{path}: missing; generate it with `{_regenerate_command(args)}`") from None
            if current != text:
                raise ConfigError(f"{path}: stale (does not match {matrix.path}); regenerate it with "
                                  f"`{_regenerate_command(args)}`")
        print(f"{out}: up to date ({n} legs)")
        return ExitCode.OK
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    print(f"{out}: {n} legs written from {matrix.path}" + "".join(f"; {p}" for p in list(files)[1:]))
    return ExitCode.OK
