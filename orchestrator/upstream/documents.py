"""The bundle's documents for one target, by its policy: PR_TITLE, PR_BODY.md and ISSUE.md for a
target that takes a pull request, READINESS.md for every target, and the manifest's policy,
readiness and draft fields. Pure: the bundle (bundle.py) reads the inputs and writes the files."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import unidiff

from .. import publish
from ..model.results import Results
from ..redact import redact
from . import comments, issue, pr_body, readiness
from .authorship import COMMITTER, Identity
from .cover import Cover, fixes_line, problems
from .issue_form import IssueForm
from .manifest import CoverInfo, Readiness, Verification
from .policy import DerivedPolicy
from .sync import compare, parse_sync_script, sync_script_for
from .views import pr_title


@dataclass(frozen=True)
class Documents:
    files: dict[str, str]
    policy: DerivedPolicy
    readiness: Readiness
    draft_reasons: list[str]
    cover: Cover

    @property
    def draft(self) -> bool:
        return bool(self.draft_reasons)

    def manifest_fields(
        self, author: Identity, assistant: Optional[str], bundle_commit: str
    ) -> dict[str, Any]:
        """manifest.json's policy, readiness, draft, cover and authorship keys
        (upstream/manifest.py)."""
        cover = CoverInfo(path=self.cover.path, present=self.cover.text is not None)
        return {
            "policy": self.policy.to_json(),
            "readiness": self.readiness.to_json(),
            "draft": self.draft,
            "draft_reasons": self.draft_reasons,
            "cover": cover.to_json() if self.policy.takes_pull_request else None,
            "authorship": {
                "author": str(author),
                "from": author.source,
                "assisted_by": assistant,
                "committer": "{} <{}>".format(*COMMITTER),
            },
            "bundle_commit": bundle_commit,
        }


def documents(
    *,
    policy: DerivedPolicy,
    cover: Cover,
    results: Results,
    results_sha256: str,
    target: str,
    commits: list,
    patches: list[tuple[str, str]],
    toolchain: dict,
    warnings: list[str],
    canonical_paths: list[str],
    read_file,
    known_limits: tuple = (),
    finetune: tuple = (),
    related: tuple = (),
    issue_form: Optional[IssueForm] = None,
    competing: tuple = (),
    host: tuple[str, str] = ("Linux", ""),
    live: tuple[str, ...] = (),
    problem: Optional[str] = None,
    symptom: Optional[str] = None,
    api: Optional[str] = None,
    related_prs: list[str] | None = None,
    follows: tuple[str, ...] = (),
    tests: tuple = (),
    verified: Optional[Verification] = None,
) -> Documents:
    """read_file(path): the target's file at its base commit, or None; finetune: the training
    evidence, validated, one record per case set (finetune/bundle.of_target);
    issue_form: the target's bug form (None: none in its tree); competing: the ported fixes of
    native_tests/competing/ (a COMMENT draft each); host: (OS, CPU) of the verifying machine;
    tests: the tests a contributor runs (contributor.shown_tests); verified: the verification
    that ran them, whose output lines the documents quote."""
    names = [n for n, _ in patches]
    # the patches of the pull requests this one follows, from their bundles beside this one
    prior = tuple(f"../../{t}/{target}/*.patch" for t in follows)
    texts: dict[str, str] = {}
    cover_problems: list[str] = []
    form_problems: list[str] = []
    if policy.takes_pull_request:
        texts, form_problems = _pull_request_texts(
            policy=policy,
            cover=cover,
            results=results,
            results_sha256=results_sha256,
            target=target,
            commits=commits,
            names=names,
            toolchain=toolchain,
            read_file=read_file,
            known_limits=known_limits,
            finetune=finetune,
            issue_form=issue_form,
            competing=competing,
            host=host,
            live=live,
            problem=problem,
            symptom=symptom,
            api=api,
            related_prs=related_prs,
            prior=prior,
            shown=pr_body.ShownRun(tests, verified),
        )
        cover_problems = problems(cover, policy.template)
    return _checked(
        policy,
        cover,
        target,
        patches,
        texts,
        cover_problems,
        form_problems,
        warnings,
        canonical_paths,
        read_file,
        related,
    )


def _pull_request_texts(
    *,
    policy: DerivedPolicy,
    cover: Cover,
    results: Results,
    results_sha256: str,
    target: str,
    commits: list,
    names: list[str],
    toolchain: dict,
    read_file,
    known_limits: tuple,
    finetune: tuple,
    issue_form: Optional[IssueForm],
    competing: tuple,
    host: tuple[str, str],
    live: tuple[str, ...],
    problem: Optional[str],
    symptom: Optional[str],
    api: Optional[str],
    related_prs: list[str] | None,
    prior: tuple[str, ...],
    shown: pr_body.ShownRun,
) -> tuple[dict[str, str], list[str]]:
    """PR_TITLE, PR_BODY.md (without its banner), ISSUE.md and the COMMENT drafts of a
    pull-request target, and the bug form's fields the run cannot fill."""
    repo = policy.repo.value if isinstance(policy.repo.value, str) else None
    data = pr_body.additional_information(
        results,
        results_sha256,
        target,
        commits,
        names,
        toolchain,
        repo,
        known_limits,
        finetune=finetune,
        issue_ref=fixes_line(cover, repo),
        machine=host[1],
        related=related_prs,
        notes=comments.neutral_lines(list(competing), results, target),
        prior=prior,
        shown=shown,
    )
    issue_text, missing = issue.issue_md(
        issue_form,
        results,
        target,
        commits,
        names,
        repo,
        toolchain,
        read_file,
        host[0],
        finetune,
        live,
        problem,
        cover.path,
        symptom=symptom,
        api=api,
        prior=prior,
        shown=shown,
    )
    form = issue_form.file if issue_form else "no bug form in the target's tree"
    form_problems = [f"ISSUE.md: '{label}' ({form})" for label in missing]
    return {
        "PR_TITLE": pr_title(commits) + "\n",
        "PR_BODY.md": pr_body.body(policy.template, cover, data),
        "ISSUE.md": issue_text,
        **comments.drafts(list(competing), results, target, commits, names, repo),
    }, form_problems


