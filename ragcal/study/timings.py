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
    ['fastapi: calibration', 'total']
    """

    def __init__(self, *, clock=time.perf_counter):
        self.clock = clock
        #: (stage, seconds, counted): stages run inside a parallel stage are not counted in the total twice.
        self.rows: list[tuple[str, float, bool]] = []

    @contextmanager
    def stage(self, name: str):
        """Time the body of the ``with`` block as stage ``name`` (recorded even when it raises)."""
        start = self.clock()
        try:
            yield
        finally:
            self.rows.append((name, self.clock() - start, True))

    def add_parallel(self, rows) -> None:
        """Add the stages another process timed (its :attr:`rows`) while a stage of this one ran them in parallel.

        They are shown, indented, but not added to the total: the stage that
        ran them (timed here with :meth:`stage`) holds their wall-clock time.
        """
        self.rows.extend((name, float(seconds), False) for name, seconds, *_ in rows)

    def table(self) -> pd.DataFrame:
        """``stage``, ``seconds`` and ``counted`` per stage, in order, then a ``total`` row (the counted stages' sum)."""
        frame = pd.DataFrame(self.rows, columns=["stage", "seconds", "counted"])
        if frame.empty:
            return frame
        total = pd.DataFrame([{"stage": "total", "seconds": float(frame.loc[frame["counted"], "seconds"].sum()),
                               "counted": True}])  # fmt: skip
        return pd.concat([frame, total], ignore_index=True)

    def format(self) -> str:
        """The table as aligned text, seconds to one decimal and minutes beside them.

        Stages that ran in another process are indented under the parallel
        stage that holds their wall-clock time.
        """
        table = self.table()
        if table.empty:
            return "no stage was timed"
        names = [stage if counted else f"  {stage}" for stage, counted in zip(table["stage"], table["counted"])]
        width = max(len(name) for name in names)
        return "\n".join(
            f"{name:<{width}}  {seconds:8.1f} s  {seconds / 60:6.1f} min" for name, seconds in zip(names, table["seconds"])
        )
