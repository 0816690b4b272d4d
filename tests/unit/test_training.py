"""Training evidence: parsing, the bug's signature, the table, the plot."""

import math

import pytest

from orchestrator.model.results import EpochLoss
from orchestrator.verdicts.training import (
    diverges_as_predicted,
    epochs,
    figure,
    plot,
    table_markdown,
)

FIXED = """train-opt-dynamic: linear regression, 8 inputs
epoch=1 train_loss=2.63242 eval_loss=1.5473
epoch=2 train_loss=1.18589 eval_loss=0.791693
epoch=3 train_loss=0.572887 eval_loss=0.41297
"""
BUGGY = """epoch=1 train_loss=1.6816 eval_loss=1.21143
epoch=2 train_loss=3.48703 eval_loss=1.48637
epoch=3 train_loss=nan eval_loss=inf
"""


def test_epochs_parsed_exactly():
    rows = epochs(FIXED)
    assert rows[0] == EpochLoss(epoch=1, train_loss=2.63242, eval_loss=1.5473)
    assert [r.epoch for r in rows] == [1, 2, 3]
    buggy = epochs(BUGGY)
    assert math.isnan(buggy[2].train_loss) and math.isinf(buggy[2].eval_loss)


def test_the_bugs_signature():
    assert diverges_as_predicted(epochs(FIXED), epochs(BUGGY)) is True
    assert diverges_as_predicted(epochs(FIXED), epochs(FIXED)) is False  # both learn: no evidence
    assert diverges_as_predicted(epochs(BUGGY), epochs(BUGGY)) is False  # the fix does not learn
    assert diverges_as_predicted([], epochs(BUGGY)) is None


def test_table_numbers_are_the_results_numbers():
    table = table_markdown(epochs(FIXED), epochs(BUGGY))
    row = next(line for line in table.splitlines() if line.startswith("| 2 |"))
    assert [float(x) for x in row.strip("| ").split(" | ")] == [
        2,
        1.18589,
        0.791693,
        3.48703,
        1.48637,
    ]
    assert "| 3 | 0.572887 | 0.41297 | nan | inf |" in table


def test_plot_has_both_curves_and_labelled_axes(tmp_path):
    pytest.importorskip(
        "matplotlib", reason="the plot needs the plot extra: pip install 'ggml-patch[plot]'"
    )
    fig = figure(epochs(FIXED), epochs(BUGGY), "t")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "epoch" and "loss" in ax.get_ylabel()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == [
        "train, with the fix",
        "eval, with the fix",
        "train, without the fix",
        "eval, without the fix",
    ]
    png = plot(epochs(FIXED), epochs(BUGGY), tmp_path / "p.png", "t")
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 5000
    # reproducible
    assert plot(epochs(FIXED), epochs(BUGGY), tmp_path / "q.png", "t").read_bytes() == data
