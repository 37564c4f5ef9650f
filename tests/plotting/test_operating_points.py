"""OperatingPointDisplay: binary decisions as points, computed by hand, drawn onto the curves' own Axes."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from ragcal.metrics import clopper_pearson  # noqa: E402
from ragcal.plotting import OperatingPointDisplay, RocDisplay  # noqa: E402


def test_points_by_hand():
    answerable = np.array([True, True, True, True, False, False, False, False, False, False])
    llm = np.array([True, True, True, False, True, True, False, False, False, False])
    roc = OperatingPointDisplay.from_decisions({"llm": llm}, answerable).points.iloc[0]
    assert roc["x"] == pytest.approx(2 / 6) and roc["y"] == pytest.approx(3 / 4)  # FPR 2 of 6, TPR 3 of 4
    low, high = clopper_pearson(3, 4)
    assert (roc["y_low"], roc["y_high"]) == (pytest.approx(float(low)), pytest.approx(float(high)))
    support = np.array([True, False, True, True, False, False, False, False, False, False])
    risk = OperatingPointDisplay.from_decisions(
        {"llm": llm}, answerable, support=support, space="risk-coverage"
    ).points.iloc[0]
    assert risk["x"] == pytest.approx(5 / 10) and risk["y"] == pytest.approx(3 / 5)  # 3 of its 5 answers unsupported


def test_bad_input():
    with pytest.raises(ValueError, match="needs support="):
        OperatingPointDisplay.from_decisions({"llm": [True]}, [True], space="risk-coverage")
    with pytest.raises(ValueError, match="has 2 decisions for 1 questions"):
        OperatingPointDisplay.from_decisions({"llm": [True, False]}, [True])
    with pytest.raises(ValueError, match="'space' parameter"):
        OperatingPointDisplay.from_decisions({"llm": [True]}, [True], space="pr")
    with pytest.raises(ValueError, match="lack column"):
        OperatingPointDisplay(pd.DataFrame({"name": ["llm"], "x": [0.5]}))


def test_drawn_on_a_roc_keeps_its_legend():
    rng = np.random.default_rng(0)
    table = pd.DataFrame(
        {
            "id": [f"q{n}" for n in range(40)],
            "query": "q",
            "answerable": [n < 20 for n in range(40)],
            "slice": ["answerable"] * 20 + ["near-domain"] * 20,
            "dense_top1": np.r_[rng.normal(0.6, 0.1, 20), rng.normal(0.5, 0.1, 20)],
        }
    )
    roc = RocDisplay.from_score_table(table, ["dense_top1"], n_resamples=50, n_band_resamples=20).plot()
    curves_legend = roc.ax_.get_legend()
    points = pd.DataFrame(
        {"name": ["llm"], "space": ["roc"], "x": [0.3], "x_low": [0.2], "x_high": [0.4], "y": [0.7],
         "y_low": [0.6], "y_high": [0.8]}
    )
    display = OperatingPointDisplay.from_table(points, space="roc").plot(ax=roc.ax_, alpha=0.5)
    assert display.ax_ is roc.ax_ and list(display.points_) == ["llm"]
    assert roc.ax_.get_legend() is curves_legend  # the curves' legend stays the Axes' legend
    assert display.legend_ in roc.ax_.artists and display.legend_.get_texts()[0].get_text() == "llm: (0.30, 0.70)"
    marker = display.points_["llm"].lines[0]
    assert marker.get_xdata()[0] == pytest.approx(0.3) and marker.get_alpha() == 0.5
    # No rows of that space: nothing drawn, the Axes untouched.
    empty = OperatingPointDisplay.from_table(points, space="risk-coverage").plot(ax=roc.ax_)
    assert empty.points_ == {}
    plt.close("all")
