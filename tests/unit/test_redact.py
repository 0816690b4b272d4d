"""Issue 16, point 2 (the pure part): the one redaction function, and the places it is applied
without any subprocess (errors when made, sources' provenance, the PR body and manifest,
progress lines, GitHub's error text). The routes end to end: tests/integration/test_redaction.py."""

import io
import json
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator import redact as redact_module
from orchestrator import sources
from orchestrator.model.results import load_results
from orchestrator.redact import REDACTED, redact, redact_data
from orchestrator.upstream import bundle as B

from ..helpers.security import ROOT

SECRET = "s3cr3t-Pa55w0rd-9f8e7d"  # a password in a URL: not GITHUB_TOKEN, still never printed
TOKEN = "ghp_redactTEST_c0ffee5eed9d4e21b7a3"


@pytest.mark.parametrize(
    "text, expected",
    [
        (f"https://u:{SECRET}@github.com/a/b.git", "https://***@github.com/a/b.git"),
        (f"http://{SECRET}@127.0.0.1:8/x", "http://***@127.0.0.1:8/x"),
        (f"ssh://git:{SECRET}@host:22/a/b.git", "ssh://***@host:22/a/b.git"),
        (f"git://me:{SECRET}@host/a", "git://***@host/a"),
        (f"git+https://me:{SECRET}@host/a", "git+https://***@host/a"),
        (f"fetch 'HTTPS://ME:{SECRET}@HOST/A' failed", "fetch 'HTTPS://***@HOST/A' failed"),
        (f"https://h/x?access_token={SECRET}&a=1", "https://h/x?access_token=***&a=1"),
        (f"https://h/x?private_token={SECRET}", "https://h/x?private_token=***"),
        ("https://h/x;token=q-only-9f8e", "https://h/x;token=***"),  # never in a URL's userinfo
        ("see ?sig=q-only-9f8e&a=1", "see ?sig=***&a=1"),
        ("git@github.com:a/b.git", "git@github.com:a/b.git"),  # scp-like: a user name, no secret
        (
            "mail me at a@b.org, see https://github.com/a",
            "mail me at a@b.org, see https://github.com/a",
        ),
        ('"url": "https://u:p@h/x", "b": "c@d"', '"url": "https://***@h/x", "b": "c@d"'),
    ],
)
def test_redact_urls_of_every_scheme(text, expected, monkeypatch):
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    assert redact(text) == expected


