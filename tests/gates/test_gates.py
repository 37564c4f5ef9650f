"""Gates: every floor-and-gap case by hand, thresholds and their cut, chain order and tiers, files and messages."""

import dataclasses
import json
import math
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import write

from ragcal.calibration import fit_threshold, heldout_outcomes
from ragcal.chunking import chunk_by_headings
from ragcal.corpus import load_corpus
from ragcal.gates import (
    Decision,
    FallbackChain,
    FloorGapGate,
    GateFileError,
    GateWarning,
    Stage,
    ThresholdGate,
    fit_floor_gap_gate,
    fit_threshold_gate,
    floor_gap_sweep,
    gate_outcomes,
    heldout_gates,
    load_gate,
    read_gate_file,
    save_gate,
)
from ragcal.gates.base import gate_from_dict
from ragcal.gates.chain import fit_default_chain
from ragcal.gates.evaluate import paired_differences, passage_metrics
from ragcal.gates.refusal import refusal_message
from ragcal.retrieval import BM25Retriever, RetrievalResult
from ragcal.retrieval.views import CorpusDescription, Passage


def hits(name, *pairs):
    return RetrievalResult(name, tuple(chunk_id for chunk_id, _ in pairs), [score for _, score in pairs])


def dense(*scores):
    return {"dense": hits("dense", *((f"page{n}.md#0", score) for n, score in enumerate(scores)))}


# --------------------------------------------------------------------------- Decision


def test_decision_checks_and_tiers():
    assert Decision("hedge", 0.5, (("a.md#0", 0.5),)).tier == "partial"
    assert Decision("answer", 0.5).tier == "confident"
    assert Decision("refuse", float("nan")).tier == "refuse"
    with pytest.raises(ValueError, match="one of"):
        Decision("maybe", 0.5)
    with pytest.raises(ValueError, match="no passages"):
        Decision("refuse", 0.2, (("a.md#0", 0.2),))
    record = Decision("refuse", float("nan"), reasons=("no hits",), message="m").to_dict()
    assert record["score"] is None and record["passages"] == [] and json.dumps(record)


# --------------------------------------------------------------------------- FloorGapGate, seed 001 case by case

GATE = FloorGapGate(0.5, 0.1)


def test_floor_gap_no_hits():
    decision = GATE.decide({"dense": RetrievalResult("dense", (), [])})
    assert decision.action == "refuse" and decision.reasons == ("no hits",) and math.isnan(decision.score)


def test_floor_gap_top_below_floor():
    decision = GATE.decide(dense(0.49, 0.48))
    assert decision.action == "refuse" and decision.reasons == ("top score 0.490 < floor 0.500",)
    assert decision.score == pytest.approx(0.49)


def test_floor_gap_single_hit():
    decision = GATE.decide(dense(0.5))  # exactly the floor counts (best < floor refuses)
    assert decision.action == "answer" and decision.reasons[0].startswith("single hit")
    assert decision.passages == (("page0.md#0", 0.5),)


def test_floor_gap_clear_gap_is_strict():
    clear = GATE.decide(dense(0.7, 0.45))
    assert clear.action == "answer" and clear.reasons == ("gap 0.250 > min_gap 0.100",)
    assert [chunk for chunk, _ in clear.passages] == ["page0.md#0"]  # only what clears the floor
    # A gap of exactly min_gap is not enough (seed: best - second > MIN_MARGIN); binary-exact numbers.
    tie = FloorGapGate(0.625, 0.25).decide(dense(0.75, 0.5))
    assert tie.action == "refuse" and "<= min_gap" in tie.reasons[0]


def test_floor_gap_second_above_floor():
    decision = GATE.decide(dense(0.62, 0.58, 0.2))
    assert decision.action == "answer" and decision.reasons == ("second score 0.580 >= floor 0.500",)
    assert [chunk for chunk, _ in decision.passages] == ["page0.md#0", "page1.md#0"]


def test_floor_gap_otherwise_refuses():
    decision = GATE.decide(dense(0.55, 0.48))
    assert decision.action == "refuse"
    assert decision.reasons == ("second score 0.480 < floor 0.500 and gap 0.070 <= min_gap 0.100",)


