"""A judge's training curves: training loss per logged step and validation loss per epoch, one line per fold."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ._style import _SIGNAL_COLOURS, _finish, _new_axes, figure_style

__all__ = ["TrainingCurveDisplay"]

_COLUMNS = ("fold", "step", "epoch", "training_loss", "validation_loss")


@dataclass
class TrainingCurveDisplay:
    """Training and validation loss of one or several judges (``training.csv``, one per fold).

    Attributes
    ----------
    curves : DataFrame
        ``fold, step, epoch, training_loss, validation_loss``; NaN where a
        row holds only one of the two losses.
    """

    curves: pd.DataFrame

    @classmethod
    def from_curves(cls, curves: pd.DataFrame) -> "TrainingCurveDisplay":
        """From a judge's ``curve`` (:attr:`ragcal.judges.TrainedJudge.curve`, given a ``fold`` column when
        missing) or the judge study's ``training_curves.csv``."""
        if "fold" not in curves.columns:
            curves = curves.assign(fold=0)
        missing = [column for column in _COLUMNS if column not in curves.columns]
        if missing:
            raise ValueError(f"TrainingCurveDisplay.from_curves: missing column(s) {missing}")
        if curves.empty:
            raise ValueError("TrainingCurveDisplay.from_curves: no rows to draw")
        return cls(curves[list(_COLUMNS)].reset_index(drop=True))

    def plot(self, ax=None, *, name=None, **kwargs) -> "TrainingCurveDisplay":
        """Training loss as a line, validation loss as markers joined by a dashed line, against epochs."""
        with figure_style():
            ax = _new_axes(ax, size=(5.2, 3.0))
            self.lines_ = {}
            for (fold, part), colour in zip(self.curves.groupby("fold", sort=True), _SIGNAL_COLOURS * 3):
                trained = part.dropna(subset=["training_loss"])
                validated = part.dropna(subset=["validation_loss"])
                self.lines_[f"fold {fold} training"] = ax.plot(
                    trained["epoch"], trained["training_loss"], color=colour, linewidth=1.3,
                    label=f"fold {fold}: training",
                )[0]
                self.lines_[f"fold {fold} validation"] = ax.plot(
                    validated["epoch"], validated["validation_loss"], color=colour, linestyle="--", marker="o",
                    markersize=4, linewidth=1, label=f"fold {fold}: validation",
                )[0]
            ax.set_xlabel("epoch")
            ax.set_ylabel("binary cross-entropy")
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
            self.ax_, self.figure_ = ax, ax.figure
        return _finish(self, self.lines_, name=name, kwargs=kwargs)
