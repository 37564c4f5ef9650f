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

        def another_definition(query_results):
            return 0.0

        with pytest.raises(ValueError, match="already registered by .*mean_of_two; .*another_definition defines it"):
            register_signal("dense_top2_mean_test", retrievers="dense")(another_definition)
        assert get_signal("dense_top2_mean_test").function is mean_of_two
        register_signal("dense_top2_mean_test", retrievers="dense", replace=True)(another_definition)
        assert compute_signals(results(), ["dense_top2_mean_test"]) == {"dense_top2_mean_test": 0.0}
    finally:
        unregister_signal("dense_top2_mean_test")
    with pytest.raises(ValueError, match="unknown signal 'nope'; registered signals are: dense_top1"):
        get_signal("nope")
    with pytest.raises(KeyError, match="needs retriever results"):
        get_signal("rrf_top1")({"dense": results()["dense"]})


def test_redefining_a_signal_from_the_same_place_replaces_it():
    # A re-run notebook cell defines a new function object with the same module and qualified name.
    def define(offset):
        @register_signal("rerun_cell_test", retrievers=("dense",))
        def rerun_cell_test(query_results):
            return float(query_results["dense"].scores[0]) + offset

        return rerun_cell_test

    try:
        define(0.0)
        second = define(1.0)
        assert get_signal("rerun_cell_test").function is second
        assert compute_signals(results(), ["rerun_cell_test"]) == {"rerun_cell_test": pytest.approx(1.8)}
        assert list(SIGNALS).count("rerun_cell_test") == 1
    finally:
        unregister_signal("rerun_cell_test")


def test_a_builtin_name_cannot_be_taken_by_accident():
    def dense_top1(query_results):
        return 0.0

    with pytest.raises(ValueError, match="already registered by ragcal.signals.builtin.dense_top1"):
        register_signal("dense_top1", retrievers="dense")(dense_top1)
    assert get_signal("dense_top1").origin == "ragcal.signals.builtin.dense_top1"


def test_signals_module_registers_and_reloads(tmp_path):
    from ragcal.signals import load_signals_module

    module = tmp_path / "my_signals.py"
    module.write_text(
        "from ragcal.signals import register_signal\n\n"
        "@register_signal('module_signal_test', retrievers=('dense',))\n"
        "def module_signal_test(results):\n"
        "    return float(results['dense'].scores[0]) * 2\n"
    )
    try:
        assert load_signals_module(module) == ["module_signal_test"]
        assert load_signals_module(module) == ["module_signal_test"]  # loading again replaces, no clash
        assert get_signal("module_signal_test").origin == "ragcal_signals_my_signals.module_signal_test"
        assert compute_signals(results(), ["module_signal_test"]) == {"module_signal_test": pytest.approx(1.6)}
    finally:
        unregister_signal("module_signal_test")
    with pytest.raises(ValueError, match="existing .py file"):
        load_signals_module(tmp_path / "missing.py")


# --------------------------------------------------------------------------- the issue-11 signals


def ranked(name, pages, scores, info=None):
    """A result whose chunk ids are ``<page>#<n>``."""
    chunk_ids = tuple(f"{page}#{n}" for n, page in enumerate(pages))
    return RetrievalResult(name, chunk_ids, np.array(scores, dtype=float), info=info or {})


def test_sorted_top_k_features_follow_their_formulas():
    scores = np.array([0.9, 0.7, 0.6, 0.55, 0.5, 0.48, 0.47, 0.46, 0.45, 0.44, 0.1])
    values = compute_signals(
        {"dense": ranked("dense", ["a.md"] * 11, scores)}, ["dense_top10_mean", "dense_top10_std", "dense_top10_drop"]
    )
    top = scores[:10]
    ranks = np.arange(1, 11)
    slope = ((ranks - ranks.mean()) * (top - top.mean())).sum() / ((ranks - ranks.mean()) ** 2).sum()
    assert values["dense_top10_mean"] == pytest.approx(top.mean())
    assert values["dense_top10_std"] == pytest.approx(np.sqrt(((top - top.mean()) ** 2).mean()))
    assert values["dense_top10_drop"] == pytest.approx(-slope)
    one = compute_signals({"dense": ranked("dense", ["a.md"], [0.9])}, ["dense_top10_mean", "dense_top10_drop"])
    assert one["dense_top10_mean"] == 0.9 and math.isnan(one["dense_top10_drop"])
    empty = compute_signals({"dense": ranked("dense", [], [])}, ["dense_top10_mean", "dense_top10_std"])
    assert all(math.isnan(value) for value in empty.values())


