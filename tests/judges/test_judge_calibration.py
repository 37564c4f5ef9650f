"""Judges on one scale: Platt calibration fitted on a judge's held-out validation pairs, recorded and applied.

Cross-fitted judges each put their sigmoid on a scale of their own; pooled, one fold can sit above another
whatever the question. These tests check the calibration's arithmetic, that two judges whose raw scales differ
land on one scale, and that a trained judge folder records, applies and protects it.
"""

import json
import math

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from ragcal.judges import JudgeFileError, JudgeTraining, TrainedJudge, question_key, train_judge
from ragcal.judges.training import MIN_VALIDATION_CLASS, platt_calibration
from ragcal.retrieval.rerank import build_tiny_cross_encoder, cross_encoder_logits


def sigmoid(values):
    return 1.0 / (1.0 + np.exp(-values))


def noisy_pairs(n=200, random_state=0):
    """Labels and a score that orders them well but not perfectly."""
    rng = np.random.default_rng(random_state)
    labels = rng.integers(0, 2, n)
    return labels, labels + rng.normal(0, 0.8, n)


def test_the_calibrated_mean_is_the_base_rate_and_the_order_is_kept():
    labels, scores = noisy_pairs()
    calibration = platt_calibration(labels, scores)
    assert calibration["method"] == "platt" and calibration["slope"] > 0
    assert (calibration["n_pairs"], calibration["n_positive"]) == (200, int(labels.sum()))
    calibrated = sigmoid(calibration["slope"] * scores + calibration["intercept"])
    # The intercept is not penalized: at the optimum the probabilities sum to the positives (logistic regression's
    # score equation for the intercept).
    assert calibrated.mean() == pytest.approx(labels.mean(), abs=1e-4)
    # Increasing: the judge's own order, and so its AUC, is unchanged.
    assert roc_auc_score(labels, calibrated) == roc_auc_score(labels, scores)


def test_two_judges_on_different_raw_scales_land_on_one_scale():
    labels, scores = noisy_pairs()
    # The same judgement on two raw scales, as two fold judges might give it: shifted, and stretched and shifted.
    first, second = scores + 3.0, 2.0 * scores - 1.0
    calibrated = []
    for raw in (first, second):
        calibration = platt_calibration(labels, raw)
        calibrated.append(sigmoid(calibration["slope"] * raw + calibration["intercept"]))
    # Raw, every score of the first is above the second's median; calibrated, they agree to the penalty's effect.
    assert np.median(sigmoid(first)) > np.median(sigmoid(second)) + 0.3
    np.testing.assert_allclose(calibrated[0], calibrated[1], atol=0.01)
    # Pooled, one threshold now means one thing: the pooled AUC is the per-judge AUC, not a mix of the scales.
    pooled = np.concatenate([calibrated[0][:100], calibrated[1][100:]])
    raw_pooled = np.concatenate([sigmoid(first[:100]), sigmoid(second[100:])])
    assert roc_auc_score(labels, pooled) == pytest.approx(roc_auc_score(labels, scores), abs=0.01)
    assert abs(roc_auc_score(labels, raw_pooled) - roc_auc_score(labels, scores)) > 0.05


def test_too_few_pairs_a_backwards_judge_and_bad_input():
    few = MIN_VALIDATION_CLASS - 1
    assert platt_calibration([1] * few + [0] * 50, np.arange(few + 50)) is None
    assert platt_calibration([0] * 30, np.arange(30)) is None  # one class
    assert platt_calibration([], []) is None
    # A judge that ranks held-out pairs backwards is not turned around: flat, at the base rate.
    labels, scores = noisy_pairs()
    backwards = platt_calibration(labels, -scores)
    assert backwards["slope"] == 0.0
    assert sigmoid(backwards["intercept"]) == pytest.approx(labels.mean(), abs=1e-4)
    # NaN logits (nothing read) are left out of the fit.
    with_nan = platt_calibration(np.append(labels, 1), np.append(scores, np.nan))
    assert with_nan["n_pairs"] == 200
    with pytest.raises(ValueError, match="3 labels but 2 logits"):
        platt_calibration([0, 1, 1], [0.1, 0.2])


