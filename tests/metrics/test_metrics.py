import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from ragcal.metrics import DegenerateInputWarning, auc_interval, retrieval_metrics
from ragcal.metrics.auc import auc_bootstrap
from ragcal.metrics.retrieval import bootstrap_mean_ci, per_query_retrieval_metrics
from ragcal.runs import read_trec_run


def auc_ci(*args, **kwargs):
    """(auc, low, high) of auc_interval over every row (no subsample)."""
    result = auc_interval(*args, bootstrap_rows=None, **kwargs)
    return result.auc, result.low, result.high


def run_frame(rankings):
    return pd.DataFrame(
        [(qid, docid, rank) for qid, docids in rankings.items() for rank, docid in enumerate(docids, start=1)],
        columns=["qid", "docid", "rank"],
    )


RUN = run_frame(
    {
        "q1": ["a.md#0", "a.md#1", "b.md#0", "c.md#2", "d.md#0"],
        "q2": ["x.md#0", "y.md#3", "y.md#1", "z.md#0"],
        "q3": ["m.md#0"],
    }
)
GOLD = {"q1": {"b.md", "d.md"}, "q2": {"y.md"}, "q3": {"nothing.md"}, "q4": {"a.md"}, "q5": set()}


def test_hand_computed_page_level_metrics():
    table = per_query_retrieval_metrics(
        RUN, GOLD, metrics=("recall@1", "recall@2", "recall@5", "mrr@10", "context_precision@5", "context_precision@2")
    )
    # q1 pages: a, b, c, d -> gold b at page rank 2, d at page rank 4.
    assert table.loc["q1", "recall@1"] == 0
    assert table.loc["q1", "recall@2"] == 1 / 2
    assert table.loc["q1", "recall@5"] == 2 / 2
    assert table.loc["q1", "mrr@10"] == 1 / 2
    assert table.loc["q1", "context_precision@5"] == 2 / 5  # chunks b.md#0 and d.md#0 of the five
    # q2 pages: x, y, z -> gold y at page rank 2; chunks 2 and 3 are from y.
    assert table.loc["q2", "mrr@10"] == 1 / 2
    assert table.loc["q2", "context_precision@5"] == 2 / 5
    assert table.loc["q2", "context_precision@2"] == 1 / 2
    # q3 misses, q4 has no run at all, q5 has no gold and is skipped.
    assert table.loc["q3"].eq(0).all() and table.loc["q4"].eq(0).all()
    assert "q5" not in table.index


def test_matches_trec_eval_on_page_level_runs():
    # trec_eval itself (pytrec_eval, through ir_measures' names): recall@k is trec_eval's recall_k, mrr@10 its
    # recip_rank cut at 10. Compiled C, so the reference costs a second; ranx, used before, compiled its metrics with
    # numba in every fresh environment (about 30 s of CI).
    ir_measures = pytest.importorskip("ir_measures")
    rng = np.random.default_rng(3)
    pages = [f"p{n}.md" for n in range(30)]
    rankings, gold = {}, {}
    for query in range(25):
        chunks = [f"{pages[i]}#{rng.integers(0, 3)}" for i in rng.integers(0, 30, size=40)]
        rankings[f"q{query:02d}"] = list(dict.fromkeys(chunks))
        gold[f"q{query:02d}"] = set(rng.choice(pages, size=rng.integers(1, 4), replace=False))
    run = run_frame(rankings)
    ours = per_query_retrieval_metrics(run, gold, metrics=("recall@1", "recall@5", "recall@10", "mrr@10"))
    page_run = {qid: {} for qid in rankings}
    for qid, chunk_ids in rankings.items():
        for rank, page in enumerate(dict.fromkeys(chunk_id.split("#")[0] for chunk_id in chunk_ids), start=1):
            page_run[qid][page] = 1000.0 - rank
    qrels = {qid: {page: 1 for page in pages_} for qid, pages_ in gold.items()}
    names = {
        ir_measures.R @ 1: "recall@1",
        ir_measures.R @ 5: "recall@5",
        ir_measures.R @ 10: "recall@10",
        ir_measures.RR @ 10: "mrr@10",
    }
    reference = {name: {} for name in names.values()}
    for found in ir_measures.iter_calc(list(names), qrels, page_run):
        reference[names[found.measure]][found.query_id] = found.value
    assert ours.index.tolist() == sorted(gold) and all(len(values) == len(gold) for values in reference.values())
    assert 0 < ours["mrr@10"].mean() < 1  # some hits, some misses: not a vacuous agreement
    for name, values in reference.items():
        np.testing.assert_allclose(ours[name].to_numpy(), [values[qid] for qid in ours.index], err_msg=name)


