"""ISSUE.md's data, field by field of the target's bug form (issue_form.py): the version on the
pinned base, the problem in upstream's own words (quoted from its tree with file:line), the
reproduction with upstream's own programs first (llama-finetune's loss per epoch with and without
the fix), then test-opt with the series' new cases and the line it fails with. No snapshot or
sdist digest: those stay in manifest.json. Pure: the target's files come in through read_file."""

from __future__ import annotations

import re
from typing import Callable, Optional

from ..finetune import results as finetune_results
from ..model.results import Results
from . import issue_form, pr_body

ReadFile = Callable[[str], Optional[str]]

# where upstream says what the default mode is and where its own training uses that mode
_HEADER = ("ggml/include/ggml-opt.h", "include/ggml-opt.h")
_DEFAULT_MODE = "by default the forward graph needs to be reconstructed"
_USES = (
    ("examples/training/finetune.cpp", "llama_opt_epoch("),
    ("src/llama-context.cpp", "ggml_opt_prepare_alloc("),
)
_OS = {"Linux": "Linux", "Darwin": "Mac", "Windows": "Windows", "FreeBSD": "BSD"}


def find_line(read_file: ReadFile, paths: tuple[str, ...], needle: str) -> Optional[tuple]:
    """(path, line number, the line stripped) of the first line holding `needle`."""
    for path in paths:
        text = read_file(path)
        for n, line in enumerate((text or "").splitlines(), 1):
            if needle in line:
                return path, n, line.strip()
    return None


def uses(read_file: ReadFile, api: Optional[str] = None) -> list[str]:
    """Where upstream's own training takes this mode: `path:line` (the call), in call order. With
    `api` (the one public function the bug is in): where those files call that function instead,
    so no caller is claimed that the tree does not have."""
    found = []
    for path, needle in _USES:
        needle = f"{api}(" if api else needle
        hit = find_line(read_file, (path,), needle)
        if hit:
            found.append(f"`{path}:{hit[1]}` ({needle.rstrip('(')})")
    return found


def problem_lines(
    read_file: ReadFile, problem: Optional[str] = None, api: Optional[str] = None
) -> list[str]:
    """What breaks (`problem`: the topic's own line, topic.yaml `problem:`), quoting upstream's
    header on the mode; who uses that mode (or, with `api`, that function), by file:line."""
    said = find_line(read_file, _HEADER, _DEFAULT_MODE)
    mode = "non-static graphs (`ctx_compute` not set in `ggml_opt_params`)"
    if said:
        quote = said[2].lstrip("/ ").strip()
        mode += f', the default mode (`{said[0]}:{said[1]}`: "{quote}")'
    out = [f"With {mode}, {pr_body.ascii_text(problem)}" if problem else f"Affected: {mode}."]
    used = uses(read_file, api)
    if used:
        what = f"`{api}`" if api else "this mode"
        out += ["", f"llama-finetune uses {what}: {', '.join(used)}."]
    elif api:
        files = " and ".join(f"`{path}`" for path, _ in _USES)
        out += ["", f"`{api}` is public API; upstream's own training ({files}) does not call it."]
    return out


def version_lines(results: Results, target: str, repo: Optional[str], toolchain: dict) -> list:
    source = pr_body._source(results, target)
    name = pr_body.ascii_text(repo or target)  # matrix.yaml's (or the template's) repository
    if source.upstream_commit:
        where = f"{name} at commit {pr_body.inert(source.upstream_commit[:8])}"
    else:
        where = f"{name} (the source carries no git metadata)"
    described = pr_body.inert(source.description) if source.description != pr_body.NONE else ""
    out = [where + (f", as in {described}" if described else "")]
    compiler = pr_body.compiler_short(toolchain.get("cxx_compiler") or "")
    if compiler:
        out.append(f"built from source with {compiler}")
    return out


