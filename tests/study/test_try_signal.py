"""ragcal try-signal: a new signal beside dense_top1 on small datasets, the CLI, its errors, and the cached lists."""

import numpy as np
import pytest
from labeled_queries import QUERIES
from test_imported_study import write_benchmark

from ragcal.calibration import group_splits, heldout_outcomes
from ragcal.cli import main
from ragcal.datasets import FASTAPI_EXCLUDE, BundledCorpus
from ragcal.metrics import auc_table
from ragcal.retrieval.index import build_index
from ragcal.scoring import score_table
from ragcal.signals import SIGNALS, register_signal, unregister_signal
from ragcal.study.imported import BENCHMARKS, BenchmarkInputs
from ragcal.study.imported_report import spread
from ragcal.study.retrieved_cache import cached_retrieval
from ragcal.study.try_signal import signal_names, trial_data, trial_report, try_signal

SIGNAL_FILE = '''
from ragcal.signals import register_signal


@register_signal("trial_lift_example", retrievers=("dense",))
def trial_lift_example(results):
    """Best cosine minus the mean of ranks 2 to 5."""
    scores = results["dense"].scores
    return float(scores[0] - scores[1:5].mean())
'''


@pytest.fixture
def tiny_benchmark(tmp_path):
    corpus, queries = write_benchmark(tmp_path / "tiny")
    return BenchmarkInputs("tiny", "Three fake articles", corpus=corpus, queries=queries)


@pytest.fixture
def fastapi_small(fastapi_slice, tmp_path):
    queries = tmp_path / "queries.csv"
    queries.write_text(QUERIES, encoding="utf-8")
    return BundledCorpus("fastapi-slice", "A few FastAPI pages", fastapi_slice, queries, exclude=FASTAPI_EXCLUDE)


@pytest.fixture
def lift():
    @register_signal("trial_lift", retrievers=("dense",), replace=True)
    def trial_lift(results):
        scores = results["dense"].scores
        return float(scores[0] - scores[1:5].mean())

    yield trial_lift
    unregister_signal("trial_lift")


def test_dense_top1_row_is_what_auc_table_and_heldout_outcomes_give(tiny_benchmark, embedder, lift):
    rows = try_signal([lift], corpora=[], benchmarks=[tiny_benchmark], embedder=embedder, n_resamples=300,
                      n_splits=10, use_cache=False, log=None)
    assert rows["signal"].tolist() == ["dense_top1", "trial_lift"]
    data = trial_data(tiny_benchmark, embedder=embedder, use_cache=False)
    table = score_table(data.queries, data.retrieved)
    expected = auc_table(table, ["dense_top1"], n_resamples=300).iloc[0]
    assert expected["comparison"] == "all unanswerable"
    first = rows.iloc[0]
    for column in ("auc", "ci_low", "ci_high", "n_answerable", "n_unanswerable"):
        assert first[column] == expected[column]
    # Held out by article, every one of the C(3, 2) = 3 article splits (fewer than the 10 asked for).
    splits = group_splits(data.groups, max_splits=10)
    heldout = heldout_outcomes(table, "dense_top1", ["keep@0.95"], splits=splits)
    assert (first["n_splits"], first["split_by"]) == (3, "article")
    assert (first["unanswerable_refused"], first["unanswerable_refused_low"], first["unanswerable_refused_high"]) == (
        spread(heldout["unanswerable_refused"])
    )
    assert first["answerable_refused"] == pytest.approx(1 - heldout["answerable_kept"].mean())
    assert not np.isnan([first["article_low"], first["article_high"]]).any()


def test_a_corpus_is_held_out_by_slice(fastapi_small, embedder, lift):
    rows = try_signal("trial_lift", corpora=[fastapi_small], benchmarks=[], embedder=embedder, n_resamples=100,
                      n_splits=7, use_cache=False, log=None)
    assert rows["dataset"].tolist() == ["fastapi-slice"] * 2
    assert set(rows["split_by"]) == {"slice"} and set(rows["n_splits"]) == {7}
    assert rows[["article_low", "article_high"]].isna().all().all()
    shares = rows[["answerable_refused", "unanswerable_refused"]].to_numpy()
    assert ((shares >= 0) & (shares <= 1)).all()
    report = trial_report(rows)
    assert report.index("dense_top1") < report.index("trial_lift") and "7 splits by slice" in report


