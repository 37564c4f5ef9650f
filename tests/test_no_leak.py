"""The reported leak, on every public decision path.

Three pages: cookies.md and headers.md are public, payroll.md is restricted and titled "Zanzibarquux payroll". A
gate is bound to the full index (what ``load_gate("gate.json", index=index)`` does) and a question is asked on the
public view. Before the fix the refusal read "it covers Cookies, Headers, Zanzibarquux payroll".
"""

import json

import numpy as np
import pandas as pd
import pytest

from ragcal.cli import main
from ragcal.gates import FallbackChain, FloorGapGate, LearnedGate, Stage, ThresholdGate, ask, load_gate, save_gate
from ragcal.gates.learned_score import LinearScore
from ragcal.retrieval.fusion import reciprocal_rank_fusion
from ragcal.retrieval.index import build_index
from ragcal.retrieval.views import ViewMismatchError
from ragcal.scoring import score_table

from conftest import write

OFF_TOPIC = "Who won the 1998 World Cup?"
#: Marks of the restricted page: its path, its title and the words only it uses.
HIDDEN = ("payroll", "Zanzibarquux", "Salaries", "salary")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("three_pages") / "docs"
    write(root / "cookies.md", "# Cookies\n\n## Setting cookies\n\nCall response.set_cookie to set a cookie.\n")
    write(root / "headers.md", "# Headers\n\n## Reading headers\n\nDeclare a Header parameter to read a header.\n")
    write(
        root / "payroll.md",
        "---\naccess_level: restricted\n---\n# Zanzibarquux payroll\n\n## Salary runs\n\n"
        "Salaries are paid on the 25th; the payroll team signs off every run.\n",
    )
    return root


@pytest.fixture(scope="module")
def full(corpus, embedder):
    return build_index(corpus, embedder=embedder)


def gates():
    """One gate of every kind that refuses the off-topic question, and one that hedges everything."""
    learned = LearnedGate(LinearScore(("dense_top1",), (0.0,), (1.0,), (1.0,), -50.0), 0.5)  # score ~ 0: refuses
    return {
        "threshold": ThresholdGate("dense_top1", 0.99),
        "floor_gap": FloorGapGate(0.99, 0.5),
        "chain": FallbackChain(
            (Stage("hybrid", ThresholdGate("dense_top1", 0.99, passages_from="rrf")),
             Stage("keyword", ThresholdGate("bm25_top1_stopwords", 50.0)))
        ),
        "learned": learned,
        "hedge": ThresholdGate("dense_top1", -1.0, hedge_below=1.01),
    }


def assert_public(text: str) -> None:
    assert not [mark for mark in HIDDEN if mark in text], text


@pytest.fixture(scope="module")
def gate_files(full, tmp_path_factory):
    folder = tmp_path_factory.mktemp("gate_files")
    return {name: save_gate(folder / f"{name}.json", gate, provenance=full.config) for name, gate in gates().items()}


def test_the_full_index_does_name_the_restricted_page(full, gate_files):
    """The control: without a restriction the title is there to leak, so the checks below can fail."""
    decision = load_gate(gate_files["threshold"], index=full).decide(
        {name: lists[0] for name, lists in full.retrieve([OFF_TOPIC]).items()}, query=OFF_TOPIC
    )
    assert "Zanzibarquux payroll" in decision.message
    assert "3 passages from 3 pages" in decision.message


@pytest.mark.parametrize("kind", list(gates()))
def test_load_gate_on_the_full_index_then_decide_on_the_public_view(full, gate_files, kind):
    gate = load_gate(gate_files[kind], index=full)  # bound to the full index
    view = full.restrict(["public"])
    decision = gate.decide({name: lists[0] for name, lists in view.retrieve([OFF_TOPIC]).items()}, query=OFF_TOPIC)
    assert decision.action == ("hedge" if kind == "hedge" else "refuse")
    assert_public(json.dumps(decision.to_dict()))
    if kind != "hedge":
        assert "2 passages from 2 pages" in decision.message
        assert "it covers Cookies, Headers. Ask about one of them." in decision.message


