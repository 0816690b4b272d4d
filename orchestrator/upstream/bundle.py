"""The upstream bundle of each target whose run proves the fix: the contributor's `git format-patch`
series on its exact base, verified by `git am`, a build and the two tests on a fresh copy of that
base; the documents its policy asks for; manifest.json. What the results prove is proof.py, the
verification verification.py, the folder and its manifest bundle_dir.py; this module makes the
bundles, running git and CMake only under the tool's cache and the output directory."""

from __future__ import annotations

import hashlib
import json
import platform
import re
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional

from .. import outdir, untrusted
from ..cache import slug
from ..config import Matrix, Target
from ..errors import BundleRefused, ConfigError
from ..finetune import bundle as training_evidence
from ..model.results import Cell, Results
from ..patchset.files import load_queue, load_series, write_patches
from ..patchset.queue import Queue
from ..patchset.render import rendered_for_target
from ..patchset.series import Series
from ..run.tree import native_programs
from ..vcs.snapshots import SnapshotRepo, Worktree
from ..verdicts.competing import load_competing
from ..verdicts.known_limits import as_json, load_known_limits
from ..verdicts.related import load_related
from ..verdicts.training import can_plot, plot
from . import authorship, contributor, cover, documents, issue_form, leaks, plan, policy
from .bundle_dir import MANIFEST, Bundle, _bytes, _write_dir, manifest, read_bundle
from .bundle_options import BundleOptions
from .manifest import Manifest, Verification
from .proof import Problem, _cell_problems, load_results_dir, problems, refusal_message
from .verification import Shown, compiler_info, format_patch, toolchain_of, verify
from .views import TRAINING_PLOT, SeriesCommit, topic_results, training_cell

__all__ = [  # what callers and tests reach through this module
    "MANIFEST",
    "Bundle",
    "BundleOptions",
    "Manifest",
    "Problem",
    "SeriesCommit",
    "_cell_problems",
    "compiler_info",
    "format_patch",
    "load_results_dir",
    "manifest",
    "problems",
    "read_bundle",
    "refusal_message",
    "toolchain_of",
    "verify",
]


# ---------------------------------------------------------------- making the bundle (git, CMake)


@dataclass(frozen=True)
class TopicInputs:
    """What one topic's bundles are made from, read (and checked) before any work."""

    name: str
    series: Series  # its series alone: the topics it follows first (`after:`), then its own
    own: int  # how many of the series' last patches are the topic's own (the bundle's)
    folder: Path  # patches/<topic>/: cover.md, known-limits.yaml, related-upstream.yaml
    known_limits: tuple
    related: tuple
    competing: tuple
    problem: Optional[str]  # topic.yaml's `problem:`: what breaks without the fix, one line
    symptom: Optional[str] = None  # topic.yaml's `symptom:`: ISSUE.md's title
    api: Optional[str] = None  # topic.yaml's `api:`: the one public function the bug is in
    other_prs: tuple[str, ...] = ()  # the PR body's lines naming the other PRs of the set

    @property
    def follows(self) -> tuple[str, ...]:
        return tuple(t for t in self.series.topics if t != self.name)


def topic_inputs(matrix: Matrix, queue: Queue, name: str) -> TopicInputs:
    topic = queue.topic(name)
    series = load_series(matrix, [name])
    folder = matrix.topic_dir(name)
    return TopicInputs(
        name=name,
        series=series,
        own=len(topic.series.patches),
        folder=folder,
        known_limits=load_known_limits(folder),  # malformed: one line, exit 2, before any work
        related=load_related(folder),  # likewise
        competing=tuple(load_competing(matrix, [name])),
        problem=topic.meta.problem,
        symptom=topic.meta.symptom,
        api=topic.meta.api,
    )


def bundled_topics(queue: Queue, asked: list[str], run_topics: list[str]) -> list[str]:
    """The topics to bundle: those --topic names, else every forwardable (active) topic the run
    carried, in queue order."""
    if asked:
        for name in asked:
            queue.topic(name)  # an unknown name: one line naming the queue
        return [t.name for t in queue.topics if t.name in asked]
    return [t.name for t in queue.active() if t.name in run_topics]


