"""The upstream bundle of each target whose run proves the fix: the contributor's `git format-patch`
series on its exact base, verified by `git am`, a build and the two tests on a fresh copy of that
base; the documents its policy asks for; manifest.json. The first half is pure; the second runs git
and CMake, only under the tool's cache and the output directory."""

from __future__ import annotations

import hashlib
import json
import platform
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from .. import outdir, untrusted
from ..cache import Cache, slug
from ..config import Backend, Matrix
from ..errors import (
    BuildFailed,
    BundleRefused,
    BundleVerificationFailed,
    ConfigError,
    SeriesDoesNotApply,
)
from ..finetune import bundle as training_evidence
from ..model.results import Cell, CellStatus, Outcome, Results, Verdict, load_results
from ..patchset.files import load_queue, load_series, write_patches
from ..patchset.queue import Queue
from ..patchset.render import rendered_for_target
from ..patchset.series import Series
from ..redact import redact_data
from ..run import toolchain
from ..run.cell import tested_tree
from ..vcs.snapshots import SnapshotRepo, Worktree
from ..verdicts.competing import load_competing
from ..verdicts.known_limits import as_json, load_known_limits
from ..verdicts.related import load_related
from ..verdicts.training import can_plot, plot
from . import authorship, cover, documents, issue_form, leaks, policy
from .manifest import Durations, Manifest, Verification, VerifiedTest, read_manifest
from .views import (
    NOT_RUN,
    TRAINING_PLOT,
    SeriesCommit,
    one_line,
    topic_results,
    training_cell,
)

MANIFEST = "manifest.json"


# ---------------------------------------------------------------- results.json: what it proves


@dataclass(frozen=True)
class Problem:
    target: Optional[str]  # None: the whole run (e.g. a stale series)
    text: str


def load_results_dir(results_dir: Path) -> tuple[Results, str]:
    """results.json (validated) and the sha256 of its bytes (what the manifest names)."""
    path = Path(results_dir) / "results.json"
    if not path.exists():
        raise ConfigError(
            f"{path}: no results; run `ggml-patch matrix --results {results_dir}` first"
        )
    return load_results(path)


def problems(
    results: Results, current_series_sha256: str, topic: Optional[str] = None
) -> list[Problem]:
    """Everything that stops these results from backing a pull request; empty when they do.
    `current_series_sha256`: the series of the run's topics as patches/ gives it now; `topic`:
    the topic the bundle carries (the run must have carried it; `results` is then that topic's
    view of the run, views.topic_results)."""
    found, ran, now = [], results.series.sha256, current_series_sha256
    run_topics = results.series.topics
    if topic and run_topics and topic not in run_topics:
        found.append(
            Problem(
                None,
                f"results.json was made from the topics {', '.join(run_topics)}; a bundle of "
                f"{topic} needs a run that carries it: `ggml-patch matrix --topic {topic}`",
            )
        )
    elif ran != now:
        stale = (
            f"results.json was made from series {ran[:12]}, "
            f"the series in patches/ is now {now[:12]}"
        )
        found.append(Problem(None, f"{stale}: re-run `ggml-patch matrix`"))
    for target in results.targets():
        cells = results.cells_of(target)
        if all(c.status in NOT_RUN for c in cells):
            why = "no cell ran its tests (skipped or build-only), so nothing was proven"
            found.append(Problem(target, f"{target}: {why}"))
        found += [
            Problem(target, t)
            for c in cells
            if c.status not in NOT_RUN
            for t in _cell_problems(results, c)
        ]
    return found


def _cell_problems(results: Results, cell: Cell) -> list[str]:
    cid = cell.cell
    recs = results.records_of(cid)
    patched, control = recs.get("patched"), results.control_of(cid)
    found = []
    if patched is None:
        found.append(f"{cid}: nothing was tested ({cell.status}: {one_line(cell.reason)})")
    elif not (patched.build and patched.build.ok):
        found.append(f"{cid}: the patched variant did not build")
    else:
        bad = [
            f"{n} {t.outcome}"
            for n, t in patched.tests.items()
            if t.outcome not in (Outcome.PASSED, Outcome.SKIPPED)
        ]
        if bad:  # skipped: the backend's, with its reason
            found.append(f"{cid}: with the fix {', '.join(bad)}")
    if patched is not None and control is None:
        found.append(f"{cid}: the negative control did not run")
    elif control is not None and control.verdict != Verdict.KILLED:
        found.append(
            f"{cid}: the negative control was not killed "
            f"({control.verdict}: {one_line(control.verdict_reason)})"
        )
    if not found and cell.status != CellStatus.PASSED:
        found.append(f"{cid}: {cell.status}: {one_line(cell.reason)}")
    return found