def test_floor_gap_reasons_are_distinct_per_case():
    cases = [
        RetrievalResult("dense", (), []),
        *(dense(*s)["dense"] for s in [(0.4,), (0.6,), (0.7, 0.45), (0.6, 0.55), (0.55, 0.48)]),
    ]
    kinds = {re.sub(r"[0-9.]+", "#", GATE.decide({"dense": case}).reasons[0]) for case in cases}
    assert len(kinds) == 6


def test_floor_gap_table_agrees_with_decide():
    lists = [(), (0.4, 0.3), (0.5,), (0.7, 0.45), (0.62, 0.58), (0.55, 0.48), (0.6, 0.6)]
    table = pd.DataFrame(
        {
            "dense_top1": [scores[0] if scores else np.nan for scores in lists],
            "dense_top2": [scores[1] if len(scores) > 1 else np.nan for scores in lists],
        }
    )
    expected = [
        GATE.decide(dense(*scores) if scores else {"dense": RetrievalResult("dense", (), [])}).action
        for scores in lists
    ]
    assert (
        list(GATE.decide_table(table)["action"])
        == expected
        == ["refuse", "refuse", "answer", "answer", "answer", "refuse", "answer"]
    )


# --------------------------------------------------------------------------- ThresholdGate


def test_threshold_gate_answer_hedge_refuse():
    gate = ThresholdGate("dense_top1", 0.45, hedge_below=0.55)
    assert gate.decide(dense(0.6, 0.5)).action == "answer"
    hedged = gate.decide(dense(0.5, 0.46, 0.3))
    assert hedged.action == "hedge" and "partial" in hedged.message
    assert [chunk for chunk, _ in hedged.passages] == ["page0.md#0", "page1.md#0"]  # the cut at 0.45
    refused = gate.decide(dense(0.44, 0.3))
    assert (
        refused.action == "refuse"
        and refused.passages == ()
        and refused.reasons == ("dense_top1 0.440 fails >= 0.450",)
    )
    assert gate.decide(dense(0.45)).action == "hedge"  # >= threshold answers


def test_threshold_gate_cut_is_capped_not_fixed():
    gate = ThresholdGate("dense_top1", 0.3, max_passages=3)
    assert len(gate.decide(dense(0.9, 0.8, 0.7, 0.6, 0.5)).passages) == 3
    assert len(gate.decide(dense(0.9, 0.2, 0.1)).passages) == 1


def test_threshold_gate_lower_is_answerable_and_nan():
    gate = ThresholdGate("bm25_empty_stopwords", 0.5, higher_is_answerable=False)
    empty = {"bm25_stopwords": RetrievalResult("bm25_stopwords", (), [])}
    assert gate.decide(empty).action == "refuse"
    matched = {"bm25_stopwords": hits("bm25_stopwords", ("a.md#0", 3.0), ("b.md#1", 1.0))}
    decision = gate.decide(matched)
    assert decision.action == "answer" and decision.passages == (("a.md#0", 3.0),)  # not a passage scale: top only
    nan_gate = ThresholdGate("dense_top2", 0.1)
    assert nan_gate.decide(dense(0.9)).reasons == ("dense_top2 is undefined (nothing retrieved)",)


def test_threshold_gate_fused_passages_clear_the_cosine_bar():
    results = {
        "dense": hits("dense", ("a.md#0", 0.7), ("b.md#0", 0.5), ("c.md#0", 0.4)),
        "rrf": hits("rrf", ("b.md#0", 0.032), ("d.md#0", 0.031), ("a.md#0", 0.030), ("c.md#0", 0.02)),
    }
    decision = ThresholdGate("dense_top1", 0.45, passages_from="rrf").decide(results)
    assert decision.passages == (("b.md#0", 0.5), ("a.md#0", 0.7))  # fused order, cosine scores, d has none


def test_threshold_gate_checks_its_parameters():
    with pytest.raises(ValueError, match="unknown signal"):
        ThresholdGate("nope", 0.5)
    with pytest.raises(ValueError, match="'hedge_below' parameter of ThresholdGate must be at least"):
        ThresholdGate("dense_top1", 0.5, hedge_below=0.4)
    with pytest.raises(ValueError, match="'max_passages'"):
        ThresholdGate("dense_top1", 0.5, max_passages=0)
    with pytest.raises(KeyError, match="needs retriever results"):
        ThresholdGate("dense_top1", 0.5).decide({"bm25_raw": RetrievalResult("bm25_raw", (), [])})


