"""Notebook 09's live log and its stand-in labeler; the shift display."""

import numpy as np
import pandas as pd
import pytest

from ragcal.gates import ThresholdGate
from ragcal.monitoring import monitor
from ragcal.plotting import ShiftDisplay
from ragcal.study.monitoring import truth_labels


def test_truth_labels_keep_only_retrieved_gold_pages():
    review = pd.DataFrame(
        {"id": ["q1", "q2", "q3"], "page_1": ["a.md", "x.md", "a.md"], "page_2": ["b.md", "", "a.md"]}
    )
    truth = pd.DataFrame(
        {
            "id": ["q3", "q2", "q1"],
            "answerable": [True, False, True],
            "slice": ["answerable", "near-domain", "answerable"],
            "gold": [("c.md",), (), ("b.md", "z.md")],
        }
    )
    labels = truth_labels(review, truth, ["page_1", "page_2"])
    assert labels == [
        {"row": 0, "answerable": True, "slice": "answerable", "gold": ["b.md"]},
        {"row": 1, "answerable": False, "slice": "near-domain", "gold": []},
        # answerable, but its page was not retrieved: a retrieval miss, no gold page
        {"row": 2, "answerable": True, "slice": "answerable", "gold": []},
    ]


def test_shift_display_draws_the_report_and_says_when_there_is_no_time_test():
    rng = np.random.default_rng(0)
    calibration = pd.DataFrame({"dense_top1": rng.normal(0.6, 0.1, 80)})
    live = pd.DataFrame({"dense_top1": np.r_[rng.normal(0.4, 0.1, 59), np.nan]})
    gate = ThresholdGate("dense_top1", 0.5)
    report = monitor(gate, live, calibration, n_resamples=50)
    display = ShiftDisplay.from_report(report, live, calibration)
    assert display.live.size == 59 and display.calibration.size == 80 and display.martingale is None
    assert display.ks_p_value == report.signals.set_index("signal").loc["dense_top1", "p_value"]
    display.plot()
    assert display.line_ is None and not display.axes_[1].axison
    with pytest.raises(ValueError, match="no test of 'bm25_top1_raw'"):
        ShiftDisplay.from_report(report, live, calibration, signal="bm25_top1_raw")
    timed = live.assign(timestamp=pd.date_range("2026-01-01", periods=60, freq="min", tz="UTC"))
    report = monitor(gate, timed, calibration, n_resamples=50)
    display = ShiftDisplay.from_report(report, timed, calibration).plot()
    assert display.line_ is not None and display.martingale.size == report.sequential.n
