"""Held-out splits by group (article): no group on both sides, every split of the groups once."""

import math

import numpy as np
import pandas as pd
import pytest

from ragcal.calibration import fit_threshold, group_splits, heldout_outcomes, split_by_group


def labelled_groups():
    # 3 articles of 4, 3 and 2 questions, in an interleaved order.
    return np.array(["a", "b", "a", "c", "b", "a", "c", "b", "a"])


def test_split_by_group_keeps_every_group_on_one_side():
    groups = labelled_groups()
    for seed in range(20):
        calibration = split_by_group(groups, random_state=seed)
        on_calibration = set(groups[calibration])
        on_evaluation = set(groups[~calibration])
        assert not on_calibration & on_evaluation
        assert len(on_calibration) == 2 and len(on_evaluation) == 1  # ceil(3 / 2) groups to calibration
    # Seeded: the same seed gives the same split, and some seeds give different ones.
    assert (split_by_group(groups, random_state=3) == split_by_group(groups, random_state=3)).all()
    assert len({tuple(split_by_group(groups, random_state=seed)) for seed in range(20)}) == 3


def test_group_splits_are_every_choice_of_half_the_groups():
    groups = labelled_groups()
    splits = group_splits(groups)
    # C(3, 2) = 3 choices of the calibration groups, in lexicographic order of first appearance (a, b, c).
    assert len(splits) == math.comb(3, 2)
    expected = [{"a", "b"}, {"a", "c"}, {"b", "c"}]
    assert [set(groups[mask]) for mask in splits] == expected
    # Hand-counted rows on each side: a has 4 questions, b 3, c 2.
    assert [int(mask.sum()) for mask in splits] == [7, 6, 5]
    assert [int((~mask).sum()) for mask in splits] == [2, 3, 4]
    # Eight articles give C(8, 4) = 70 splits, each one distinct, none with a group on both sides.
    eight = np.repeat(list("abcdefgh"), [3, 1, 2, 5, 4, 2, 1, 2])
    masks = group_splits(eight)
    assert len(masks) == 70 and len({tuple(mask) for mask in masks}) == 70
    assert all(not set(eight[mask]) & set(eight[~mask]) for mask in masks)
    assert all(len(set(eight[mask])) == 4 for mask in masks)


def test_group_splits_sample_and_bad_input():
    eight = np.repeat(list("abcdefgh"), 2)
    sample = group_splits(eight, max_splits=5, random_state=1)
    every = [tuple(mask) for mask in group_splits(eight)]
    assert len(sample) == 5
    positions = [every.index(tuple(mask)) for mask in sample]
    assert positions == sorted(positions)  # a subset, in the same order
    assert len(group_splits(eight, max_splits=100)) == 70
    with pytest.raises(ValueError, match="at least two groups"):
        group_splits(["a", "a"])
    with pytest.raises(ValueError, match="'max_splits' parameter of group_splits"):
        group_splits(eight, max_splits=0)


def grouped_table():
    # Article a: high scores; b: middling; c: low. Unanswerable questions in every article.
    rows = [
        ("a", True, 0.9), ("a", True, 0.8), ("a", False, 0.7), ("a", False, 0.3),
        ("b", True, 0.6), ("b", True, 0.5), ("b", False, 0.55),
        ("c", True, 0.4), ("c", False, 0.2), ("c", False, 0.1),
    ]
    return pd.DataFrame(
        {
            "id": [f"q{n}" for n in range(len(rows))],
            "query": "q",
            "answerable": [row[1] for row in rows],
            "slice": ["answerable" if row[1] else "near-domain" for row in rows],
            "group": [row[0] for row in rows],
            "dense_top1": [row[2] for row in rows],
        }
    )


def test_heldout_outcomes_on_group_splits_fit_on_one_side_and_count_the_other():
    table = grouped_table()
    splits = group_splits(table["group"])
    heldout = heldout_outcomes(table, "dense_top1", ["keep@1.0"], splits=splits)
    assert list(heldout["split"]) == [0, 1, 2]
    # Split 0: calibration a + b, evaluation c. keep@1.0 on a + b keeps every answerable: boundary 0.5, placed
    # midway to the next calibration score below, 0.3.
    first = heldout.iloc[0]
    assert first["threshold"] == pytest.approx((0.5 + 0.3) / 2)
    assert first["threshold"] == fit_threshold("keep@1.0", table["dense_top1"][:7], table["answerable"][:7])
    # On c (one answerable at 0.4, two unanswerable at 0.2 and 0.1): the answerable one sits on the placed
    # threshold (0.5 + 0.3) / 2 == 0.4 and is kept; both unanswerable refused.
    assert first["answerable_n"] == 1 and first["answerable_kept"] == 1.0
    assert first["near_domain_n"] == 2 and first["near_domain_refused"] == 1.0
    # Split 2: calibration b + c (boundary 0.4, placed midway to 0.2), evaluation a: keeps 2 of 2, refuses 0.3 only.
    last = heldout.iloc[2]
    assert last["threshold"] == pytest.approx((0.4 + 0.2) / 2)
    assert (last["answerable_kept_k"], last["answerable_n"]) == (2, 2)
    assert (last["near_domain_refused_k"], last["near_domain_n"]) == (1, 2)


def test_heldout_outcomes_without_splits_is_unchanged_and_splits_are_checked():
    table = grouped_table()
    before = heldout_outcomes(table, "dense_top1", ["keep@0.95"], n_splits=7, random_state=3)
    again = heldout_outcomes(table, "dense_top1", ["keep@0.95"], n_splits=7, random_state=3, splits=None)
    pd.testing.assert_frame_equal(before, again)
    with pytest.raises(ValueError, match="boolean masks of 10 rows"):
        heldout_outcomes(table, "dense_top1", ["keep@0.95"], splits=[np.ones(9, dtype=bool)])
    with pytest.raises(ValueError, match="boolean masks"):
        heldout_outcomes(table, "dense_top1", ["keep@0.95"], splits=[np.ones(10)])


def test_heldout_outcomes_with_splits_drops_nan_rows_from_the_masks():
    table = grouped_table()
    table.loc[0, "dense_top1"] = np.nan  # a question of article a without a score
    heldout = heldout_outcomes(table, "dense_top1", ["keep@1.0"], splits=group_splits(table["group"]))
    last = heldout.iloc[2]  # evaluation: article a, now one answerable (0.8) and two unanswerable
    assert (last["answerable_kept_k"], last["answerable_n"]) == (1, 1)
