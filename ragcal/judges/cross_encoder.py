"""A judge from any sentence-transformers cross-encoder: a user's ms-marco, NLI or fine-tuned model.

The model reads each (question, passage) pair and returns its raw outputs
(logits); :class:`CrossEncoderJudge` maps them to ``P(passage answers
question)`` by one documented rule, whatever the model's own default
activation:

- a model with **one output** (ms-marco rerankers, ragcal's trained judges):
  ``P = sigmoid(logit)``;
- a model with **several outputs** (NLI: contradiction, entailment,
  neutral): ``P = softmax(logits)[positive]``, the probability of the label
  ``positive_label`` names (by default the one whose ``id2label`` name is
  ``entailment``, in any case).

An ms-marco logit says "relevant", not "answers": a gate on it still needs
its own calibration, as every signal does. Scores are cached on disk like
reranker scores, keyed by the judge's fingerprint and the exact pair.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .._params import check_int
from ..retrieval.rerank import (
    RerankCache,
    cross_encoder_logits,
    load_cross_encoder,
    model_max_length,
    pair_cache_key,
    pair_key,
    weights_digest,
)
from .protocol import check_pairs

__all__ = ["CrossEncoderJudge"]


def _positive_label(config, positive_label) -> int | None:
    """The output whose probability is P(answers): None for a one-output model."""
    n_labels = int(config.num_labels)
    if n_labels == 1:
        return None
    names = {int(key): str(value) for key, value in (config.id2label or {}).items()}
    if positive_label is None:
        found = [key for key, value in names.items() if value.casefold() == "entailment"]
        if not found:
            raise ValueError(
                f"the model has {n_labels} outputs ({', '.join(names.values())}) and none is named 'entailment'; "
                "pass positive_label= (the name or index of the output that means 'the passage answers')"
            )
        return found[0]
    if isinstance(positive_label, (int, np.integer)) and not isinstance(positive_label, bool):
        if not 0 <= positive_label < n_labels:
            raise ValueError(f"positive_label {positive_label} is not an output of this {n_labels}-output model")
        return int(positive_label)
    found = [key for key, value in names.items() if value.casefold() == str(positive_label).casefold()]
    if not found:
        raise ValueError(f"positive_label {positive_label!r} is none of the model's outputs: {', '.join(names.values())}")
    return found[0]


def probabilities(logits: np.ndarray, positive: int | None) -> np.ndarray:
    """The documented rule: sigmoid of a single logit, else the softmax probability of output ``positive``."""
    if positive is None:
        return 1.0 / (1.0 + np.exp(-logits[:, 0]))
    shifted = logits - logits.max(axis=1, keepdims=True)
    weights = np.exp(shifted)
    return weights[:, positive] / weights.sum(axis=1)


class CrossEncoderJudge:
    """A judge that reads each (question, passage) pair with a cross-encoder.

    Parameters
    ----------
    model : str or Path
        A local folder with a sentence-transformers / transformers
        sequence-classification model, or a Hugging Face Hub name (which
        needs the network, or a copy in the local Hugging Face cache).
    positive_label : str or int, default=None
        For a model with several outputs: the output that means "the passage
        answers" (default: the one named ``entailment``). Ignored for a
        one-output model.
    max_length : int, default=None
        Tokens read per pair; the model's own limit when None.
    batch_size : int, default=32
    cache_dir : str or Path, default=None
        Folder of the score cache (``judge.sqlite``); the embedding cache's
        folder when None.
    use_cache : bool, default=True
    device : str, default="cpu"
    local_files_only : bool, default=False
        Never reach the Hub.
    name : str, default=None
        Label in tables; the model folder's name or the Hub name when None.

    Attributes
    ----------
    fingerprint : str
        ``<name>@<weights sha256, 12 hex>/max<max_length>/<rule>``: changes
        with the weights, the tokens read and the mapping rule.
    trained_on : frozenset of str
        Empty: a model brought by the user was trained on questions ragcal
        does not know (see :class:`~ragcal.judges.trained.TrainedJudge`).

    Examples
    --------
    >>> judge = CrossEncoderJudge("path/to/cross-encoder")                       # doctest: +SKIP
    >>> judge.score(["What is FastAPI?"], ["FastAPI is a web framework."])     # doctest: +SKIP
    array([0.93])
    """

    trained_on: frozenset = frozenset()

    def __init__(
        self,
        model,
        *,
        positive_label=None,
        max_length: int | None = None,
        batch_size: int = 32,
        cache_dir=None,
        use_cache: bool = True,
        device: str = "cpu",
        local_files_only: bool = False,
        name: str | None = None,
    ):
        from ..embedding.cache import default_cache_dir

        self.batch_size = check_int(batch_size, "batch_size", type(self).__name__, low=1)
        max_length = check_int(max_length, "max_length", type(self).__name__, low=8, allow_none=True)
        self.model_name = str(model)
        self.cross_encoder = load_cross_encoder(self.model_name, device=device, local_files_only=local_files_only, what="judge")
        self.positive = _positive_label(self.cross_encoder.model.config, positive_label)
        self.max_length = int(max_length or model_max_length(self.cross_encoder) or 512)
        label, digest = weights_digest(self.model_name, self.cross_encoder)
        self.name = name or label
        rule = "sigmoid" if self.positive is None else f"softmax[{self.positive}]"
        self.fingerprint = f"{label}@{digest[:12]}/max{self.max_length}/{rule}"
        self.cache_key = pair_cache_key(self.fingerprint)
        self.use_cache = use_cache
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self._cache = None
        self.last_stats = {"cached": 0, "scored": 0}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.fingerprint!r})"

    def score(self, questions, passages) -> np.ndarray:
        """P(passage answers question) for each pair, through the cache: float64, shape (n_pairs,)."""
        questions, passages = check_pairs(questions, passages, f"{type(self).__name__}.score")
        if not questions:
            return np.empty(0)
        keys = [pair_key(question, passage) for question, passage in zip(questions, passages)]
        found = {}
        if self.use_cache:
            if self._cache is None:
                self._cache = RerankCache(self.cache_dir / "judge.sqlite")
            found = self._cache.get(self.cache_key, keys)
        missing = list(dict.fromkeys(key for key in keys if key not in found))
        if missing:
            by_key = dict(zip(keys, zip(questions, passages)))
            pairs = [by_key[key] for key in missing]
            logits = cross_encoder_logits(
                self.cross_encoder,
                [question for question, _ in pairs],
                [passage for _, passage in pairs],
                batch_size=self.batch_size,
                max_length=self.max_length,
            )
            fresh = dict(zip(missing, self.probabilities(logits).tolist()))
            if self.use_cache:
                self._cache.put(self.cache_key, fresh)
            found = {**found, **fresh}
        self.last_stats = {"cached": len(keys) - len(missing), "scored": len(missing)}
        return np.array([found[key] for key in keys], dtype=np.float64)

    def probabilities(self, logits: np.ndarray) -> np.ndarray:
        """P(answers) of each row of raw outputs, by the module's rule (a subclass may calibrate it)."""
        return probabilities(logits, self.positive)

    def to_dict(self) -> dict:
        """Provenance: which judge."""
        return {"judge": self.model_name, "judge_fingerprint": self.fingerprint}