def test_info_signals_read_their_retrievers_diagnostics_and_are_nan_without():
    with_info = {
        "dense": ranked("dense", ["a.md"], [0.8], {"centroid_cosine": 0.3, "page_knn_cosine": 0.6}),
        "bm25_raw": ranked(
            "bm25_raw", ["a.md"], [6.0], {"max_score": 12.0, "coverage_top": 0.75, "coverage_corpus": 1.0}
        ),
        "bm25_stopwords": ranked(
            "bm25_stopwords", [], [], {"max_score": 5.0, "coverage_top": 0.0, "coverage_corpus": 0.5}
        ),
    }
    names = [
        "bm25_norm_raw",
        "bm25_norm_stopwords",
        "bm25_coverage_top10",
        "bm25_coverage_corpus",
        "dense_centroid_cosine",
        "dense_page_knn5",
    ]
    values = compute_signals(with_info, names)
    assert values == {
        "bm25_norm_raw": 6.0 / 12.0,
        "bm25_norm_stopwords": 0.0,  # nothing matched: 0, like bm25_top1_stopwords
        "bm25_coverage_top10": 0.75,
        "bm25_coverage_corpus": 1.0,
        "dense_centroid_cosine": 0.3,
        "dense_page_knn5": 0.6,
    }
    without = {name: ranked(name, ["a.md"], [1.0]) for name in ("dense", "bm25_raw", "bm25_stopwords")}
    assert all(math.isnan(value) for value in compute_signals(without, names).values())


def test_dense_bm25_agreement():
    dense = ranked("dense", ["a.md", "b.md", "a.md", "c.md"], [0.9, 0.8, 0.7, 0.6])
    bm25 = ranked("bm25_stopwords", ["c.md", "d.md", "a.md"], [9.0, 8.0, 7.0])
    values = compute_signals(
        {"dense": dense, "bm25_stopwords": bm25}, ["dense_bm25_page_overlap", "dense_top_page_bm25_rr"]
    )
    # pages {a, b, c} and {c, d, a}: 2 shared of 4; the dense top page a.md is BM25's third page.
    assert values == {"dense_bm25_page_overlap": 2 / 4, "dense_top_page_bm25_rr": 1 / 3}
    nothing = compute_signals(
        {"dense": dense, "bm25_stopwords": ranked("bm25_stopwords", [], [])},
        ["dense_bm25_page_overlap", "dense_top_page_bm25_rr"],
    )
    assert nothing == {"dense_bm25_page_overlap": 0.0, "dense_top_page_bm25_rr": 0.0}


def test_every_new_signal_is_registered_with_a_docstring():
    from ragcal.signals import NEW_SIGNALS

    for name in NEW_SIGNALS:
        signal = get_signal(name)
        assert signal.description and signal.function.__doc__


def test_every_builtin_signal_is_vectorised_and_its_per_query_form_is_a_batch_of_one():
    from ragcal.signals import ResultBatch

    builtin = [signal for signal in SIGNALS.values() if signal.origin.startswith("ragcal.signals.")]
    assert len(builtin) >= 21
    one = results(dense=(0.9, 0.5, 0.4), bm25_raw=(7.0, 3.0))
    for signal in builtin:
        assert signal.batch is not None and signal.function.__wrapped__ is signal.batch
        if all(name in one for name in signal.retrievers):
            value = signal(one)
            batch_value = float(signal.values(ResultBatch.of_query(one))[0])
            assert value == batch_value or (math.isnan(value) and math.isnan(batch_value))
