"""The study's checks of the certified gates: held-out halves by hand, and the population check on the bundled set."""

import math

import numpy as np
import pandas as pd
import pytest

from ragcal.study.selective import CERTIFIED_GATES, SUPPORT_COLUMN, guarantee_check, population_check

GATE = "threshold risk_guarantee@0.2"


def heldout_rows(split, answered, unsupported, total=100):
    """The rows guarantee_check reads, for one split of GATE."""
    return [
        (split, GATE, "all questions", "answered", answered, total),
        (split, GATE, "all questions", "selective_risk", unsupported, answered),
    ]


def test_guarantee_check_by_hand():
    rows = []
    rows += heldout_rows(0, 0, 0)  # nothing certified: claims nothing, counts as held
    rows += heldout_rows(1, 50, 5)  # risk 0.10: held
    rows += heldout_rows(2, 40, 12)  # risk 0.30: broken
    rows += heldout_rows(3, 20, 4)  # risk 0.20: at the bound, held
    heldout = pd.DataFrame(rows, columns=["split", "gate", "slice", "outcome", "k", "n"])
    check = guarantee_check(heldout).set_index("gate").loc[GATE]
    assert check["certified_splits"] == 3 and check["splits"] == 4
    assert check["held"] == pytest.approx(3 / 4)
    assert check["held_when_certified"] == pytest.approx(2 / 3)
    assert check["nominal"] == pytest.approx(0.9)


@pytest.mark.slow
def test_population_check_on_the_bundled_set(fastapi_index):
    from ragcal.datasets import FASTAPI_QUERIES
    from ragcal.gates import support_levels
    from ragcal.gates.support import support_inputs
    from ragcal.queries import load_queries
    from ragcal.scoring import score_table

    queries = load_queries(FASTAPI_QUERIES, corpus_paths=fastapi_index.doc_paths)
    retrieved = fastapi_index.retrieve(queries["query"])
    results, gold = support_inputs(queries, retrieved)
    table = score_table(queries, retrieved)
    table = table.assign(**{SUPPORT_COLUMN: support_levels(results, gold, "dense")})
    check = population_check(table, results, gold, n_draws=30, random_state=3)
    expected = [(gate, rule) for gate, (_, rules) in CERTIFIED_GATES.items() for rule in rules]
    assert list(zip(check["gate"], check["rule"])) == expected
    assert (check["draws"] == 30).all() and (check["certified_draws"] <= 30).all()
    # bounds within reach on the full set are certified in most draws
    reachable = check.set_index("gate").loc["threshold unsupported_guarantee@0.1"]
    assert reachable["certified_draws"] >= 25
    # the guarantee: in at most delta of the draws does a certified gate break its bound (30 draws: allow slack)
    assert (check["held_population"] >= 0.9 - 0.15).all()
    assert not check["held_population"].map(math.isnan).any() and np.all(check["held_population"] <= 1)