# --------------------------------------------------------------------------- FallbackChain


def chain():
    return FallbackChain(
        (
            Stage("hybrid", ThresholdGate("dense_top1", 0.6, passages_from="rrf")),
            Stage("keyword", ThresholdGate("bm25_top1_stopwords", 10.0)),
            Stage("broad", ThresholdGate("dense_top1", 0.4, max_passages=20), tier="partial"),
        )
    )


def results_for(dense_scores, bm25_score):
    dense_hits = hits("dense", *((f"d{n}.md#0", score) for n, score in enumerate(dense_scores)))
    bm25 = hits("bm25_stopwords", ("k.md#0", bm25_score)) if bm25_score else RetrievalResult("bm25_stopwords", (), [])
    return {"dense": dense_hits, "bm25_stopwords": bm25, "rrf": dense_hits}


@pytest.mark.parametrize(
    "dense_scores, bm25_score, action, stage",
    [
        ((0.7, 0.5), 12.0, "answer", "hybrid"),  # the first stage wins even when a later one would answer
        ((0.5, 0.3), 12.0, "answer", "keyword"),
        ((0.5, 0.3), 3.0, "hedge", "broad"),  # partial tier: answered with a hedge
        ((0.3, 0.2), 3.0, "refuse", None),
        ((0.3, 0.2), 0.0, "refuse", None),  # BM25 matched nothing
    ],
)
def test_chain_order_and_tiers(dense_scores, bm25_score, action, stage):
    decision = chain().decide(results_for(dense_scores, bm25_score))
    assert (decision.action, decision.stage) == (action, stage)
    assert decision.tier == {"answer": "confident", "hedge": "partial", "refuse": "refuse"}[action]
    if action == "refuse":
        assert [reason.split(":")[0] for reason in decision.reasons] == ["hybrid", "keyword", "broad"]
        assert decision.score == pytest.approx(dense_scores[0])  # the first stage's score
        assert decision.message and decision.passages == ()
    table = pd.DataFrame({"dense_top1": [dense_scores[0]], "bm25_top1_stopwords": [bm25_score]})
    row = chain().decide_table(table).iloc[0]
    assert (row["action"], row["stage"]) == (action, stage)


def test_chain_checks_stages():
    with pytest.raises(ValueError, match="unique"):
        FallbackChain((Stage("a", ThresholdGate("dense_top1", 0.5)), Stage("a", ThresholdGate("dense_top1", 0.4))))
    with pytest.raises(ValueError, match="at least one"):
        FallbackChain(())
    with pytest.raises(ValueError, match="tier"):
        Stage("a", ThresholdGate("dense_top1", 0.5), tier="maybe")
    assert chain().retrievers == ("dense", "rrf", "bm25_stopwords")


# --------------------------------------------------------------------------- dict round trips and files


@pytest.mark.parametrize(
    "gate",
    [
        ThresholdGate("dense_top1", 0.43, hedge_below=0.5, max_passages=None),
        ThresholdGate("dense_top1", -math.inf),  # "answer all", from a guarantee rule with too little data
        ThresholdGate("bm25_empty_raw", 0.5, higher_is_answerable=False),
        FloorGapGate(0.45, 0.05, retriever="rrf", max_passages=5),
        chain(),
    ],
)
def test_to_dict_from_dict_round_trip(gate):
    data = json.loads(json.dumps(gate.to_dict(), allow_nan=False))
    assert gate_from_dict(data) == gate
    assert type(gate).from_dict(data) == gate


def test_gate_from_dict_names_the_known_types():
    with pytest.raises(ValueError, match="known types are"):
        gate_from_dict({"type": "oracle"})


CONFIG = {
    "model": "sentence-transformers/all-MiniLM-L6-v2",
    "model_fingerprint": "sentence-transformers/all-MiniLM-L6-v2@53aa51172d14/max256",
    "chunker": "headings",
    "max_tokens": 256,
    "expand_includes": True,
    "n_chunks": 10,
    "chunks_sha256": "abc",
    "documents": ["a.md"],
}


