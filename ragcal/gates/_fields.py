"""Strict reading of a gate's saved form: every field checked for presence, type and range, by name.

A gate file is edited by hand now and then. ``float(True)`` is 1.0 and
``bool("no")`` is True, so a lenient reader turns a typo into a different
gate. These readers accept exactly what :meth:`Gate.to_dict` writes and say
which field is wrong otherwise; :func:`ragcal.gates.read_gate_file` adds the
file's path.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = ["GateFieldError", "fields_of", "number", "boolean", "text", "positive_int_or_none", "numbers"]

_MISSING = object()


class GateFieldError(ValueError):
    """One field of a gate's dict is missing, of the wrong type or out of range; the message names it."""


def fields_of(data, where: str, *, required=(), optional=()) -> Mapping:
    """``data`` itself, checked to be a mapping with every ``required`` key and no key outside the two lists."""
    if not isinstance(data, Mapping):
        raise GateFieldError(f"field {where!r}: expected an object, got {_describe(data)}")
    missing = [key for key in required if key not in data]
    if missing:
        raise GateFieldError(f"field {where!r}: missing key(s) {', '.join(map(repr, missing))}")
    unknown = [key for key in data if key not in required and key not in optional]
    if unknown:
        known = ", ".join(map(repr, (*required, *optional)))
        raise GateFieldError(f"field {where!r}: unknown key(s) {', '.join(map(repr, unknown))}; known keys: {known}")
    return data


def _describe(value) -> str:
    shown = repr(value)
    return f"{type(value).__name__} {shown[:60]}{'...' if len(shown) > 60 else ''}"


def _check_number(value, name: str, *, infinite: bool) -> float:
    if isinstance(value, str) and value.strip().lower() in ("inf", "+inf", "-inf", "infinity", "-infinity"):
        value = float(value)
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GateFieldError(f"field {name!r}: expected a number, got {_describe(value)}")
    value = float(value)
    if math.isnan(value):
        raise GateFieldError(f"field {name!r}: NaN is not a number a gate can compare with")
    if math.isinf(value) and not infinite:
        raise GateFieldError(f"field {name!r}: must be finite, got {value}")
    return value


def number(data, key, where, *, default=_MISSING, infinite: bool = False):
    """A float (``"inf"``/``"-inf"`` strings when ``infinite``); never NaN, never a bool or other text.

    Without ``default`` the key is required; with one (often None), a
    missing key or null gives the default.
    """
    name = f"{where}.{key}"
    value = data.get(key)
    if value is None:
        if default is _MISSING:
            raise GateFieldError(f"field {name!r}: missing or null, expected a number")
        return default
    return _check_number(value, name, infinite=infinite)


def numbers(data, key, where, *, length: int | None = None) -> tuple:
    """A list of finite numbers (of ``length`` items, when given)."""
    values = data.get(key)
    name = f"{where}.{key}"
    if not isinstance(values, list):
        raise GateFieldError(f"field {name!r}: expected a list of numbers, got {_describe(values)}")
    if length is not None and len(values) != length:
        raise GateFieldError(f"field {name!r}: expected {length} numbers (one per signal), got {len(values)}")
    return tuple(_check_number(value, f"{name}[{position}]", infinite=False) for position, value in enumerate(values))


def boolean(data, key, where, *, default: bool) -> bool:
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise GateFieldError(f"field {where + '.' + key!r}: expected true or false, got {_describe(value)}")
    return value


def text(data, key, where, *, default=_MISSING):
    value = data.get(key, None if default is _MISSING else default)
    if value is None and default is not _MISSING:
        return None
    if not isinstance(value, str) or not value:
        raise GateFieldError(f"field {where + '.' + key!r}: expected a non-empty string, got {_describe(value)}")
    return value


def positive_int_or_none(data, key, where, *, default):
    value = data.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise GateFieldError(
            f"field {where + '.' + key!r}: expected a positive integer or null, got {_describe(value)}"
        )
    return value
