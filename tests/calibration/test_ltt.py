"""Learn-then-Test by hand: binomial p-values, the corrections across candidates, and the certificate's table.

The simulations that show each certified gate meets its bounds live with the gates (tests/gates/test_certify.py).
"""

import numpy as np
import pytest

from ragcal.calibration.ltt import binomial_p_values, certify_candidates, ltt_certify


def test_binomial_p_value_by_hand():
    # P(Bin(10, 0.2) <= 1) = 0.8^10 + 10 * 0.2 * 0.8^9
    assert binomial_p_values(1, 10, 0.2) == pytest.approx(0.8**10 + 10 * 0.2 * 0.8**9)
    assert binomial_p_values(0, 0, 0.2) == 1.0  # nothing answered: nothing to certify


def test_corrections_by_hand():
    p = [0.001, 0.02, 0.03, 0.5]
    assert ltt_certify(p, 0.1, method="bonferroni").tolist() == [True, True, False, False]  # <= 0.025
    # Holm: 0.001 <= 0.1/4, 0.02 <= 0.1/3, 0.03 <= 0.1/2, 0.5 > 0.1
    assert ltt_certify(p, 0.1, method="holm").tolist() == [True, True, True, False]
    assert ltt_certify(p, 0.1, method="fixed_sequence", order=[3, 0, 1, 2]).tolist() == [False] * 4
    with pytest.raises(ValueError, match="NaN"):
        ltt_certify([np.nan], 0.1, method="holm")


def test_the_certificate_table_by_hand():
    # Three candidates over four questions: two answerable (first two), two unanswerable.
    answered = np.array([[False, False, False, False], [True, False, False, False], [True, True, True, False]])
    supported = np.array([[False] * 4, [True, False, False, False], [True, False, False, False]])
    certificate = certify_candidates(answered, supported, [True, True, False, False], ["risk_guarantee@0.5"],
                                     delta=0.5, method="bonferroni")
    table = certificate.candidates
    assert table["risk_guarantee@0.5_k"].tolist() == [0, 0, 2]
    assert table["risk_guarantee@0.5_n"].tolist() == [0, 1, 3]
    assert table["risk_guarantee@0.5_p"].tolist() == pytest.approx([1.0, 0.5, 0.5**3 * 7])  # P(Bin(3,.5)<=2)=7/8
    # Bonferroni at 0.5 / 3: nothing certified, and the certificate says the gate refuses everything.
    assert not certificate.certified and "refuses everything" in certificate.summary()


def test_only_risk_bounds_are_certified_and_options_are_checked():
    answered = np.array([[False, False], [True, True]])
    with pytest.raises(ValueError, match="'keep@0.9' is not a risk bound; Learn-then-Test certifies recall_guarantee"):
        certify_candidates(answered, None, [True, False], "keep@0.9")
    with pytest.raises(ValueError, match="risk_guarantee and unsupported_guarantee need to know which answers"):
        certify_candidates(answered, None, [True, False], "risk_guarantee@0.2")
    with pytest.raises(ValueError, match="'method' parameter of certify_candidates must be one of 'auto', "):
        certify_candidates(answered, None, [True, False], "recall_guarantee@0.5", method="nope")
    with pytest.raises(ValueError, match=r"'delta' parameter of ltt_certify must be a float in \(0, 1\)"):
        ltt_certify([0.1], 1.5, method="holm")
    with pytest.raises(ValueError, match="'method' parameter of ltt_certify must be one of 'fixed_sequence'"):
        ltt_certify([0.1], 0.1, method="auto")


def test_the_parameters_come_first_in_the_certificate_table_with_their_dtypes():
    import pandas as pd

    answered = np.array([[False, False], [True, False], [True, True]])
    parameters = pd.DataFrame({"threshold": [np.inf, 0.7, 0.2], "stage": ["none", "a", "b"]}, index=[5, 6, 7])
    certificate = certify_candidates(answered, None, [True, False], ["recall_guarantee@0.5"], delta=0.5,
                                     method="bonferroni", parameters=parameters)
    table = certificate.candidates
    assert list(table.columns[:3]) == ["threshold", "stage", "answered"]
    assert table.index.tolist() == [0, 1, 2]  # the parameters' own index is not kept
    assert table["threshold"].tolist() == [np.inf, 0.7, 0.2] and table["stage"].tolist() == ["none", "a", "b"]
    assert table["threshold"].dtype == np.float64 and table["stage"].dtype == parameters["stage"].dtype
    assert table["answered"].tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match=r"one row per candidate \(3\)"):
        certify_candidates(answered, None, [True, False], ["recall_guarantee@0.5"], parameters=parameters.iloc[:2])
    with pytest.raises(ValueError, match="columns of their own"):
        certify_candidates(answered, None, [True, False], ["recall_guarantee@0.5"],
                           parameters=parameters.rename(columns={"stage": "answered"}))
