"""Report helpers that notebooks print: whole-number counts, and the guarantee check in words."""

import numpy as np
import pandas as pd

from ragcal.calibration import heldout_outcomes
from ragcal.study.published import published_split
from ragcal.study.report import guarantee_check, split_counts


def table(n=40, seed=0):
    rng = np.random.default_rng(seed)
    answerable = np.repeat([True, False], [n, n])
    slices = np.where(answerable, "answerable", np.where(np.arange(2 * n) % 2, "near-domain", "unrelated"))
    scores = np.where(answerable, rng.normal(0.65, 0.08, 2 * n), rng.normal(0.35, 0.1, 2 * n))
    return pd.DataFrame({"id": range(2 * n), "query": "q", "answerable": answerable, "slice": slices, "s": scores})


def test_split_counts_are_whole_numbers():
    single = published_split(table(), "s")
    counts = split_counts(single).iloc[0]
    kept, size = int(single["answerable_kept_k"]), int(single["answerable_n"])
    assert counts["answerable kept"] == f"{kept}/{size}"  # "19/20", never "19.0"
    assert ".0/" not in "".join(str(value) for value in counts.to_numpy())
    assert counts["threshold"] == round(float(single["threshold"]), 4)


def test_guarantee_check_explains_a_share_below_nominal():
    repeated = heldout_outcomes(table(), "s", ["recall_guarantee@0.9"], n_splits=30)
    text = guarantee_check(repeated, total_answerable=40)
    assert "of 30 splits" in text and "not a broken guarantee" in text and "20 answerable questions" in text
