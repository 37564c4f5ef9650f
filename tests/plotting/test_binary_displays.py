"""Binary signals in ROC and risk-coverage displays: one marker at the operating point, not a curve."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ragcal.plotting import RiskCoverageDisplay, RocDisplay


def table():
    answerable = np.array([True] * 4 + [False] * 6)
    return pd.DataFrame(
        {
            "id": [f"q{i}" for i in range(10)],
            "query": ["?"] * 10,
            "answerable": answerable,
            "slice": np.where(answerable, "answerable", "near-domain"),
            "dense_top1": np.linspace(0.9, 0.1, 10),
            "llm_found": [1, 1, 1, 0, 1, 1, 0, 0, 0, 0],
            "llm_idk": [0, 0, 0, 1, 0, 0, 1, 1, 1, 1],
        }
    )


def test_roc_display_draws_a_binary_signal_as_one_marker_at_its_tpr_fpr():
    display = RocDisplay.from_score_table(
        table(),
        ["dense_top1", "llm_found", "llm_idk"],
        directions={"llm_idk": False},
        n_resamples=50,
        n_band_resamples=10,
    )
    assert set(display.curves) == {"dense_top1"}
    # Hand count: 3 of 4 answerable and 2 of 6 unanswerable said "found"; llm_idk is the same verdict negated.
    assert display.points == {"llm_found": (2 / 6, 3 / 4), "llm_idk": (2 / 6, 3 / 4)}
    assert display.aucs["llm_found"][0] == (3 / 4 + 1 - 2 / 6) / 2
    figure, ax = plt.subplots()
    display.plot(ax=ax)
    marker = display.points_["llm_found"]
    assert marker.get_linestyle() == "None" and marker.get_marker() == "o"
    assert marker.get_xdata().tolist() == [2 / 6] and marker.get_ydata().tolist() == [3 / 4]
    assert "binary" in marker.get_label()
    assert len(display.lines_["dense_top1"].get_xdata()) > 2 and display.lines_["dense_top1"].get_linestyle() == "-"
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert any(text.startswith("llm_found (binary") for text in legend)
    plt.close(figure)


def test_risk_coverage_display_draws_a_binary_signal_as_its_operating_point():
    scores = table()
    supported = scores["answerable"].to_numpy()
    display = RiskCoverageDisplay.from_scores(
        {"dense_top1": scores["dense_top1"], "llm_found": scores["llm_found"]},
        {"dense_top1": supported, "llm_found": supported},
    )
    assert set(display.curves) == {"dense_top1"}
    assert display.operating_points == {"llm_found": (5 / 10, 2 / 5)}  # 5 answered, 2 of them unanswerable
    figure, ax = plt.subplots()
    display.plot(ax=ax)
    marker = display.operating_points_["llm_found"]
    assert marker.get_linestyle() == "None" and marker.get_marker() == "D"
    assert marker.get_xdata().tolist() == [0.5] and marker.get_ydata().tolist() == [0.4]
    assert set(display.lines_) == {"dense_top1"}
    plt.close(figure)