def test_bootstrap_mean_ci():
    mean, low, high = bootstrap_mean_ci([0, 1, 1, 1], n_resamples=5000, random_state=1)
    assert mean == 0.75 and 0 <= low < 0.75 < high <= 1
    assert bootstrap_mean_ci([1, 1, 1]) == (1.0, 1.0, 1.0)
    assert all(np.isnan(bootstrap_mean_ci([])))
    assert bootstrap_mean_ci([0, 1, 1, 1], random_state=7) == bootstrap_mean_ci([0, 1, 1, 1], random_state=7)


def test_retrieval_metrics_table_and_trec_reader(tmp_path):
    path = tmp_path / "dense.run"
    path.write_text(
        "".join(f"{qid} Q0 {docid} {rank} {1 / rank:.4f} dense\n" for qid, docid, rank in RUN.itertuples(index=False))
    )
    run = read_trec_run(path)
    assert list(run.columns) == ["qid", "docid", "rank", "score", "tag"] and len(run) == len(RUN)
    table = retrieval_metrics({"dense": run}, GOLD, metrics=("recall@5",))
    row = table.iloc[0]
    assert row["retriever"] == "dense" and row["n_queries"] == 4
    assert row["value"] == pytest.approx((1 + 0 + 0 + 0) / 4 + (1) / 4)  # q1 and q2 hit, q3 and q4 miss
    assert row["ci_low"] <= row["value"] <= row["ci_high"]
    path.write_text("q1 Q0 a.md#0 1\n")
    with pytest.raises(ValueError, match=r"dense\.run, line 1: expected 6 fields"):
        read_trec_run(path)


def test_unknown_metric_is_named():
    with pytest.raises(ValueError, match="unknown metric 'ndcg@10'"):
        per_query_retrieval_metrics(RUN, GOLD, metrics=("ndcg@10",))


def test_vectorised_bootstrap_equals_sklearn_on_each_resample():
    rng = np.random.default_rng(0)
    y_true = np.array([True] * 12 + [False] * 9)
    y_score = np.round(rng.normal(size=21) + y_true, 1)  # rounding creates ties
    resampled = auc_bootstrap(y_true, y_score, n_resamples=50, random_state=4)
    # Rebuild the same resamples by hand with the same generator calls.
    check = np.random.default_rng(4)
    positives, negatives = y_score[y_true], y_score[~y_true]
    pos_draws = check.integers(0, positives.size, size=(50, positives.size))
    neg_draws = check.integers(0, negatives.size, size=(50, negatives.size))
    for b in range(50):
        scores = np.concatenate([positives[pos_draws[b]], negatives[neg_draws[b]]])
        labels = np.r_[np.ones(positives.size), np.zeros(negatives.size)]
        assert resampled[b] == pytest.approx(roc_auc_score(labels, scores))


def test_auc_with_ci_hand_case_and_direction():
    # positives 3, 2 ; negatives 1, 2 -> pairs: 3>1, 3>2, 2>1, 2=2 -> (3 + 0.5) / 4
    auc, low, high = auc_ci([1, 1, 0, 0], [3, 2, 1, 2])
    assert auc == pytest.approx(3.5 / 4)
    assert low <= auc <= high
    flipped, _, _ = auc_ci([1, 1, 0, 0], [3, 2, 1, 2], higher_is_answerable=False)
    assert flipped == pytest.approx(1 - 3.5 / 4)