def fake_index(config=CONFIG, chunks=()):
    return SimpleNamespace(
        config=dict(config),
        retriever_names=("dense", "bm25_raw", "bm25_stopwords", "rrf"),
        chunks=list(chunks),
        bm25={},
        description=None,  # what RetrievalIndex.description would build; these tests only check provenance
    )


def test_save_and_load_keep_provenance(tmp_path):
    path = save_gate(tmp_path / "gate.json", chain(), rule="keep@0.95", fitted={"n_calibration": 9}, provenance=CONFIG)
    document = read_gate_file(path)
    assert document["gate"] == chain() and document["rule"] == "keep@0.95"
    assert document["provenance"]["model_fingerprint"] == CONFIG["model_fingerprint"]
    assert "documents" not in document["provenance"]  # only what decides the score scale
    assert load_gate(path) == chain()


@pytest.mark.parametrize(
    "change, message",
    [
        ({"model_fingerprint": "other/model@0123456789ab/max512"}, "another model's scale is wrong"),
        ({"max_tokens": 512}, "max_tokens=256 but the index has max_tokens=512"),
        ({"chunker": "fixed"}, "chunker='headings'"),
    ],
)
def test_load_gate_refuses_another_scale(tmp_path, change, message):
    path = save_gate(tmp_path / "gate.json", ThresholdGate("dense_top1", 0.43), provenance=CONFIG)
    with pytest.raises(GateFileError, match=message):
        load_gate(path, index=fake_index({**CONFIG, **change}))


def test_load_gate_refuses_unknown_provenance_and_warns_on_a_changed_corpus(tmp_path, monkeypatch):
    bare = save_gate(tmp_path / "bare.json", ThresholdGate("dense_top1", 0.43))
    with pytest.raises(GateFileError, match="no model fingerprint"):
        load_gate(bare, index=fake_index())
    path = save_gate(tmp_path / "gate.json", ThresholdGate("dense_top1", 0.43), provenance=CONFIG)
    with pytest.warns(GateWarning, match="corpus changed"):
        load_gate(path, index=fake_index({**CONFIG, "chunks_sha256": "def", "n_chunks": 11}))


@pytest.mark.parametrize(
    "text, message", [("{not json", "not a JSON gate file"), ('{"format": "x"}', "expected a 'ragcal-gate/1'")]
)
def test_bad_gate_files_are_named(tmp_path, text, message):
    path = write(tmp_path / "gate.json", text)
    with pytest.raises(GateFileError, match=message) as caught:
        read_gate_file(path)
    assert str(path) in str(caught.value)
    with pytest.raises(GateFileError, match="not found"):
        read_gate_file(tmp_path / "missing.json")


# --------------------------------------------------------------------------- refusal messages


@pytest.fixture(scope="module")
def handbook(tmp_path_factory):
    """A tiny corpus with an owner in one page's front matter."""
    root = tmp_path_factory.mktemp("handbook")
    write(
        root / "expenses.md",
        "---\nowner: Finance team\n---\n# Expenses\n\n## Travel claims\n\nSubmit travel receipts within thirty days.\n",
    )
    write(
        root / "leave.md",
        "# Leave\n\n## Parental leave\n\nParental leave lasts sixteen weeks. Leave requests go to your manager.\n\n## Sick leave\n\nReport sick leave on the first day.\n",
    )
    write(
        root / "laptops.md",
        "# Laptops\n\n## Laptop refresh\n\nLaptops are refreshed every three years. Request a laptop from IT.\n",
    )
    chunks = chunk_by_headings(load_corpus(root))
    index = SimpleNamespace(
        chunks=chunks,
        bm25={"bm25_stopwords": BM25Retriever.from_chunks(chunks, variant="stopwords")},
        config={"corpus": str(root)},
    )
    return CorpusDescription.from_index(index, name="the staff handbook")


def test_refusal_with_no_hits_at_all(handbook):
    empty = {"bm25_stopwords": RetrievalResult("bm25_stopwords", (), [])}
    message = (
        FloorGapGate(1.0, 0.1, retriever="bm25_stopwords")
        .bind(handbook)
        .decide(empty, query="Who won the 1998 World Cup?")
        .message
    )
    assert message.startswith("I searched the staff handbook (4 passages from 3 pages)")
    assert "No passage matched any word of the question." in message
    assert "it covers Expenses, Laptops, Leave" in message  # the next step names what the corpus does cover
    assert "I don't know" not in message


