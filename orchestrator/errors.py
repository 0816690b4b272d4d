"""Fatal error classes, one exit code each (listed in the README)."""
from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    CONFIG = 2  # matrix.yaml, the series or the command line is wrong
    SOURCE_UNAVAILABLE = 3  # a source could not be fetched or failed its checksum
    SERIES_DOES_NOT_APPLY = 4
    BUILD_FAILED = 5
    EXPECTATIONS_NOT_MET = 6  # a patched test failed
    CONTROL_NOT_KILLED = 7  # the gate test did not fail without the fix
    TOOL_ERROR = 8  # the tool itself failed (a bug, or the environment)
    INTERRUPTED = 130


class GgmlPatchError(Exception):
    """An error the user can act on: printed as one line, exits with `exit_code`."""

    exit_code = ExitCode.TOOL_ERROR


class ConfigError(GgmlPatchError):
    exit_code = ExitCode.CONFIG


class SourceUnavailable(GgmlPatchError):
    exit_code = ExitCode.SOURCE_UNAVAILABLE


class SeriesDoesNotApply(GgmlPatchError):
    exit_code = ExitCode.SERIES_DOES_NOT_APPLY


class BuildFailed(GgmlPatchError):
    exit_code = ExitCode.BUILD_FAILED


class ToolError(GgmlPatchError):
    exit_code = ExitCode.TOOL_ERROR
