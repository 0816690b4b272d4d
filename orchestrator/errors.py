"""Fatal error classes, one exit code each (listed in the README)."""

from __future__ import annotations

import enum

from .publish import plain
from .redact import redact


class ExitCode(enum.IntEnum):
    OK = 0
    CONFIG = 2  # matrix.yaml, the series or the command line is wrong
    SOURCE_UNAVAILABLE = 3  # a source could not be fetched or failed its checksum
    SERIES_DOES_NOT_APPLY = 4
    BUILD_FAILED = 5
    EXPECTATIONS_NOT_MET = 6  # a patched test failed
    CONTROL_NOT_KILLED = 7  # the gate test did not fail without the fix
    TOOL_ERROR = 8  # the tool itself failed (a bug, or the environment)
    # a backend named by --require-backend could not run here (it would have been a skip)
    BACKEND_MISSING = 9
    # another run held a lock past --lock-timeout (not a source problem: CI fails on it)
    LOCK_TIMED_OUT = 10
    # 20-29: the upstream bundle and the pull request (a block
    # of their own: other commands add codes too)
    # the results do not support a pull request (control survived, a cell failed, stale series)
    BUNDLE_REFUSED = 20
    PUSH_FAILED = 21  # git push (or fetching the base) from/to the fork failed
    GITHUB_AUTH = 22  # 401 bad credentials, or 403 without a rate limit (missing permission)
    # 422: GitHub refused the request (pr: a pull request already exists for the branch)
    PR_REJECTED = 23
    RATE_LIMITED = 24  # 403/429 with the rate limit exhausted
    GITHUB_UNREACHABLE = 25  # connection refused, DNS failure or timeout
    GITHUB_ERROR = 26  # any other unexpected answer from the GitHub API
    # `pr --open` on a target whose submit is manual or none: the steps are printed instead
    SUBMIT_MANUAL = 27
    INTERRUPTED = 130


class GgmlPatchError(Exception):
    """An error the user can act on: printed as one line, exits with `exit_code`. Its message is
    redacted when it is made (credentials in URLs, GITHUB_TOKEN), so no route can print a secret."""

    exit_code = ExitCode.TOOL_ERROR

    def __init__(self, message: object = "", *args: object):
        # control characters shown (\x1b), not sent to the terminal; line breaks kept
        super().__init__(plain(redact(str(message)), newlines=True), *args)


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


class BundleRefused(GgmlPatchError):
    exit_code = ExitCode.BUNDLE_REFUSED


class PushFailed(GgmlPatchError):
    exit_code = ExitCode.PUSH_FAILED


class GitHubAuthFailed(GgmlPatchError):
    exit_code = ExitCode.GITHUB_AUTH


class GitHubRejected(GgmlPatchError):
    exit_code = ExitCode.PR_REJECTED


class RateLimited(GgmlPatchError):
    exit_code = ExitCode.RATE_LIMITED


class GitHubUnreachable(GgmlPatchError):
    exit_code = ExitCode.GITHUB_UNREACHABLE


class GitHubError(GgmlPatchError):
    exit_code = ExitCode.GITHUB_ERROR


class LockTimedOut(GgmlPatchError):
    exit_code = ExitCode.LOCK_TIMED_OUT


class SubmissionNotAutomated(GgmlPatchError):
    exit_code = ExitCode.SUBMIT_MANUAL


class BundleVerificationFailed(GgmlPatchError):
    """The bundle's series, applied to a fresh base, did not pass its tests."""

    exit_code = ExitCode.EXPECTATIONS_NOT_MET
