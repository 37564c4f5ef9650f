"""What the metrics share: the warning for degenerate input, and dropping NaN scores with a warning."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

__all__ = ["DegenerateInputWarning"]


class DegenerateInputWarning(UserWarning):
    """The input cannot give a meaningful number (one class only, a constant score); NaN is returned."""


def check_binary(y_true, y_score, function: str):
    y_true = np.asarray(y_true)
    y_score = np.asarray(y_score, dtype=float)
    if y_true.shape != y_score.shape or y_true.ndim != 1:
        raise ValueError(
            f"{function}: y_true and y_score must be 1-D of the same length; got {y_true.shape} and {y_score.shape}"
        )
    if np.isnan(y_score).any():
        raise ValueError(f"{function}: y_score contains NaN; drop or impute those queries first")
    return y_true.astype(bool), y_score


def drop_nan(table: pd.DataFrame, signal: str) -> pd.DataFrame:
    """The rows of ``table`` whose ``signal`` is a number, with a DegenerateInputWarning naming how many were not."""
    missing = int(table[signal].isna().sum())
    if missing:
        warnings.warn(
            f"{signal}: {missing} queries with a NaN score are left out", DegenerateInputWarning, stacklevel=3
        )
    return table[~table[signal].isna()]
