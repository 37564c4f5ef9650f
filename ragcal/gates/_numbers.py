"""JSON has no infinity: thresholds such as ``-inf`` ("answer all") travel as strings.

Reading them back is :mod:`ragcal.gates._fields`'s job (``number(..., infinite=True)``).
"""

from __future__ import annotations

import math

__all__ = ["to_json_number"]


def to_json_number(value):
    """``float`` for finite values and None; ``"inf"``/``"-inf"``/``"nan"`` otherwise."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else str(value)
