"""Judge scores that no question was trained on: K folds, a judge per fold, each scoring only its own fold.

Retraining a judge on every calibration half of a held-out protocol (the
1,000 splits, the 70 article splits) would take days on a CPU. So the
questions are cut into K folds (whole groups, an article on SQuAD, in each
fold; answerable and unanswerable questions spread evenly), a judge is
trained on the pairs of the other K-1 folds and scores the questions of its
fold. Every question's judge scores then come from a judge that never saw it
(:func:`ragcal.judges.protocol.check_not_trained_on` checks it for every
fold, and a question whose text also occurs in the fold being scored is left
out of that fold's training). Thresholds are then fitted on the calibration
questions' scores only, as for any other signal.

Each fold's judge is its own model, and its raw sigmoid sits on a scale of
its own: pooled, one fold's scores could sit above another's whatever the
question. So every fold judge is calibrated
(:func:`ragcal.judges.training.platt_calibration`) on its validation pairs,
a share of its own training questions held out of its gradient steps, never
on the fold it scores. Calibrated scores share one scale, so a pooled AUC,
threshold or histogram means one thing; the per-fold numbers still belong
beside the pooled ones.

The judges are kept in ``judge_dir`` under a name derived from their
training pairs and options, so running again reuses them.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from .._params import check_int
from .pairs import judge_pairs
from .protocol import question_key
from .results import judge_results
from .trained import TrainedJudge, is_judge_folder
from .training import JudgeTraining, train_judge

__all__ = ["judge_folds", "crossfit_judge_results"]


def judge_folds(answerable, groups, *, n_folds: int = 4, random_state=0) -> np.ndarray:
    """Fold of each question, 0 to ``n_folds`` - 1: whole groups per fold, answerable shares kept alike.

    :class:`sklearn.model_selection.StratifiedGroupKFold`, shuffled with
    ``random_state``. With fewer groups than folds, one group per fold.
    """
    from sklearn.model_selection import StratifiedGroupKFold

    answerable = np.asarray(answerable, dtype=bool)
    groups = np.asarray(groups).astype(str)
    n_groups = len(pd.unique(groups))
    n_folds = min(check_int(n_folds, "n_folds", "judge_folds", low=2), n_groups)
    if n_folds < 2:
        raise ValueError(f"judge_folds needs at least two groups to cross-fit. Got {n_groups}.")
    folds = np.full(answerable.size, -1)
    splitter = StratifiedGroupKFold(n_splits=n_folds, shuffle=True, random_state=random_state)
    for fold, (_, rows) in enumerate(splitter.split(np.zeros(answerable.size), answerable, groups)):
        folds[rows] = fold
    return folds


def _training_digest(pairs: pd.DataFrame, training: JudgeTraining) -> str:
    hasher = hashlib.sha256(json.dumps(asdict(training), sort_keys=True).encode())
    hasher.update(pd.util.hash_pandas_object(pairs[["query", "passage", "label"]], index=False).to_numpy().tobytes())
    return hasher.hexdigest()[:12]


def crossfit_judge_results(
    queries: pd.DataFrame,
    candidates,
    texts,
    *,
    judge_dir,
    groups=None,
    n_folds: int = 4,
    training: JudgeTraining | None = None,
    depth: int = 10,
    pair_options=None,
    random_state=0,
    judge_options=None,
    progress: bool = True,
    log=None,
):
    """Cross-fitted judge results: every question scored by a judge trained on the other folds only.

    Parameters
    ----------
    queries : DataFrame
        Labeled queries (``id, query, answerable, gold``).
    candidates : sequence of RetrievalResult
        One retrieved list per query (the dense list): what the judges are
        trained on and read.
    texts : mapping of str to str
        Chunk id -> passage text.
    judge_dir : str or Path
        Where the fold judges are kept (reused when their pairs and options
        are the same).
    groups : array-like, default=None
        Unit kept whole in a fold (an article); each question alone when None.
    n_folds : int, default=4
    training : JudgeTraining, default=None
    depth : int, default=10
        Passages each judge reads per question (and pairs are taken from).
    pair_options : dict, default=None
        Options of :func:`ragcal.judges.judge_pairs` (beyond ``depth``).
    random_state : int, default=0
        Seed of the folds (the training seed is ``training.random_state``).
    judge_options : dict, default=None
        Options of :class:`TrainedJudge` (``cache_dir``, ``batch_size``).

    Returns
    -------
    results : list of RetrievalResult
        The ``"judge"`` view of every query, in order.
    folds : DataFrame
        One row per fold: ``fold, n_questions, n_training_questions, n_pairs,
        n_positive, train_seconds, reused, score_seconds, final_validation_loss,
        validation_auc, verdict (of :func:`ragcal.judges.training.training_verdict`; None for a judge folder
        written before it), calibration_slope, calibration_intercept,
        calibration_pairs (the fold judge's Platt calibration, fitted on its
        validation questions, a share of its training questions; None and
        0 when it has none), fingerprint, folder``.
    """
    training = training or JudgeTraining()
    candidates = list(candidates)
    if len(candidates) != len(queries):
        raise ValueError(f"crossfit_judge_results: {len(queries)} queries but {len(candidates)} retrieved lists")
    queries = queries.reset_index(drop=True)
    groups = queries["id"].astype(str).to_numpy() if groups is None else np.asarray(groups).astype(str)
    fold_of = judge_folds(queries["answerable"], groups, n_folds=n_folds, random_state=random_state)
    judge_dir = Path(judge_dir)
    keys = np.array([question_key(question) for question in queries["query"]])
    results: list = [None] * len(queries)
    rows = []
    for fold in range(fold_of.max() + 1):
        scored = np.flatnonzero(fold_of == fold)
        trained = np.flatnonzero((fold_of != fold) & ~np.isin(keys, keys[scored]))
        pairs = judge_pairs(
            queries.iloc[trained], [candidates[row] for row in trained], texts, depth=depth, **(pair_options or {})
        )
        folder = judge_dir / f"fold{fold}-{_training_digest(pairs, training)}"
        reused = is_judge_folder(folder)
        if reused:
            judge = TrainedJudge(folder, **(judge_options or {}))
        else:
            judge = train_judge(pairs, folder, training=training, progress=progress, log=log)
            if judge_options:
                judge = TrainedJudge(folder, **judge_options)
        started = time.perf_counter()
        fold_results = judge_results(
            judge, queries["query"].iloc[scored], [candidates[row] for row in scored], texts, depth=depth
        )
        score_seconds = time.perf_counter() - started
        for row, result in zip(scored, fold_results):
            results[row] = result
        description = judge.description
        rows.append(
            {
                "fold": fold,
                "n_questions": scored.size,
                "n_training_questions": description["n_questions"],
                "n_pairs": description["n_pairs"],
                "n_positive": description["n_positive"],
                "train_seconds": description["train_seconds"],
                "reused": reused,
                "score_seconds": round(score_seconds, 1),
                "scored_pairs": int(sum(len(result.chunk_ids) for result in fold_results)),
                "final_validation_loss": description["final_validation_loss"],
                "validation_auc": description.get("validation_auc"),
                "verdict": description.get("verdict"),
                "calibration_slope": judge.calibration["slope"] if judge.calibration else None,
                "calibration_intercept": judge.calibration["intercept"] if judge.calibration else None,
                "calibration_pairs": judge.calibration["n_pairs"] if judge.calibration else 0,
                "fingerprint": judge.fingerprint,
                "folder": folder.name,
            }
        )
        if log:
            log(
                f"judge fold {fold}: trained on {description['n_questions']} questions"
                f"{' (reused)' if reused else ''}, scored {scored.size} in {score_seconds:.0f} s"
            )
    return results, pd.DataFrame(rows)
