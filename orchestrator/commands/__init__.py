"""One module per `ggml-patch` command, each with the same shape:

    HELP = "one line for --help"
    def add_arguments(parser: argparse.ArgumentParser) -> None
    def run(args: argparse.Namespace, matrix: Matrix, cache: Cache) -> ExitCode

`--matrix` and `--cache` are added to every command by cli.py. Register a new command by
adding its module name to COMMANDS. A command imports its work inside `run()`: cli.py loads every
command module to build `--help`, so what a module imports at its top costs every start-up
(tests/unit/test_structure.py holds every other module to a reason per such import).
"""

COMMANDS = [
    "matrix",
    "export",
    "ci-workflow",
    "merge-results",
    "bundle",
    "pr",
    "status",
    "refresh",
    "drift-issue",
    "resolve-refs",
    "evidence",
]