def make_bundles(opts: BundleOptions) -> tuple[list[Bundle], list[str], list[str]]:
    """Every bundle the results allow: one per topic and target, from one run of the queue; the
    targets left out (why); the topics refused (why: their results do not prove their fix)."""
    results, results_sha = load_results_dir(opts.results_dir)
    present = results.targets()
    for t in opts.targets:
        if t not in present:
            raise ConfigError(
                f"{Path(opts.results_dir) / 'results.json'}: no cells for target {t!r} "
                f"(targets in this run: {', '.join(present) or 'none'})"
            )
    chosen = [t for t in present if not opts.targets or t in opts.targets]
    queue = load_queue(opts.matrix)
    # older results name no topics: they carried the queue's default
    run_topics = results.series.topics or [t.name for t in queue.chosen()]
    # the run's series as patches/ gives it now, a topic retired or dropped since included
    ran = load_series(opts.matrix, run_topics, any_state=True)
    left_out = [
        f"{t.name}: the run carried it, topic.yaml now says {t.meta.state}; not bundled"
        for t in queue.chosen(run_topics, any_state=True)
        if not t.active and not opts.topics
    ]
    topics = [
        topic_inputs(opts.matrix, queue, n) for n in bundled_topics(queue, opts.topics, run_topics)
    ]
    if not topics:
        raise BundleRefused(
            f"nothing to bundle: the run carried {', '.join(run_topics)}, none of them forwardable"
            + (f" ({'; '.join(left_out)})" if left_out else "")
        )
    planned = _planned(queue, topics)
    topics = [replace(t, other_prs=tuple(plan.other_prs_lines(planned, t.name))) for t in topics]
    made, refused = [], []
    for topic in topics:
        competing = frozenset(c.name for c in topic.competing)
        own_tests = frozenset(t.name for t in ran.tests_of(topic.name))
        # the training run and the gate's attribution are the topic's that declares training
        own = bool(ran.training_of(topic.name))
        view = topic_results(results, topic.name, competing, own_tests, own)
        found = [p for p in problems(view, ran.sha256, topic.name) if p.target in (None, *chosen)]
        if found and not opts.allow_incomplete:
            refused.append(refusal_message(found, topic.name))
            continue
        for target in chosen:
            if not queue.topic(topic.name).active_on(target):
                left_out.append(f"{topic.name} on {target}: retired there (topic.yaml retired:)")
                continue
            if not any(c.patched_commit for c in view.cells_of(target)):
                left_out.append(
                    f"{topic.name} on {target}: the queue was never applied in this run, so "
                    "there is nothing to send"
                )
                continue
            warnings = [p.text for p in found if p.target in (None, target)]
            made.append(bundle_target(opts, view, results_sha, target, warnings, topic))
    if not made and len(refused) == 1 and not left_out:
        raise BundleRefused(refused[0])
    if not made:
        raise BundleRefused("nothing to bundle: " + "; ".join(refused + left_out))
    _write_plan(opts, made, planned)
    return made, left_out, refused


def _planned(queue: Queue, topics: list[TopicInputs]) -> list[plan.PlannedPR]:
    """The bundled topics as pull requests, in the order they apply (after:), each titled by
    what it fixes."""
    out = []
    for t in topics:
        meta = queue.topic(t.name).meta
        title = t.symptom or (t.problem or meta.summary).split(": ", 1)[0]
        out.append(plan.PlannedPR(t.name, title, tuple(f for f in t.follows)))
    return out


