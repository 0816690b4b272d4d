"""ggml-patch bundle: the upstream pull-request bundle for each target the results prove."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ..errors import ExitCode
from . import add_results, add_targets, add_topics

HELP = (
    "write a verified git format-patch series per target, authored by you, with PR_TITLE, "
    "PR_BODY.md and ISSUE.md by the target's own policy, READINESS.md and manifest.json"
)


def add_arguments(p) -> None:
    add_results(p, "the matrix run to draw the evidence from (default: results/)")
    p.add_argument("--out", metavar="DIR", help="where the bundles go (default: RESULTS/bundle)")
    add_targets(p)
    add_topics(p)
    p.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="bundle even when the results do not prove the "
        "fix; PR_BODY.md then opens with a warning",
    )
    p.add_argument(
        "--author",
        metavar='"NAME <EMAIL>"',
        help="the identity the bundle's commits carry (default: "
        "git config user.name and user.email)",
    )
    p.add_argument(
        "--assisted-by",
        metavar="NAME",
        help="add an `Assisted-by: NAME` trailer to each commit (an "
        "assistant helped; never Co-authored-by)",
    )


def run(args, matrix, cache) -> ExitCode:
    from .. import outdir
    from ..config import require_native_tests
    from ..redact import redact
    from ..upstream import authorship, submission
    from ..upstream.bundle import BundleOptions, make_bundles

    results = Path(args.results).absolute()
    # the folder is checked now (never one holding a
    # user's files), marked when the bundle is written
    out = outdir.check(args.out or results / "bundle", "--out", legacy=outdir.made_bundles)
    # whose commits these are, before anything is read or written: refused in one line when unknown
    author = authorship.resolve(
        args.author, authorship.from_git_config() if args.author is None else (None, None)
    )
    assisted = authorship.check_assistant(args.assisted_by)
    require_native_tests(matrix)

    def log(msg: str) -> None:
        print(redact(f"bundle: {msg}"), file=sys.stderr, flush=True)

    opts = BundleOptions(
        matrix,
        cache,
        results,
        out,
        args.allow_incomplete,
        args.target,
        log=log,
        author=author,
        assisted_by=assisted,
        topics=list(args.topic or []),
    )
    t0 = time.monotonic()
    made, left_out, refused = make_bundles(opts)
    for why in left_out:
        print(redact(f"ggml-patch: warning: not bundled: {why}"), file=sys.stderr)
    for why in refused:  # one topic's refusal never hides the others' bundles
        print(redact(f"ggml-patch: error: not bundled: {why}"), file=sys.stderr)
    for b in made:
        man, base = b.manifest, b.manifest.base
        for w in man.warnings or []:
            print(
                redact(f"ggml-patch: warning: {b.target}: incomplete results: {w}"),
                file=sys.stderr,
            )
        upstream = f", upstream {base.upstream_commit[:12]}" if base.upstream_commit else ""
        verify_s = man.verification.durations_s.total if man.verification else 0.0
        which = f"{man.topic} on {b.target}" if man.topic else b.target
        print(
            f"{which}: {len(b.patch_files)} patches against base "
            f"{(base.snapshot_commit or '')[:12]}{upstream}, verified in {verify_s:.1f} s "
            f"(git am, build, tests) -> {b.path}"
        )
        draft = f"DRAFT ({len(man.draft_reasons)} reason(s), see {b.path}/READINESS.md)"
        role = submission.role_of(submission.policy_of(man, str(b.path))).text
        print(f"{which}: {role}; " + (draft if man.draft_reasons else "ready (READINESS.md)"))
    print(f"{len(made)} bundle(s) in {out} ({time.monotonic() - t0:.1f} s)")
    return ExitCode.BUNDLE_REFUSED if refused else ExitCode.OK
