"""train_judge on a handful of hand-written pairs: the loss falls, the folder reloads bit for bit, seeds, bad input.

One run fine-tunes the real bundled MiniLM (marked slow); the others start from a tiny random cross-encoder the
test builds, which is enough for what they check (files, fingerprints, seeds, refusals).
"""

import json
import math

import numpy as np
import pandas as pd
import pytest

from ragcal.judges import JudgeTraining, JudgeWarning, TrainedJudge, question_key, train_judge
from ragcal.judges.training import JUDGE_FORMAT, training_verdict
from ragcal.retrieval.rerank import build_tiny_cross_encoder, cross_encoder_logits

# (id, question, passage, label): five questions, each with a passage that answers it and some that do not.
ROWS = [
    ("cookie", "How do I set a cookie on the response?", "Call response.set_cookie(key, value) to set a cookie.", 1),
    ("cookie", "How do I set a cookie on the response?", "Docker images are built from a Dockerfile.", 0),
    ("cookie", "How do I set a cookie on the response?", "The Rust compiler checks borrows at compile time.", 0),
    ("cookie", "How do I set a cookie on the response?", "Uploaded files arrive as UploadFile objects.", 0),
    ("cors", "Which middleware enables CORS?", "Add CORSMiddleware to allow cross-origin requests.", 1),
    ("cors", "Which middleware enables CORS?", "Background tasks run after the response is sent.", 0),
    ("cors", "Which middleware enables CORS?", "A vector grows when you push elements onto it.", 0),
    ("cors", "Which middleware enables CORS?", "Call response.set_cookie(key, value) to set a cookie.", 0),
    ("tasks", "When do background tasks run?", "Background tasks run after the response is sent.", 1),
    ("tasks", "When do background tasks run?", "Add CORSMiddleware to allow cross-origin requests.", 0),
    ("tasks", "When do background tasks run?", "Cargo builds and runs Rust projects.", 0),
    ("tasks", "When do background tasks run?", "Docker images are built from a Dockerfile.", 0),
    ("docker", "How is a Docker image built?", "Docker images are built from a Dockerfile.", 1),
    ("docker", "How is a Docker image built?", "Uploaded files arrive as UploadFile objects.", 0),
    ("docker", "How is a Docker image built?", "The Rust compiler checks borrows at compile time.", 0),
    ("docker", "How is a Docker image built?", "Background tasks run after the response is sent.", 0),
    ("files", "How do I receive an uploaded file?", "Uploaded files arrive as UploadFile objects.", 1),
    ("files", "How do I receive an uploaded file?", "Cargo builds and runs Rust projects.", 0),
    ("files", "How do I receive an uploaded file?", "Add CORSMiddleware to allow cross-origin requests.", 0),
    ("files", "How do I receive an uploaded file?", "A vector grows when you push elements onto it.", 0),
]
PAIRS = pd.DataFrame(ROWS, columns=["id", "query", "passage", "label"])
QUESTIONS = PAIRS["query"].tolist()
PASSAGES = PAIRS["passage"].tolist()
#: Pairs no judge here was trained on (a question not among the training ones).
UNSEEN_QUESTIONS = ["What does set_cookie do?"] * 3
UNSEEN_PASSAGES = [ROWS[0][2], ROWS[1][2], ROWS[4][2]]


