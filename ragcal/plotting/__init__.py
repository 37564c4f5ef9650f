"""Display objects in the style of scikit-learn's ``RocCurveDisplay``, one module per family.

Each ``*Display.from_*`` constructor validates its input and computes through
ragcal's own functions (:mod:`ragcal.metrics`, :mod:`ragcal.calibration`); the
display keeps plain arrays and DataFrames. ``plot(ax=None, *, name=None,
**kwargs)`` only draws, never computes, and returns the display, which keeps
``ax_`` (or ``axes_``) and ``figure_`` and what it drew, so that a notebook
can restyle it. ``ax`` is one Axes, or one per panel for the displays with
several panels; ``name`` titles the figure; ``kwargs`` go to matplotlib for
the display's main artists.

- :mod:`~ragcal.plotting.distributions`: :class:`ScoreDistributionDisplay`;
- :mod:`~ragcal.plotting.roc`: :class:`RocDisplay`, :class:`AucComparisonDisplay`;
- :mod:`~ragcal.plotting.tradeoff`: :class:`TradeoffDisplay`, :class:`HeldoutDisplay`;
- :mod:`~ragcal.plotting.gates`: :class:`FloorGapDisplay`, :class:`GateOutcomeDisplay`;
- :mod:`~ragcal.plotting.chunking`: :class:`ChunkingSweepDisplay`;
- :mod:`~ragcal.plotting.coefficients`: :class:`CoefficientDisplay`;
- :mod:`~ragcal.plotting.risk_coverage`: :class:`RiskCoverageDisplay`;
- :mod:`~ragcal.plotting.operating_points`: :class:`OperatingPointDisplay` (binary decisions as points);
- :mod:`~ragcal.plotting.label_curve`: :class:`LabelCurveDisplay`;
- :mod:`~ragcal.plotting.monitoring`: :class:`ShiftDisplay`;
- :mod:`~ragcal.plotting.judges`: :class:`TrainingCurveDisplay` (a judge's training curves);
- :mod:`~ragcal.plotting._style`: colours, :func:`figure_style`, :func:`save_figure`.

matplotlib is imported inside the drawing code only, so importing this
package does not need it.
"""

from ._style import OKABE_ITO, SLICE_COLOURS, figure_style, save_figure
from .chunking import ChunkingSweepDisplay
from .coefficients import CoefficientDisplay
from .distributions import ScoreDistributionDisplay
from .gates import FloorGapDisplay, GateOutcomeDisplay
from .judges import TrainingCurveDisplay
from .label_curve import LabelCurveDisplay
from .monitoring import ShiftDisplay
from .operating_points import OperatingPointDisplay
from .risk_coverage import RiskCoverageDisplay
from .roc import AucComparisonDisplay, RocDisplay
from .tradeoff import HeldoutDisplay, TradeoffDisplay

__all__ = [
    "OKABE_ITO",
    "SLICE_COLOURS",
    "figure_style",
    "save_figure",
    "ScoreDistributionDisplay",
    "RocDisplay",
    "TradeoffDisplay",
    "HeldoutDisplay",
    "LabelCurveDisplay",
    "RiskCoverageDisplay",
    "OperatingPointDisplay",
    "FloorGapDisplay",
    "GateOutcomeDisplay",
    "AucComparisonDisplay",
    "ChunkingSweepDisplay",
    "CoefficientDisplay",
    "ShiftDisplay",
    "TrainingCurveDisplay",
]
