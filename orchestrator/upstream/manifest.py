"""A bundle's manifest.json, declared once: `bundle` writes it, `pr` reads it back. It is untrusted
input when read (it comes from disk, maybe from someone else): every field is validated before
use. Commits are 40-hex ids, the target is a target name (never '.', '..' or a path), file names
stay inside the bundle folder, digests are sha256, URLs are URLs. One line on the first problem
(exit 2), before anything is touched."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional, Union

from pydantic import ConfigDict, Field, StringConstraints

from ..errors import ConfigError
from ..model.results import Provenance
from ..model.values import (
    Commit,
    Count,
    ExitStatus,
    IsoDate,
    Name,
    ProcessStatus,
    Seconds,
    Sha256,
    Text,
    TextLine,
)
from ..records import Record, parse
from ..urls import git_url_problem
from ..verdicts.known_limits import KnownLimit

LayoutName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._-]+$")]
PULL_REQUEST, VERIFY_ONLY = "pull-request", "verify-only"
DEFAULT_MAX_COMMENT_LINES = 2  # ggml-patch's own standard where the target states none


# ---------------------------------------------------- the target's policy (upstream/policy.py)


class Citation(Record):
    """A policy file's line a rule cites (or matrix.yaml's `upstream:` line)."""

    model_config = ConfigDict(frozen=True)  # hashable: a rule's citations are deduplicated

    file: TextLine
    line: Count
    text: TextLine

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


class Role(Record):
    NULLS = frozenset({"changes_go_to"})

    kind: TextLine  # pull-request | verify-only
    text: Text
    changes_go_to: Optional[TextLine] = None


class Rule(Record):
    """A policy rule, in memory and in the manifest: its value and the lines that state it."""

    model_config = ConfigDict(frozen=True)
    NULLS = frozenset({"value"})

    # None or False: the files state no such rule
    value: Union[None, bool, Count, TextLine, Role] = None
    citations: tuple[Citation, ...] = ()

    def __init__(
        self, value: Union[None, bool, int, str, Role] = None, citations: tuple[Citation, ...] = ()
    ) -> None:
        # positional, as the policy code writes rules; a dict: mypy's pydantic plugin sees no
        # fields on Record
        super().__init__(**{"value": value, "citations": citations})

    # data (a manifest read back) is validated as a plain record, not through __init__, so the
    # values' rules see the read's context and refuse what they would repair (model.values)
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    def cited(self, n: int = 2) -> str:
        return ", ".join(f"{e.file}:{e.line}" for e in self.citations[:n])


class Heading(Record):
    text: TextLine
    line: Count


class TemplateInfo(Record):
    NULLS = frozenset({"disclosure"})

    file: TextLine
    headings: list[Heading]
    fixed_sections: list[TextLine]
    disclosure: Optional[Citation] = None


class Policy(Record):
    """A target's policy as manifest.json holds it (policy.DerivedPolicy adds the parsed template,
    in memory only)."""

    NULLS = frozenset({"info"})

    target: TextLine
    base_commit: TextLine
    files: dict[TextLine, bool]  # each policy file looked for: present or not
    info: Optional[TemplateInfo] = Field(default=None, alias="template")
    repo: Rule  # OWNER/NAME the pull request goes to
    submit: Rule  # manual | api | none
    role: Rule  # Role
    rules: dict[str, Rule]

    @property
    def role_value(self) -> Role:
        assert isinstance(self.role.value, Role)  # derive() gives every policy one
        return self.role.value

    @property
    def takes_pull_request(self) -> bool:
        """Not a target verified through another's sync (a manifest's role may be anything)."""
        return not isinstance(self.role.value, Role) or self.role.value.kind == PULL_REQUEST

    def rule(self, name: str) -> Rule:
        return self.rules.get(name, Rule(None))

    @property
    def max_comment_lines(self) -> int:
        stated = self.rule("max_comment_lines").value
        return stated if isinstance(stated, int) and stated else DEFAULT_MAX_COMMENT_LINES


# ---------------------------------------------------------------- readiness (upstream/readiness.py)

PASS, WARN, FAIL = "pass", "warn", "fail"


class Check(Record):
    """One readiness check (pass, warn or fail): where it applies and the policy lines it
    enforces."""

    model_config = ConfigDict(frozen=True)

    name: TextLine
    status: TextLine
    detail: Text
    where: tuple[TextLine, ...]  # required in a manifest; () by default in memory (__init__)
    rule: tuple[Citation, ...]

    def __init__(
        self,
        name: str,
        status: str,
        detail: str,
        where: tuple[str, ...] = (),
        rule: tuple[Citation, ...] = (),
    ) -> None:
        # positional, as the checks write it (see Rule.__init__)
        super().__init__(
            **{"name": name, "status": status, "detail": detail, "where": where, "rule": rule}
        )

    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]  # as Rule's


class Readiness(Record):
    model_config = ConfigDict(frozen=True)

    checks: tuple[Check, ...]
    not_applicable: dict[TextLine, TextLine]  # check name -> why it does not apply
    summary: dict[TextLine, Count]  # status -> how many checks have it

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAIL]


# ---------------------------------------------------------------- the manifest


class Base(Record):
    NULLS = frozenset({"upstream_commit", "description"})

    snapshot_commit: Optional[Commit] = None
    upstream_commit: Optional[Commit] = None
    description: Optional[TextLine] = None
    source: Optional[Provenance] = None


class SeriesDigest(Record):
    sha256: Optional[Sha256] = None
    results_series_sha256: Optional[Sha256] = None
    # file names (Name: never a path, an option, hidden)
    patches: list[Name] = Field(default_factory=list)


class ResultsRef(Record):
    path: TextLine
    sha256: Sha256
    started_at: IsoDate
    exit_code: ExitStatus


class VerifiedTest(Record):
    NULLS = frozenset({"exit_code", "summary_line"})

    outcome: TextLine
    exit_code: Optional[ProcessStatus] = None
    summary_line: Optional[TextLine] = None
    log: TextLine = ""


class Durations(Record):
    apply: Seconds
    configure: Seconds
    build: Seconds
    tests: Seconds
    total: Seconds


class CommandRun(Record):
    """One line of the contributor's commands (contributor.py), as the verification ran it."""

    NULLS = frozenset({"exit_code", "shown"})

    line: TextLine
    exit_code: Optional[ProcessStatus] = None  # None: stopped at the verification's deadline
    duration_s: Seconds
    log: TextLine = ""
    # a test line's output line the documents quote: its passing line with the fix, its failing
    # (or crash) line in the reproduction
    shown: Optional[TextLine] = None


