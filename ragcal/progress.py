"""Progress of long steps: a tqdm bar in a terminal or a notebook, a few plain lines in a log.

A tqdm bar redirected to a file writes a carriage-return update every tenth of
a second (about 2,000 of them, 154 KB, for one embedding of the SQuAD
questions). :func:`progress` shows tqdm's bar where a person watches it (a
terminal, a Jupyter kernel) and, when the output is not a terminal, prints at
most one line per 10% of the work or per 30 seconds, whichever comes first,
and a last line when the work is done.

``RAGCAL_PROGRESS=0`` (or tqdm's own ``TQDM_DISABLE=1``) silences every bar.
"""

from __future__ import annotations

import os
import sys
import time

__all__ = ["LINE_EVERY_SECONDS", "LINE_EVERY_SHARE", "LONG_LOOP", "LineProgress", "progress", "progress_bar"]

#: Loops of at least this many steps (e.g. held-out splits) show progress; shorter ones take seconds and stay silent.
LONG_LOOP = 200
#: In a log, a line at least every this many seconds (when some work was done since the last one)...
LINE_EVERY_SECONDS = 30.0
#: ...and at every this share of the total.
LINE_EVERY_SHARE = 0.1


def _silenced() -> bool:
    return os.environ.get("RAGCAL_PROGRESS", "1") == "0" or os.environ.get("TQDM_DISABLE", "") not in ("", "0")


def _in_notebook() -> bool:
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    try:
        return type(shell.get_ipython()).__name__ == "ZMQInteractiveShell"
    except AttributeError:
        return False


class LineProgress:
    """Plain-line progress for a stream that is not a terminal (see the module docstring).

    Parameters
    ----------
    total : int or None
        Units of work; None when unknown (a line every :data:`LINE_EVERY_SECONDS` only).
    desc : str
    unit : str
    file : text stream, default=sys.stderr
    clock : callable, default=time.monotonic
        Seconds, for tests.
    """

    def __init__(self, total=None, *, desc: str = "", unit: str = "it", file=None, clock=time.monotonic):
        self.total = None if total is None else int(total)
        self.desc, self.unit = desc, unit
        self.file = file if file is not None else sys.stderr
        self.clock = clock
        self.n = 0
        self.start = self.last_time = clock()
        self.last_n = 0
        self.closed = False
        self.postfix = ""

    def set_postfix(self, **values) -> None:
        """Shown at the end of the next line, as tqdm shows it beside its bar (e.g. ``loss=0.693``)."""
        self.postfix = ", ".join(f"{name}={value}" for name, value in values.items())

    def _line(self) -> str:
        elapsed = self.clock() - self.start
        done = f"{self.n:,}" if self.total is None else f"{self.n:,}/{self.total:,} ({self.n / max(self.total, 1):.0%})"
        postfix = f", {self.postfix}" if self.postfix else ""
        return f"{self.desc + ': ' if self.desc else ''}{done} {self.unit}, {elapsed:.0f} s{postfix}"

    def _write(self) -> None:
        print(self._line(), file=self.file, flush=True)
        self.last_time, self.last_n = self.clock(), self.n

    def update(self, n: int = 1) -> None:
        """Count ``n`` more units; print a line when 10% more is done or 30 s have passed."""
        self.n += n
        if self.total is not None and self.n >= self.total:
            return  # the last line is close()'s
        step = None if self.total is None else max(1, int(self.total * LINE_EVERY_SHARE))
        if (step is not None and self.n - self.last_n >= step) or self.clock() - self.last_time >= LINE_EVERY_SECONDS:
            self._write()

    def close(self) -> None:
        """Print the last line (once), unless nothing was counted."""
        if not self.closed and self.n:
            self._write()
        self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class _Silent:
    n = 0

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix(self, **values) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def progress_bar(*, total=None, desc: str = "", unit: str = "it", disable: bool | None = False, file=None):
    """A bar to ``update(n)`` by hand (a ``with`` block closes it): tqdm, plain lines or nothing (see :func:`progress`)."""
    if disable or _silenced():
        return _Silent()
    stream = file if file is not None else sys.stderr
    if _in_notebook() or getattr(stream, "isatty", lambda: False)():
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, unit=unit, file=file)
    return LineProgress(total, desc=desc, unit=unit, file=stream)


def progress(iterable, *, total=None, desc: str = "", unit: str = "it", disable: bool | None = False, file=None):
    """Iterate over ``iterable`` with progress: a tqdm bar where a person watches, plain lines in a log.

    Parameters
    ----------
    iterable : iterable
        Its items come back unchanged and in order.
    total : int, default=None
        ``len(iterable)`` when it has one.
    desc, unit : str
    disable : bool or None, default=False
        True shows nothing. ``RAGCAL_PROGRESS=0`` or ``TQDM_DISABLE=1`` in the
        environment shows nothing either.
    file : text stream, default=None
        Where to write; ``sys.stderr`` when None.

    Examples
    --------
    >>> import io
    >>> log = io.StringIO()
    >>> sum(progress(range(100), desc="splits", file=log))
    4950
    >>> len(log.getvalue().splitlines())  # 10%, 20%, ..., 90%, then the last line
    10
    """
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)
    bar = progress_bar(total=total, desc=desc, unit=unit, disable=disable, file=file)
    try:
        for item in iterable:
            yield item
            bar.update(1)
    finally:
        bar.close()
