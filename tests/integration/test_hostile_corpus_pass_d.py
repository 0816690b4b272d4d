"""Issue 51 (security pass D), the hostile corpus's new cases: a secret in a commit message
reaches no bundle file, raw or escaped; a secret in a change refuses the bundle in one line.
Real git (the bundle's own reauthor, format-patch and `git am`), the real documents."""

from __future__ import annotations

import html

import pytest

from orchestrator import publish
from orchestrator.errors import BundleRefused, ExitCode
from orchestrator.upstream import authorship as A
from orchestrator.upstream import bundle as B
from orchestrator.upstream import cover as C
from orchestrator.upstream import documents as D
from orchestrator.upstream import leaks
from orchestrator.vcs.snapshots import FIXED_IDENTITY, SnapshotRepo, Worktree

from ..helpers.tools import git
from ..unit.test_pr_body import TOOLCHAIN, TREE, WRITTEN, llama_policy, sample

TOKEN = "ghp_passD_LIVE_0123456789abcdef"  # the run's own GITHUB_TOKEN: `_` in it, as in every one
OTHER = "ghp_" + "Q7x" * 12  # a GitHub token that is not this run's (a commit quoting one)
PASSWORD = "s3cr_et-Pa55"  # a URL's password, `_` in it too
URL = f"https://bob:{PASSWORD}@git.example.org/fork.git"
MESSAGES = [
    f"ggml-opt : zero the accumulators {TOKEN}\n\nPushed from {URL} with {TOKEN}.\n",
    f"tests : add test-x\n\nThe old token was {OTHER}; see {URL}\n",
]


def escaped_forms(secret: str) -> set[str]:
    """The secret as an escaping may have written it; each renders as the secret."""
    return {
        secret,
        secret.replace("_", "\\_"),
        secret.replace("_", "&#95;"),
        html.escape(secret),
        publish._escape_words(secret),
    }


def scan(files: dict[str, str | bytes]) -> None:
    for name, data in files.items():
        text = data if isinstance(data, str) else data.decode("utf-8", "replace")
        for secret in (TOKEN, OTHER, PASSWORD):
            for form in escaped_forms(secret):
                assert form not in text, (name, form)


def _series(tmp_path, messages=MESSAGES, content=("int a = 1;\n", "int a = 2;\n")):
    repo = SnapshotRepo(tmp_path / "snapshots.git")
    tree = tmp_path / "tree"
    (tree / "src").mkdir(parents=True)
    (tree / "src" / "a.cpp").write_text("int a = 0;\n")
    base = repo.import_tree(tree, "refs/snapshots/t", "snapshot")
    wt = Worktree(repo, tmp_path / "wt")
    wt.ensure(base)
    for text, msg in zip(content, messages, strict=True):
        (wt.path / "src" / "a.cpp").write_text(text)
        wt.git("commit", "-qa", "--cleanup=verbatim", "-m", msg, env=FIXED_IDENTITY)
    return repo, base, wt.head()


def _bundle_files(tmp_path, notices: list[str], **series) -> tuple[dict, SnapshotRepo, str, str]:
    """The files `bundle` writes for this series: its patches (from the re-made commits) and
    its documents (llama.cpp's real policy and template)."""
    repo, base, patched = _series(tmp_path, **series)
    who = A.parse_author("Ada Lovelace <ada@example.org>")
    head = A.reauthor(str(repo.path), base, patched, who, None, notices.append)
    patches = B.format_patch(repo, base, head)
    commits = [B.SeriesCommit(s, b, f) for _, s, b, f in repo.commits(base, head)]
    docs = D.documents(
        policy=llama_policy(),
        cover=C.parse_cover("patches/cover.md", WRITTEN),
        results=sample(),
        results_sha256="f" * 64,
        target="llama.cpp",
        commits=commits,
        patches=patches,
        toolchain=TOOLCHAIN,
        warnings=[f"a warning naming {TOKEN} and {URL}"],
        canonical_paths=[],
        read_file=TREE.get,
    )
    return {**dict(patches), **docs.files}, repo, base, head


@pytest.fixture
def live_token(monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)


def test_secrets_in_commit_messages_reach_no_bundle_file_raw_or_escaped(tmp_path, live_token):
    notices: list[str] = []
    files, repo, base, head = _bundle_files(tmp_path, notices)
    assert {"PR_TITLE", "PR_BODY.md", "ISSUE.md", "READINESS.md"} <= set(files)
    assert sum(n.endswith(".patch") for n in files) == 2
    scan(files)
    leaks.refuse_leaks(files, "t/llama.cpp")  # nothing left to refuse
    # one notice a commit, naming the patch, never the secret
    assert notices == [
        "commit 1's message held a secret (a token or a URL's password): "
        "written as *** in patch 0001",
        "commit 2's message held a secret (a token or a URL's password): "
        "written as *** in patch 0002",
    ]
    first = files[sorted(n for n in files if n.endswith(".patch"))[0]]
    assert "Pushed from https://***@git.example.org/fork.git with ***." in first
    # the redacted patches are the bundle's commits: a plain `git am` gives the tested tree
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--shared", "--no-checkout", str(repo.path), str(clone))
    git(clone, "checkout", "-q", "--detach", base)
    names = sorted(n for n in files if n.endswith(".patch"))
    for name in names:
        (tmp_path / name).write_text(files[name])
    git(clone, "am", "-q", *[str(tmp_path / n) for n in names])
    assert git(clone, "rev-parse", "HEAD^{tree}").strip() == repo.tree_of(head)


def test_a_message_without_a_secret_stays_byte_for_byte(tmp_path, live_token):
    notices: list[str] = []
    plain = ["ggml-opt : zero it\n\nA body_with_underscores.\n", "tests : x\n\nMore.\n"]
    files, *_ = _bundle_files(tmp_path, notices, messages=plain)
    assert notices == []
    assert "A body_with_underscores." in "".join(v for k, v in files.items() if ".patch" in k)


@pytest.mark.parametrize("where", ["change", "document"])
def test_a_secret_left_in_a_bundle_file_refuses_it_in_one_line(tmp_path, live_token, where):
    """A token in the change itself cannot be redacted without changing the tested tree; one an
    escaping hid from redaction (`ghp\\_...`) would render as the token: both refused, exit 20,
    the line naming the file and never the secret."""
    if where == "change":
        content = (f'const char * t = "{TOKEN}";\n', "int a = 2;\n")
        files, *_ = _bundle_files(tmp_path, [], content=content)
        name = sorted(n for n in files if n.endswith(".patch"))[0]
    else:
        files, name = {"READINESS.md": f"a line with {OTHER.replace('_', chr(92) + '_')}\n"}, ""
        name = "READINESS.md"
    with pytest.raises(BundleRefused) as e:
        leaks.refuse_leaks(files, "t/llama.cpp")
    line = str(e.value)
    assert e.value.exit_code == ExitCode.BUNDLE_REFUSED == 20
    assert line.startswith(f"t/llama.cpp/{name}: ") and "\n" not in line
    assert TOKEN not in line and OTHER not in line and "\\_" not in line


def test_escaping_never_turns_a_live_token_into_one_redaction_misses(live_token):
    for value in (TOKEN, f"see {TOKEN}", f"[{TOKEN}](x)", URL, f"{OTHER}_x"):
        shown = [
            publish.text(value),
            publish.cell(value),
            publish.code(value),
            publish.cell_with_code(f"`{value}` {value}"),
            *publish.lines_in_block([value]),
            *publish.inert_block(f"{value}\n{value}"),
            publish.link(value, URL),
        ]
        scan({"shown": "\n".join(shown)})
