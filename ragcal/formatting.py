"""Numbers as text for tables and reports: an estimate with its interval, a count as a share."""

from __future__ import annotations

import math

__all__ = ["format_interval", "interval_cell", "format_share", "listing", "LISTED"]

#: How many items an error message lists before "and N more".
LISTED = 10


def format_interval(value, low, high, *, digits: int = 3, sign: bool = False) -> str:
    """``"0.986 [0.973, 0.996]"`` (``"+0.042 [+0.014, +0.074]"`` with ``sign``); ``"n/a"`` for NaN."""
    if math.isnan(value):
        return "n/a"
    form = f"{{:{'+' if sign else ''}.{digits}f}}"
    return f"{form.format(value)} [{form.format(low)}, {form.format(high)}]"


def interval_cell(row, name, *, sign=False, digits: int = 3) -> str:
    """``row[name]`` with its ``<name>_low`` and ``<name>_high`` columns, as :func:`format_interval` writes it."""
    return format_interval(row[name], row[f"{name}_low"], row[f"{name}_high"], digits=digits, sign=sign)


def format_share(k, n) -> str:
    """``"42% (21/50)"``; ``"n/a"`` when ``n`` is 0."""
    return f"{k / n:.0%} ({int(k)}/{int(n)})" if n else "n/a"


def listing(items, *, limit: int = LISTED, total: int | None = None, show=str, separator: str = ", ") -> str:
    """The first ``limit`` items, then "and N more": what every error message that lists ids says.

    ``total`` is how many there are when ``items`` holds only some of them;
    ``show`` turns an item into text (``repr`` quotes ids).

    >>> listing(range(12), limit=3)
    '0, 1, 2 and 9 more'
    >>> listing(["a"], show=repr)
    "'a'"
    """
    items = list(items)
    total = len(items) if total is None else total
    shown = separator.join(map(show, items[:limit]))
    return shown + (f" and {total - limit} more" if total > limit else "")
