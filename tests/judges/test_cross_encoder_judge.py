"""CrossEncoderJudge on tiny cross-encoders the tests build: the logit -> probability rule, fingerprint, cache, errors."""

import math

import numpy as np
import pytest

from ragcal.judges import CrossEncoderJudge, Judge
from ragcal.judges.training import default_base_model
from ragcal.retrieval.rerank import RerankerLoadError, build_tiny_cross_encoder

QUESTIONS = ["how do I set a cookie?", "what is CORS?", "how do I set a cookie?", "where do background tasks run?"]
PASSAGES = [
    "Use response.set_cookie(key, value) on the Response.",
    "CORS means cross-origin resource sharing, configured with a middleware.",
    "Docker images are built from a Dockerfile.",
    "Background tasks run after the response is sent.",
]
NLI_LABELS = {0: "contradiction", 1: "entailment", 2: "neutral"}


def build_tiny_nli_model(folder, *, random_state=0):
    """A tiny random three-output BERT classifier saved with the bundled MiniLM tokenizer, as build_tiny_cross_encoder."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(default_base_model())
    tokenizer.model_max_length = 256
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=8,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=512,
        num_labels=3,
        id2label=NLI_LABELS,
        label2id={name: index for index, name in NLI_LABELS.items()},
        initializer_range=0.5,
    )
    state = torch.random.get_rng_state()
    torch.manual_seed(random_state)
    try:
        model = BertForSequenceClassification(config)
    finally:
        torch.random.set_rng_state(state)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def model_logits(folder, questions, passages):
    """The model's own logits, one pair at a time (no padding), straight from transformers."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    rows = []
    with torch.inference_mode():
        for question, passage in zip(questions, passages):
            encoded = tokenizer(question, passage, return_tensors="pt")
            rows.append(model(**encoded).logits[0].double().numpy())
    return np.array(rows)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("judge_models")
    return {
        "one": build_tiny_cross_encoder(root / "a" / "tiny-ce", random_state=0),
        "one_other": build_tiny_cross_encoder(root / "b" / "tiny-ce", random_state=1),
        "one_again": build_tiny_cross_encoder(root / "c" / "tiny-ce", random_state=0),
        "nli": build_tiny_nli_model(root / "tiny-nli", random_state=0),
    }


def test_one_output_model_gives_the_sigmoid_of_its_logit(models, tmp_path):
    judge = CrossEncoderJudge(models["one"], cache_dir=tmp_path)
    assert isinstance(judge, Judge) and judge.trained_on == frozenset()
    probabilities = judge.score(QUESTIONS, PASSAGES)
    logits = model_logits(models["one"], QUESTIONS, PASSAGES)
    assert logits.shape == (4, 1)
    expected = [1 / (1 + math.exp(-logit)) for logit in logits[:, 0]]
    assert probabilities.dtype == np.float64 and probabilities.shape == (4,)
    np.testing.assert_allclose(probabilities, expected, rtol=1e-5, atol=1e-7)
    assert np.all((probabilities >= 0) & (probabilities <= 1))
    assert len(set(probabilities.round(6))) == 4  # the random model tells the pairs apart: the order is checked
    assert judge.fingerprint.startswith("tiny-ce@") and judge.fingerprint.endswith("/max256/sigmoid")
    # One pair at a time gives the same bits as the batch, pair for pair, and so does the batch reversed.
    alone = [CrossEncoderJudge(models["one"], use_cache=False).score([q], [p])[0] for q, p in zip(QUESTIONS, PASSAGES)]
    np.testing.assert_array_equal(probabilities, alone)
    reverse = CrossEncoderJudge(models["one"], use_cache=False).score(QUESTIONS[::-1], PASSAGES[::-1])
    np.testing.assert_array_equal(probabilities, reverse[::-1])


def softmax(row):
    weights = [math.exp(value - max(row)) for value in row]
    return [weight / sum(weights) for weight in weights]