@pytest.mark.parametrize("kind", list(gates()))
def test_results_assembled_from_the_views_retrievers_are_not_described_by_the_full_index(full, gate_files, kind):
    """Stamped with the view's key but carrying no description: the message names only what was retrieved."""
    gate = load_gate(gate_files[kind], index=full)
    view = full.restrict(["public"])
    dense = view.dense.search([OFF_TOPIC])[0]
    bm25 = {name: retriever.search([OFF_TOPIC])[0] for name, retriever in view.bm25.items()}
    rrf = reciprocal_rank_fusion([dense, bm25["bm25_stopwords"]])
    decision = gate.decide({"dense": dense, **bm25, "rrf": rrf}, query=OFF_TOPIC)
    assert_public(json.dumps(decision.to_dict()))
    if decision.action == "refuse":
        assert decision.message.startswith("I looked at 2 passages")


def test_results_of_two_views_are_refused(full):
    view = full.restrict(["public"])
    mixed = {"dense": full.dense.search([OFF_TOPIC])[0], "bm25_stopwords": view.bm25["bm25_stopwords"].search(["x"])[0]}
    for threshold in (0.99, -1.0):  # a refusal and an answer alike
        with pytest.raises(ViewMismatchError, match="2 corpus views"):
            ThresholdGate("dense_top1", threshold).decide(mixed)


@pytest.mark.parametrize("kind", list(gates()))
def test_decide_table_agrees_with_decide_on_the_view(full, kind):
    gate = gates()[kind].bind(full.description)
    view = full.restrict(["public"])
    questions = [OFF_TOPIC, "How do I set a cookie?"]
    retrieved = view.retrieve(questions)
    frame = pd.DataFrame({"id": ["a", "b"], "query": questions, "answerable": True, "slice": "s"})
    table = score_table(frame, retrieved)
    decided = gate.decide_table(table)
    assert_public(decided.to_csv(index=False) + table.to_csv(index=False))
    for position in range(len(questions)):
        decision = gate.decide({name: lists[position] for name, lists in retrieved.items()})
        assert decision.action == decided["action"][position]


@pytest.mark.parametrize("kind", list(gates()))
def test_ask_on_the_view_and_with_allowed_levels(full, gate_files, kind):
    gate = load_gate(gate_files[kind], index=full)
    for decisions, table in (
        ask(gate, full.restrict(["public"]), [OFF_TOPIC]),
        ask(gate, full, [OFF_TOPIC], allowed_levels=["public"]),
    ):
        assert_public(table.to_csv(index=False) + json.dumps([decision.to_dict() for decision in decisions]))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["threshold", "chain", "hedge"])
def test_the_cli_names_no_restricted_page(corpus, gate_files, kind, capsys, tmp_path):
    common = ["ask", "--gate", str(gate_files[kind]), "--corpus", str(corpus), "--cache-dir", str(tmp_path)]
    assert main([*common, "--access", "public", OFF_TOPIC]) == 0
    assert main([*common, "--access", "public", "--json", OFF_TOPIC]) == 0
    captured = capsys.readouterr()
    assert_public(captured.out + captured.err)
    assert main([*common, "--access", "public,restricted", OFF_TOPIC]) == 0  # the control: a caller who may see it
    if kind != "hedge":
        assert "Zanzibarquux payroll" in capsys.readouterr().out


def test_views_are_stamped_through_fusion_and_diagnostics(full):
    view = full.restrict(["public"])
    retrieved = view.retrieve(["cookie"])
    assert {result.view for lists in retrieved.values() for result in lists} == {view.description.view}
    assert view.description.view != full.description.view
    assert all(result.corpus is view.description for lists in retrieved.values() for result in lists)
    assert np.isfinite(retrieved["dense"][0].scores).all()
