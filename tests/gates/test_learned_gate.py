"""LearnedGate: the saved linear form reproduces scikit-learn, decide agrees with decide_table, fitting stays honest."""

import json

import numpy as np
import pandas as pd
import pytest

from ragcal.calibration import fit_threshold
from ragcal.gates import LearnedGate, LinearScore, fit_learned_gate, fit_learned_score, gate_from_dict, save_gate
from ragcal.gates.files import read_gate_file
from ragcal.gates.learned import crossfit_scores, learned_pipeline
from ragcal.retrieval import RetrievalResult

SIGNALS = ("dense_top1", "bm25_top1_raw")


def synthetic_table(n=120, random_state=0):
    rng = np.random.default_rng(random_state)
    answerable = np.arange(n) % 2 == 0
    slices = np.where(answerable, "answerable", np.where(np.arange(n) % 4 == 1, "near-domain", "unrelated"))
    dense = rng.normal(0.45, 0.08, n) + 0.12 * answerable
    bm25 = np.maximum(rng.normal(12, 5, n) + 8 * answerable, 0.0)
    bm25[5] = np.nan  # a missing value is imputed with the calibration mean
    return pd.DataFrame(
        {
            "id": [f"q{i}" for i in range(n)],
            "query": [f"question {i}" for i in range(n)],
            "answerable": answerable,
            "slice": slices,
            "dense_top1": dense,
            "bm25_top1_raw": bm25,
        }
    )


def results_for(dense_top1, bm25_top1_raw):
    bm25 = (
        RetrievalResult("bm25_raw", ("b.md#0",), [bm25_top1_raw])
        if bm25_top1_raw > 0
        else RetrievalResult("bm25_raw", (), [])
    )
    return {"dense": RetrievalResult("dense", ("a.md#0", "a.md#1"), [dense_top1, dense_top1 - 0.1]), "bm25_raw": bm25}


def test_linear_score_reproduces_the_sklearn_pipeline():
    table = synthetic_table()
    model = fit_learned_score(table, SIGNALS)
    assert isinstance(model, LinearScore)
    X = table[list(SIGNALS)].to_numpy(dtype=float)
    pipeline = learned_pipeline().fit(X, table["answerable"].to_numpy(dtype=bool))
    np.testing.assert_allclose(model.score(X), pipeline.predict_proba(X)[:, 1], rtol=0, atol=1e-12)
    # The formula of the docstring, by hand, for the row with a missing value (standardised to 0).
    z = (X[5] - np.array(model.mean)) / np.array(model.scale)
    z[np.isnan(z)] = 0.0
    assert model.score(X[5:6])[0] == pytest.approx(1 / (1 + np.exp(-(z @ np.array(model.coef) + model.intercept))))


def test_gate_file_round_trip_reproduces_the_fitted_score(tmp_path):
    table = synthetic_table()
    gate = fit_learned_gate(table, "keep@0.95", signals=SIGNALS, hedge_rule="keep@0.8")
    path = save_gate(tmp_path / "gate.json", gate, rule="keep@0.95", provenance={"model_fingerprint": "m"})
    document = json.loads(path.read_text())
    assert document["gate"]["type"] == "learned"
    assert document["gate"]["signals"] == list(SIGNALS)
    assert {"scaler_mean", "scaler_scale", "coefficients", "intercept", "threshold"} <= set(document["gate"])
    loaded = read_gate_file(path)["gate"]
    assert isinstance(loaded, LearnedGate)
    np.testing.assert_allclose(loaded.score_table(table), gate.score_table(table), rtol=0, atol=1e-12)
    assert loaded.threshold == gate.threshold and loaded.hedge_below == gate.hedge_below
    assert gate_from_dict(gate.to_dict()).to_dict() == gate.to_dict()


def test_decide_agrees_with_decide_table():
    table = synthetic_table().fillna({"bm25_top1_raw": 0.0})
    gate = fit_learned_gate(table, "keep@0.9", signals=SIGNALS, hedge_rule="keep@0.7")
    decided = gate.decide_table(table)
    assert set(decided["action"]) == {"answer", "hedge", "refuse"}
    for position, row in enumerate(table.itertuples()):
        decision = gate.decide(results_for(row.dense_top1, row.bm25_top1_raw))
        assert decision.action == decided["action"][position]
        assert decision.score == pytest.approx(decided["score"][position], abs=1e-12)
        assert bool(decision.passages) == decision.answered
        if decision.answered:  # the dense passages that clear the rule's cosine bar; the top one at least
            assert decision.passages[0] == ("a.md#0", row.dense_top1)
            assert len(decision.passages) == 1 or all(s >= gate.passage_floor for _, s in decision.passages)
    assert gate.passage_floor == fit_threshold("keep@0.9", table["dense_top1"], table["answerable"])


