"""The nested held-out evaluation of learned gates, its summaries, the transfer table and the report text."""

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from ragcal.calibration import split_by_slice
from ragcal.gates import fit_learned_gate, fit_threshold_gate
from ragcal.gates.evaluate import ALL_UNANSWERABLE, outcome_counts
from ragcal.gates.support import table_support
from ragcal.retrieval import RetrievalResult
from ragcal.score_tables import unanswerable_slices
from ragcal.study.cross_corpus import learned_transfer_text
from ragcal.study.learned import candidate_sets, heldout_learned, learned_transfer, summarize_learned
from ragcal.study.learned_report import learned_gate_section

SETS = {"pair": ("dense_top1", "bm25_top1_raw")}


def synthetic_table(n=80, random_state=0, shift=0.0):
    rng = np.random.default_rng(random_state)
    answerable = np.arange(n) % 2 == 0
    slices = np.where(answerable, "answerable", np.where(np.arange(n) % 4 == 1, "near-domain", "unrelated"))
    return pd.DataFrame(
        {
            "id": [f"q{i}" for i in range(n)],
            "query": [f"question {i}" for i in range(n)],
            "answerable": answerable,
            "slice": slices,
            "dense_top1": rng.normal(0.45 + shift, 0.08, n) + 0.1 * answerable,
            "bm25_top1_raw": np.maximum(rng.normal(12, 5, n) + 7 * answerable, 0.5),
        }
    )


def test_nothing_fitted_on_a_split_depends_on_its_evaluation_half():
    table = synthetic_table()
    first = heldout_learned(table, SETS, n_splits=1)
    evaluation = ~split_by_slice(table["slice"].to_numpy(), random_state=0)
    scrambled = table.copy()
    scrambled.loc[evaluation, ["dense_top1", "bm25_top1_raw"]] = [[0.99, 99.0]]
    second = heldout_learned(scrambled, SETS, n_splits=1)
    pd.testing.assert_frame_equal(first["coefficients"], second["coefficients"])
    # The scrambled evaluation rows are now all answered; counts change, the fitted model does not.
    assert not first["outcomes"].equals(second["outcomes"])


def test_heldout_counts_and_aucs_cover_each_split_gate_and_comparison():
    table = synthetic_table()
    heldout = heldout_learned(table, SETS, n_splits=3)
    assert set(heldout["auc"]["gate"]) == {"threshold dense_top1", "learned pair"}
    assert set(heldout["auc"]["comparison"]) == {"all unanswerable", "near-domain", "unrelated"}
    assert len(heldout["auc"]) == 3 * 2 * 3
    # The baseline's held-out AUC is the plain AUC of dense_top1 on the evaluation half.
    evaluation = table[~split_by_slice(table["slice"].to_numpy(), random_state=1)]
    row = heldout["auc"].query("split == 1 and gate == 'threshold dense_top1' and comparison == 'all unanswerable'")
    assert row["auc"].iloc[0] == pytest.approx(roc_auc_score(evaluation["answerable"], evaluation["dense_top1"]))
    answerable = heldout["outcomes"].query("slice == 'answerable' and outcome == 'answered'")
    assert (answerable["n"] == (~split_by_slice(table["slice"].to_numpy()) & table["answerable"]).sum()).all()
    assert set(heldout["coefficients"]["signal"]) == {"dense_top1", "bm25_top1_raw", "(intercept)"}


def test_summary_differences_are_paired_per_split():
    auc = pd.DataFrame(
        {
            "split": [0, 0, 1, 1, 2, 2],
            "gate": ["threshold dense_top1", "learned pair"] * 3,
            "comparison": "all unanswerable",
            "auc": [0.90, 0.95, 0.80, 0.82, 0.85, 0.88],
        }
    )
    outcomes = pd.DataFrame(
        {
            "split": [0, 0, 1, 1, 2, 2],
            "gate": ["threshold dense_top1", "learned pair"] * 3,
            "slice": "near-domain",
            "outcome": "refuse",
            "k": [5, 4, 6, 6, 5, 7],
            "n": 10,
        }
    )
    coefficients = pd.DataFrame(
        {"split": [0, 1, 2], "gate": "learned pair", "signal": "dense_top1", "coefficient": [1.0, 2.0, -1.0]}
    )
    summary = summarize_learned({"auc": auc, "outcomes": outcomes, "coefficients": coefficients})
    learned = summary["auc"].set_index("gate").loc["learned pair"]
    assert learned["difference"] == pytest.approx(np.mean([0.05, 0.02, 0.03]))
    assert learned["verdict"] == "better" and learned["better"] == 1.0
    near = summary["outcomes"].set_index("gate").loc["learned pair"]
    assert near["difference"] == pytest.approx(np.mean([-0.1, 0.0, 0.2]))
    assert near["verdict"] == "cannot be told apart" and near["better"] == pytest.approx(1 / 3)
    coefficient = summary["coefficients"].iloc[0]
    assert coefficient["mean"] == pytest.approx(2 / 3) and coefficient["positive"] == pytest.approx(2 / 3)


