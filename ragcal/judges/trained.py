"""A judge ragcal trained (:func:`ragcal.judges.training.train_judge`), loaded from its folder.

It is a :class:`~ragcal.judges.cross_encoder.CrossEncoderJudge` (one output,
``P = sigmoid(logit)``) that also knows the questions it was trained on, from
the folder's ``judge.json`` (the validation questions its calibration was
fitted on among them): measuring it on any of them raises
:class:`~ragcal.judges.protocol.JudgeLeakageError`
(:func:`ragcal.judges.judge_results`; deciding on them, in ``ragcal ask`` or
``serve``, is allowed).

When judge.json holds a calibration (:func:`~ragcal.judges.training.platt_calibration`,
fitted on the judge's held-out validation pairs), its scores are
``sigmoid(slope * logit + intercept)``: a probability on the scale every
calibrated judge shares. ``calibrated=False`` gives the raw ``sigmoid(logit)``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..retrieval.rerank import pair_cache_key
from .cross_encoder import CrossEncoderJudge

__all__ = ["TrainedJudge", "JudgeFileError", "is_judge_folder", "JUDGE_FORMAT"]

#: The ``format`` of a judge folder's judge.json (written by :func:`~ragcal.judges.training.train_judge`).
JUDGE_FORMAT = "ragcal-judge/1"


class JudgeFileError(ValueError):
    """A judge folder is missing, incomplete or malformed; the message names the file."""


def is_judge_folder(path) -> bool:
    """True when ``path`` is a folder with a judge.json (what :func:`train_judge` writes)."""
    return (Path(path) / "judge.json").is_file()


class TrainedJudge(CrossEncoderJudge):
    """A judge folder written by :func:`~ragcal.judges.training.train_judge`.

    Parameters
    ----------
    folder : str or Path
    calibrated : bool, default=True
        Apply the calibration judge.json holds (none in a folder written
        before ragcal recorded one, or when the validation pairs were too
        few); False: the raw ``sigmoid(logit)``.
    **options
        As for :class:`~ragcal.judges.cross_encoder.CrossEncoderJudge`
        (``batch_size``, ``cache_dir``, ``use_cache``, ``device``); the number
        of tokens read is the one it was trained with.

    Attributes
    ----------
    description : dict
        judge.json: base model, training options, counts, time, the keys of
        the questions trained on.
    trained_on : frozenset of str
    calibration : dict or None
        The calibration applied (``method, slope, intercept, n_pairs,
        n_positive``); None when the scores are the raw sigmoid.
    curve : DataFrame
        training.csv: ``step, epoch, training_loss, validation_loss, validation_auc``.
    """

    def __init__(self, folder, *, calibrated: bool = True, **options):
        folder = Path(folder)
        if not folder.is_dir():
            raise JudgeFileError(f"{folder}: judge folder not found")
        path = folder / "judge.json"
        if not path.is_file():
            raise JudgeFileError(f"{path}: missing; {folder} is not a judge folder written by `ragcal train-judge`")
        try:
            description = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise JudgeFileError(f"{path}: not valid JSON ({error})") from None
        if not isinstance(description, dict) or description.get("format") != JUDGE_FORMAT:
            found = description.get("format") if isinstance(description, dict) else type(description).__name__
            raise JudgeFileError(f"{path}: expected format {JUDGE_FORMAT!r}, found {found!r:.80}")
        trained_on = description.get("trained_on")
        if not isinstance(trained_on, list) or not all(isinstance(key, str) for key in trained_on):
            raise JudgeFileError(f"{path}: field 'trained_on' must be a list of question keys")
        calibration = description.get("calibration") if calibrated else None
        if calibration is not None and not (
            isinstance(calibration, dict)
            and calibration.get("method") == "platt"
            and all(isinstance(calibration.get(key), (int, float)) for key in ("slope", "intercept"))
        ):
            raise JudgeFileError(f"{path}: field 'calibration' must be null or a platt slope and intercept")
        options.setdefault("max_length", int(description.get("training", {}).get("max_length") or 256))
        options.setdefault("name", folder.resolve().name)
        super().__init__(folder, **options)
        self.folder = folder
        self.description = description
        self.trained_on = frozenset(trained_on)
        self.calibration = calibration
        if calibration is not None:
            # Calibrated scores are other numbers: their own fingerprint, so the score cache never mixes the two.
            self.fingerprint += f"/platt({calibration['slope']:.9g},{calibration['intercept']:.9g})"
            self.cache_key = pair_cache_key(self.fingerprint)

    def probabilities(self, logits: np.ndarray) -> np.ndarray:
        """``sigmoid(slope * logit + intercept)`` when calibrated, else ``sigmoid(logit)``."""
        if self.calibration is None:
            return super().probabilities(logits)
        return super().probabilities(self.calibration["slope"] * logits + self.calibration["intercept"])

    @property
    def curve(self) -> pd.DataFrame:
        """The training curve (training.csv)."""
        return pd.read_csv(self.folder / "training.csv")

    def to_dict(self) -> dict:
        """Provenance: the judge folder, its fingerprint and how many questions trained it."""
        return {**super().to_dict(), "judge_questions": len(self.trained_on)}
