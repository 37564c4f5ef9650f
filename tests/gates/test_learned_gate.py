"""LearnedGate: the saved linear form reproduces scikit-learn, decide agrees with decide_table, fitting stays honest."""

import json

import numpy as np
import pandas as pd
import pytest

from ragcal.calibration import fit_threshold, midway_threshold
from ragcal.gates import LearnedGate, fit_learned_gate, save_gate
from ragcal.gates.base import gate_from_dict
from ragcal.gates.files import read_gate_file
from ragcal.gates.learned import crossfit_scores
from ragcal.gates.learned_score import LinearScore, fit_learned_score, learned_pipeline
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
    # midway between the boundary out-of-fold score and the next one below
    assert gate.threshold == midway_threshold(answerable[answerable >= gate.threshold].min(), held)
    in_sample = fit_learned_gate(table, "keep@0.95", signals=SIGNALS, n_folds=None)
    in_sample_scores = gate.model.score(table[list(SIGNALS)].to_numpy(dtype=float))
    boundary = in_sample_scores[table["answerable"].to_numpy() & (in_sample_scores >= in_sample.threshold)].min()
    assert in_sample.threshold == midway_threshold(boundary, in_sample_scores)


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
    with pytest.raises(ValueError, match="non-empty sequence of signal names"):
        fit_learned_gate(table, "keep@0.95", signals=())
    with pytest.raises(ValueError, match="NaN on every calibration row"):
        fit_learned_gate(table.assign(bm25_top1_raw=np.nan), "keep@0.95", signals=SIGNALS)
    with pytest.raises(ValueError, match="missing column"):
        fit_learned_gate(table.drop(columns="bm25_top1_raw"), "keep@0.95", signals=SIGNALS)
    with pytest.raises(ValueError, match="unknown signal 'nope'"):
        LearnedGate(LinearScore(("nope",), (0.0,), (1.0,), (1.0,), 0.0), 0.5)
    with pytest.raises(ValueError, match="'scale' parameter of LinearScore must be positive floats"):
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


def random_problem(rng, trial):
    """A calibration matrix and labels with the awkward cases: ties, a constant column, large scales, both layouts."""
    n, k = int(rng.integers(8, 300)), int(rng.integers(1, 18))
    X = rng.normal(size=(n, k)) * rng.uniform(0.01, 30, size=k) + rng.normal(size=k) * 5
    if trial % 3 == 0:
        X = np.round(X, 1)  # ties
    if trial % 5 == 0:
        X[:, 0] = 0.37  # constant: scale 1
    if trial % 7 == 0:
        X *= 1e6
    labels = rng.random(n) < rng.uniform(0.1, 0.9)
    if trial % 11 == 0:
        labels = X[:, -1] > np.median(X[:, -1])  # separable: large coefficients, many iterations
    labels[:2] = [True, False]
    # DataFrame.to_numpy gives column-major arrays, a row selection of them row-major; NumPy sums a column
    # differently in each, so both must come out as the pipeline's.
    layout = (np.asfortranarray, np.ascontiguousarray, lambda a: np.asfortranarray(a)[rng.permutation(n)])[trial % 3]
    return layout(X), labels


def test_the_default_fit_is_the_sklearn_pipeline_without_its_imputer(monkeypatch):
    """On a matrix without NaN the default fit skips the imputer and scikit-learn's input checks, nothing else.

    Tolerance: 1e-9 relative (1e-12 absolute). The numbers are scikit-learn's either way (with the installed
    versions they are equal to the last bit); a larger difference would mean another model was fitted.
    """
    from ragcal.gates import learned_score

    rng = np.random.default_rng(0)
    problems = [random_problem(rng, trial) for trial in range(60)]
    expected = []
    for X, labels in problems:
        pipeline = learned_pipeline(random_state=3).fit(X, labels)
        scaler, model = pipeline.named_steps["scale"], pipeline.named_steps["model"]
        expected.append((scaler.mean_, scaler.scale_, model.coef_[0], model.intercept_[0], model.get_params()))

    def no_pipeline(*args, **kwargs):
        raise AssertionError("the pipeline was fitted")

    monkeypatch.setattr(learned_score, "learned_pipeline", no_pipeline)
    for (X, labels), (mean, scale, coef, intercept, params) in zip(problems, expected):
        score = learned_score.fit_score_matrix(X, labels, tuple(f"s{j}" for j in range(X.shape[1])), None, 3)
        fitted = (score.mean, score.scale, score.coef, score.intercept)
        for ours, theirs in zip(fitted, (mean, scale, coef, intercept)):
            np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)
        assert score.params == {key: value for key, value in params.items() if isinstance(value, (int, float, str))}
    # A missing value is imputed by the pipeline itself.
    X, labels = problems[0]
    X = X.copy()
    X[0, 0] = np.nan
    with pytest.raises(AssertionError, match="the pipeline was fitted"):
        learned_score.fit_score_matrix(X, labels, tuple(f"s{j}" for j in range(X.shape[1])), None, 3)


def test_the_matrix_of_a_table_is_its_column_selection_layout_included():
    from ragcal.gates.learned_score import signal_matrix

    rng = np.random.default_rng(1)
    values = rng.normal(size=(30, 4))
    names = ["a", "b", "c", "d"]
    frames = [
        pd.DataFrame(values, columns=names),  # one column-major block: row-major matrices
        pd.DataFrame(dict(zip(names, values.T))),
        pd.DataFrame(dict(zip(names, values.T))).assign(e=np.arange(30))[::2].reset_index(drop=True),
    ]
    for frame in frames:
        for signals in (("c", "a"), ("b",), ("d", "a", "c", "b")):
            expected = frame[list(signals)].to_numpy(dtype=float)
            matrix = signal_matrix(frame, signals)
            assert np.array_equal(matrix, expected)
            assert (matrix.flags.c_contiguous, matrix.flags.f_contiguous) == (
                expected.flags.c_contiguous,
                expected.flags.f_contiguous,
            )


def test_several_signal_sets_fit_the_gates_of_separate_calls():
    from ragcal.gates.learned import fit_learned_gates

    table = synthetic_table()
    table["bm25_coverage_corpus"] = np.where(table["answerable"], 0.8, 0.5) + np.linspace(0, 0.3, len(table))
    sets = {"pair": SIGNALS, "three": (*SIGNALS, "bm25_coverage_corpus"), "one": ("bm25_coverage_corpus",)}
    for options in ({"random_state": 4}, {"hedge_rule": "keep@0.8", "n_folds": 3}, {"n_folds": None}):
        together = fit_learned_gates(table, "keep@0.9", sets, **options)
        for name, signals in sets.items():
            alone = fit_learned_gate(table, "keep@0.9", signals=signals, **options)
            assert together[name].to_dict() == alone.to_dict()
    # A seed that is not an integer draws new folds for every set, as separate calls do.
    together = fit_learned_gates(table, "keep@0.9", sets, random_state=np.random.RandomState(5))
    state = np.random.RandomState(5)
    for name, signals in sets.items():
        assert (
            together[name].to_dict()
            == fit_learned_gate(table, "keep@0.9", signals=signals, random_state=state).to_dict()
        )