def test_candidate_sets_only_name_signals_of_the_table():
    table = synthetic_table()
    sets = candidate_sets(table)
    assert sets["dense+bm25"] == ("dense_top1", "bm25_top1_raw")
    assert "default" not in sets  # the coverage signals are not in this table
    assert set(sets["all"]) == {"dense_top1", "bm25_top1_raw"}


def test_learned_transfer_applies_each_corpus_fit_to_the_other():
    tables = {"a": synthetic_table(random_state=1), "b": synthetic_table(random_state=2, shift=0.1)}
    transfer = learned_transfer(tables, signals=SETS["pair"], n_resamples=200)
    assert list(zip(transfer["fitted_on"], transfer["applied_to"], transfer["gate"])) == [
        ("a", "b", "threshold dense_top1"),
        ("a", "b", "learned default"),
        ("b", "a", "threshold dense_top1"),
        ("b", "a", "learned default"),
    ]
    baseline = transfer.iloc[0]
    assert baseline["auc"] == pytest.approx(roc_auc_score(tables["b"]["answerable"], tables["b"]["dense_top1"]))
    learned = transfer.iloc[1]
    assert learned["auc_difference"] == pytest.approx(learned["auc"] - baseline["auc"])
    assert learned["auc_difference_low"] <= learned["auc_difference"] <= learned["auc_difference_high"]
    kept = (tables["b"]["answerable"] & (tables["b"]["dense_top1"] >= baseline["threshold"])).sum()
    assert baseline["answerable_kept_k"] == kept
    text = learned_transfer_text(transfer, {"a": "Corpus A", "b": "Corpus B"}, {})
    assert "Fitted on the Corpus A, applied to the Corpus B" in text and "near-domain refused" in text


def test_report_section_names_the_protocol_and_the_verdicts():
    table = synthetic_table()
    heldout = heldout_learned(table, SETS, n_splits=5)
    learned = {**summarize_learned(heldout), "sets": SETS, "n_splits": 5}
    text = learned_gate_section(
        learned,
        baseline_gate="threshold dense_top1",
        default_gate="learned pair",
        rule="keep@0.95",
        default_signals=SETS["pair"],
    )
    assert "5 stratified half splits" in text
    assert "`learned pair` against `threshold dense_top1`: answerable kept" in text
    assert "near-domain refused" in text and "Standardised coefficients" in text


def test_verdicts_from_paired_percentiles():
    from ragcal.study.learned import _verdict

    assert _verdict(0.01, 0.2, 0.1) == "better"
    assert _verdict(-0.2, -0.01, -0.1) == "worse"
    assert _verdict(0.0, 0.27, 0.15) == "no worse"  # better on most splits, equal on the rest
    assert _verdict(-0.27, 0.0, -0.15) == "no better"
    assert _verdict(-0.1, 0.1, 0.0) == "cannot be told apart"


def test_a_difference_of_zero_on_every_split_is_called_the_same():
    from ragcal.study.learned import _verdict

    assert _verdict(0.0, 0.0, 0.0) == "the same on every split"


def retrieval_for(table, random_state=0):
    """Dense results per row (the top score is the row's dense_top1) and gold pages (answerable rows only).

    The gold page sits at a random rank, so a cut at the cosine bar passes it on for some rows and not others.
    """
    rng = np.random.default_rng(random_state)
    results, gold = [], []
    for position, (top, answerable) in enumerate(zip(table["dense_top1"], table["answerable"])):
        scores = top - np.sort(rng.uniform(0, 0.2, 5))
        scores[0] = top
        if position % 9 == 0:
            scores[1] = top  # a tie at the top
        chunk_ids = tuple(f"page{(position + rank) % 7}.md#{rank}" for rank in range(5))
        results.append({"dense": RetrievalResult("dense", chunk_ids, scores)})
        gold.append({f"page{(position + int(rng.integers(0, 6))) % 7}.md"} if answerable else set())
    return results, gold


