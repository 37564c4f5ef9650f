"""Wall-clock time of each stage of the study, for ``ragcal reproduce --timings``."""

from __future__ import annotations

import time
from contextlib import contextmanager

import pandas as pd

__all__ = ["StageTimings"]


class StageTimings:
    """Records how long each named stage took, in the order the stages ran.

    Examples
    --------
    >>> timings = StageTimings()
    >>> with timings.stage("fastapi: calibration"):
    ...     pass
    >>> list(timings.table()["stage"])
    ['fastapi: calibration']
    """

    def __init__(self, *, clock=time.perf_counter):
        self.clock = clock
        self.rows: list[tuple[str, float]] = []

    @contextmanager
    def stage(self, name: str):
        """Time the body of the ``with`` block as stage ``name`` (recorded even when it raises)."""
        start = self.clock()
        try:
            yield
        finally:
            self.rows.append((name, self.clock() - start))

    def table(self) -> pd.DataFrame:
        """``stage`` and ``seconds`` per stage, in order, then a ``total`` row (the stages' sum)."""
        frame = pd.DataFrame(self.rows, columns=["stage", "seconds"])
        total = pd.DataFrame([{"stage": "total", "seconds": float(frame["seconds"].sum())}])
        return pd.concat([frame, total], ignore_index=True) if len(frame) else frame

    def format(self) -> str:
        """The table as aligned text, seconds to one decimal and minutes beside them."""
        table = self.table()
        if table.empty:
            return "no stage was timed"
        width = max(len(stage) for stage in table["stage"])
        return "\n".join(
            f"{stage:<{width}}  {seconds:8.1f} s  {seconds / 60:6.1f} min"
            for stage, seconds in zip(table["stage"], table["seconds"])
        )
