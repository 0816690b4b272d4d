"""The `ggml-patch` command line. Every user-facing error is one line and a distinct exit code."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
from typing import NoReturn, Optional

from .commands import COMMANDS, add_seconds, repeatable
from .errors import ExitCode, GgmlPatchError
from .redact import RedactingStream, redact


def _command(name: str):
    return importlib.import_module(f".commands.{name.replace('-', '_')}", __package__)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: the usage block is what --help is for."""

    def error(self, message: str) -> NoReturn:
        self.exit(int(ExitCode.CONFIG), f"ggml-patch: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument(
        "--matrix", default="matrix.yaml", metavar="PATH", help="matrix file (default: matrix.yaml)"
    )
    common.add_argument(
        "--cache",
        metavar="DIR",
        help="cache directory (default: $GGML_PATCH_CACHE or ~/.cache/ggml-patch)",
    )
    add_seconds(
        common,
        "--lock-timeout",
        None,
        "give up (exit 10) when another run holds a lock this tool needs for S seconds "
        "(default: wait, saying who holds it)",
        zero=True,
    )
    common.add_argument(
        "--pins",
        metavar="FILE",
        help="git targets pinned to commits (`ggml-patch "
        "resolve-refs --out FILE`): one commit per CI run",
    )
    repeatable(
        common,
        "--pin",
        "pin one git target to a commit (repeatable; wins over --pins)",
        "TARGET=COMMIT",
    )
    about = (
        "Carry a queue of fixes to ggml's optimizer into ggml, llama.cpp and forks, and prove "
        "each on every backend."
    )
    p = _Parser(prog="ggml-patch", description=about)
    p.add_argument("--version", action=_Version, help="show the version and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        mod = _command(name)
        mod.add_arguments(
            sub.add_parser(name, parents=[common], help=mod.HELP, description=mod.HELP)
        )
    return p


def main(argv: Optional[list[str]] = None) -> int:
    # redaction at the edge: every line printed on stdout and stderr, by any route, is redacted
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(sys.stdout), RedactingStream(sys.stderr)
    try:
        # SIGTERM unwinds like Ctrl-C: locks released, tree restored
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        return int(_dispatch(_parser().parse_args(argv)))
    except GgmlPatchError as e:
        print(f"ggml-patch: error: {_one_line(redact(str(e)))}", file=sys.stderr)
        return int(e.exit_code)
    except KeyboardInterrupt:
        print("ggml-patch: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except Exception as e:  # a bug in the tool: still one line, the traceback on request
        if os.environ.get("GGML_PATCH_DEBUG"):
            raise
        print(
            f"ggml-patch: internal error: {type(e).__name__}: {_one_line(redact(str(e)))} "
            "(set GGML_PATCH_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return int(ExitCode.TOOL_ERROR)
    finally:
        for s in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                s.flush()
        sys.stdout, sys.stderr = streams


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ggml-patch")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


class _Version(argparse.Action):
    """--version, the installed version looked up only when asked (importlib.metadata is a
    noticeable share of every other command's start-up)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"ggml-patch {_version()}")  # on stdout, as argparse's own version action
        parser.exit()


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _dispatch(args: argparse.Namespace) -> ExitCode:
    from .cache import Cache, default_cache_dir
    from .config import load_matrix
    from .errors import ConfigError
    from .outdir import cache_problem, writable_dir
    from .pins import collect, pinned

    command = _command(args.command)
    # drift-issue reads only its own inputs: no matrix, no cache
    if not getattr(command, "NEEDS_MATRIX", True):
        return command.run(args, None, None)
    # user errors first, before any work: the cache must be a folder we can write (not a file)
    # refuses GGML_PATCH_CACHE='' even with --cache: backends read it too
    default = default_cache_dir()
    option = "--cache" if args.cache else "GGML_PATCH_CACHE"
    root = writable_dir(args.cache or default, option)
    why = cache_problem(root)  # never a folder of the user's: the cache's tmp/ is cleaned below
    if why:
        raise ConfigError(f"{option} {why}")
    matrix = pinned(load_matrix(args.matrix), collect(args.pins, args.pin))
    if getattr(args, "topic", None):  # --topic: an unknown or inactive one is one line, exit 2
        from .patchset.files import load_queue

        load_queue(matrix).chosen(args.topic)
    cache = Cache(root, lock_timeout=args.lock_timeout)
    cache.clean_scratch()  # what a killed run left in <cache>/tmp/
    return command.run(args, matrix, cache)
