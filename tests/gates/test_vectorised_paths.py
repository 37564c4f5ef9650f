"""The vectorised and remembered support paths against plain per-question references, on random cases."""

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from ragcal.chunking import page_of
from ragcal.gates import FloorGapGate, LearnedGate, ThresholdGate, table_support
from ragcal.gates.certify import certify_chain, chain_cuts
from ragcal.gates.chain import default_chain
from ragcal.gates.fit import floor_gap_counts
from ragcal.gates.floor_gap import floor_gap_answers
from ragcal.gates.support import SupportMemo, cut_support, passage_cuts
from ragcal.metrics.selective import _answer_counts, _counts
from ragcal.retrieval import RetrievalResult

PAGES = ("a.md", "b.md", "c.md", "d.md")


def reference_cut_support(gate, results, gold, thresholds):
    """The per-question loop ``cut_support`` was before :class:`PassageCuts` (kept as the reference)."""
    thresholds = np.asarray(thresholds, dtype=float).reshape(-1)
    out = np.zeros((thresholds.size, len(results)), dtype=bool)
    bar_retriever, _ = gate._passage_bar()
    moves = bar_retriever is not None and gate.passage_floor is None
    for position, (per_retriever, pages) in enumerate(zip(results, gold)):
        if not pages:
            continue
        if not moves:
            out[:, position] = any(page_of(chunk_id) in pages for chunk_id, _ in gate.passages_for(per_retriever))
            continue
        listed = per_retriever[gate._view]
        bar_listed = per_retriever[bar_retriever]
        by_id = dict(zip(bar_listed.chunk_ids, bar_listed.scores))
        scores = np.array([by_id.get(chunk_id, -math.inf) for chunk_id in listed.chunk_ids], dtype=float)
        is_gold = np.array([page_of(chunk_id) in pages for chunk_id in listed.chunk_ids], dtype=bool)
        clears = scores[None, :] >= thresholds[:, None]
        if gate.max_passages is not None:
            clears &= np.cumsum(clears, axis=1) <= gate.max_passages
        passed_gold = (clears & is_gold[None, :]).any(axis=1)
        fallback = len(bar_listed.chunk_ids) > 0 and page_of(bar_listed.chunk_ids[0]) in pages
        out[:, position] = passed_gold | (~clears.any(axis=1) & fallback)
    return out


def ranked(rng, retriever, size, *, scale=1.0):
    """A random ranked list of ``size`` chunks (scores descending, some tied), possibly empty."""
    ids = tuple(dict.fromkeys(f"{rng.choice(PAGES)}#{rng.integers(0, 6)}" for _ in range(size)))
    scores = np.sort(rng.choice(np.round(np.linspace(0, scale, 9), 3), len(ids)))[::-1]
    return RetrievalResult(retriever, ids, scores.astype(float))


def draw_results(rng, n):
    results, gold = [], []
    for _ in range(n):
        results.append({
            "dense": ranked(rng, "dense", int(rng.integers(0, 12))),
            "rrf": ranked(rng, "rrf", int(rng.integers(0, 12)), scale=0.05),
            "bm25_stopwords": ranked(rng, "bm25_stopwords", int(rng.integers(0, 12)), scale=9.0),
        })
        gold.append(frozenset(rng.choice(PAGES, int(rng.integers(0, 3)), replace=False)))
    return results, gold


GATES = (
    ThresholdGate("dense_top1", 0.5, passages_from="rrf", max_passages=3),
    ThresholdGate("dense_top1", 0.5, max_passages=None),
    ThresholdGate("dense_top1", 0.5, max_passages=1),
    ThresholdGate("bm25_top1_stopwords", 2.0, max_passages=2),
    ThresholdGate("dense_top1", 0.5, passage_floor=0.4),
    ThresholdGate("dense_gap", 0.1),
)


@pytest.mark.parametrize("gate", GATES, ids=range(len(GATES)))
def test_passage_cuts_equal_the_per_question_loop(gate):
    rng = np.random.default_rng(7)
    for _ in range(30):
        results, gold = draw_results(rng, int(rng.integers(0, 15)))
        thresholds = np.concatenate([rng.choice(np.linspace(-0.5, 9.5, 21), 5), [math.inf, -math.inf]])
        expected = reference_cut_support(gate, results, gold, thresholds)
        np.testing.assert_array_equal(cut_support(gate, results, gold, thresholds), expected)
        rows = rng.integers(0, len(results), 2 * len(results)) if results else np.zeros(0, dtype=int)
        taken = passage_cuts(gate, results, gold).take(rows).support(thresholds)
        np.testing.assert_array_equal(taken, expected[:, rows])


