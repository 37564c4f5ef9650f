"""JSON has no infinity: thresholds such as ``-inf`` ("answer all") travel as strings."""

from __future__ import annotations

import math

__all__ = ["to_json_number", "from_json_number"]


def to_json_number(value):
    """``float`` for finite values and None; ``"inf"``/``"-inf"``/``"nan"`` otherwise."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else str(value)


def from_json_number(value, *, name: str):
    """Inverse of :func:`to_json_number`; a value that is not a number names the field."""
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"gate field {name!r} must be a number, got {value!r}") from None