def test_threshold_is_fitted_on_out_of_fold_scores():
    table = synthetic_table()
    gate = fit_learned_gate(table, "keep@0.95", signals=SIGNALS)
    held = crossfit_scores(table, SIGNALS)
    answerable = held[table["answerable"].to_numpy()]
    # keep@0.95 on the out-of-fold scores, not on the model's in-sample scores.
    assert (answerable >= gate.threshold).mean() >= 0.95
    assert gate.threshold in set(answerable)
    in_sample = fit_learned_gate(table, "keep@0.95", signals=SIGNALS, n_folds=None)
    assert in_sample.threshold in set(gate.model.score(table[list(SIGNALS)].to_numpy(dtype=float)))


def test_crossfit_never_scores_a_row_with_a_model_that_saw_it():
    table = synthetic_table()
    scores = crossfit_scores(table, SIGNALS, n_folds=4)
    changed = table.copy()
    # Make row 0 an extreme outlier: only models trained on it would move much for the rows of its own fold.
    from sklearn.model_selection import StratifiedKFold

    strata = table["slice"].astype(str) + "|" + table["answerable"].astype(str)
    folds = list(StratifiedKFold(n_splits=4, shuffle=True, random_state=0).split(np.zeros(len(table)), strata))
    fold_of_zero = next(test for _, test in folds if 0 in test)
    changed.loc[0, "dense_top1"] = 50.0
    moved = crossfit_scores(changed, SIGNALS, n_folds=4)
    same_fold = [position for position in fold_of_zero if position != 0]
    np.testing.assert_allclose(moved[same_fold], scores[same_fold], rtol=0, atol=1e-12)


def test_any_sklearn_classifier_works_in_memory_but_only_linear_models_are_saved():
    from sklearn.tree import DecisionTreeClassifier

    table = synthetic_table()
    gate = fit_learned_gate(table, "keep@0.95", signals=SIGNALS, estimator=DecisionTreeClassifier(max_depth=2))
    assert gate.decide_table(table)["action"].isin(["answer", "refuse"]).all()
    with pytest.raises(ValueError, match="DecisionTreeClassifier cannot be saved"):
        gate.to_dict()


def test_fitting_errors_name_the_problem():
    table = synthetic_table()
    with pytest.raises(ValueError, match="one class"):
        fit_learned_score(table[table["answerable"]], SIGNALS)
    with pytest.raises(ValueError, match="at least one signal"):
        fit_learned_gate(table, "keep@0.95", signals=())
    with pytest.raises(ValueError, match="NaN on every calibration row"):
        fit_learned_gate(table.assign(bm25_top1_raw=np.nan), "keep@0.95", signals=SIGNALS)
    with pytest.raises(ValueError, match="missing column"):
        fit_learned_gate(table.drop(columns="bm25_top1_raw"), "keep@0.95", signals=SIGNALS)
    with pytest.raises(ValueError, match="unknown signal 'nope'"):
        LearnedGate(LinearScore(("nope",), (0.0,), (1.0,), (1.0,), 0.0), 0.5)
    with pytest.raises(ValueError, match="every scale must be positive"):
        LinearScore(("dense_top1",), (0.0,), (0.0,), (1.0,), 0.0)


def test_missing_diagnostics_are_reported_not_silently_imputed():
    from ragcal.gates import GateWarning

    table = synthetic_table()
    table["bm25_coverage_corpus"] = np.where(table["answerable"], 0.9, 0.4) + np.linspace(0, 0.05, len(table))
    gate = fit_learned_gate(table, "keep@0.9", signals=("dense_top1", "bm25_coverage_corpus"))
    with pytest.warns(GateWarning, match="bm25_coverage_corpus are NaN on every row"):
        gate.decide_table(table.assign(bm25_coverage_corpus=np.nan))
    # One query whose BM25 results carry no diagnostics (another engine, or diagnostics=False).
    with pytest.warns(GateWarning, match="carry no per-query diagnostics"):
        gate.decide(results_for(0.6, 10.0))
