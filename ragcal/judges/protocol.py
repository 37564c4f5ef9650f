"""What a judge is: reads (question, passage) pairs and says how likely the passage answers the question.

Every retrieval signal of :mod:`ragcal.signals` measures whether retrieval
found something *about* a question. A judge reads the question against each
passage and returns ``P(passage answers question)`` in [0, 1]: on SQuAD 2.0,
whose unanswerable questions are written against the very paragraph the
retriever finds, only a judge can tell the two apart.

A judge is any object with

- ``name`` (str), shown in tables and legends;
- ``fingerprint`` (str), which changes whenever its scores could: a gate
  fitted on one judge's scale refuses another, as it refuses another
  embedding model (:func:`ragcal.gates.check_provenance`);
- ``score(questions, passages) -> ndarray`` of one probability per pair;
- ``trained_on`` (frozenset of str): :func:`question_key` of every question
  it was trained on, empty for a judge trained on none. A judge is never
  scored on its training questions: :func:`check_not_trained_on` refuses.

:class:`~ragcal.judges.cross_encoder.CrossEncoderJudge` (any
sentence-transformers cross-encoder), :class:`~ragcal.judges.trained.TrainedJudge`
(fine-tuned here on the user's labels) and :class:`~ragcal.judges.llm.LLMJudge`
(an OpenAI-compatible endpoint) are the three that ship.
"""

from __future__ import annotations

import hashlib
import unicodedata
from typing import Protocol, Sequence, runtime_checkable

import numpy as np

__all__ = ["Judge", "JudgeLeakageError", "question_key", "check_not_trained_on", "check_pairs"]


@runtime_checkable
class Judge(Protocol):
    """``score(questions, passages)``: P(passage answers question) per pair, with a fingerprint."""

    name: str
    fingerprint: str
    trained_on: frozenset

    def score(self, questions: Sequence[str], passages: Sequence[str]) -> np.ndarray:
        """One probability in [0, 1] per (question, passage) pair, float64, shape (n_pairs,)."""


class JudgeLeakageError(ValueError):
    """A judge was asked to score questions it was trained on."""


def question_key(question: str) -> str:
    """What identifies a question for the leakage check: sha256 of its NFC text, whitespace collapsed, casefolded.

    Examples
    --------
    >>> question_key("What is  FastAPI?") == question_key("what is fastapi?")
    True
    """
    text = " ".join(unicodedata.normalize("NFC", str(question)).split()).casefold()
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_not_trained_on(judge, questions) -> None:
    """Raise :class:`JudgeLeakageError` when ``judge`` was trained on any of ``questions``.

    A judge scored on its own training questions looks far better than it
    is: every held-out protocol scores a question only with a judge trained
    without it.
    """
    trained_on = getattr(judge, "trained_on", frozenset())
    if not trained_on:
        return
    first_text = {}  # one entry per question, however its case, spacing or Unicode form varies
    for question in map(str, questions):
        first_text.setdefault(question_key(question), question)
    seen = [question for key, question in first_text.items() if key in trained_on]
    if seen:
        shown = "; ".join(repr(question[:80]) for question in seen[:3])
        raise JudgeLeakageError(
            f"judge {getattr(judge, 'name', judge)!r} was trained on {len(seen)} of the questions it is asked to "
            f"score (e.g. {shown}); score it only on questions it has not seen (train it on the calibration part, "
            "or cross-fit: ragcal.judges.crossfit_judge_results)"
        )


def check_pairs(questions, passages, owner: str) -> tuple[list[str], list[str]]:
    """The pairs as two equally long lists of str; a clear ``ValueError`` otherwise."""
    if isinstance(questions, str) or isinstance(passages, str):
        raise TypeError(f"{owner}: questions and passages must be sequences of str, one per pair, not one str")
    questions, passages = [str(question) for question in questions], [str(passage) for passage in passages]
    if len(questions) != len(passages):
        raise ValueError(f"{owner}: {len(questions)} questions but {len(passages)} passages; give one of each per pair")
    return questions, passages