def chain_table(rng, results):
    dense = [row["dense"].scores[0] if len(row["dense"].scores) else np.nan for row in results]
    keyword = [row["bm25_stopwords"].scores[0] if len(row["bm25_stopwords"].scores) else 0.0 for row in results]
    return pd.DataFrame({
        "answerable": rng.random(len(results)) < 0.6,
        "slice": "all",
        "dense_top1": dense,
        "bm25_top1_stopwords": keyword,
    })


def test_chain_certified_from_cuts_taken_at_rows_equals_reading_the_results():
    rng = np.random.default_rng(3)
    results, gold = draw_results(rng, 60)
    table = chain_table(rng, results)
    cuts = chain_cuts(results, gold)
    for _ in range(10):
        rows = rng.integers(0, len(results), 30)
        subset = table.iloc[rows].reset_index(drop=True)
        picked = [results[row] for row in rows], [gold[row] for row in rows]
        plain_gate, plain = certify_chain(subset, "risk_guarantee@0.4", results=picked[0], gold=picked[1])
        taken = {stage: stage_cuts.take(rows) for stage, stage_cuts in cuts.items()}
        gate, certificate = certify_chain(
            subset, "risk_guarantee@0.4", results=picked[0], gold=picked[1], cuts=taken
        )
        assert gate == plain_gate
        pd.testing.assert_frame_equal(certificate.candidates, plain.candidates, check_exact=True)


def test_answers_at_is_decide_table_at_each_threshold():
    rng = np.random.default_rng(5)
    table = pd.DataFrame({
        "dense_top1": rng.choice([np.nan, 0.0, 0.3, 0.5, 0.7], 40),
        "bm25_top1_stopwords": rng.choice([np.nan, 0.0, 1.0, 2.5], 40),
    })
    bars = [-math.inf, 0.0, 0.3, 0.5, 1.0, 2.5, math.inf]
    for gate in (ThresholdGate("dense_top1", 0.5, hedge_below=0.6), ThresholdGate("bm25_top1_stopwords", 1.0),
                 ThresholdGate("dense_top1", 0.5, higher_is_answerable=False)):
        expected = np.stack([
            replace(gate, threshold=bar, hedge_below=None).decide_table(table)["action"].to_numpy(dtype=object)
            != "refuse"
            for bar in bars
        ])
        np.testing.assert_array_equal(gate.answers_at(table, bars), expected)


def test_support_memo_equals_table_support_over_gates_and_row_subsets():
    rng = np.random.default_rng(11)
    results, gold = draw_results(rng, 50)
    table = chain_table(rng, results).assign(dense_top2=lambda frame: frame["dense_top1"] - 0.1)
    memo = SupportMemo(results, gold)
    gates = [
        *GATES[:5],
        FloorGapGate(0.4, 0.05),
        default_chain(0.7, 3.0, 0.3),
        default_chain(0.7, math.inf, 0.3),
    ]
    for _ in range(3):  # the second and third rounds answer from what the memo remembered
        for gate in gates:
            rows = rng.integers(0, len(results), 25)
            subset = table.iloc[rows].reset_index(drop=True)
            decisions = gate.decide_table(subset)
            expected = table_support(gate, subset, [results[row] for row in rows], [gold[row] for row in rows])
            np.testing.assert_array_equal(memo(gate, decisions, rows), expected)


def test_passage_keys_name_what_passages_for_reads():
    hedged = ThresholdGate("dense_top1", 0.5, hedge_below=0.7)
    assert ThresholdGate("dense_top1", 0.5).passage_key() == hedged.passage_key()
    assert ThresholdGate("dense_top1", 0.5).passage_key() != ThresholdGate("dense_top1", 0.6).passage_key()
    assert FloorGapGate(0.4, 0.05).passage_key() == FloorGapGate(0.4, 0.2).passage_key()
    chain = default_chain(0.7, 3.0, 0.3)
    assert chain.passage_key(stage="broad") == chain.stages[2].gate.passage_key()
    assert chain.passage_key(stage="no such stage") is None
    assert LearnedGate.passage_key is not None