def test_refusal_with_one_hit_names_the_page_and_terms(handbook):
    one = {"dense": hits("dense", ("leave.md#1", 0.31))}
    decision = ThresholdGate("dense_top1", 0.5).bind(handbook).decide(one, query="How long is leave for adoption?")
    assert "Related, but not an answer:\n- Leave › Sick leave (leave.md)" in decision.message
    assert "rephrase" in decision.message


def test_refusal_names_the_owner_from_front_matter(handbook):
    close = {"dense": hits("dense", ("expenses.md#0", 0.41), ("leave.md#0", 0.2))}
    message = ThresholdGate("dense_top1", 0.5).bind(handbook).decide(close, query="Can I claim a taxi?").message
    assert "Expenses › Travel claims (expenses.md)" in message
    assert "ask Finance team, who owns expenses.md" in message


def test_refusal_without_a_corpus_still_says_what_was_searched():
    message = refusal_message(dense(0.2, 0.1), query="anything")
    assert message.startswith("I looked at 2 passages (dense)") and "page0.md#0" in message


def returned(*passages):
    """What a store returned, described alone: ids that name no page (a store's own), pages from metadata."""
    return CorpusDescription.from_passages([Passage(*passage) for passage in passages], name="the notes store")


def test_a_refusal_from_what_a_store_returned_counts_what_it_returned_not_the_corpus():
    description = returned(
        ("u1", "pets/cats.md", ("Pets", "Cats"), "Cats sleep sixteen hours a day."),
        ("u2", "pets/cats.md", ("Pets", "Cats", "Food"), "Cats need taurine in their food."),
        ("u3", "garden/roses.md", ("Garden", "Roses"), "Prune roses in late winter."),
    )
    assert (description.n_passages, description.n_pages, description.returned_only) == (3, 2, True)
    assert description.page("u3") == "garden/roses.md" and description.page("x.md#4") == "x.md"
    assert description.topics == ("Pets", "Garden")  # one page each: first seen first
    results = {"dense": hits("dense", ("u2", 0.3), ("u1", 0.25), ("u3", 0.1))}
    message = ThresholdGate("dense_top1", 0.5).decide(results, query="What do hamsters eat?").message
    assert message.startswith("I looked at 3 passages")  # unbound: ids only
    results = {name: dataclasses.replace(result, corpus=description) for name, result in results.items()}
    message = ThresholdGate("dense_top1", 0.5).decide(results, query="What do hamsters eat?").message
    lines = message.splitlines()
    assert lines[0] == (
        "I searched the notes store: none of the 3 passages it returned (from 2 pages) answers “What do hamsters eat?”."
    )
    # Two distinct pages, in the store's order, each under its best passage's heading path.
    assert lines[1:4] == ["Related, but not an answer:", "- Pets › Cats › Food (pets/cats.md)",
                          "- Garden › Roses (garden/roses.md)"]  # fmt: skip
    assert lines[4].startswith("Next step: the notes store may not cover this topic at all; the passages it "
                               "returned are about Pets, Garden.")  # fmt: skip
    # The owner of a closest page (from the document's metadata) wins, as in a described corpus.
    owned = returned(("u3", "garden/roses.md", ("Garden", "Roses"), "Prune roses in late winter.", "Garden club"))
    closest = {"dense": dataclasses.replace(hits("dense", ("u3", 0.3)), corpus=owned)}
    assert "ask Garden club, who owns garden/roses.md" in ThresholdGate("dense_top1", 0.5).decide(closest).message


def test_a_hedge_names_the_pages_a_store_recorded_not_its_ids():
    from ragcal.gates.refusal import hedge_message

    description = returned(("u1", "pets/cats.md", ("Pets", "Cats"), "Cats sleep."),
                           ("u2", "garden/roses.md", ("Garden",), "Prune roses."))  # fmt: skip
    message = hedge_message([("u2", 0.5), ("u1", 0.4)], corpus=description)
    assert "in the notes store, in garden/roses.md; pets/cats.md." in message
    assert "in u2; u1." in hedge_message([("u2", 0.5), ("u1", 0.4)])  # without one, the ids are all it has


