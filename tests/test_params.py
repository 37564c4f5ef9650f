"""The one parameter-check template (ragcal/_params.py)."""

import numpy as np
import pytest

from ragcal._params import check_choice, check_float, check_int, interval_text, parameter_error


def test_message_template_names_parameter_function_range_and_value():
    with pytest.raises(ValueError) as error:
        check_float(1.5, "alpha", "monitor", low=0, high=1)
    assert str(error.value) == "The 'alpha' parameter of monitor must be a float in (0, 1). Got 1.5 instead."


@pytest.mark.parametrize(
    ("low_open", "high_open", "text"),
    [(True, True, "(0, 1)"), (True, False, "(0, 1]"), (False, True, "[0, 1)"), (False, False, "[0, 1]")],
)
def test_interval_ends(low_open, high_open, text):
    assert interval_text(0, 1, low_open=low_open, high_open=high_open) == text
    if low_open:
        with pytest.raises(ValueError, match=r"in \W0, 1\W"):
            check_float(0, "x", "f", low=0, high=1, low_open=low_open, high_open=high_open)
    else:
        assert check_float(0, "x", "f", low=0, high=1, low_open=low_open, high_open=high_open) == 0.0
    if high_open:
        with pytest.raises(ValueError):
            check_float(1, "x", "f", low=0, high=1, low_open=low_open, high_open=high_open)
    else:
        assert check_float(1, "x", "f", low=0, high=1, low_open=low_open, high_open=high_open) == 1.0


@pytest.mark.parametrize("bad", [True, "0.5", float("nan"), None, [0.5]])
def test_float_refuses_booleans_text_nan_and_none(bad):
    with pytest.raises(ValueError, match="must be a float"):
        check_float(bad, "alpha", "monitor", low=0, high=1)


def test_float_accepts_ints_numpy_and_optional_none():
    assert check_float(np.float32(0.25), "alpha", "f", low=0, high=1) == 0.25
    assert isinstance(check_float(1, "c", "f", low=0), float)
    assert check_float(None, "c", "f", low=0, allow_none=True) is None
    with pytest.raises(ValueError, match=r"a float in \(0, inf\) or None"):
        check_float(-1, "c", "f", low=0, allow_none=True)


def test_int_bounds_and_types():
    assert check_int(np.int64(3), "k", "f", low=1) == 3
    assert check_int(None, "k", "f", low=1, allow_none=True) is None
    with pytest.raises(ValueError, match=r"^The 'k' parameter of f must be an int >= 1\. Got 0 instead\.$"):
        check_int(0, "k", "f", low=1)
    with pytest.raises(ValueError, match=r"an int in \[1, 1000\]\. Got 1001"):
        check_int(1001, "ef", "f", low=1, high=1000)
    for bad in (2.0, True, "2"):
        with pytest.raises(ValueError, match="must be an int"):
            check_int(bad, "k", "f", low=1)


def test_choice_lists_the_registry():
    assert check_choice("holm", "method", "f", ("holm", "bonferroni")) == "holm"
    with pytest.raises(ValueError, match=r"must be one of 'holm', 'bonferroni'\. Got 'bh' instead\."):
        check_choice("bh", "method", "f", ("holm", "bonferroni"))


def test_parameter_error_can_be_a_type_error():
    error = parameter_error("table", "f", "a DataFrame", 3, error=TypeError)
    assert isinstance(error, TypeError)
    assert str(error) == "The 'table' parameter of f must be a DataFrame. Got 3 instead."