def test_answer_counts_equal_the_curve_counts():
    rng = np.random.default_rng(0)
    for trial in range(3000):
        n = int(rng.integers(0, 30))
        values = [0.0, -0.0, 0.25, 0.5, 1.0, np.nan, np.inf, -np.inf]
        scores = rng.choice(values, n) if trial % 2 else rng.normal(size=n).round(1)
        support = rng.choice([np.inf, -np.inf, 0.5, 0.0, -0.0, 0.3], n)
        _, answered, supported = _counts(scores, support)
        fast_answered, fast_supported = _answer_counts(scores, support)
        np.testing.assert_array_equal(fast_answered, answered)
        np.testing.assert_array_equal(fast_supported, supported)
        assert fast_answered.dtype == answered.dtype and fast_supported.dtype == supported.dtype


def test_floor_gap_counts_equal_the_full_grid_of_answers():
    rng = np.random.default_rng(2)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        top = rng.choice(np.linspace(0.2, 0.9, 8), n)
        second = np.where(rng.random(n) < 0.15, np.nan, top - rng.choice([0.0, 0.05, 0.1, 0.3], n))
        answerable = rng.random(n) < 0.5
        floors = np.unique(top)
        gaps = np.unique(np.concatenate([[0.0], (top - second)[np.isfinite(top - second)]]))
        answers = floor_gap_answers(
            top[None, None, :], second[None, None, :], floors[:, None, None], gaps[None, :, None]
        )
        kept, refused = floor_gap_counts(top, second, answerable, floors, gaps)
        np.testing.assert_array_equal(kept, answers[:, :, answerable].sum(axis=2))
        np.testing.assert_array_equal(refused, (~answers[:, :, ~answerable]).sum(axis=2))


def test_decided_arrays_are_decide_tables_columns_and_a_subclass_decides_through_its_own_table():
    from ragcal.gates.base import Decided, decided_arrays, decisions_as_arrays
    from ragcal.gates.learned_score import LinearScore

    rng = np.random.default_rng(13)
    results, _ = draw_results(rng, 60)
    table = chain_table(rng, results).assign(dense_top2=lambda frame: frame["dense_top1"] - 0.1)
    table["dense_gap"] = table["dense_top1"] - table["dense_top2"] + rng.choice([0.0, 0.2], len(table))
    learned = LearnedGate(LinearScore(("dense_top1", "bm25_top1_stopwords"), (0.5, 1.0), (0.2, 2.0), (1.5, 0.5), 0.1),
                          0.6, hedge_below=0.8)  # fmt: skip
    gates = [*GATES, ThresholdGate("dense_top1", 0.5, hedge_below=0.6), FloorGapGate(0.4, 0.05), learned,
             default_chain(0.7, 3.0, 0.3), default_chain(0.7, math.inf, 0.3)]  # fmt: skip
    for gate in gates:
        frame = gate.decide_table(table)
        arrays = decided_arrays(gate, table)
        assert isinstance(arrays, Decided) and arrays.frame().equals(frame)
        assert list(frame.dtypes) == [object, np.float64, object] and arrays.action.dtype == object
        assert decisions_as_arrays(frame).frame().equals(frame)
    assert {"answer", "hedge", "refuse"} <= {action for gate in gates for action in decided_arrays(gate, table).action}
    # The arrays are the gate's own: changing them changes neither the table nor the next decision.
    arrays = decided_arrays(GATES[1], table)
    arrays.score[:] = -1.0
    assert not (table["dense_top1"] == -1.0).any() and decided_arrays(GATES[1], table).frame().equals(
        GATES[1].decide_table(table)
    )

    # Decisions made elsewhere (a framework's answers) need no score to be counted.
    elsewhere = decisions_as_arrays(pd.DataFrame({"action": ["answer", "refuse"], "stage": None}))
    assert elsewhere.action.tolist() == ["answer", "refuse"] and np.isnan(elsewhere.score).all()

    class EveryoneAnswered(ThresholdGate):
        def decide_table(self, table):
            frame = super().decide_table(table)
            return frame.assign(action="answer")

    custom = EveryoneAnswered("dense_top1", 0.5)
    assert (decided_arrays(custom, table).action == "answer").all()
    assert (custom.decide_arrays(table).action == "refuse").any()  # what the parent decides, which is not asked
