"""No leakage: a judge is never scored on the questions it was trained on (the test fails if one is)."""

import unicodedata

import numpy as np
import pandas as pd
import pytest

from ragcal.judges import (
    JudgeLeakageError,
    JudgeTraining,
    TrainedJudge,
    check_not_trained_on,
    judge_results,
    question_key,
    train_judge,
)
from ragcal.retrieval import RetrievalResult
from ragcal.retrieval.rerank import build_tiny_cross_encoder

TEXTS = {
    "cookies.md#0": "Call response.set_cookie(key, value).",
    "cors.md#0": "Add CORSMiddleware.",
    "docker.md#0": "Docker.",
}


class FixedJudge:
    """A judge of our own that says 0.5 of everything and was trained on the questions given."""

    name = "fixed"
    fingerprint = "fixed@1"

    def __init__(self, trained_on=()):
        self.trained_on = frozenset(map(question_key, trained_on))
        self.calls = 0

    def score(self, questions, passages):
        self.calls += 1
        return np.full(len(passages), 0.5)


def dense(*chunk_ids):
    return RetrievalResult("dense", tuple(chunk_ids), np.linspace(0.9, 0.5, len(chunk_ids)))


def test_question_keys_ignore_case_whitespace_and_unicode_form():
    composed, decomposed = "Qu'est-ce qu'un caf\u00e9 ?", "Qu'est-ce qu'un cafe\u0301 ?"
    assert composed != decomposed and unicodedata.normalize("NFC", decomposed) == composed
    assert question_key(composed) == question_key(decomposed)
    assert question_key("How do I set a COOKIE?") == question_key("  how do i\tset a cookie?\n")
    assert question_key("Straße?") == question_key("STRASSE?")  # casefold, not lower
    assert question_key("How do I set a cookie?") != question_key("How do I set cookies?")
    assert len(question_key("x")) == 64


@pytest.mark.parametrize(
    "asked",
    [
        "How do I set a cookie?",  # the very question
        "how do i set a COOKIE?",  # another case
        "How  do I\nset a cookie? ",  # other whitespace
    ],
)
def test_judge_results_refuses_a_judge_trained_on_any_scored_question(asked):
    judge = FixedJudge(["How do I set a cookie?", "What is CORS?"])
    queries = ["Which port does Docker use?", asked]
    with pytest.raises(JudgeLeakageError, match="judge 'fixed' was trained on 1 of the questions it is asked to score"):
        judge_results(judge, queries, [dense("docker.md#0"), dense("cookies.md#0")], TEXTS)
    assert judge.calls == 0  # refused before anything is scored
    assert issubclass(JudgeLeakageError, ValueError)


def test_the_unicode_form_of_a_training_question_does_not_hide_it():
    judge = FixedJudge(["Qu'est-ce qu'un caf\u00e9 ?"])
    with pytest.raises(JudgeLeakageError):
        judge_results(judge, ["qu'est-ce qu'un cafe\u0301 ?"], [dense("cookies.md#0")], TEXTS)
    with pytest.raises(JudgeLeakageError, match="trained on 2 of the questions"):
        check_not_trained_on(FixedJudge(["a?", "b?"]), ["A?", "b?", "c?", "a?"])


def test_a_judge_trained_on_other_questions_scores():
    judge = FixedJudge(["How do I set a cookie?"])
    [result] = judge_results(judge, ["How do I set cookies?"], [dense("cookies.md#0", "cors.md#0")], TEXTS)
    assert judge.calls == 1 and result.scores.tolist() == [0.5, 0.5]
    # A judge trained on no question, or one that does not say, is never refused.
    check_not_trained_on(FixedJudge(), ["How do I set a cookie?"])
    check_not_trained_on(object(), ["How do I set a cookie?"])


@pytest.fixture(scope="module")
def trained_judge(tmp_path_factory):
    """A judge trained (from a tiny random cross-encoder) on two questions, one held out for validation."""
    root = tmp_path_factory.mktemp("leakage")
    base = build_tiny_cross_encoder(root / "tiny-ce")
    pairs = pd.DataFrame(
        [
            ("q1", "How do I set a cookie?", TEXTS["cookies.md#0"], 1),
            ("q1", "How do I set a cookie?", TEXTS["docker.md#0"], 0),
            ("q2", "What is CORS?", TEXTS["cors.md#0"], 1),
            ("q2", "What is CORS?", TEXTS["cookies.md#0"], 0),
        ],
        columns=["id", "query", "passage", "label"],
    )
    training = JudgeTraining(base_model=str(base), epochs=1, batch_size=4, max_length=32, validation_fraction=0.0)
    train_judge(pairs, root / "judge", training=training, progress=False)
    return root / "judge"


def test_a_trained_judge_loaded_from_its_folder_is_not_measured_on_its_training_questions(trained_judge, tmp_path):
    judge = TrainedJudge(trained_judge, cache_dir=tmp_path)
    assert judge.trained_on == {question_key("How do I set a cookie?"), question_key("What is CORS?")}
    for asked in ("How do I set a cookie?", "WHAT IS  CORS?"):
        with pytest.raises(JudgeLeakageError, match="judge 'judge' was trained on 1 of the questions"):
            judge_results(judge, [asked], [dense("cookies.md#0", "cors.md#0")], TEXTS)
    assert not (tmp_path / "judge.sqlite").exists()  # nothing was scored
    # Deciding (ragcal ask, serve) on a training question is allowed; only measuring on it is refused.
    [decided] = judge_results(
        judge, ["What is CORS?"], [dense("cookies.md#0", "cors.md#0")], TEXTS, check_leakage=False
    )
    assert decided.scores.tolist() == judge.score(["What is CORS?"] * 2, [TEXTS[c] for c in decided.chunk_ids]).tolist()
    [result] = judge_results(judge, ["Which port does Docker use?"], [dense("cookies.md#0", "cors.md#0")], TEXTS)
    assert len(result.chunk_ids) == 2 and np.all((result.scores >= 0) & (result.scores <= 1))


def test_a_judge_folder_whose_question_list_is_broken_is_refused(trained_judge, tmp_path):
    import json
    import shutil

    from ragcal.judges import JudgeFileError

    broken = tmp_path / "broken"
    shutil.copytree(trained_judge, broken)
    description = json.loads((broken / "judge.json").read_text())
    (broken / "judge.json").write_text(json.dumps({**description, "trained_on": "all of them"}))
    with pytest.raises(JudgeFileError, match=f"{broken / 'judge.json'}: field 'trained_on' must be a list"):
        TrainedJudge(broken)
    (broken / "judge.json").write_text(
        json.dumps({key: value for key, value in description.items() if key != "trained_on"})
    )
    with pytest.raises(JudgeFileError, match="field 'trained_on'"):
        TrainedJudge(broken)
