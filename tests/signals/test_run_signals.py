"""The signals of a user's own run: formulas on hand-built lists, edge cases, and presence only with ``run`` results."""

import math

import numpy as np
import pytest

from ragcal.retrieval import RetrievalResult
from ragcal.signals import RUN_SIGNALS, compute_signals, compute_signals_batch, get_signal, signals_for


def run(*scores):
    return RetrievalResult("run", tuple(f"p{n}.md#0" for n in range(len(scores))), np.array(scores, dtype=float))


def test_the_formulas_on_a_list_longer_than_ten():
    scores = [20.0, 15.0, 14.0, 9.0, 8.0, 8.0, 7.0, 5.0, 4.0, 1.0, 0.5, 0.25]
    values = compute_signals({"run": run(*scores)}, RUN_SIGNALS)
    top = np.array(scores[:10])
    assert values["run_top1"] == 20.0 and values["run_gap"] == 20.0 - 15.0
    assert values["run_top10_mean"] == pytest.approx(top.mean())
    assert values["run_top10_std"] == pytest.approx(math.sqrt(((top - top.mean()) ** 2).mean()))
    ranks = np.arange(1, 11)
    slope = ((ranks - ranks.mean()) * (top - top.mean())).sum() / ((ranks - ranks.mean()) ** 2).sum()
    assert values["run_top10_drop"] == pytest.approx(-slope)


def test_short_empty_and_tied_lists():
    batch = {"run": [run(3.0), run(), run(2.0, 2.0)]}
    values = compute_signals_batch(batch, RUN_SIGNALS)
    assert values["run_top1"].tolist()[0] == 3.0 and math.isnan(values["run_top1"][1])
    assert math.isnan(values["run_gap"][0]) and values["run_gap"][2] == 0.0  # one candidate: no gap; a tie: 0
    assert values["run_top10_std"][0] == 0.0 and math.isnan(values["run_top10_std"][1])
    assert math.isnan(values["run_top10_drop"][0]) and values["run_top10_drop"][2] == 0.0


def test_run_signals_exist_only_with_run_results():
    assert not set(RUN_SIGNALS) & set(signals_for(["dense", "bm25_raw", "bm25_stopwords", "rrf"]))
    assert set(RUN_SIGNALS) <= set(signals_for(["dense", "run"]))
    assert get_signal("run_top1").passage_scale and not get_signal("run_gap").passage_scale
    assert all(get_signal(name).higher_is_answerable and get_signal(name).description for name in RUN_SIGNALS)