def refusal_message(found: list[Problem], topic: str = "") -> str:
    anyway = "--allow-incomplete bundles anyway, with a warning at the top of PR_BODY.md"
    which = f" {topic}" if topic else ""
    return f"refusing to bundle{which}: {'; '.join(p.text for p in found)} ({anyway})"


# ---------------------------------------------------------------- PR_TITLE, PR_BODY.md, manifest


def manifest(
    *,
    target: str,
    layout: str,
    results: Results,
    results_sha256: str,
    results_path: str,
    source: dict,
    patched_commit: str,
    patches: list[tuple[str, str]],
    files: dict[str, str],
    verification: Optional[Verification],
    toolchain: dict,
    warnings: list[str],
    **more: Any,
) -> dict[str, Any]:
    """manifest.json's data (upstream/manifest.py), redacted; `more`: the policy's keys and the
    rest."""
    data = {
        "schema_version": 2,
        "tool": "ggml-patch",
        "target": target,
        "layout": layout,
        "base": {
            "snapshot_commit": source.get("base_commit"),
            "upstream_commit": source.get("upstream_commit"),
            "description": source.get("description"),
            "source": source or None,
        },
        "patched_commit": patched_commit,
        "series": {
            # the same digest as Series.sha256: each patch's name and text
            "sha256": hashlib.sha256(
                b"".join(f"{n}\0{t}\0".encode() for n, t in patches)
            ).hexdigest(),
            "results_series_sha256": results.series.sha256,
            "patches": [name for name, _ in patches],
        },
        "results": {
            "path": results_path,
            "sha256": results_sha256,
            "started_at": results.started_at,
            "exit_code": results.exit_code,
        },
        "incomplete": bool(warnings),
        "warnings": warnings,
        "verification": verification.to_json() if verification else None,
        "toolchain": toolchain,
        "files": files,
        **more,
    }
    return Manifest.model_validate(redact_data(data)).to_json()


# ---------------------------------------------------------------- reading a bundle back


@dataclass(frozen=True)
class Bundle:
    path: Path
    manifest: Manifest
    title: str
    body: str
    patch_files: tuple[Path, ...]

    @property
    def target(self) -> str:
        return self.manifest.target


def read_bundle(directory: Path) -> Bundle:
    """A bundle directory, checked against its manifest: every file present, unchanged."""
    directory = Path(directory)
    mpath = directory / MANIFEST
    if not mpath.exists() and not mpath.is_symlink():
        raise ConfigError(
            f"{mpath}: missing; --bundle must name one target's directory made by "
            "`ggml-patch bundle`"
        )
    # untrusted: every field checked before any is used
    man = read_manifest(untrusted.load_json(mpath, "manifest", root=directory), mpath)
    files = man.files
    for name, digest in files.items():
        f = untrusted.name_under(directory, name, f"{mpath}: files")
        if Path(name).name != name or not f.is_file():
            raise ConfigError(f"{f}: listed in {MANIFEST} but missing; re-run `ggml-patch bundle`")
        kind = "patch" if name.endswith(".patch") else "document"
        if hashlib.sha256(untrusted.read_bytes(f, kind, root=directory)).hexdigest() != digest:
            raise ConfigError(
                f"{f}: changed since the bundle was made (sha256 differs from {MANIFEST}); "
                "re-run `ggml-patch bundle`"
            )
    patches = tuple(sorted(directory / n for n in files if n.endswith(".patch")))
    if not patches:
        raise ConfigError(f"{mpath}: the bundle lacks patches")
    if man.takes_pull_request and ("PR_TITLE" not in files or "PR_BODY.md" not in files):
        raise ConfigError(f"{mpath}: the bundle lacks PR_TITLE or PR_BODY.md")
    read = lambda n: (directory / n).read_text(encoding="utf-8") if n in files else ""  # noqa: E731
    return Bundle(directory, man, read("PR_TITLE").strip(), read("PR_BODY.md"), patches)


