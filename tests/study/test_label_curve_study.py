"""The "How many labels are enough" part of each summary and its label_curve.csv."""

import pandas as pd
import pytest

from ragcal.calibration import kept_share_interval
from ragcal.datasets import DATA_DIR
from ragcal.score_tables import read_score_table
from ragcal.study.label_curve import evaluate_label_curve, label_curve_section

RESULTS = DATA_DIR.parent / "results"


@pytest.mark.parametrize(
    "corpus, figure", [("fastapi", "figures/label_curve.png"), ("rust-book", "figures/rust-book/label_curve.png")]
)
def test_the_committed_summary_and_csv_match_a_fresh_computation(corpus, figure, tmp_path):
    table = read_score_table(RESULTS / corpus / "scores.csv", ["dense_top1"])
    tables = evaluate_label_curve(table, tmp_path, log=lambda message: None)
    section = label_curve_section(tables["label_curve"], tables["label_curve_outcome"], figure=figure)
    assert section in (RESULTS / corpus / "summary.md").read_text()
    assert (tmp_path / "label_curve.csv").read_text() == (RESULTS / corpus / "label_curve.csv").read_text()
    # x is half the width of the exact 90% interval of the kept share, for every answerable question of the table.
    n, m = int(table["answerable"].sum()), int((~table["answerable"]).sum())
    low, high = kept_share_interval(n, keep=0.95, confidence=0.9)
    first = section.splitlines()[2]
    assert first.startswith(
        f"With {n} answerable and {m} unanswerable questions, the kept share at `keep@0.95` is "
        f"known to ± {50 * (high - low):.1f} points (half the width of the exact 90% interval"
    )


def test_the_section_compares_the_bands_before_it_says_which_is_wider():
    curve = pd.DataFrame(
        {
            "size": [10],
            "n_answerable": [5],
            "n_unanswerable": [5],
            "n_heldout": [10],
            "threshold": [0.5],
            "threshold_low": [0.4],
            "threshold_high": [0.6],
            "answerable_kept": [0.9],
            "answerable_kept_low": [0.89],
            "answerable_kept_high": [0.91],
            "unrelated_refused": [1.0],
            "unrelated_refused_low": [1.0],
            "unrelated_refused_high": [1.0],
            "unanswerable_refused": [1.0],
            "unanswerable_refused_low": [1.0],
            "unanswerable_refused_high": [1.0],
        }
    )
    outcome = pd.Series(
        {
            "answerable_n": 10,
            "unanswerable_n": 10,
            "future_kept_low": 0.7,
            "future_kept_high": 0.99,
            "unrelated_refused": 1.0,
            "unrelated_refused_k": 10,
            "unrelated_n": 10,
            "unrelated_refused_low": 0.74,
            "unrelated_refused_high": 1.0,
        }
    )
    section = label_curve_section(curve, outcome)
    assert "± 14.5 points" in section and "no wider than the exact band" in section
    assert "Below 20 answerable questions `keep@0.95` keeps every one of them" in section