def _write_plan(opts: BundleOptions, made: list[Bundle], planned: list[plan.PlannedPR]) -> None:
    """SUBMISSION.md at the top of the bundle set: one section per target that takes pull
    requests, from its own CONTRIBUTING.md and CODEOWNERS at the base."""
    repo = SnapshotRepo(opts.cache.snapshots_git)
    sections = []
    for target in dict.fromkeys(b.target for b in made if b.manifest.takes_pull_request):
        first = next(b for b in made if b.target == target)
        base = first.manifest.base.snapshot_commit or ""
        read = _policy_reader(repo)
        owners_file = next((f for f in plan.CODEOWNERS_PATHS if read(base, f) is not None), None)
        paths = _fix_paths(made, target)
        owners = plan.code_owners(read(base, owners_file) if owners_file else None, paths)
        upstream = opts.matrix.target(target).upstream
        sections.append(
            plan.plan_markdown(
                target,
                upstream.repo if upstream and upstream.repo else target,
                [
                    p
                    for p in planned
                    if any(b.target == target and b.manifest.topic == p.topic for b in made)
                ],
                owners,
                owners_file,
                plan.asks(read(base, "CONTRIBUTING.md")),
            )
        )
    if sections:
        claimed = outdir.claim(opts.out_dir, "--out", legacy=outdir.made_bundles)
        text = "# Submission plan\n\n" + "\n".join(sections)
        untrusted.name_under(claimed, plan.PLAN_FILE, "bundle file").write_text(text)


def _fix_paths(made: list[Bundle], target: str) -> list[str]:
    """The source files (not tests) the target's bundles change, from their patches."""
    paths: dict[str, None] = {}
    for b in made:
        if b.target != target:
            continue
        for f in b.patch_files:
            for line in f.read_text(encoding="utf-8").splitlines():
                m = re.match(r"^\+\+\+ b/(\S+)$", line)
                if m and not m.group(1).startswith("tests/"):
                    paths[m.group(1)] = None
    return list(paths)


def _same(cells: list[Cell], what: str, get: Callable[[Cell], Optional[str]]) -> str:
    values = {get(c) for c in cells} - {None}
    if len(values) != 1:
        raise BundleRefused(
            f"{cells[0].target}: the cells of this target record {len(values)} different {what}s"
        )
    return str(values.pop())


def _issue_form(repo, base: str, read) -> Optional[issue_form.IssueForm]:
    """The target's bug form at the base (.github/ISSUE_TEMPLATE/*.yml); None without one. A file
    that is no issue form is one line in the log and ISSUE.md falls back to plain fields."""
    chosen = issue_form.pick_bug_form(repo.names_in(base, issue_form.FORM_DIR))
    text = read(base, f"{issue_form.FORM_DIR}/{chosen}") if chosen else None
    if text is None:
        return None
    try:
        return issue_form.parse_form(f"{issue_form.FORM_DIR}/{chosen}", text)
    except issue_form.FormError:
        return None


def _policy_reader(repo):
    """read_blob for the target's policy files: at most the policy cap, UTF-8 or one line."""

    def read(commit: str, path: str) -> Optional[str]:
        size, cap, where = (
            repo.blob_size(commit, path),
            untrusted.cap_of("policy"),
            f"{path} at {commit[:12]}",
        )
        if size is not None and size > cap:
            raise ConfigError(f"{where}: {size} bytes, more than the {cap} a policy file may hold")
        text = repo.read_blob(commit, path) if size is not None else None
        return (
            None
            if text is None
            else untrusted.decode(text.encode("utf-8", "surrogateescape"), where, "policy")
        )

    return read


def live_of(matrix, target_name: str) -> tuple[str, ...]:
    """The targets that follow the same upstream repository's branch (git sources, e.g.
    llama.cpp-master for llama.cpp): where ISSUE.md reproduces on current master."""
    target = matrix.target(target_name)
    repo = target.upstream.repo if target.upstream else None
    if not repo:
        return ()
    return tuple(
        name
        for name, other in matrix.targets.items()
        if name != target_name
        and other.upstream is not None
        and other.upstream.repo == repo
        and other.source.kind == "git"
    )


@dataclass(frozen=True)
class _Made:
    """One topic's bundle as the cache made it: its commits, verified, and its documents."""

    patched: str  # the tested tree's commit (the topic's series on the base)
    head: str  # the contributor's commits
    patches: list[tuple[str, str]]
    verification: Verification
    toolchain: dict[str, str]
    docs: Optional[documents.Documents]  # None until _with_documents
    takes_pull_request: bool


@dataclass(frozen=True)
class _Commits:
    """The topic's commits on the target's base, in the bundle's own worktree."""

    target: Target
    repo: SnapshotRepo
    worktree: Worktree
    work: Path  # the target's bundle folder in the cache
    base: str
    start: str  # the commit its own patches start from (the base, or the topics it follows)
    patched: str
    head: str
    patches: list[tuple[str, str]]
    prior: list[Path]  # the patches of the topics it follows