@pytest.mark.parametrize(
    "y_true, y_score, message",
    [
        ([1, 1, 1], [0.1, 0.2, 0.3], "only one class"),
        ([1, 0, 1, 0], [0.5, 0.5, 0.5, 0.5], "constant"),
    ],
)
def test_degenerate_auc_warns_and_returns_nan(y_true, y_score, message):
    with pytest.warns(DegenerateInputWarning, match=message):
        result = auc_ci(y_true, y_score)
    assert all(np.isnan(result))


def test_nan_scores_are_rejected():
    with pytest.raises(ValueError, match="NaN"):
        auc_ci([1, 0], [0.5, np.nan])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        auc_ci([1, 0, 1, 0], [0.9, 0.1, 0.8, 0.3])


# --------------------------------------------------------------------------- check_score_table


def test_score_table_answerable_as_numbers_is_accepted(tmp_path):
    from ragcal.score_tables import check_score_table

    path = tmp_path / "scores.csv"
    path.write_text("id,answerable,slice,score\na,1.0,answerable,0.9\nb,0.0,unrelated,0.1\nc,1,answerable,0.8\n")
    table = check_score_table(pd.read_csv(path), ["score"], source=str(path))
    assert table["answerable"].tolist() == [True, False, True]


def test_the_checked_score_table_is_a_copy_that_never_changes_the_caller_s():
    from ragcal.score_tables import check_score_table

    table = pd.DataFrame({"answerable": [True, False], "slice": ["answerable", "unrelated"], "score": [0.9, 0.1]})
    checked = check_score_table(table, ["score"])
    assert checked is not table and checked.equals(table)
    checked["score"] = [0.5, 0.5]
    checked.loc[0, "slice"] = "changed"
    checked["answerable"] = [False, False]
    assert table["score"].tolist() == [0.9, 0.1] and table["slice"].tolist() == ["answerable", "unrelated"]
    assert table["answerable"].tolist() == [True, False]


@pytest.mark.parametrize(
    "cells, shown",
    [(["1.0", "2.0"], "'2.0'"), (["true", "maybe"], "'maybe'"), (["1", ""], "an empty cell")],
)
def test_score_table_bad_answerable_names_the_file_line_and_plain_value(tmp_path, cells, shown):
    from ragcal.score_tables import check_score_table

    path = tmp_path / "scores.csv"
    path.write_text(f"id,answerable,slice,score\na,{cells[0]},answerable,0.9\nb,{cells[1]},unrelated,0.1\n")
    with pytest.raises(ValueError) as raised:
        check_score_table(pd.read_csv(path), ["score"], source=str(path))
    message = str(raised.value)
    assert message.startswith(f"{path}, line 3, column 'answerable': expected true or false (or 1/0, yes/no), got ")
    assert message.endswith(shown)
    assert "np." not in message and "float64" not in message


@pytest.mark.parametrize("delimiter, name", [(";", "semicolon"), ("\t", "tab")])
def test_score_table_with_another_delimiter_is_named(tmp_path, delimiter, name):
    from ragcal.score_tables import check_score_table

    path = tmp_path / "scores.csv"
    path.write_text(
        delimiter.join(["id", "answerable", "slice", "score"]) + "\n" + delimiter.join(["a", "true", "x", "0.5"]) + "\n"
    )
    with pytest.raises(ValueError) as raised:
        check_score_table(pd.read_csv(path), ["score"], source=str(path))
    message = str(raised.value)
    assert message.startswith(f"{path}: looks {name}-delimited; ragcal reads comma-separated CSV")
    assert "missing column" not in message


def test_auc_with_ci_is_deprecated_and_returns_auc_intervals_numbers():
    from ragcal.metrics.auc import auc_with_ci

    with pytest.warns(DeprecationWarning, match=r"auc_interval\(y_true, y_score, bootstrap_rows=None\)"):
        old = auc_with_ci([1, 1, 0, 0, 1], [3, 2, 1, 2, 0.5], n_resamples=300)
    assert old == auc_ci([1, 1, 0, 0, 1], [3, 2, 1, 2, 0.5], n_resamples=300)
