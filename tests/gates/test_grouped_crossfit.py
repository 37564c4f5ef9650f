"""Cross-fitted learned scores with folds by group: no row scored by a model that saw its group."""

import numpy as np
import pandas as pd
import pytest

from ragcal.gates.learned import _folds as learned_folds
from ragcal.gates.learned import crossfit_scores, fold_strata
from ragcal.gates.learned_score import fit_learned_score


def article_table(n_articles=6, per_article=20, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for article in range(n_articles):
        shift = rng.normal(0, 0.3)  # each article has its own score level: rows of one article are not independent
        for position in range(per_article):
            answerable = position % 2 == 0
            rows.append(
                {
                    "id": f"a{article}q{position}",
                    "query": "q",
                    "answerable": answerable,
                    "slice": "answerable" if answerable else "near-domain",
                    "group": f"article {article}",
                    "dense_top1": rng.normal(0.6 if answerable else 0.4, 0.1) + shift,
                    "bm25_top1_raw": rng.normal(10 if answerable else 8, 2),
                }
            )
    return pd.DataFrame(rows)


def test_grouped_folds_never_put_a_group_on_both_sides():
    table = article_table()
    groups = table["group"].to_numpy()
    folds = learned_folds(fold_strata(table), 4, 0, groups=groups)
    assert len(folds) == 4
    tested = np.concatenate([test for _, test in folds])
    assert sorted(tested) == list(range(len(table)))  # every row scored once
    for train, test in folds:
        assert not set(groups[train]) & set(groups[test])
    # More folds than groups: one group left out at a time.
    folds = learned_folds(fold_strata(table), 10, 0, groups=groups)
    assert len(folds) == 6 and all(len(set(groups[test])) == 1 for _, test in folds)


def test_grouped_crossfit_scores_each_group_with_a_model_fitted_on_the_others():
    table = article_table()
    signals = ["dense_top1", "bm25_top1_raw"]
    groups = table["group"].to_numpy()
    scores = crossfit_scores(table, signals, n_folds=6, groups=groups)
    assert np.isfinite(scores).all()
    # Leave one article out: each article's scores are exactly those of a model fitted on the other five.
    for article in pd.unique(groups):
        held = groups == article
        model = fit_learned_score(table[~held], signals)
        expected = model.score(table.loc[held, signals].to_numpy(dtype=float))
        np.testing.assert_allclose(scores[held], expected, rtol=1e-10)
    # The same call gives the same scores; without groups the folds (and scores) differ.
    np.testing.assert_array_equal(scores, crossfit_scores(table, signals, n_folds=6, groups=groups))
    assert not np.allclose(scores, crossfit_scores(table, signals, n_folds=6))


def test_crossfit_without_groups_is_unchanged():
    table = article_table()
    signals = ["dense_top1", "bm25_top1_raw"]
    from sklearn.model_selection import StratifiedKFold

    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=0).split(np.zeros(len(table)), fold_strata(table))
    expected = np.full(len(table), np.nan)
    for train, test in folds:
        expected[test] = fit_learned_score(table.iloc[train], signals).score(
            table.iloc[test][signals].to_numpy(dtype=float)
        )
    np.testing.assert_allclose(crossfit_scores(table, signals), expected, rtol=1e-10)


def test_grouped_crossfit_bad_groups():
    table = article_table(n_articles=2, per_article=6)
    with pytest.raises(ValueError, match="at least two groups"):
        crossfit_scores(table, ["dense_top1"], groups=["one"] * len(table))
    with pytest.raises(ValueError, match="3 group labels for 12 rows"):
        crossfit_scores(table, ["dense_top1"], groups=["a", "b", "c"])