def values(
    results: Results,
    target: str,
    commits: list,
    patch_names: list[str],
    repo: Optional[str],
    toolchain: dict,
    read_file: ReadFile,
    host_os: str,
    finetune: tuple[finetune_results.FinetuneResults, ...] = (),
    live: tuple[str, ...] = (),
    problem: Optional[str] = None,
    api: Optional[str] = None,
    prior: tuple[str, ...] = (),
    shown: pr_body.ShownRun = pr_body.NOT_VERIFIED,
) -> dict[str, list[str]]:
    """role -> lines (issue_form.role_of): what the run can say for each field. `live`: targets
    of the same upstream that follow its branch (matrix.yaml's live profile), when this run has
    their cells: the reproduction on current master too. The steps always hold the commands that
    show the bug, and the log the line they print (`shown`: the tests and the verification that
    ran those commands, whose lines are quoted)."""
    steps = problem_lines(read_file, problem, api) + [
        "",
        "Steps to reproduce, on the version above:",
    ]
    tuned = [line for record in finetune for line in pr_body.finetune_lines(record, "####")]
    if tuned:
        steps += ["", "1. upstream's llama-finetune, with and without the fix:", "", *tuned]
    # the project's own training program (train-opt-dynamic) is not the reader's to run: its
    # loss stays in summary.md; the steps are upstream's programs and the PR's test commit
    bug = pr_body.reproduce_bug(results, target, commits, patch_names, prior, shown.tests)
    # the lines of the tests the reader builds (the topic's; the gate only when the series adds it)
    lines, _ = pr_body.before_after(results, target, patch_names, shown.verified)
    if bug:
        steps += ["", "Apply the test commit of the fix alone, build its tests and run them:"]
        steps += ["", "```sh", *bug, "```"]
    if bug and lines:
        steps += ["", "Result without the fix (also under Relevant log output):"]
        steps += ["", "```", *lines, "```"]
    steps += master_lines(results, live, patch_names)
    # libllama's training (llama_opt_epoch) is where the tree shows the mode in use
    modules = ["libllama"] if any("llama-context" in u for u in uses(read_file, api)) else []
    return {
        "version": version_lines(results, target, repo, toolchain),
        "os": [_OS.get(host_os, "Other")],
        "module": modules + ["Other"],
        "command": bug or [],
        "problem": steps,
        "logs": lines,
    }


def master_lines(results: Results, live: tuple[str, ...], patch_names: list[str]) -> list[str]:
    """The same test-opt cases on current master, for each live target this run has cells of:
    its commit and the line it fails with (a master that passes says so: fixed there)."""
    out: list[str] = []
    for name in live:
        commits = [c.source.upstream_commit for c in results.cells_of(name) if c.source]
        known = [c for c in commits if c]
        if not known:
            continue
        commit = pr_body.inert(known[0][:8])
        lines, _ = pr_body.before_after(results, name, patch_names)
        out += ["", f"On current master ({commit}), the same cases without the fix:"]
        if lines:
            out += ["", "```", *lines, "```"]
        else:
            out += ["", "no failing line was recorded (see the run's summary.md)"]
    return out


def dropdown_values(form: issue_form.IssueForm, vals: dict[str, list[str]]) -> dict[str, list[str]]:
    """A dropdown's lines as the form's own options (none matching: the field stays empty)."""
    out = dict(vals)
    for f in form.fields:
        role = issue_form.role_of(f)
        if f.type == "dropdown" and role in vals:
            out[role] = issue_form.chosen_options(f, vals[role])
    return out


def issue_title(commits: list, symptom: Optional[str] = None, problem: Optional[str] = None) -> str:
    """What a user sees, as a bug's title says it: topic.yaml's `symptom:`; else its `problem:`
    up to the first colon; the fix's subject (without its `module : ` prefix) only without
    either (the form gives its own title prefix)."""
    if symptom:
        return pr_body.ascii_text(symptom)
    if problem:
        return pr_body.ascii_text(problem.split(": ", 1)[0].rstrip("."))
    subject = ([c for c in commits if not c.is_test] or commits)[0].subject
    return re.sub(r"^[^:]+ : ", "", subject)


def issue_md(
    form: Optional[issue_form.IssueForm],
    results: Results,
    target: str,
    commits: list,
    patch_names: list[str],
    repo: Optional[str],
    toolchain: dict,
    read_file: ReadFile,
    host_os: str,
    finetune: tuple[finetune_results.FinetuneResults, ...] = (),
    live: tuple[str, ...] = (),
    problem: Optional[str] = None,
    cover_path: str = "patches/cover.md",
    symptom: Optional[str] = None,
    api: Optional[str] = None,
    prior: tuple[str, ...] = (),
    shown: pr_body.ShownRun = pr_body.NOT_VERIFIED,
) -> tuple[str, list[str]]:
    """ISSUE.md and the required fields the run has no data for. `problem`: the topic's line of
    what breaks; `cover_path`: its cover.md."""
    used = form or issue_form.DEFAULT_FORM
    vals = values(
        results,
        target,
        commits,
        patch_names,
        repo,
        toolchain,
        read_file,
        host_os,
        finetune,
        live,
        problem,
        api,
        prior,
        shown,
    )
    vals = dropdown_values(used, vals)
    text = issue_form.render(used, vals, issue_title(commits, symptom, problem), cover_path)
    missing = issue_form.missing_required(used, vals)
    # a bug report without its reproduction or its output is not ready, whatever the form requires
    if not vals.get("command"):
        missing.append("steps to reproduce (no commit of the series is only tests)")
    if not vals.get("logs"):
        missing.append("relevant log output (no failing test line without the fix in this run)")
    return text, missing
