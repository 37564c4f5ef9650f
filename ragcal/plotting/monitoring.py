"""What :func:`ragcal.monitoring.monitor` compared: the gate's signal on live and calibration rows, and the
test martingale over time."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._style import _finish, figure_style

__all__ = ["ShiftDisplay"]


@dataclass
class ShiftDisplay:
    """Two panels: one signal's scores on calibration and live rows, and the conformal test martingale.

    Attributes
    ----------
    signal : str
    calibration, live : ndarray
        The signal's finite values on each set.
    ks_statistic, ks_p_value : float
        From the report's signal tests.
    martingale : ndarray or None
        The martingale after each live row in time order (None: no timestamps).
    bar : float
        ``1 / level``: crossing it is the sequential test firing.
    verdict : str
    """

    signal: str
    calibration: np.ndarray
    live: np.ndarray
    ks_statistic: float
    ks_p_value: float
    martingale: np.ndarray | None
    bar: float
    verdict: str

    @classmethod
    def from_report(cls, report, live, calibration, *, signal=None) -> "ShiftDisplay":
        """From a :class:`~ragcal.monitoring.MonitorReport` and the two tables it compared.

        ``signal`` defaults to the first signal of the report's signal tests (the gate's first column).
        """
        tests = report.signals.set_index("signal")
        signal = tests.index[0] if signal is None else signal
        if signal not in tests.index:
            raise ValueError(f"ShiftDisplay: the report has no test of {signal!r}; it has {list(tests.index)}")
        values = {
            name: np.asarray(table[signal], dtype=float) for name, table in (("live", live), ("calibration", calibration))
        }
        values = {name: array[np.isfinite(array)] for name, array in values.items()}
        sequential = report.sequential
        return cls(
            signal=signal,
            calibration=values["calibration"],
            live=values["live"],
            ks_statistic=float(tests.loc[signal, "ks_statistic"]),
            ks_p_value=float(tests.loc[signal, "p_value"]),
            martingale=None if sequential is None else np.asarray(sequential.martingale, dtype=float),
            bar=float("nan") if sequential is None else float(sequential.bar),
            verdict=report.verdict,
        )

    def plot(self, ax=None, *, name=None, **kwargs) -> "ShiftDisplay":
        """Draw both panels (``ax``: two Axes); the martingale panel says so when there were no timestamps."""
        import matplotlib.pyplot as plt

        with figure_style():
            if ax is None:
                figure, ax = plt.subplots(1, 2, figsize=(9.0, 3.2), layout="constrained")
            left, right = ax
            low = min(self.calibration.min(initial=np.inf), self.live.min(initial=np.inf))
            high = max(self.calibration.max(initial=-np.inf), self.live.max(initial=-np.inf))
            bins = np.linspace(low, high, 31) if np.isfinite([low, high]).all() and high > low else 10
            self.bars_ = {
                "calibration": left.hist(self.calibration, bins=bins, density=True, histtype="step", linewidth=1.6,
                                         color="#0072B2", label=f"calibration (n={self.calibration.size})")[2],
                "live": left.hist(self.live, bins=bins, density=True, histtype="stepfilled", alpha=0.45,
                                  color="#D55E00", label=f"live (n={self.live.size})")[2],
            }
            left.set_xlabel(self.signal)
            left.set_ylabel("density")
            left.set_title(f"KS {self.ks_statistic:.3f}, p = {self.ks_p_value:.2g}", loc="left", fontsize=9)
            left.legend(fontsize=7)
            self.line_ = None
            if self.martingale is not None and self.martingale.size:
                (self.line_,) = right.plot(np.arange(1, self.martingale.size + 1), self.martingale, color="#000000",
                                           linewidth=1.3, label="test martingale")
                right.axhline(self.bar, color="#CC79A7", linestyle="--", linewidth=1.1,
                              label=f"alarm bar 1/level = {self.bar:.0f}")
                right.set_yscale("log")
                right.set_xlabel("live rows, in time order")
                right.set_ylabel("martingale (log scale)")
                right.legend(fontsize=7)
            else:
                right.text(0.5, 0.5, "no timestamps: no test over time", ha="center", va="center",
                           transform=right.transAxes)
                right.set_axis_off()
            right.set_title("exchangeability over time", loc="left", fontsize=9)
            self.axes_, self.figure_ = np.array([left, right]), left.figure
        return _finish(self, [self.bars_, self.line_] if self.line_ is not None else self.bars_, name=name,
                       kwargs=kwargs)