def straightforward_heldout(table, signal_sets, n_splits, results, gold):
    """The nested held-out loop written plainly: every gate fitted on its own, every AUC by scikit-learn."""
    outcome_rows, auc_rows, coefficient_rows = [], [], []
    for split in range(n_splits):
        calibration = split_by_slice(table["slice"].to_numpy(), random_state=split)
        fitting, evaluation = table[calibration].reset_index(drop=True), table[~calibration].reset_index(drop=True)
        answerable = evaluation["answerable"].to_numpy(dtype=bool)
        comparisons = [(ALL_UNANSWERABLE, ~answerable)]
        comparisons += [
            (name, (evaluation["slice"] == name).to_numpy() & ~answerable) for name in unanswerable_slices(evaluation)
        ]
        gates = {"threshold dense_top1": fit_threshold_gate(fitting, "dense_top1", "keep@0.95")}
        for name, signals in signal_sets.items():
            gates[f"learned {name}"] = fit_learned_gate(fitting, "keep@0.95", signals=signals, random_state=split)
        held = np.flatnonzero(~calibration)
        for gate_name, gate in gates.items():
            decisions = gate.decide_table(evaluation)
            supported = table_support(gate, evaluation, [results[row] for row in held], [gold[row] for row in held])
            outcome_rows += [(split, gate_name, *row) for row in outcome_counts(evaluation, decisions, (), supported)]
            scores = decisions["score"].to_numpy(dtype=float)
            for comparison, negative in comparisons:
                mask = answerable | negative
                auc_rows.append((split, gate_name, comparison, roc_auc_score(answerable[mask], scores[mask])))
            if gate_name.startswith("learned"):
                coefficient_rows += [(split, gate_name, s, c) for s, c in zip(gate.model.signals, gate.model.coef)]
                coefficient_rows.append((split, gate_name, "(intercept)", gate.model.intercept))
    return {
        "outcomes": pd.DataFrame(outcome_rows, columns=["split", "gate", "slice", "outcome", "k", "n"]),
        "auc": pd.DataFrame(auc_rows, columns=["split", "gate", "comparison", "auc"]),
        "coefficients": pd.DataFrame(coefficient_rows, columns=["split", "gate", "signal", "coefficient"]),
    }


def test_heldout_learned_is_the_straightforward_loop_to_the_last_bit():
    # The study shares the folds and the cosine bar between signal sets, remembers which rows pass a gold passage
    # on at which bar, and computes AUCs without scikit-learn's checks: none of it may change a number.
    table = synthetic_table(n=120)
    table["bm25_coverage_corpus"] = np.round(np.where(table["answerable"], 0.7, 0.5) + table["dense_top1"] / 3, 2)
    sets = {"pair": ("dense_top1", "bm25_top1_raw"), "three": ("dense_top1", "bm25_top1_raw", "bm25_coverage_corpus")}
    results, gold = retrieval_for(table)
    study = heldout_learned(table, sets, n_splits=6, results=results, gold=gold)
    plain = straightforward_heldout(table, sets, 6, results, gold)
    answerable = study["outcomes"].query("slice == 'answerable'").set_index("outcome")["k"]
    assert answerable["supported"].sum() > 0 and answerable["unsupported"].sum() > 0  # the cut decides support
    for name in ("outcomes", "auc", "coefficients"):
        pd.testing.assert_frame_equal(study[name], plain[name], check_exact=True)


def test_the_study_auc_is_sklearns_to_the_last_bit():
    from ragcal.study.learned import _roc_auc

    rng = np.random.default_rng(0)
    for trial in range(300):
        n = int(rng.integers(2, 200))
        labels = rng.random(n) < rng.uniform(0.05, 0.95)
        scores = rng.normal(size=n) + labels * rng.uniform(0, 2)
        if trial % 2:
            scores = np.round(scores, int(rng.integers(0, 2)))  # heavy ties, within and across the classes
        if not labels.any() or labels.all():
            continue
        assert _roc_auc(labels, scores) == roc_auc_score(labels, scores)
    with pytest.warns(Warning, match="Only one class"):
        assert np.isnan(_roc_auc(np.ones(4, dtype=bool), np.arange(4.0)))