def leftovers(folder):
    """Anything beside the judge folder in its parent: temporary or old copies."""
    return sorted(path.name for path in folder.parent.iterdir() if path.name != folder.name)


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory):
    return str(build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny_base") / "tiny-ce"))


def tiny_training(tiny_base, **options):
    defaults = {"base_model": tiny_base, "epochs": 1, "batch_size": 8, "max_length": 64, "validation_fraction": 0.0}
    return JudgeTraining(**{**defaults, **options})


@pytest.fixture(scope="module")
def minilm_judge(tmp_path_factory):
    """The real bundled MiniLM fine-tuned on the twenty pairs, one question held out to draw the validation loss.

    The 16 training pairs make one batch, so every step sees the same pairs and the loss can be compared step to
    step. One thread: the machine's cores are shared, and threads that wait for each other only cost time.
    """
    import torch

    out_dir = tmp_path_factory.mktemp("minilm") / "judge"
    training = JudgeTraining(
        epochs=6, batch_size=16, learning_rate=3e-4, warmup=0.0, max_length=64, validation_fraction=0.2
    )
    lines, threads = [], torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        # Four validation pairs (one question) cannot show a judge better than chance, and it says so.
        with pytest.warns(JudgeWarning, match=r"not shown to have learned anything: too few validation pairs to tell "
                          r"on its 4 held-out"):  # fmt: skip
            judge = train_judge(PAIRS, out_dir, training=training, progress=False, log=lines.append)
    finally:
        torch.set_num_threads(threads)
    return judge, out_dir, lines


@pytest.mark.slow
def test_the_training_loss_falls(minilm_judge):
    judge, out_dir, lines = minilm_judge
    curve = judge.curve
    assert list(curve.columns) == ["step", "epoch", "training_loss", "validation_loss", "validation_auc"]
    logged = curve.dropna(subset=["training_loss"])
    assert logged["step"].tolist() == [1, 2, 3, 4, 5, 6]  # one step an epoch, each logged
    first, last = logged["training_loss"].iloc[0], logged["training_loss"].iloc[-1]
    assert last < first - 0.1, curve
    # Below the loss of the best constant guess (a quarter of the pairs answer): the judge reads the pairs.
    base_rate = 4 / 16
    assert last < -(base_rate * math.log(base_rate) + (1 - base_rate) * math.log(1 - base_rate)), curve
    # The validation loss is drawn before training and after every epoch.
    validation = curve.dropna(subset=["validation_loss"])
    assert validation["step"].tolist() == [0, 1, 2, 3, 4, 5, 6]
    # ...and its AUC with it (one answering pair among four: 0, 1/3, 2/3 or 1).
    assert curve.dropna(subset=["validation_auc"])["step"].tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert set((3 * validation["validation_auc"]).round(4)) <= {0.0, 1.0, 2.0, 3.0}  # written to 6 digits
    assert "validation AUC" in lines[0] and "(too few validation pairs to tell)" in lines[0]
    assert lines and "trained a judge on 16 pairs of 4 questions" in lines[0] and str(out_dir) in lines[0]


@pytest.mark.slow
def test_judge_json_says_what_it_was_trained_on(minilm_judge):
    judge, out_dir, _ = minilm_judge
    description = json.loads((out_dir / "judge.json").read_text(), parse_constant=pytest.fail)
    assert description == judge.description
    assert description["format"] == JUDGE_FORMAT
    assert description["base_model"].startswith("all-MiniLM-L6-v2")
    assert (description["n_pairs"], description["n_positive"], description["n_validation_pairs"]) == (16, 4, 4)
    assert description["n_questions"] == 4 and description["steps"] == 6 and description["stopped_early"] is False
    assert description["training"]["epochs"] == 6 and description["training"]["max_length"] == 64
    # The held-out question is not among those trained on, so this judge may score it.
    held_out = set(QUESTIONS) - {q for q in QUESTIONS if question_key(q) in judge.trained_on}
    assert len(held_out) == 1
    assert sorted(description["trained_on"]) == description["trained_on"]
    assert set(description["trained_on"]) == {question_key(q) for q in set(QUESTIONS) - held_out}
    assert judge.trained_on == frozenset(description["trained_on"])
    assert math.isfinite(description["final_validation_loss"])
    assert description["verdict"] == "too few validation pairs to tell"
    assert description["validation_auc_low"] is None  # no interval on four pairs
    assert 0 <= description["dense_validation_auc"] <= 1
    assert judge.to_dict()["judge_questions"] == 4


@pytest.mark.slow
def test_the_saved_judge_reloads_and_scores_bit_identically(minilm_judge, tmp_path):
    from sentence_transformers import CrossEncoder

    judge, out_dir, _ = minilm_judge
    first = TrainedJudge(out_dir, use_cache=False).score(UNSEEN_QUESTIONS, UNSEEN_PASSAGES)
    second = TrainedJudge(out_dir, cache_dir=tmp_path).score(UNSEEN_QUESTIONS, UNSEEN_PASSAGES)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(judge.score(UNSEEN_QUESTIONS, UNSEEN_PASSAGES), first)
    # The same numbers from a CrossEncoder loaded independently from the folder, through the documented rule.
    logits = cross_encoder_logits(CrossEncoder(str(out_dir)), UNSEEN_QUESTIONS, UNSEEN_PASSAGES, max_length=64)
    np.testing.assert_array_equal(1 / (1 + np.exp(-logits[:, 0])), first)
    assert judge.fingerprint.startswith("judge@") and judge.fingerprint.endswith("/max64/sigmoid")
    # And the judge learned something: the passage that answers scores highest.
    assert np.argmax(first) == 0


def test_the_same_seed_gives_the_same_weights_and_another_seed_others(tiny_base, tmp_path):
    first = train_judge(PAIRS, tmp_path / "a" / "judge", training=tiny_training(tiny_base), progress=False)
    again = train_judge(PAIRS, tmp_path / "b" / "judge", training=tiny_training(tiny_base), progress=False)
    other = train_judge(
        PAIRS, tmp_path / "c" / "judge", training=tiny_training(tiny_base, random_state=1), progress=False
    )
    assert again.fingerprint == first.fingerprint
    assert (tmp_path / "a/judge/model.safetensors").read_bytes() == (
        tmp_path / "b/judge/model.safetensors"
    ).read_bytes()
    assert other.fingerprint != first.fingerprint
    assert first.fingerprint.split("@")[0] == other.fingerprint.split("@")[0] == "judge"
    np.testing.assert_array_equal(
        again.score(UNSEEN_QUESTIONS, UNSEEN_PASSAGES), first.score(UNSEEN_QUESTIONS, UNSEEN_PASSAGES)
    )
    assert not np.array_equal(
        other.score(UNSEEN_QUESTIONS, UNSEEN_PASSAGES), first.score(UNSEEN_QUESTIONS, UNSEEN_PASSAGES)
    )
    # With no validation share every question is trained on.
    assert first.trained_on == frozenset(map(question_key, QUESTIONS))
    assert first.description["n_validation_pairs"] == 0 and first.description["n_pairs"] == 20
    # No validation pairs, no validation loss: judge.json stays strict JSON (null, not NaN).
    strict = json.loads((tmp_path / "a/judge/judge.json").read_text(), parse_constant=pytest.fail)
    assert strict["final_validation_loss"] is None
    assert leftovers(tmp_path / "a" / "judge") == []


def test_an_existing_judge_folder_is_replaced_whole(tiny_base, tmp_path):
    out_dir = tmp_path / "judge"
    first = train_judge(PAIRS, out_dir, training=tiny_training(tiny_base), progress=False)
    replaced = train_judge(PAIRS, out_dir, training=tiny_training(tiny_base, random_state=3), progress=False)
    assert replaced.fingerprint != first.fingerprint
    assert json.loads((out_dir / "judge.json").read_text())["training"]["random_state"] == 3
    assert leftovers(out_dir) == []


def test_max_minutes_stops_early_and_says_so(tiny_base, tmp_path):
    training = tiny_training(tiny_base, epochs=3, batch_size=2, max_minutes=1e-9)
    judge = train_judge(PAIRS, tmp_path / "judge", training=training, progress=False)
    description = json.loads((tmp_path / "judge" / "judge.json").read_text())
    assert description["stopped_early"] is True and description["steps"] == 1
    assert judge.description["stopped_early"] is True


@pytest.mark.parametrize(
    "pairs, message",
    [
        (
            PAIRS.assign(label=1),
            "all 20 pairs have label 1; a judge needs passages that answer and passages that do not",
        ),
        (PAIRS.assign(label=0), "all 20 pairs have label 0"),
        (PAIRS.drop(columns="passage"), "lacks column\\(s\\) \\['passage'\\]"),
        (PAIRS.assign(label=PAIRS["label"] * 2), "every label must be 0 or 1"),
        (PAIRS.assign(label=PAIRS["label"].map({1: "yes", 0: "no"})), "every label must be 0 or 1"),
        (PAIRS.assign(label=PAIRS["label"].astype(float).where(PAIRS.index != 3)), "every label must be 0 or 1"),
    ],
)
def test_bad_pairs_are_refused_and_nothing_is_written(tiny_base, tmp_path, pairs, message):
    out_dir = tmp_path / "out" / "judge"
    with pytest.raises(ValueError, match=message):
        train_judge(pairs, out_dir, training=tiny_training(tiny_base), progress=False)
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_an_existing_path_that_is_not_a_judge_folder_is_refused(tiny_base, tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    other_folder = tmp_path / "data"
    (other_folder / "keep.csv").parent.mkdir()
    (other_folder / "keep.csv").write_text("a,b\n")
    for existing in (a_file, other_folder):
        with pytest.raises(FileExistsError, match=f"{existing}: exists and is not a judge folder"):
            train_judge(PAIRS, existing, training=tiny_training(tiny_base), progress=False)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["data", "notes.txt"]
    assert a_file.read_text() == "mine" and [path.name for path in other_folder.iterdir()] == ["keep.csv"]


def test_other_bad_input(tiny_base, tmp_path):
    with pytest.raises(TypeError, match="pairs"):
        train_judge(PAIRS.to_dict("records"), tmp_path / "judge", training=tiny_training(tiny_base), progress=False)
    with pytest.raises(ValueError, match="3 groups for 20 pairs"):
        train_judge(
            PAIRS, tmp_path / "judge", groups=["a", "b", "c"], training=tiny_training(tiny_base), progress=False
        )
    with pytest.raises(ValueError, match="'epochs' parameter of JudgeTraining"):
        JudgeTraining(epochs=0)
    with pytest.raises(ValueError, match="'validation_fraction' parameter of JudgeTraining"):
        JudgeTraining(validation_fraction=1.5)
    assert list(tmp_path.iterdir()) == []


def test_a_training_part_of_one_class_is_refused(tiny_base, tmp_path):
    # Two groups, one of answering pairs and one of the others: holding one out for validation leaves one class.
    groups = np.where(PAIRS["label"] == 1, "answers", "does not")
    training = tiny_training(tiny_base, validation_fraction=0.5)
    with pytest.raises(ValueError, match="the (5|15) pairs left to train on .* all have one label"):
        train_judge(PAIRS, tmp_path / "judge", groups=groups, training=training, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_max_pairs_keeps_whole_questions_and_only_those_count_as_trained_on(tiny_base, tmp_path):
    judge = train_judge(PAIRS, tmp_path / "judge", training=tiny_training(tiny_base, max_pairs=9), progress=False)
    assert judge.description["n_pairs"] == 8 and judge.description["n_questions"] == 2  # two questions of 4 pairs
    assert len(judge.trained_on) == 2 and judge.trained_on < frozenset(map(question_key, QUESTIONS))


def test_training_verdict_by_hand():
    labels = np.array([1, 1, 1, 1, 1, 0, 0, 0, 0, 0] * 4)
    perfect = labels + np.linspace(0, 0.5, labels.size)  # every answering pair above every other
    # Answering pairs at 0.5 to 0.9, the others at 0.1, 0.2, 0.3, 0.55, 0.65: 3 + 4 + 5 + 5 + 5 = 22 of 25 pairs ordered.
    weak = np.tile([0.5, 0.6, 0.7, 0.8, 0.9, 0.1, 0.2, 0.3, 0.55, 0.65], 4)
    verdict = training_verdict(labels, perfect, weak, n_resamples=200)
    assert verdict["validation_auc"] == 1.0 and verdict["verdict"] == "better than chance and than the dense cosine"
    assert verdict["dense_validation_auc"] == pytest.approx(22 / 25)
    # The same ordering as the cosine: no better than it, however good.
    assert training_verdict(labels, weak, weak, n_resamples=200)["verdict"] == "no better than the dense cosine"
    # A constant score orders nothing: its AUC is undefined (NaN, as auc_with_ci says), and no better than chance.
    constant = training_verdict(labels, np.zeros(labels.size), weak, n_resamples=200)
    assert constant["verdict"] == "no better than chance" and math.isnan(constant["validation_auc"])
    # An ordering that is right, but on three pairs: too few to tell (a bootstrap of them would say [1, 1]).
    few = training_verdict([1, 0, 0], [0.9, 0.1, 0.2], [0.1, 0.9, 0.2], n_resamples=200)
    assert few["validation_auc"] == 1.0 and few["verdict"] == "too few validation pairs to tell"
    assert training_verdict([], [], [])["verdict"] == "no validation pairs"
    one_class = training_verdict([0, 0, 0], [0.1, 0.2, 0.3], [0.3, 0.2, 0.1])
    assert one_class["verdict"] == "one class in the validation pairs" and math.isnan(one_class["validation_auc"])


def test_a_tiny_random_judge_says_it_learned_nothing(tiny_base, tmp_path):
    training = tiny_training(tiny_base, validation_fraction=0.4)
    with pytest.warns(JudgeWarning, match=r"not shown to have learned anything: too few validation pairs"):
        judge = train_judge(PAIRS, tmp_path / "judge", training=training, progress=False)
    assert judge.description["verdict"] == "too few validation pairs to tell"
    assert judge.description["n_validation_pairs"] == 8
    curve = pd.read_csv(tmp_path / "judge" / "training.csv")
    assert curve["validation_auc"].notna().sum() == 2  # before training and after its one epoch