def test_signals_are_named_registered_or_refused(lift):
    assert signal_names([lift, "dense_gap", SIGNALS["trial_lift"]]) == ["trial_lift", "dense_gap"]
    with pytest.raises(ValueError, match="not a registered signal"):
        signal_names(lambda results: 0.0)
    with pytest.raises(ValueError, match="unknown signal 'no_such_signal'"):
        signal_names("no_such_signal")
    with pytest.raises(ValueError, match="unknown benchmark 'nope'"):
        try_signal(lift, benchmarks=["nope"], log=None)


def test_cached_lists_are_the_retrieved_ones(fastapi_small, embedder, tmp_path):
    index = build_index(fastapi_small.corpus, exclude=fastapi_small.exclude, embedder=embedder)
    questions = ["How do I set a cookie?", "Which wine goes with lamb?"]
    retrieved, cached = cached_retrieval(index, questions, lambda: index.retrieve(questions), cache_dir=tmp_path)
    loaded, from_cache = cached_retrieval(index, questions, lambda: pytest.fail("retrieved again"), cache_dir=tmp_path)
    assert (cached, from_cache) == (False, True)
    assert list(loaded) == list(retrieved)
    for name in retrieved:
        for original, read in zip(retrieved[name], loaded[name]):
            assert read.chunk_ids == original.chunk_ids and np.array_equal(read.scores, original.scores)
            assert list(read.info) == list(original.info)  # and the values, NaN (clarity of an unknown word) too:
            assert np.array_equal(list(read.info.values()), list(original.info.values()), equal_nan=True)
            assert read.tokens == original.tokens and read.view == original.view
            assert (read.positions is None) == (original.positions is None)
            if original.positions is not None:
                assert np.array_equal(read.positions, original.positions)
                assert list(read.source_ids) == list(original.source_ids)
    assert score_table_equal(questions, retrieved, loaded)
    # Other questions are another key: retrieved, not read.
    _, again = cached_retrieval(index, questions[:1], lambda: index.retrieve(questions[:1]), cache_dir=tmp_path)
    assert again is False


def score_table_equal(questions, retrieved, loaded) -> bool:
    import pandas as pd

    queries = pd.DataFrame({"id": ["a", "b"], "query": questions, "answerable": [True, False], "slice": ["x", "y"]})
    return score_table(queries, retrieved).equals(score_table(queries, loaded))


def test_cli_tries_the_signals_a_file_registers(tiny_benchmark, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(BENCHMARKS, "tiny", tiny_benchmark)
    signal_file = tmp_path / "my_signal.py"
    signal_file.write_text(SIGNAL_FILE, encoding="utf-8")
    arguments = ["try-signal", str(signal_file), "--benchmark", "tiny", "--splits", "5", "--resamples", "50",
                 "--cache-dir", str(tmp_path / "cache")]
    try:
        assert main(arguments) == 0
        first = capsys.readouterr()
        assert main(arguments) == 0
        second = capsys.readouterr()
    finally:
        unregister_signal("trial_lift_example")
    assert f"{signal_file}: registered trial_lift_example" in first.err
    assert "tiny: 19 questions, retrieved" in first.err and "tiny: 19 questions, cached lists" in second.err
    table = first.out.split("\n\n")[0].splitlines()
    assert "3 splits by article" in table[0]
    assert table[2].split()[0] == "dense_top1" and table[3].split()[0] == "trial_lift_example"
    # The warm run reads the cached lists and gives the same numbers (only the wall time differs).
    assert first.out.split("\n", 1)[1] == second.out.split("\n", 1)[1]


def test_cli_names_a_file_that_registers_nothing_or_fails(tmp_path, capsys):
    empty = tmp_path / "nothing.py"
    empty.write_text("LIMIT = 3\n", encoding="utf-8")
    assert main(["try-signal", str(empty)]) == 2
    assert f"{empty}: registers no signal" in capsys.readouterr().err
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n", encoding="utf-8")
    assert main(["try-signal", str(broken)]) == 2
    assert f"{broken}, line 1: the signals module failed to load" in capsys.readouterr().err
    assert main(["try-signal", str(tmp_path / "missing.py")]) == 2
    assert "missing.py" in capsys.readouterr().err
