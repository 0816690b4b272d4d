"""The corpus of malformed matrix files (issue 16): tests/data/bad-matrices/*.yaml, each with its
expected exit code and a phrase of its message in expectations.tsv. Each one, given to
`ggml-patch status`: that exit code, at most 3 lines on stderr, never an internal error, and
well under 10 s (alias bombs included). Nothing reaches the network: pip's index is a closed
port on 127.0.0.1, so a valid file whose source is on PyPI ends as "source unreachable" (3)."""

import time
from pathlib import Path

import pytest

from orchestrator import cli

from ..helpers.security import isolated, isolated_env, tool  # noqa: F401 (fixture)

CORPUS = Path(__file__).resolve().parents[1] / "data" / "bad-matrices"


def expectations() -> list[tuple[str, int, str]]:
    rows = []
    for line in (CORPUS / "expectations.tsv").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, code, phrase = (line.split("\t") + [""])[:3]
        rows.append((name, int(code), phrase))
    return rows


CASES = expectations()


def test_the_corpus_is_large_and_complete():
    assert len(CASES) >= 60
    on_disk = sorted(p.name for p in CORPUS.glob("*.yaml"))
    assert on_disk == sorted(name for name, _, _ in CASES)
    assert {code for _, code, _ in CASES} >= {2, 3}


@pytest.mark.parametrize("name, code, phrase", CASES, ids=[c[0] for c in CASES])
def test_each_malformed_matrix(name, code, phrase, tmp_path, isolated, capsys):  # noqa: F811
    t0 = time.monotonic()
    got = cli.main(["status", "--matrix", str(CORPUS / name), "--cache", str(tmp_path / "cache")])
    seconds = time.monotonic() - t0
    out, err = capsys.readouterr()
    assert got == code, (got, out[-2000:], err)
    assert len(err.strip().splitlines()) <= 3, err
    assert "internal error" not in err and "Traceback" not in err, err
    assert phrase in out + err, (phrase, out, err)
    if code == 2:  # one line naming the file (and line), or the key of the source that is wrong
        assert err.startswith("ggml-patch: error: ") and (
            f"{CORPUS / name}:" in err or "targets." in err
        ), err
    assert seconds < 10


@pytest.mark.parametrize("name", [n for n, _, _ in CASES if "bomb" in n or "nesting" in n])
def test_bombs_end_quickly_in_a_real_process(name, tmp_path):
    proc = tool(
        "status",
        "--matrix",
        CORPUS / name,
        "--cache",
        tmp_path / "cache",
        env=isolated_env(tmp_path),
        timeout=30,
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) <= 3, proc.stderr
    assert proc.seconds < 10
