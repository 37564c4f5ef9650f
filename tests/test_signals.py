import math

import numpy as np
import pytest

from ragcal.retrieval import RetrievalResult
from ragcal.signals import SIGNALS, compute_signals, get_signal, register_signal, unregister_signal


def results(dense=(0.8, 0.5), bm25_raw=(7.0,), bm25_stopwords=(), rrf=(0.03,)):
    def make(name, scores):
        return RetrievalResult(name, tuple(f"{name}{n}#0" for n in range(len(scores))), np.array(scores))

    return {
        "dense": make("dense", dense),
        "bm25_raw": make("bm25_raw", bm25_raw),
        "bm25_stopwords": make("bm25_stopwords", bm25_stopwords),
        "rrf": make("rrf", rrf),
    }


def test_builtin_signals():
    values = compute_signals(results())
    assert values["dense_top1"] == 0.8 and values["dense_top2"] == 0.5
    assert values["dense_gap"] == pytest.approx(0.8 - 0.5)
    assert values["bm25_top1_raw"] == 7.0
    assert values["bm25_top1_stopwords"] == 0.0 and values["bm25_empty_stopwords"] == 1.0
    assert values["bm25_empty_raw"] == 0.0
    assert values["rrf_top1"] == 0.03
    required = {
        "dense_top1",
        "dense_top2",
        "dense_gap",
        "bm25_top1_raw",
        "bm25_top1_stopwords",
        "bm25_empty_stopwords",
        "rrf_top1",
    }
    assert required <= set(SIGNALS)
    assert not get_signal("bm25_empty_stopwords").higher_is_answerable


def test_single_result_gives_nan_second_score():
    values = compute_signals(results(dense=(0.9,)))
    assert math.isnan(values["dense_top2"]) and math.isnan(values["dense_gap"])


def test_register_a_new_signal_and_errors():
    @register_signal("dense_top2_mean_test", retrievers=("dense",))
    def mean_of_two(query_results):
        """Mean of the two best cosines."""
        return float(query_results["dense"].scores[:2].mean())

    try:
        assert compute_signals(results(), ["dense_top2_mean_test"]) == {"dense_top2_mean_test": pytest.approx(0.65)}
        assert get_signal("dense_top2_mean_test").description == "Mean of the two best cosines."
        assert list(SIGNALS)[-1] == "dense_top2_mean_test"
        with pytest.raises(ValueError, match="already registered"):
            register_signal("dense_top2_mean_test", retrievers="dense")(mean_of_two)
        register_signal("dense_top2_mean_test", retrievers="dense", replace=True)(mean_of_two)
    finally:
        unregister_signal("dense_top2_mean_test")
    with pytest.raises(ValueError, match="unknown signal 'nope'; registered signals are: dense_top1"):
        get_signal("nope")
    with pytest.raises(KeyError, match="needs retriever results"):
        get_signal("rrf_top1")({"dense": results()["dense"]})