@pytest.fixture(scope="module")
def calibrated_judge(tmp_path_factory):
    """A tiny random cross-encoder trained on 40 questions, half of them held out: 20 validation pairs a class."""
    base = build_tiny_cross_encoder(tmp_path_factory.mktemp("base") / "tiny", random_state=5)
    rows = []
    for number in range(40):
        question = f"How do I configure feature {number}?"
        rows.append((f"q{number}", question, f"Feature {number} is configured in settings.toml, key f{number}.", 1))
        rows.append((f"q{number}", question, f"Unrelated page {number}: the weather was mild.", 0))
    pairs = pd.DataFrame(rows, columns=["id", "query", "passage", "label"])
    training = JudgeTraining(base_model=str(base), epochs=1, batch_size=8, max_length=32, validation_fraction=0.5)
    folder = tmp_path_factory.mktemp("judge") / "judge"
    with pytest.warns(UserWarning):  # a tiny random model learns nothing, and says so
        judge = train_judge(pairs, folder, training=training, progress=False)
    return judge, folder, pairs


def test_a_trained_judge_records_its_calibration_and_the_questions_it_was_fitted_on(calibrated_judge):
    judge, folder, pairs = calibrated_judge
    description = json.loads((folder / "judge.json").read_text())
    calibration = description["calibration"]
    assert calibration["method"] == "platt" and calibration["n_pairs"] == 40 and calibration["n_positive"] == 20
    assert math.isfinite(calibration["slope"]) and calibration["slope"] >= 0
    assert description["n_questions"] == 20  # trained by gradient on half the questions...
    # ...and calibrated on the other half: every question was used, so the judge may be measured on none.
    assert judge.trained_on == frozenset(question_key(q) for q in pairs["query"])
    assert judge.calibration == calibration


def test_scores_are_the_calibrated_sigmoid_and_cached_apart_from_the_raw_ones(calibrated_judge, tmp_path):
    from sentence_transformers import CrossEncoder

    judge, folder, _ = calibrated_judge
    questions, passages = ["What is feature 99?"] * 2, ["Feature 99 is on.", "The weather was mild."]
    calibrated = TrainedJudge(folder, cache_dir=tmp_path)
    raw = TrainedJudge(folder, cache_dir=tmp_path, calibrated=False)
    assert raw.calibration is None and calibrated.fingerprint != raw.fingerprint
    assert calibrated.fingerprint.startswith(raw.fingerprint + "/platt(")
    logits = cross_encoder_logits(CrossEncoder(str(folder)), questions, passages, max_length=32)[:, 0]
    slope, intercept = judge.calibration["slope"], judge.calibration["intercept"]
    # Both through one cache folder, each twice: the second read is the cache's, and the two never mix.
    for _ in range(2):
        np.testing.assert_allclose(calibrated.score(questions, passages), sigmoid(slope * logits + intercept), rtol=1e-12)
        np.testing.assert_allclose(raw.score(questions, passages), sigmoid(logits), rtol=1e-12)
    assert calibrated.last_stats == {"cached": 2, "scored": 0}


def test_a_malformed_calibration_is_refused_naming_the_file(calibrated_judge, tmp_path):
    import shutil

    _, folder, _ = calibrated_judge
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    description = json.loads((broken / "judge.json").read_text())
    description["calibration"] = {"method": "isotonic"}
    (broken / "judge.json").write_text(json.dumps(description))
    with pytest.raises(JudgeFileError, match=r"judge\.json: field 'calibration'"):
        TrainedJudge(broken)
    assert TrainedJudge(broken, calibrated=False, use_cache=False).calibration is None