def _commit_series(
    opts: BundleOptions,
    target_name: str,
    topic: TopicInputs,
    base: str,
    author: authorship.Identity,
) -> _Commits:
    """The topic's series `git am`ed on the base (after the topics it follows), its own commits
    reauthored as the contributor's and formatted: deterministic, the same series gives the same
    commits."""
    matrix, cache = opts.matrix, opts.cache
    target = matrix.target(target_name)
    work = cache.root / "bundle" / slug(target_name)
    rendered, snap = rendered_for_target(matrix, cache, target, topic.series)
    if snap.commit != base:
        raise BundleRefused(
            f"{target_name}: results.json's base commit {base[:12]} is not the base "
            f"{matrix.path} gives now ({snap.commit[:12]}); re-run `ggml-patch matrix`"
        )
    repo = SnapshotRepo(cache.snapshots_git)
    worktree = Worktree(repo, work / "src")
    series_files = write_patches(rendered, work / "series")
    worktree.ensure(base)
    patched = worktree.am(series_files)
    prior = series_files[: len(series_files) - topic.own]
    start = repo.commits(base, patched)[len(prior) - 1][0] if prior else base
    # the contributor's commits: their identity (and Assisted-by)
    said = lambda line: opts.log(f"{topic.name} on {target_name}: {line}")  # noqa: E731
    head = authorship.reauthor(str(repo.path), start, patched, author, opts.assisted_by, said)
    patches = format_patch(repo, start, head)
    return _Commits(target, repo, worktree, work, base, start, patched, head, patches, prior)


def _with_documents(
    opts: BundleOptions,
    made: _Made,
    c: _Commits,
    results: Results,
    results_sha: str,
    warnings: list[str],
    topic: TopicInputs,
    finetune: tuple,
    tests: tuple = (),
) -> _Made:
    """`made` with the documents the target's policy asks for (its own files at the base and the
    contributor's cover.md, each checked for size and UTF-8 before use)."""
    target_name, base, repo = c.target.name, c.base, c.repo
    read = _policy_reader(repo)
    files_at_base = {f: read(base, f) for f in (*policy.POLICY_FILES, *policy.TEMPLATE_FILES)}
    rules = policy.derive(target_name, base, files_at_base, c.target.upstream)
    form = _issue_form(repo, base, read) if rules.takes_pull_request else None
    folder = topic.folder
    cover_text = untrusted.read_optional(folder / cover.COVER_FILE, "cover", root=folder)
    cov = cover.parse_cover(f"{folder.parent.name}/{folder.name}/{cover.COVER_FILE}", cover_text)
    commits = [
        SeriesCommit(subj, body, files) for _, subj, body, files in repo.commits(c.start, c.head)
    ]
    docs = documents.documents(
        policy=rules,
        cover=cov,
        results=results,
        results_sha256=results_sha,
        target=target_name,
        commits=commits,
        patches=made.patches,
        toolchain=made.toolchain,
        warnings=warnings,
        canonical_paths=topic.series.paths(),
        read_file=lambda path: repo.read_blob(base, path),
        known_limits=topic.known_limits,
        related=topic.related,
        finetune=finetune,
        issue_form=form,
        competing=topic.competing,
        problem=topic.problem,
        symptom=topic.symptom,
        api=topic.api,
        related_prs=list(topic.other_prs),
        follows=topic.follows,
        host=(platform.system(), platform.machine()),
        live=live_of(opts.matrix, target_name),
        tests=tests,
        verified=made.verification,
    )
    return replace(made, docs=docs, takes_pull_request=rules.takes_pull_request)


def _files_of(made: _Made, results: Results, target_name: str, finetune: tuple) -> dict:
    """The bundle's files: the patches, the documents, the training plots where they are drawn."""
    assert made.docs is not None
    files_text: dict[str, str | bytes] = {**dict(made.patches), **made.docs.files}
    trained = training_cell(results, target_name)
    plots = made.takes_pull_request and can_plot()
    if plots and trained and trained.training:  # the plots' tables are in the body anyway
        title, t = f"{trained.cell}: train-opt-dynamic, non-static graphs, SGD", trained.training
        with tempfile.TemporaryDirectory() as tmp:
            files_text[TRAINING_PLOT] = plot(
                t.patched, t.control, Path(tmp) / TRAINING_PLOT, title
            ).read_bytes()
    for tuned in finetune if plots else ():
        files_text[training_evidence.plot_name(tuned)] = training_evidence.plot_png(tuned)
    return files_text