def test_a_store_that_returned_nothing_is_described_by_nothing():
    description = CorpusDescription.from_passages([], name="the notes store")
    assert (description.n_passages, description.n_pages, description.topics, description.idf) == (0, 0, (), {})


def test_rephrasing_terms_come_from_the_corpus_and_skip_the_question(handbook):
    terms = handbook.rephrasing_terms(["leave.md#0", "leave.md#1"], "leave")
    assert terms and "leave" not in terms
    assert all(any(term in text.lower() for text in handbook.texts.values()) for term in terms)


# --------------------------------------------------------------------------- fitting and evaluation


def table_of(top1, top2, answerable, slices=None):
    answerable = np.asarray(answerable, dtype=bool)
    slices = slices if slices is not None else np.where(answerable, "answerable", "near-domain")
    return pd.DataFrame(
        {
            "id": [f"q{n}" for n in range(len(top1))],
            "query": "q",
            "answerable": answerable,
            "slice": slices,
            "dense_top1": top1,
            "dense_top2": top2,
        }
    )


def test_fit_floor_gap_hand_case():
    # Answerable: clear winners (big gap) or a crowd above 0.5. Unanswerable: lone 0.55 with a close second.
    table = table_of(
        top1=[0.70, 0.56, 0.60, 0.55, 0.53, 0.30],
        top2=[0.40, 0.54, 0.45, 0.50, 0.49, 0.28],
        answerable=[True, True, True, False, False, False],
    )
    gate = fit_floor_gap_gate(table, rule="keep@1.0")
    decided = gate.decide_table(table)["action"].tolist()
    assert decided[:3] == ["answer"] * 3 and decided[3:] == ["refuse"] * 3
    # A plain threshold keeping all answerable questions (0.56) would let none through either, but at 0.56 the
    # gate needs no gap; the fit prefers the smallest gap, then the highest floor, among equally good pairs.
    # The floor then goes midway to the next top or second score below (0.55); gap 0 is no observed gap and stays.
    assert gate.floor == pytest.approx((0.56 + 0.55) / 2) and gate.min_gap == 0.0


def test_floor_gap_sweep_matches_the_gate():
    rng = np.random.default_rng(0)
    top1 = rng.uniform(0.2, 0.8, 60)
    table = table_of(top1, top1 - rng.uniform(0, 0.2, 60), rng.random(60) < 0.5)
    sweep = floor_gap_sweep(table, n_floors=7, n_gaps=5)
    assert len(sweep) == 35
    for row in sweep.sample(10, random_state=0).itertuples():
        actions = FloorGapGate(row.floor, row.min_gap).decide_table(table)["action"]
        kept = (actions[table["answerable"]] == "answer").sum()
        assert row.answerable_kept_k == kept
        assert row.near_domain_refused_k == (actions[~table["answerable"]] == "refuse").sum()


def test_fit_threshold_gate_uses_the_rule():
    table = table_of([0.4, 0.5, 0.6, 0.7, 0.3, 0.45], [0.1] * 6, [True] * 4 + [False] * 2)
    gate = fit_threshold_gate(table, "dense_top1", "keep@0.75", hedge_rule="keep@0.5")
    # boundaries 0.5 and 0.6, each placed midway to the next calibration score below
    assert gate.threshold == fit_threshold("keep@0.75", table["dense_top1"], table["answerable"])
    assert gate.threshold == pytest.approx((0.5 + 0.45) / 2)
    assert gate.hedge_below == pytest.approx((0.6 + 0.5) / 2)


def test_gate_outcomes_counts_by_hand():
    table = table_of(
        [0.9, 0.5, 0.2, 0.6, 0.1],
        [0.0] * 5,
        [True, True, True, False, False],
        ["answerable"] * 3 + ["near-domain", "unrelated"],
    )
    decisions = ThresholdGate("dense_top1", 0.4, hedge_below=0.7).decide_table(table)
    outcomes = gate_outcomes(table, decisions).set_index(["slice", "outcome"])
    assert outcomes.loc[("answerable", "answer"), "k"] == 1
    assert outcomes.loc[("answerable", "hedge"), "k"] == 1
    assert outcomes.loc[("answerable", "answered"), "share"] == pytest.approx(2 / 3)
    assert outcomes.loc[("all unanswerable", "refuse"), ["k", "n"]].tolist() == [1, 2]  # abstention accuracy 1/2
    assert outcomes.loc[("unrelated", "refuse"), "low"] == pytest.approx(0.025)  # Clopper-Pearson for 1/1


