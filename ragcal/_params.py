"""Parameter checks: the one place where ragcal says what a parameter must be.

Every public function checks its options through these helpers, so each message
has the same form, modelled on scikit-learn's::

    The 'alpha' parameter of monitor must be a float in (0, 1). Got 1.5 instead.

Each checker returns the value in its canonical type (``float`` or ``int``), so
callers can write ``alpha = check_float(alpha, "alpha", "monitor", low=0, high=1)``.
Booleans are never numbers here: ``True`` is refused where a float or an int is
asked for, because ``float(True)`` silently turns a typo into ``1.0``.
"""

from __future__ import annotations

import math
import numbers

__all__ = ["parameter_error", "check_float", "check_int", "check_choice", "interval_text"]


def parameter_error(name: str, function: str, expected: str, value, *, error=ValueError) -> Exception:
    """The exception (not raised) for ``name`` of ``function``: "... must be {expected}. Got {value!r} instead."."""
    return error(f"The {name!r} parameter of {function} must be {expected}. Got {value!r} instead.")


def interval_text(low, high, *, low_open: bool, high_open: bool) -> str:
    """``(0, 1]``-style text for an interval; a missing end is written as infinity."""
    left = "(" if low_open or low is None else "["
    right = ")" if high_open or high is None else "]"
    low_text = "-inf" if low is None else _number_text(low)
    high_text = "inf" if high is None else _number_text(high)
    return f"{left}{low_text}, {high_text}{right}"


def _number_text(value) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _inside(value: float, low, high, low_open: bool, high_open: bool) -> bool:
    if low is not None and (value <= low if low_open else value < low):
        return False
    if high is not None and (value >= high if high_open else value > high):
        return False
    return True


def check_float(value, name: str, function: str, *, low=None, high=None, low_open: bool = True,
                high_open: bool = True, allow_none: bool = False) -> float | None:
    """``value`` as a float inside the interval, else a ``ValueError`` in the one template.

    ``low`` / ``high`` of ``None`` leave that end open to infinity. NaN is never
    inside an interval. Ints are accepted and returned as floats.

    Examples
    --------
    >>> check_float(0.5, "alpha", "monitor", low=0, high=1)
    0.5
    >>> check_float(1.5, "alpha", "monitor", low=0, high=1)
    Traceback (most recent call last):
    ...
    ValueError: The 'alpha' parameter of monitor must be a float in (0, 1). Got 1.5 instead.
    """
    if value is None and allow_none:
        return None
    expected = "a float"
    if low is not None or high is not None:
        expected += f" in {interval_text(low, high, low_open=low_open, high_open=high_open)}"
    if allow_none:
        expected += " or None"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise parameter_error(name, function, expected, value)
    as_float = float(value)
    if math.isnan(as_float) or not _inside(as_float, low, high, low_open, high_open):
        raise parameter_error(name, function, expected, value)
    return as_float


def check_int(value, name: str, function: str, *, low=None, high=None, allow_none: bool = False) -> int | None:
    """``value`` as an int with ``low <= value <= high`` (either end optional), else a ``ValueError``.

    NumPy integers are accepted; floats, even whole ones, and booleans are not.

    Examples
    --------
    >>> check_int(3, "k", "attach_passages", low=1)
    3
    >>> check_int(0, "k", "attach_passages", low=1)
    Traceback (most recent call last):
    ...
    ValueError: The 'k' parameter of attach_passages must be an int >= 1. Got 0 instead.
    """
    if value is None and allow_none:
        return None
    if low is not None and high is not None:
        expected = f"an int in [{low}, {high}]"
    elif low is not None:
        expected = f"an int >= {low}"
    elif high is not None:
        expected = f"an int <= {high}"
    else:
        expected = "an int"
    if allow_none:
        expected += " or None"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise parameter_error(name, function, expected, value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise parameter_error(name, function, expected, value)
    return int(value)


def check_choice(value, name: str, function: str, choices) -> str:
    """``value`` if it is one of ``choices`` (listed in the message, from the caller's registry), else a ``ValueError``.

    Examples
    --------
    >>> check_choice("holm", "method", "ltt_certify", ("bonferroni", "holm"))
    'holm'
    """
    choices = tuple(choices)
    if not isinstance(value, str) or value not in choices:
        listed = ", ".join(repr(choice) for choice in choices)
        raise parameter_error(name, function, f"one of {listed}", value)
    return value