def _shown(opts: BundleOptions, c: _Commits, topic: TopicInputs) -> Shown:
    """The tests the documents show and the verification runs (contributor.shown_tests), and the
    patch files of the test commits alone (the reproduction)."""
    names = [n for n, _ in c.patches]
    natives = native_programs(opts.matrix.native_tests_dir)
    tests = contributor.shown_tests(topic.series.tests_of(topic.name), names, natives)
    commits = [SeriesCommit(s, b, files) for _, s, b, files in c.repo.commits(c.start, c.head)]
    test_only = tuple(n for commit, n in zip(commits, names, strict=True) if commit.is_test)
    return Shown(tests, test_only, c.target.layout, natives, topic.name)


def bundle_target(
    opts: BundleOptions,
    results: Results,
    results_sha: str,
    target_name: str,
    warnings: list[str],
    topic: TopicInputs,
) -> Bundle:
    """One topic's bundle for one target: its own commits on the target's base (after the topics
    it follows), verified alone; `results`: the topic's view of the run."""
    if opts.author is None:
        raise ConfigError(
            'bundle: no author for the bundle\'s commits (pass --author "Name <email>")'
        )
    cells = [c for c in results.cells_of(target_name) if c.patched_commit]
    base = _same(cells, "base commit", lambda c: c.source.base_commit if c.source else None)
    finetune: tuple = ()
    if topic.series.training_of(topic.name):  # the training evidence is of its own topic
        finetune = training_evidence.of_target(
            opts.results_dir, target_name, base, topic.series.sha256, opts.log
        )
    with opts.cache.lock(f"bundle-{target_name}"):
        commits = _commit_series(opts, target_name, topic, base, opts.author)
        opts.log(
            f"{topic.name} on {target_name}: verifying {len(commits.patches)} patches on a fresh "
            f"copy of {base[:12]} (git am, build, tests)"
        )
        c = commits
        shown = _shown(opts, c, topic)
        verification = verify(
            c.target, c.repo, c.worktree, c.work, base, c.head, c.patches, shown, c.prior
        )
        tools = toolchain_of(opts.cache, cells, c.work / "contributor-build")
        made = _Made(c.patched, c.head, c.patches, verification, tools, None, False)
        made = _with_documents(
            opts, made, c, results, results_sha, warnings, topic, finetune, shown.tests
        )
    files_text = _files_of(made, results, target_name, finetune)
    assert made.docs is not None
    man = manifest(
        target=target_name,
        layout=opts.matrix.target(target_name).layout,
        results=results,
        results_sha256=results_sha,
        results_path=str(Path(opts.results_dir).resolve() / "results.json"),
        source=cells[0].source.to_json() if cells[0].source else {},
        patched_commit=made.patched,
        patches=made.patches,
        files={name: hashlib.sha256(_bytes(d)).hexdigest() for name, d in files_text.items()},
        verification=made.verification,
        toolchain=made.toolchain,
        warnings=warnings,
        # patches/known-limits.yaml: what the series leaves as it is
        known_limits=as_json(topic.known_limits),
        topic=topic.name,
        after=list(topic.follows) or None,
        **made.docs.manifest_fields(opts.author, opts.assisted_by, made.head),
    )
    files_text[MANIFEST] = json.dumps(man, indent=2) + "\n"  # the whole manifest, redacted
    leaks.refuse_leaks(files_text, f"{topic.name}/{target_name}")  # before anything is written
    # only into a folder the tool made (or a new or empty one): _write_dir replaces dest whole
    claimed = outdir.claim(opts.out_dir, "--out", legacy=outdir.made_bundles)
    dest = claimed / topic.name / target_name
    _write_dir(dest, files_text)
    return read_bundle(dest)  # what `pr` reads: the bundle as written, checked