def _checked(
    policy: DerivedPolicy,
    cover: Cover,
    target: str,
    patches: list[tuple[str, str]],
    texts: dict[str, str],
    cover_problems: list[str],
    form_problems: list[str],
    warnings: list[str],
    canonical_paths: list[str],
    read_file,
    related: tuple,
) -> Documents:
    """The readiness checks over the texts, READINESS.md, the banner on PR_BODY.md; every text
    redacted and bounded."""
    # a target verified through another's sync: what that sync script carries
    script = None if policy.takes_pull_request else sync_script_for(policy.role_value.changes_go_to)
    text = read_file(script) if script else None
    sync = parse_sync_script(script, text) if script and text else None
    changed = list(dict.fromkeys(f.path for _, text in patches for f in unidiff.PatchSet(text)))
    report = compare(sync, canonical_paths, changed) if sync else None
    pr_cover = cover if policy.takes_pull_request else None
    ready = readiness.run(
        policy,
        patches,
        texts,
        pr_cover,
        cover_problems,
        sync,
        report,
        script,
        related=related,
        form_problems=tuple(form_problems),
    )
    reasons = cover_problems + [
        f"{c.name}: {c.detail}" + (f" ({c.where[0]})" if c.where else "") for c in ready.failed
    ]
    if policy.takes_pull_request:
        texts["PR_BODY.md"] = (
            "\n".join(pr_body.banner(reasons, warnings))
            + ("\n" if reasons or warnings else "")
            + texts["PR_BODY.md"]
        )
    texts["READINESS.md"] = readiness.markdown(target, ready, reasons, policy)
    # the run's records may name URLs: never their credentials; each body below GitHub's limit
    texts = {name: publish.bounded(redact(text), where=name) for name, text in texts.items()}
    return Documents(texts, policy, ready, reasons, cover)