class Verification(Record):
    """git am of the bundle on a fresh copy of its base, then the contributor's commands there
    (`commands`), and with the test commits alone (`reproduction`)."""

    applied_with: TextLine = "git am"
    worktree: TextLine
    head: Commit
    head_is_bundle_commit: bool  # the contributor's commits, exactly
    tree_is_patched_tree: bool
    configure_reused: bool
    build_log: TextLine
    tests: dict[TextLine, VerifiedTest]
    durations_s: Durations
    commands: list[CommandRun] = Field(default_factory=list)
    reproduction: list[CommandRun] = Field(default_factory=list)


class CoverInfo(Record):
    path: TextLine
    present: bool


class Authorship(Record):
    NULLS = frozenset({"assisted_by"})

    author: TextLine
    from_: TextLine = Field(alias="from")  # where the identity came from (--author, git config)
    assisted_by: Optional[TextLine] = None
    committer: TextLine


class Manifest(Record):
    """manifest.json. A hand-made or older one may hold only some keys: `target` and `files`
    always."""

    NULLS = frozenset({"cover"})

    # 2: a rule's cited lines are `citations` (were `evidence`)
    schema_version: Optional[int] = Field(default=None, ge=1, le=2)
    tool: Optional[TextLine] = None
    target: Name
    layout: Optional[LayoutName] = None
    base: Base = Field(default_factory=Base)
    patched_commit: Optional[Commit] = None
    series: Optional[SeriesDigest] = None
    results: Optional[ResultsRef] = None
    incomplete: Optional[bool] = None
    warnings: Optional[list[TextLine]] = None
    verification: Optional[Verification] = None
    toolchain: Optional[dict[TextLine, TextLine]] = None
    files: dict[Name, Sha256]  # none: read_bundle says the bundle lacks patches
    policy: Optional[Policy] = None
    readiness: Optional[Readiness] = None
    draft: bool = False
    draft_reasons: list[TextLine] = Field(default_factory=list)
    cover: Optional[CoverInfo] = None  # None: the target takes no pull request
    authorship: Optional[Authorship] = None
    bundle_commit: Optional[Commit] = None
    known_limits: Optional[list[KnownLimit]] = None  # patches/<topic>/known-limits.yaml
    topic: Optional[Name] = None  # the queue's topic the bundle carries
    after: Optional[list[Name]] = None  # the topics it follows: applied first, not in the bundle

    def kept_nulls(self) -> frozenset[str]:
        return self.NULLS if "cover" in self.model_fields_set else frozenset()

    @property
    def takes_pull_request(self) -> bool:
        """The bundle's target gets a pull request (a target verified through another's sync
        does not)."""
        return self.policy is None or self.policy.takes_pull_request


_WHAT = {
    "target": "a target name (letters, digits, '.', '_', '-'; not '.' or '..')",
    "snapshot_commit": "a full 40-hex commit id",
    "upstream_commit": "a full 40-hex commit id or null",
    "patched_commit": "a full 40-hex commit id",
    "files": "file names inside the bundle folder, each with its sha256",
}
_REFUSING = "refusing a tampered or foreign bundle (re-run `ggml-patch bundle`)"


def _hint(loc: tuple[Any, ...], kind: str, value: Any) -> Optional[str]:
    field = next((str(p) for p in reversed(loc) if str(p) in _WHAT), None)
    if field is None or kind in ("missing", "extra_forbidden"):
        return None
    return f"{_short(value)} is not {_WHAT[field]}"


def read_manifest(data: Any, mpath: Path) -> Manifest:
    """The manifest if every field is what `ggml-patch bundle` writes; else one line naming the
    field."""
    man = parse(Manifest, data, str(mpath), f"a ggml-patch bundle manifest; {_REFUSING}", _hint)
    url = man.base.source.url if man.base.source else None
    why = git_url_problem(url) if url is not None else None
    if why:
        raise ConfigError(f"{mpath}: base.source.url: {_short(url)} {why}; {_REFUSING}")
    return man


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