# ---------------------------------------------------------------- making the bundle (git, CMake)


@dataclass
class BundleOptions:
    matrix: Matrix
    cache: Cache
    results_dir: Path
    out_dir: Path
    allow_incomplete: bool = False
    targets: list[str] = field(default_factory=list)
    log: Callable[[str], None] = lambda msg: None  # progress, one line each
    author: Optional[authorship.Identity] = None  # the contributor the commits carry
    assisted_by: Optional[str] = None  # the assistant named in an Assisted-by: trailer
    topics: list[str] = field(default_factory=list)  # --topic; none: every forwardable one


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
    return made, left_out, refused


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
    matrix, cache = opts.matrix, opts.cache
    if opts.author is None:
        raise ConfigError(
            'bundle: no author for the bundle\'s commits (pass --author "Name <email>")'
        )
    cells = [c for c in results.cells_of(target_name) if c.patched_commit]
    base = _same(cells, "base commit", lambda c: c.source.base_commit if c.source else None)
    source = cells[0].source.to_json() if cells[0].source else {}
    finetune: tuple = ()
    if topic.series.training_of(topic.name):  # the training evidence is of its own topic
        finetune = training_evidence.of_target(
            opts.results_dir, target_name, base, topic.series.sha256, opts.log
        )
    target = matrix.target(target_name)
    work = cache.root / "bundle" / slug(target_name)
    with cache.lock(f"bundle-{target_name}"):
        rendered, snap = rendered_for_target(matrix, cache, target, topic.series)
        if snap.commit != base:
            raise BundleRefused(
                f"{target_name}: results.json's base commit {base[:12]} is not the base "
                f"{opts.matrix.path} gives now ({snap.commit[:12]}); re-run `ggml-patch matrix`"
            )
        repo = SnapshotRepo(cache.snapshots_git)
        # the target's own text and the contributor's: checked (size, UTF-8) before any build
        read = _policy_reader(repo)
        files_at_base = {f: read(base, f) for f in (*policy.POLICY_FILES, *policy.TEMPLATE_FILES)}
        rules = policy.derive(target_name, base, files_at_base, target.upstream)
        form = _issue_form(repo, base, read) if rules.takes_pull_request else None
        folder = topic.folder
        cover_text = untrusted.read_optional(folder / cover.COVER_FILE, "cover", root=folder)
        where = f"{folder.parent.name}/{folder.name}/{cover.COVER_FILE}"
        cov = cover.parse_cover(where, cover_text)
        worktree = Worktree(repo, work / "src")
        # the topic's commits on the base, alone (after the topics it follows): the tested trees'
        # messages, deterministic (the same series gives the same commits)
        series_files = write_patches(rendered, work / "series")
        worktree.ensure(base)
        patched = worktree.am(series_files)
        prior = series_files[: len(series_files) - topic.own]
        start = repo.commits(base, patched)[len(prior) - 1][0] if prior else base
        # the contributor's commits: their identity (and Assisted-by)
        said = lambda line: opts.log(f"{topic.name} on {target_name}: {line}")  # noqa: E731
        head = authorship.reauthor(
            str(repo.path), start, patched, opts.author, opts.assisted_by, said
        )
        patches = format_patch(repo, start, head)
        commits = [
            SeriesCommit(subject, body, files)
            for _, subject, body, files in repo.commits(start, head)
        ]
        opts.log(
            f"{topic.name} on {target_name}: verifying {len(patches)} patches on a fresh copy of "
            f"{base[:12]} (git am, build, tests)"
        )
        verification = verify(
            opts, target, repo, worktree, work, base, head, patches, topic.series, prior
        )
        tools = toolchain_of(cache, cells, work / "build")
        docs = documents.documents(
            policy=rules,
            cover=cov,
            results=results,
            results_sha256=results_sha,
            target=target_name,
            commits=commits,
            patches=patches,
            toolchain=tools,
            warnings=warnings,
            canonical_paths=topic.series.paths(),
            read_file=lambda path: repo.read_blob(base, path),
            known_limits=topic.known_limits,
            related=topic.related,
            finetune=finetune,
            issue_form=form,
            competing=topic.competing,
            problem=topic.problem,
            host=(platform.system(), platform.machine()),
            live=live_of(matrix, target_name),
        )
    files_text: dict[str, str | bytes] = {**dict(patches), **docs.files}
    trained, plots = training_cell(results, target_name), rules.takes_pull_request and can_plot()
    if plots and trained and trained.training:  # the plots' tables are in the body anyway
        title, t = f"{trained.cell}: train-opt-dynamic, per-step graphs, SGD", trained.training
        with tempfile.TemporaryDirectory() as tmp:
            files_text[TRAINING_PLOT] = plot(
                t.patched, t.control, Path(tmp) / TRAINING_PLOT, title
            ).read_bytes()
    for tuned in finetune if plots else ():
        files_text[training_evidence.plot_name(tuned)] = training_evidence.plot_png(tuned)
    files = {name: hashlib.sha256(_bytes(data)).hexdigest() for name, data in files_text.items()}
    man = manifest(
        target=target_name,
        layout=target.layout,
        results=results,
        results_sha256=results_sha,
        results_path=str(Path(opts.results_dir).resolve() / "results.json"),
        source=source,
        patched_commit=patched,
        patches=patches,
        files=files,
        verification=verification,
        toolchain=tools,
        warnings=warnings,
        # patches/known-limits.yaml: what the series leaves as it is
        known_limits=as_json(topic.known_limits),
        topic=topic.name,
        after=list(topic.follows) or None,
        **docs.manifest_fields(opts.author, opts.assisted_by, head),
    )
    files_text[MANIFEST] = json.dumps(man, indent=2) + "\n"  # the whole manifest, redacted

    leaks.refuse_leaks(files_text, f"{topic.name}/{target_name}")  # before anything is written
    # only into a folder the tool made (or a new or empty one): _write_dir replaces dest whole
    claimed = outdir.claim(opts.out_dir, "--out", legacy=outdir.made_bundles)
    dest = claimed / topic.name / target_name
    _write_dir(dest, files_text)
    return read_bundle(dest)  # what `pr` reads: the bundle as written, checked


