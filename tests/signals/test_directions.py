"""Directions of signals: declared, inferred from labels, registered or recorded in a table's provenance."""

import numpy as np
import pandas as pd
import pytest

from ragcal.signals.directions import (
    SignalDirection,
    decide_directions,
    direction_warning,
    parse_direction_options,
    signal_direction,
)


def test_parse_direction_options():
    assert parse_direction_options(["a=lower", " b = HIGHER "]) == {"a": "lower", "b": "higher"}
    assert parse_direction_options(None) == {}
    for bad in ("a", "a=up", "=lower", "a:lower"):
        with pytest.raises(ValueError, match="expected NAME=higher or NAME=lower"):
            parse_direction_options([bad])
    with pytest.raises(ValueError, match="gives 'a' both 'lower' and 'higher'"):
        parse_direction_options(["a=lower", "a=higher"])


def test_inference_follows_the_auc_of_the_same_labels():
    table = pd.DataFrame(
        {
            "answerable": [True, True, False, False],
            "slice": ["answerable", "answerable", "near", "near"],
            "up": [0.9, 0.6, 0.7, 0.1],  # AUC 0.75 as higher
            "down": [0.1, 0.4, 0.3, 0.9],  # AUC 0.25 as higher
            "tie": [1.0, 0.0, 1.0, 0.0],  # AUC 0.5: higher
            "nan": [np.nan, np.nan, np.nan, 1.0],  # one class among finite rows
        }
    )
    decided = decide_directions(table, ["up", "down", "tie", "nan"], declared={"up": "lower"})
    assert decided["up"] == SignalDirection(False, "declared")
    assert decided["down"] == SignalDirection(False, "inferred from labels")
    assert decided["tie"] == SignalDirection(True, "inferred from labels")
    assert decided["nan"] == SignalDirection(True, "default")
    assert direction_warning("up", decided["up"]) is None
    assert "by construction" in direction_warning("down", decided["down"])
    assert "labels cannot decide" in direction_warning("nan", decided["nan"])


def test_signal_direction_registry_then_recorded_then_default():
    provenance = {"directions": {"llm_idk": "lower"}, "direction_sources": {"llm_idk": "inferred from labels"}}
    assert signal_direction("dense_top1", provenance) == SignalDirection(True, "registry")
    assert signal_direction("bm25_empty_raw") == SignalDirection(False, "registry")
    assert signal_direction("llm_idk", provenance) == SignalDirection(False, "recorded (inferred from labels)")
    assert signal_direction("llm_idk", {"directions": {"llm_idk": "higher"}}) == SignalDirection(
        True, "recorded (declared)"
    )
    assert signal_direction("unknown", provenance) == SignalDirection(True, "default")
    with pytest.raises(ValueError, match="registered with lower means answerable, but the score table's provenance"):
        signal_direction("bm25_empty_raw", {"directions": {"bm25_empty_raw": "higher"}})
    with pytest.raises(ValueError, match=r"'directions\[x\]' parameter of signal_direction must be one of"):
        signal_direction("x", {"directions": {"x": "up"}})
