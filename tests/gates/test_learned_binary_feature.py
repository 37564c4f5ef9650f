"""A binary signal (an LLM's verdict, 0/1) as a feature of a learned gate."""

import numpy as np
import pandas as pd
import pytest

from ragcal.gates import fit_learned_gate
from ragcal.gates.learned_score import fit_learned_score
from ragcal.metrics import DegenerateInputWarning
from ragcal.signals import SIGNALS, register_signal, unregister_signal


@pytest.fixture
def verdict_signal():
    """A registered binary signal: a gate computes its signals live, so a logged verdict needs a function too."""

    @register_signal("llm_found_answer_test", retrievers=("dense",))
    def llm_found_answer_test(results):
        return float(results["dense"].scores[0] > 0.5)

    yield "llm_found_answer_test"
    if "llm_found_answer_test" in SIGNALS:
        unregister_signal("llm_found_answer_test")


def table(n=200, random_state=0):
    rng = np.random.default_rng(random_state)
    answerable = np.arange(n) % 2 == 0
    # The verdict is right 85% of the time; the cosine is weak.
    verdict = np.where(rng.random(n) < 0.85, answerable, ~answerable).astype(float)
    return pd.DataFrame(
        {
            "id": [f"q{i}" for i in range(n)],
            "query": ["?"] * n,
            "answerable": answerable,
            "slice": np.where(answerable, "answerable", "unrelated"),
            "dense_top1": rng.normal(0.45, 0.08, n) + 0.02 * answerable,
            "llm_found_answer_test": verdict,
        }
    )


def test_a_binary_feature_gets_a_coefficient_and_moves_the_score(verdict_signal):
    scores = table()
    gate = fit_learned_gate(scores, "keep@0.9", signals=["dense_top1", verdict_signal])
    coef = dict(zip(gate.model.signals, gate.model.coef))
    assert coef[verdict_signal] > 1.0 > abs(coef["dense_top1"])
    # The scaler standardises the 0/1 column with its own mean and standard deviation.
    assert gate.model.mean[1] == pytest.approx(scores[verdict_signal].mean())
    assert gate.model.scale[1] == pytest.approx(scores[verdict_signal].std(ddof=0))
    found, not_found = gate.model.score([[0.45, 1.0], [0.45, 0.0]])
    assert found > 0.5 > not_found
    decisions = gate.decide_table(scores)
    said_found = scores[verdict_signal] == 1.0
    assert (decisions.loc[said_found, "action"] == "answer").mean() > (
        decisions.loc[~said_found, "action"] == "answer"
    ).mean()


def test_a_constant_binary_feature_warns_and_gets_coefficient_zero(verdict_signal):
    scores = table().assign(llm_found_answer_test=1.0)
    with pytest.warns(DegenerateInputWarning, match=r"\['llm_found_answer_test'\] are constant .* coefficient 0"):
        gate = fit_learned_gate(scores, "keep@0.9", signals=["dense_top1", verdict_signal])
    assert gate.model.coef[1] == 0.0 and gate.model.scale[1] == 1.0


def test_an_unregistered_logged_column_works_in_the_learned_score_but_not_in_a_gate():
    scores = table().rename(columns={"llm_found_answer_test": "logged_verdict"})
    model = fit_learned_score(scores, ["dense_top1", "logged_verdict"])
    assert model.coef[1] > 1.0
    with pytest.raises(ValueError, match="unknown signal 'logged_verdict'"):
        fit_learned_gate(scores, "keep@0.9", signals=["dense_top1", "logged_verdict"])