def test_heldout_gates_use_the_threshold_rules_splits():
    rng = np.random.default_rng(1)
    answerable = np.repeat([True, False, False], [40, 20, 20])
    slices = np.repeat(["answerable", "near-domain", "unrelated"], [40, 20, 20])
    top1 = np.where(answerable, rng.normal(0.65, 0.08, 80), rng.normal(0.4, 0.1, 80))
    table = table_of(top1, top1 - 0.05, answerable, slices)
    fitters = {
        "threshold": lambda calibration: fit_threshold_gate(calibration, "dense_top1", "keep@0.95"),
        "floor-gap": lambda calibration: fit_floor_gap_gate(calibration, rule="keep@0.95"),
    }
    heldout = heldout_gates(table, fitters, n_splits=20)
    reference = heldout_outcomes(table, "dense_top1", ["keep@0.95"], n_splits=20)
    mine = heldout[
        (heldout["gate"] == "threshold") & (heldout["slice"] == "answerable") & (heldout["outcome"] == "answered")
    ]
    assert np.array_equal(mine["k"].to_numpy(), reference["answerable_kept_k"].to_numpy())
    differences = paired_differences(heldout, "threshold", slice_name="near-domain", outcome="refuse").set_index("gate")
    assert differences.loc["threshold", ["mean", "low", "high", "better"]].tolist() == [0, 0, 0, 0]


def test_passage_metrics_by_hand():
    decisions = {
        "q1": Decision("answer", 0.7, (("a.md#0", 0.7), ("b.md#0", 0.6), ("c.md#1", 0.5))),
        "q2": Decision("refuse", 0.1),
    }
    lists = {"q1": hits("dense", *((f"{page}#0", 0.5) for page in ["a.md", "c.md", "d.md", "e.md", "f.md", "b.md"]))}
    metrics = passage_metrics(decisions, {"q1": {"a.md", "b.md"}, "q2": {"x.md"}}, lists).set_index("id")
    assert list(metrics.index) == ["q1"]
    assert metrics.loc["q1", "precision@cut"] == pytest.approx(2 / 3)
    assert metrics.loc["q1", "recall@cut"] == 1.0
    assert metrics.loc["q1", "precision@5"] == pytest.approx(1 / 5)
    assert metrics.loc["q1", "recall@5"] == 0.5 and metrics.loc["q1", "recall@10"] == 1.0


def test_default_chain_fit_structure():
    rng = np.random.default_rng(2)
    answerable = np.repeat([True, False], [60, 40])
    table = table_of(np.where(answerable, rng.normal(0.65, 0.08, 100), rng.normal(0.4, 0.1, 100)), 0.0, answerable)
    table["bm25_top1_stopwords"] = np.where(answerable, rng.normal(15, 4, 100), rng.normal(8, 4, 100)).clip(0)
    gate = fit_default_chain(table)
    hybrid, keyword, broad = gate.stages
    assert [stage.name for stage in gate.stages] == ["hybrid", "keyword", "broad"]
    assert broad.tier == "partial" and broad.gate.threshold == fit_threshold(
        "keep@0.95", table["dense_top1"], answerable
    )
    assert hybrid.gate.threshold >= broad.gate.threshold and hybrid.gate.passages_from == "rrf"
    assert keyword.gate.threshold > 0
    kept = (gate.decide_table(table)["action"][answerable] != "refuse").mean()
    assert kept >= 0.95  # the broad stage alone keeps keep@0.95 of the calibration questions


def test_a_gate_never_answers_with_nothing_to_pass_on():
    empty = {"bm25_stopwords": RetrievalResult("bm25_stopwords", (), [])}
    gate = ThresholdGate("bm25_top1_stopwords", 0.0)
    decision = gate.decide(empty)
    assert decision.action == "refuse" and decision.reasons[-1] == "no passage to pass on"
    table = pd.DataFrame({"bm25_top1_stopwords": [0.0, 3.0]})
    assert list(gate.decide_table(table)["action"]) == ["refuse", "answer"]  # decide_table agrees
    # Fitting keep@1.0 with an answerable question that matched nothing still needs one match.
    fitted = fit_threshold_gate(
        pd.DataFrame(
            {"answerable": [True, True, False], "slice": ["a", "a", "u"], "bm25_top1_stopwords": [0.0, 5.0, 1.0]}
        ),
        "bm25_top1_stopwords",
        "keep@1.0",
    )
    assert fitted.threshold > 0