def test_redact_the_tokens_value_wherever_it_appears(monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    assert redact(f"a {TOKEN} b /x/{TOKEN}/y") == f"a {REDACTED} b /x/{REDACTED}/y"
    assert redact(f"x {SECRET}", (SECRET,)) == f"x {REDACTED}"
    data = {"url": f"https://u:{SECRET}@h/x", "list": [TOKEN, 3, None], "n": 1.5}
    assert redact_data(data) == {"url": "https://***@h/x", "list": [REDACTED, 3, None], "n": 1.5}


def test_redact_data_removes_a_password_met_in_an_earlier_url_and_the_token_set_now(monkeypatch):
    """Issue 35: the secrets are gathered once per document, yet a URL's password met in one
    string is removed from every later one, and a token set after an earlier call is known."""
    password = "0nly-in-this-test-9c1d"
    data = {
        "a": f"git://u:{password}@h/r",
        f"key {password}": (1, f"{password}"),
        "b": [f"log: {password} again"],
        "c": TOKEN,
    }
    monkeypatch.setenv("GH_TOKEN", TOKEN)
    assert redact_data(data) == {
        "a": "git://***@h/r",
        f"key {REDACTED}": (1, REDACTED),
        "b": [f"log: {REDACTED} again"],
        "c": "***",
    }
    monkeypatch.setenv("GH_TOKEN", "")
    assert redact_data({"c": TOKEN}) == {"c": TOKEN}


def test_errors_are_redacted_when_made(monkeypatch):
    from orchestrator.errors import ConfigError

    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    assert str(ConfigError(f"https://x:{SECRET}@h/ {TOKEN}")) == "https://***@h/ ***"


def test_provenance_is_redacted_where_every_source_kind_returns_it(monkeypatch, tmp_path):
    def fake_kind(source, cache, repo):
        return sources.Snapshot(
            "0" * 40,
            f"https://u:{SECRET}@h/x master",
            {
                "url": f"https://u:{SECRET}@h/x",
                "submodules": {"a": {"url": f"ssh://u:{SECRET}@h/y"}},
            },
        )

    source = SimpleNamespace(kind="git")
    monkeypatch.setitem(sources.KINDS, "git", sources.Kind(type(source), fake_kind))
    snap = sources.snapshot(source, None, None)
    assert SECRET not in json.dumps([snap.description, snap.provenance])
    assert snap.provenance["url"] == "https://***@h/x"


def test_pr_body_and_manifest_carry_no_credentials():
    results, _ = load_results(ROOT / "tests" / "data" / "results-cpu-sample.json")
    for c in results.cells:
        c.source.url = f"https://me:{SECRET}@github.com/me/ggml.git"
    target = results.cells[0].target
    from orchestrator.upstream import pr_body

    commits = [B.SeriesCommit("s", "b", ("src/x.c",))]
    body = "\n".join(
        pr_body.additional_information(
            results, "0" * 64, target, commits, ["0001-s.patch"], {}, None
        )
    )
    assert SECRET not in body and "me/ggml.git" not in body  # the source URL is not the PR's
    man = B.manifest(
        target=target,
        layout="ggml",
        results=results,
        results_sha256="0" * 64,
        results_path="/r",
        source=results.cells[0].source.to_json(),
        patched_commit="1" * 40,
        patches=[],
        files={},
        verification=None,
        toolchain={},
        warnings=[],
    )
    assert SECRET not in json.dumps(man)


def test_progress_lines_are_redacted(monkeypatch):
    from rich.console import Console

    from orchestrator.progress import Reporter

    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    out = io.StringIO()
    r = Reporter(1, Console(file=out, width=300))
    r.start_cell(f"t/{TOKEN}")
    r.step("fetch", f"git https://u:{SECRET}@h/x")
    r.done(f"ok {TOKEN}")
    r.skip(f"https://u:{SECRET}@h/x")
    r.cell_result("failed", f"https://u:{SECRET}@h/x")
    text = out.getvalue()
    assert SECRET not in text and TOKEN not in text and "https://***@h/x" in text


def test_github_errors_given_as_a_string_are_one_message():
    """Issue 16 point 9: `errors` as a string used to be printed character by character."""
    from orchestrator.upstream import github_api as G

    text = json.dumps({"message": "Validation Failed", "errors": "head branch is missing"})
    assert G.github_message(text) == "Validation Failed: head branch is missing"


# ----------------------------------------------------------------
# issue 23: parsed userinfo, the edge

import pytest  # noqa: E402

from orchestrator.redact import RedactingStream  # noqa: E402


@pytest.mark.parametrize(
    "text, secret",
    [
        ("https://u:pa)ss@host/x", "pa)ss"),
        ("git clone 'https://u:it'sme@h/x'", "it'sme"),
        ("https://u:a(b)c@host", "a(b)c"),
        ("git+ssh://u:p;w=d@host/x", "p;w=d"),
        ("see https://tok3n-only@github.com/x", "tok3n-only"),
        ("https://h/x?access_token=abcdef&a=1", "abcdef"),
    ],
)
def test_userinfo_is_parsed_not_matched(text, secret):
    assert secret not in redact(text)


def test_a_url_without_userinfo_and_a_mail_address_stay(monkeypatch):
    assert redact('{"u":"https://h/x","e":"a@b.c"}') == '{"u":"https://h/x","e":"a@b.c"}'


def test_the_stream_redacts_lines_whatever_prints_them(monkeypatch):
    import io

    monkeypatch.setenv("GH_TOKEN", "ghp_live_value_123")
    raw = io.StringIO()
    s = RedactingStream(raw)
    s.write("token ghp_live")
    s.write("_value_123 in two writes\n")
    s.write("tail ghp_live_value_123")
    s.flush()
    assert "ghp_live_value_123" not in raw.getvalue() and raw.getvalue().count("***") == 2


# words a results document holds, and the pieces a secret query or URL is made of
_PIECES = st.sampled_from(
    ["-DGGML_CPU=ON", "a=b", "?token=abcd", "&key=v", ";sig=1", "?", ";", "=", "https://", "h/x"]
)


@given(strings=st.lists(st.lists(_PIECES, max_size=8).map("".join), max_size=6))
def test_redact_data_agrees_with_redact_on_every_string(strings):
    """The document walk skips the strings that cannot hold a secret: it must never skip one
    that redact would change. No secret known (the fast path's case): none in the environment,
    no URL password met by an earlier test."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(redact_module, "_SEEN", set())
        for name in redact_module.SECRET_ENV:
            mp.delenv(name, raising=False)
        assert redact_data({"a": strings}) == {"a": [redact(s) for s in strings]}


def test_a_github_token_shape_is_removed_whoever_it_belongs_to(monkeypatch):
    for name in redact_module.SECRET_ENV:
        monkeypatch.delenv(name, raising=False)
    classic, fine = "ghp_" + "aZ9" * 12, "github_pat_" + "11AB_cd" * 8
    assert redact(f"x {classic}_tail {fine}.") == "x ***_tail ***."
    assert redact(f"(gho_{'b' * 36})") == "(***)"
    # words that only look a little like one stay
    for word in ("ghp_short", "high_value_numbers", "xghp_" + "a" * 36, "the ghost_in"):
        assert redact(word) == word


def test_a_short_password_met_in_a_url_is_removed_as_a_word_not_inside_words(monkeypatch):
    """A URL's password "pass" is removed wherever it stands alone later, but not from
    "passed" or "/etc/passwd": the verdicts would read "***ed" (what CI printed once a test's
    user:pass@ URL had been seen). A long one goes wherever it appears."""
    monkeypatch.setattr(redact_module, "_SEEN", set())
    assert redact("https://u:pass@example.org/x") == "https://***@example.org/x"
    assert redact("passed: pass, /etc/passwd") == "passed: ***, /etc/passwd"
    redact("https://u:Zq8vLm2pXr7tW4@example.org/x")
    assert redact("aZq8vLm2pXr7tW4b") == "a***b"
