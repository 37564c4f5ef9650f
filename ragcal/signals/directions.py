"""The direction of a signal: does a higher value mean "answerable"? Declared, inferred, registered or recorded.

Registered signals carry their direction (``Signal.higher_is_answerable``).
A logged signal (:mod:`ragcal.signals.logged`) has one only if it is declared
(``"higher"`` or ``"lower"``) or inferred from the labels of the table it is
joined into. Inference picks ``lower`` when the signal's AUC as
higher-is-answerable is below 0.5, so on that very table its AUC is at least
0.5 by construction: a signal with no information looks slightly better than
chance there. The score table's provenance records the direction and how it
was decided, and :func:`signal_direction` reads it back, for ``ragcal
calibrate`` and ``ragcal fit-gate``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._params import check_choice
from ..score_tables import check_score_table

__all__ = [
    "DIRECTIONS",
    "SignalDirection",
    "decide_directions",
    "direction_warning",
    "parse_direction_options",
    "signal_direction",
]

#: How a direction is spelled: ``higher`` (higher means answerable) or ``lower``.
DIRECTIONS = ("higher", "lower")


@dataclass(frozen=True)
class SignalDirection:
    """Whether higher means answerable for a signal, and what decided it.

    Attributes
    ----------
    higher_is_answerable : bool
    decided_by : str
        ``"declared"``, ``"inferred from labels"``, ``"default"``,
        ``"registry"`` or ``"recorded (...)"``.
    """

    higher_is_answerable: bool
    decided_by: str

    @property
    def word(self) -> str:
        return "higher" if self.higher_is_answerable else "lower"


def parse_direction_options(options) -> dict:
    """``["name=lower", ...]`` (the ``--direction`` options) as ``{"name": "lower"}``; a bad one is a ``ValueError``."""
    directions = {}
    for option in options or ():
        name, equals, direction = str(option).partition("=")
        name, direction = name.strip(), direction.strip().lower()
        if not equals or not name or direction not in DIRECTIONS:
            raise ValueError(f"--direction {option!r}: expected NAME=higher or NAME=lower")
        if directions.get(name, direction) != direction:
            raise ValueError(f"--direction gives {name!r} both {directions[name]!r} and {direction!r}")
        directions[name] = direction
    return directions


def _inferred(values: np.ndarray, labels: np.ndarray) -> SignalDirection | None:
    from sklearn.metrics import roc_auc_score

    finite = ~np.isnan(values)
    values, labels = values[finite], labels[finite]
    if labels.all() or not labels.any() or np.unique(values).size < 2:
        return None
    auc = float(roc_auc_score(labels, values))
    return SignalDirection(auc >= 0.5, "inferred from labels")


def decide_directions(table: pd.DataFrame, names, *, declared: Mapping | None = None) -> dict:
    """``{name: SignalDirection}`` for the columns ``names``: declared, else inferred from ``table``'s labels.

    ``table`` is a score table (its ``answerable`` column and the ``names``
    columns); ``declared`` maps names to ``"higher"`` or ``"lower"``. Inference picks ``lower`` when the signal's AUC as
    higher-is-answerable is below 0.5 (so the AUC on this table is >= 0.5 by
    construction; see the module docstring); labels that cannot decide give
    ``higher`` (``decided_by="default"``).
    """
    declared = dict(declared or {})
    decided = {}
    labels = None
    for name in names:
        if name in declared:
            check_choice(declared[name], f"declared[{name}]", "decide_directions", DIRECTIONS)
            decided[name] = SignalDirection(declared[name] == "higher", "declared")
            continue
        if labels is None:
            labels = check_score_table(table[["answerable", "slice"]])["answerable"].to_numpy(dtype=bool)
        inferred = _inferred(table[name].to_numpy(dtype=float), labels)
        decided[name] = inferred or SignalDirection(True, "default")
    return decided


def direction_warning(name: str, direction: SignalDirection) -> str | None:
    """What to tell the user about a direction inferred from labels or taken by default; None for the others."""
    if direction.decided_by == "inferred from labels":
        return (
            f"{name}: direction '{direction.word}' inferred from this table's labels, so its AUC here is >= 0.5 by "
            f"construction; declare it (--direction {name}=higher|lower) for an honest estimate"
        )
    if direction.decided_by == "default":
        return (
            f"{name}: direction not declared and the labels cannot decide (one class, or a constant signal); "
            f"taken as 'higher' (declare it: --direction {name}=higher|lower)"
        )
    return None


def signal_direction(name: str, provenance: Mapping | None = None) -> SignalDirection:
    """Whether higher means answerable for ``name``: the registry's direction, else the recorded one, else higher.

    Parameters
    ----------
    name : str
        A signal column.
    provenance : mapping, default=None
        The score table's provenance; its ``directions`` hold the directions
        of logged signals (:func:`join_logged_signals`).

    Returns
    -------
    SignalDirection
        ``decided_by`` is ``"registry"``, ``"recorded (<how>)"`` or
        ``"default"``.

    Raises
    ------
    ValueError
        ``name`` is a registered signal and the provenance records the other
        direction for it.
    """
    from .registry import SIGNALS

    recorded = dict((provenance or {}).get("directions") or {})
    if name in recorded:
        check_choice(recorded[name], f"directions[{name}]", "signal_direction", DIRECTIONS)
    if name in SIGNALS:
        higher = SIGNALS[name].higher_is_answerable
        if name in recorded and (recorded[name] == "higher") != higher:
            raise ValueError(
                f"signal {name!r} is registered with {'higher' if higher else 'lower'} means answerable, but the "
                f"score table's provenance records {recorded[name]!r} for it (a logged signal under a registered "
                "name): rename the logged signal"
            )
        return SignalDirection(higher, "registry")
    if name in recorded:
        how = dict((provenance or {}).get("direction_sources") or {}).get(name, "declared")
        return SignalDirection(recorded[name] == "higher", f"recorded ({how})")
    return SignalDirection(True, "default")