def test_fit_floor_gap_leaves_out_questions_without_hits():
    table = table_of([np.nan, 0.7, 0.6, 0.3], [np.nan, 0.5, 0.55, 0.2], [True, True, True, False])
    gate = fit_floor_gap_gate(table, rule="keep@1.0")  # used to raise IndexError: no pair kept the question with no hit
    assert gate.floor == pytest.approx((0.6 + 0.55) / 2)  # midway to the next top or second score below


def test_fit_gate_chain_with_too_few_unanswerable_questions_prints_inf(tmp_path, capsys):
    from ragcal.cli import main

    scores = tmp_path / "scores.csv"
    scores.write_text(
        "id,query,answerable,slice,dense_top1,bm25_top1_stopwords\n"
        "a1,q,true,answerable,0.70,12.0\na2,q,true,answerable,0.62,9.0\na3,q,true,answerable,0.55,7.5\n"
        "u1,q,false,unrelated,0.30,2.0\nu2,q,false,unrelated,0.25,1.0\n"
    )
    # Two unanswerable questions cannot support the chain's false-answer guarantee: its bars fall back to +inf.
    code = main(["fit-gate", str(scores), "--gate", "chain", "--out", str(tmp_path / "chain.json")])
    out = capsys.readouterr().out
    assert code == 0 and "stage hybrid (confident): dense_top1 >= inf" in out
    assert gate_from_dict(json.loads((tmp_path / "chain.json").read_text())["gate"]).stages[0].gate.threshold == math.inf


def test_fit_gate_dispatches_to_each_kinds_fit_function():
    import pandas as pd

    from ragcal.datasets import DATA_DIR
    from ragcal.gates import fit_floor_gap_gate, fit_gate, fit_learned_gate, fit_threshold_gate, gate_kinds
    from ragcal.gates.chain import fit_default_chain
    from ragcal.gates.fit import gate_columns

    table = pd.read_csv(DATA_DIR.parent / "results" / "fastapi" / "scores.csv")
    assert set(gate_kinds()) == {"threshold", "floor_gap", "chain", "learned"}
    expected = {
        "threshold": fit_threshold_gate(table, "dense_top1", "keep@0.95"),
        "floor_gap": fit_floor_gap_gate(table, rule="keep@0.95"),
        "chain": fit_default_chain(table, rule="keep@0.95"),
        "learned": fit_learned_gate(table, "keep@0.95"),
    }
    for kind, gate in expected.items():
        assert fit_gate(table, kind, "keep@0.95").to_dict() == gate.to_dict(), kind
        assert set(gate_columns(kind)) <= set(table.columns), kind
    assert gate_columns("floor_gap", retriever="bm25_raw") == ["bm25_raw_top1", "bm25_raw_top2"]
    with pytest.raises(ValueError, match="unknown gate kind 'nope'; known kinds are"):
        fit_gate(table, "nope")
    with pytest.raises(TypeError, match="unexpected option"):
        fit_gate(table, "threshold", colour="red")


def test_gate_files_record_the_threshold_placement_and_older_files_still_load(tmp_path):
    import json

    from ragcal.calibration import THRESHOLD_PLACEMENT

    path = save_gate(tmp_path / "gate.json", ThresholdGate("dense_top1", 0.43), rule="keep@0.95", provenance=CONFIG)
    document = json.loads(path.read_text())
    assert document["threshold_placement"] == THRESHOLD_PLACEMENT
    assert read_gate_file(path)["threshold_placement"] == THRESHOLD_PLACEMENT
    del document["threshold_placement"]  # a file written before the field existed
    path.write_text(json.dumps(document))
    assert read_gate_file(path)["threshold_placement"] is None and load_gate(path) == ThresholdGate("dense_top1", 0.43)
    hand = save_gate(tmp_path / "hand.json", ThresholdGate("dense_top1", 0.43))
    assert read_gate_file(hand)["threshold_placement"] is None