def _write_dir(dest: Path, files: dict[str, str | bytes]) -> None:
    """Replace `dest` whole (no earlier patch is left beside the new ones), only when it is an
    earlier bundle or empty, through a staging folder of its own (a user's `.NAME.partial/` is
    never touched)."""
    # an empty folder, or a bundle the tool wrote before
    earlier = dest.is_dir() and (not any(dest.iterdir()) or outdir.made_bundle(dest))
    if dest.is_symlink() or (dest.exists() and not earlier):
        raise ConfigError(
            f"{dest}: holds files ggml-patch did not write; move them away or name another --out"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-", dir=dest.parent))
    try:
        for name, data in files.items():
            untrusted.name_under(staging, name, "bundle file").write_bytes(_bytes(data))
        if dest.exists():
            shutil.rmtree(dest)
        staging.rename(dest)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _bytes(data: str | bytes) -> bytes:
    return data if isinstance(data, bytes) else data.encode("utf-8")


def format_patch(repo: SnapshotRepo, base: str, patched: str) -> list[tuple[str, str]]:
    """`git format-patch base..patched`: [(file name, text)], in order."""
    if not repo.descends(base, patched):
        raise BundleRefused(
            f"the patched commit {patched[:12]} does not descend from the base {base[:12]}"
        )
    with tempfile.TemporaryDirectory(prefix="format-patch-") as tmp:
        return [
            (p.name, p.read_text(encoding="utf-8"))
            for p in repo.format_patches(base, patched, Path(tmp))
        ]


def verify(
    opts: BundleOptions,
    target,
    repo,
    worktree,
    work: Path,
    base: str,
    patched: str,
    patches: list[tuple[str, str]],
    series: Series,
    prior: list[Path],
) -> Verification:
    """git am the bundle's files on a fresh copy of the base (after `prior`: the patches of the
    topics it follows), then the cell pipeline's configure, build and tests (CPU) of `series`.
    `patched` is the bundle's head: the contributor's commits. Its trees persist in the cache: a
    repeat costs seconds."""
    t_all = time.monotonic()
    series_dir = work / "bundle-series"
    if series_dir.exists():
        shutil.rmtree(series_dir)
    series_dir.mkdir(parents=True)
    files = [series_dir / name for name, _ in patches]
    for f, (_, text) in zip(files, patches, strict=True):
        f.write_text(text, encoding="utf-8")

    t0 = time.monotonic()
    worktree.ensure(base)  # exactly the base, untracked files cleaned: a fresh copy
    try:
        # the same `git am` as the matrix's own: the same commit comes out
        if prior:
            worktree.am(prior)
        worktree.am(files)
    except SeriesDoesNotApply as e:
        raise SeriesDoesNotApply(
            f"{target.name}: the bundle's series does not apply with git am to a fresh copy "
            f"of {base[:12]}: {e}"
        ) from None
    head = worktree.head()
    tree = repo.tree_of(head)
    if tree != repo.tree_of(patched):
        raise BundleVerificationFailed(
            f"{target.name}: git am of the bundle gives tree {tree[:12]}, not the tree "
            f"of the tested commit {patched[:12]}"
        )
    apply_s = time.monotonic() - t0

    backend = opts.matrix.backends.get("cpu") or Backend("cpu")
    try:
        tested = tested_tree(
            target,
            backend,
            opts.cache,
            repo,
            series,
            opts.matrix.native_tests_dir,
            work,
            worktree,
            # the build tree is the target's, shared by its topics; the logs are each topic's
            work / "logs" / (series.topics[-1] if series.topics else "series"),
        )
    except BuildFailed as e:
        raise BuildFailed(f"{target.name}: bundle verification: {e}") from None
    rec = tested.patched
    assert rec.build is not None
    tests = {
        name: VerifiedTest(
            outcome=str(t.outcome), exit_code=t.exit_code, summary_line=t.summary_line, log=t.log
        )
        for name, t in rec.tests.items()
    }
    failed = [
        f"{n} {t.outcome}"
        for n, t in tests.items()
        if t.outcome not in (Outcome.PASSED, Outcome.SKIPPED)
    ]
    if failed:
        raise BundleVerificationFailed(
            f"{target.name}: with the bundle applied to a fresh copy of the base: "
            f"{', '.join(failed)} (logs: {tested.logs})"
        )
    return Verification(
        worktree=str(worktree.path),
        head=head,
        head_is_bundle_commit=head == patched,
        tree_is_patched_tree=True,
        configure_reused=tested.configure_reused,
        build_log=rec.build.log,
        tests=tests,
        durations_s=Durations(
            apply=round(apply_s, 2),
            configure=tested.configure_s,
            build=rec.build.duration_s,
            tests=tested.tests_s,
            total=round(time.monotonic() - t_all, 2),
        ),
    )


_SET = re.compile(r'^set\((CMAKE_(?:C|CXX)_COMPILER(?:_ID|_VERSION)?) "([^"]*)"\)', re.M)


def compiler_info(build_dir: Path) -> dict[str, str]:
    """{"c_compiler": "GNU 12.2.0 (/usr/bin/cc)", ...} from what CMake detected in a build tree."""
    found: dict[str, str] = {}
    cache = Path(build_dir) / "CMakeCache.txt"
    for lang, key in (("C", "c_compiler"), ("CXX", "cxx_compiler")):
        var = f"CMAKE_{lang}_COMPILER"
        for f in sorted(Path(build_dir).glob(f"CMakeFiles/*/CMake{lang}Compiler.cmake")):
            sets = dict(_SET.findall(f.read_text(errors="replace")))
            if sets.get(var):
                found[key] = (
                    f"{sets.get(f'{var}_ID', '?')} {sets.get(f'{var}_VERSION', '?')} ({sets[var]})"
                )
        if key not in found and cache.exists():  # older trees: the cache has the path at least
            m = re.search(rf"^{var}:\w+=(.+)$", cache.read_text(errors="replace"), re.M)
            if m:
                found[key] = m.group(1).strip()
    return found


def toolchain_of(cache: Cache, cells: list[Cell], build_dir: Path) -> dict[str, str]:
    """The tools' versions, the verification build's compilers, and a cell's C++ compiler only where
    it differs from those (the rest is noise)."""
    versions = toolchain.versions()
    info = {k: versions[k] for k in ("cmake", "ninja", "git")}
    if shutil.which("ccache"):
        info["ccache"] = versions["ccache"]
    info = {k: v for k, v in {**info, **compiler_info(build_dir)}.items() if v}
    for c in cells:
        cxx = compiler_info(cache.cell_dir(c.cell) / "build").get("cxx_compiler")
        if cxx and cxx != info.get("cxx_compiler"):
            info[f"cell {c.cell} C++ compiler"] = cxx
    return info