def test_several_outputs_give_the_softmax_probability_of_entailment(models, tmp_path):
    logits = model_logits(models["nli"], QUESTIONS, PASSAGES)
    assert logits.shape == (4, 3)
    by_default = CrossEncoderJudge(models["nli"], cache_dir=tmp_path).score(QUESTIONS, PASSAGES)
    np.testing.assert_allclose(by_default, [softmax(row)[1] for row in logits], rtol=1e-5, atol=1e-7)
    assert np.all((by_default >= 0) & (by_default <= 1))
    by_name = CrossEncoderJudge(models["nli"], positive_label="NEUTRAL", cache_dir=tmp_path)
    by_index = CrossEncoderJudge(models["nli"], positive_label=2, cache_dir=tmp_path)
    neutral = [softmax(row)[2] for row in logits]
    np.testing.assert_allclose(by_name.score(QUESTIONS, PASSAGES), neutral, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(by_index.score(QUESTIONS, PASSAGES), neutral, rtol=1e-5, atol=1e-7)
    assert by_name.fingerprint == by_index.fingerprint and by_name.fingerprint.endswith("/softmax[2]")


def test_positive_label_errors(models, tmp_path):
    with pytest.raises(ValueError, match="'yes' is none of the model's outputs: contradiction, entailment, neutral"):
        CrossEncoderJudge(models["nli"], positive_label="yes", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="positive_label 3 is not an output of this 3-output model"):
        CrossEncoderJudge(models["nli"], positive_label=3, cache_dir=tmp_path)
    # Three outputs none of which is named entailment: the judge cannot guess which one means "answers".
    unnamed = build_tiny_nli_model(tmp_path / "unnamed")
    config_path = unnamed / "config.json"
    config_path.write_text(config_path.read_text().replace('"entailment"', '"supports"'))
    with pytest.raises(ValueError, match="none is named 'entailment'; pass positive_label="):
        CrossEncoderJudge(unnamed, cache_dir=tmp_path)
    assert CrossEncoderJudge(unnamed, positive_label="supports", cache_dir=tmp_path).fingerprint.endswith("softmax[1]")


def test_the_fingerprint_changes_with_the_weights_and_the_rule(models, tmp_path):
    first = CrossEncoderJudge(models["one"], cache_dir=tmp_path)
    assert CrossEncoderJudge(models["one_again"], cache_dir=tmp_path).fingerprint == first.fingerprint
    other = CrossEncoderJudge(models["one_other"], cache_dir=tmp_path)
    assert other.fingerprint != first.fingerprint
    assert not np.allclose(other.score(QUESTIONS, PASSAGES), first.score(QUESTIONS, PASSAGES))
    assert CrossEncoderJudge(models["one"], max_length=64, cache_dir=tmp_path).fingerprint != first.fingerprint
    entailment = CrossEncoderJudge(models["nli"], cache_dir=tmp_path)
    contradiction = CrossEncoderJudge(models["nli"], positive_label="contradiction", cache_dir=tmp_path)
    assert entailment.fingerprint.endswith("/softmax[1]") and contradiction.fingerprint.endswith("/softmax[0]")
    assert entailment.fingerprint.rsplit("/", 1)[0] == contradiction.fingerprint.rsplit("/", 1)[0]


def test_the_cache_returns_exactly_the_fresh_numbers(models, tmp_path):
    judge = CrossEncoderJudge(models["one"], cache_dir=tmp_path)
    fresh = judge.score(QUESTIONS, PASSAGES)
    assert judge.last_stats == {"cached": 0, "scored": 4}
    assert (tmp_path / "judge.sqlite").is_file()
    again = CrossEncoderJudge(models["one"], cache_dir=tmp_path)
    cached = again.score(QUESTIONS, PASSAGES)
    assert again.last_stats == {"cached": 4, "scored": 0}
    np.testing.assert_array_equal(cached, fresh)
    # Some pairs cached, one new: only the new one is scored, in its place.
    mixed = again.score([QUESTIONS[1], "a new question?", QUESTIONS[0]], [PASSAGES[1], PASSAGES[0], PASSAGES[0]])
    assert again.last_stats == {"cached": 2, "scored": 1}
    assert mixed[0] == fresh[1] and mixed[2] == fresh[0]
    # Another model's cached numbers are not this one's.
    other = CrossEncoderJudge(models["one_other"], cache_dir=tmp_path)
    other.score(QUESTIONS, PASSAGES)
    assert other.last_stats == {"cached": 0, "scored": 4}
    uncached = CrossEncoderJudge(models["one"], use_cache=False, cache_dir=tmp_path / "never")
    np.testing.assert_allclose(uncached.score(QUESTIONS, PASSAGES), fresh, rtol=0, atol=0)
    assert not (tmp_path / "never").exists()


def test_bad_pairs_raise(models, tmp_path):
    judge = CrossEncoderJudge(models["one"], cache_dir=tmp_path)
    with pytest.raises(ValueError, match="2 questions but 1 passages"):
        judge.score(QUESTIONS[:2], PASSAGES[:1])
    with pytest.raises(TypeError, match="not one str"):
        judge.score("how do I set a cookie?", PASSAGES[:1])
    with pytest.raises(TypeError, match="not one str"):
        judge.score(QUESTIONS[:1], "a passage")
    empty = judge.score([], [])
    assert empty.shape == (0,) and empty.dtype == np.float64


def test_what_is_not_a_cross_encoder_is_refused_with_its_path(tmp_path):
    missing = tmp_path / "no" / "such-judge"
    with pytest.raises(RerankerLoadError, match=f"{missing}: judge folder not found"):
        CrossEncoderJudge(str(missing))
    a_file = tmp_path / "weights.bin"
    a_file.write_bytes(b"\0" * 16)
    with pytest.raises(RerankerLoadError, match=f"{a_file}: a judge must be a model folder"):
        CrossEncoderJudge(a_file)
    embedder = default_base_model()
    with pytest.raises(RerankerLoadError, match=f"{embedder}: not a cross-encoder \\(architectures: BertModel\\)"):
        CrossEncoderJudge(embedder)
    empty_folder = tmp_path / "empty"
    empty_folder.mkdir()
    with pytest.raises(RerankerLoadError, match=f"{empty_folder}: not a model folder \\(no config.json\\)"):
        CrossEncoderJudge(empty_folder)
