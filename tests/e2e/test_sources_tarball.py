"""Source kind tarball: the real ggml snapshot served as a GitHub-style archive."""

import hashlib
import subprocess

from orchestrator.config import load_matrix
from orchestrator.drift.check import status_of_targets
from orchestrator.drift.status import APPLIES
from orchestrator.vcs.snapshots import SnapshotRepo

from ..helpers.forks import real_snapshot_refs, seeded_cache, write_matrix


def test_real_ggml_as_a_github_style_archive(tool_cache, httpserver, tmp_path):
    refs = real_snapshot_refs(tool_cache)
    default = SnapshotRepo(tool_cache / "snapshots.git")
    commit = default.ref_commit(refs["ggml"])
    data = subprocess.run(
        [
            "git",
            f"--git-dir={default.path}",
            "archive",
            "--format=tar.gz",
            "--prefix=ggml-0.15.3/",
            commit,
        ],
        capture_output=True,
        check=True,
    ).stdout
    sha = hashlib.sha256(data).hexdigest()
    httpserver.expect_request("/ggml-org/ggml/archive/v0.15.3.tar.gz").respond_with_data(data)
    url = httpserver.url_for("/ggml-org/ggml/archive/v0.15.3.tar.gz")
    m = write_matrix(
        tmp_path,
        {"ggml-tarball": f"layout: ggml\nsource: {{kind: tarball, url: '{url}', sha256: {sha}}}\n"},
    )
    cache = seeded_cache(tmp_path / "cache", tool_cache)
    row = status_of_targets(load_matrix(m), cache, ["ggml-tarball"])[0]
    assert row.status == APPLIES, row
    assert row.source.upstream_commit == commit  # git archive's pax comment, as on GitHub
    assert SnapshotRepo(cache.snapshots_git).tree_of(row.base) == default.tree_of(commit)
