"""The LlamaIndex integration on real LlamaIndex objects: a VectorStoreIndex over its default SimpleVectorStore.

Most tests use the chunks of a few FastAPI pages; one slow test scores the
whole FastAPI docs' labeled set through the adapter and compares it, question
by question, with ragcal's own index. No LLM is called: MockLLM (LlamaIndex's
own, which echoes its prompt) stands where a query engine needs one.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from doc_snippets import run_quick_start
from llama_index.core import SummaryIndex, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.response_synthesizers import CompactAndRefine
from llama_index.core.response_synthesizers.context_only import ContextOnly
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore

import ragcal
from ragcal.datasets import FASTAPI_CORPUS, FASTAPI_EXCLUDE, FASTAPI_QUERIES
from ragcal.embedding import Embedder
from ragcal.gates import GateFileError, fit_gate, read_gate_file, save_gate
from ragcal.integrations.common import StoreScoreError
from ragcal.integrations.llamaindex import (
    REFUSAL_TEXT,
    GatedQueryEngine,
    GatePostprocessor,
    LlamaIndexStore,
    RagcalEmbedding,
    nodes_from_chunks,
    score_store,
)
from ragcal.queries import load_queries
from ragcal.retrieval.index import chunk_corpus

#: The pages of the small index: the labeled questions about them are answerable there.
PAGES = (
    "advanced/response-cookies.md",
    "tutorial/cors.md",
    "tutorial/background-tasks.md",
    "tutorial/request-files.md",
    "tutorial/security/get-current-user.md",
    "deployment/docker.md",
)
UNRELATED = "Who holds the record for the fastest marathon?"
COVERED = "How do I set a cookie on the response?"
DEPTH = 20  # documents per question for the small index (it holds about 60)


@pytest.fixture(scope="module")
def all_chunks():
    return chunk_corpus(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE)[1]


@pytest.fixture(scope="module")
def chunks(all_chunks):
    return [chunk for chunk in all_chunks if chunk.doc_path in PAGES]


@pytest.fixture(scope="module")
def embed_model():
    return RagcalEmbedding()


@pytest.fixture(scope="module")
def index(chunks, embed_model):
    return VectorStoreIndex(nodes_from_chunks(chunks), embed_model=embed_model)


@pytest.fixture(scope="module")
def store(index, embed_model):
    return LlamaIndexStore(index, embed_model=embed_model)


@pytest.fixture(scope="module")
def labeled():
    """The labeled questions about :data:`PAGES` and every unanswerable one."""
    queries = load_queries(FASTAPI_QUERIES)
    inside = queries["gold"].map(lambda gold: bool(gold) and set(gold) <= set(PAGES))
    return queries[inside | ~queries["answerable"]].reset_index(drop=True)


@pytest.fixture(scope="module")
def scored(labeled, store):
    return score_store(labeled, store, k=DEPTH)


@pytest.fixture(scope="module")
def gate_file(scored, tmp_path_factory):
    table, config, _ = scored
    gate = fit_gate(table, "threshold", "keep@0.95", signal="dense_top1")
    return save_gate(tmp_path_factory.mktemp("gate") / "gate.json", gate, rule="keep@0.95", provenance=config)


@pytest.fixture(scope="module")
def postprocessor(store, gate_file):
    return GatePostprocessor(store=store, gate=gate_file)


def cosine(left, right) -> float:
    left, right = np.asarray(left, dtype=np.float64), np.asarray(right, dtype=np.float64)
    return float(left @ right / (np.linalg.norm(left) * np.linalg.norm(right)))


# ------------------------------------------------------------------ embeddings and nodes


def test_the_stores_contents_are_recorded_with_its_node_count(scored, store, index, chunks):
    _, config, _ = scored
    assert config["store_contents"]["count"] == store.document_count() == len(chunks)
    assert LlamaIndexStore(index.as_retriever(similarity_top_k=5)).document_count() is None  # its index is private


def test_the_embedding_gives_ragcals_own_vectors_sync_and_async(embed_model, chunks):
    texts = [chunk.text for chunk in chunks[:5]]
    own = Embedder().encode(texts)
    assert embed_model.get_text_embedding_batch(texts) == own.tolist()
    assert embed_model.get_query_embedding(COVERED) == Embedder().encode([COVERED])[0].tolist()
    assert asyncio.run(embed_model.aget_query_embedding(COVERED)) == embed_model.get_query_embedding(COVERED)
    assert asyncio.run(embed_model.aget_text_embedding(texts[0])) == own[0].tolist()
    assert asyncio.run(embed_model.aget_text_embedding_batch(texts)) == own.tolist()
    assert np.allclose(np.linalg.norm(own, axis=1), 1.0, atol=1e-6)
    assert embed_model.name == "sentence-transformers/all-MiniLM-L6-v2"
    assert embed_model.fingerprint == Embedder().fingerprint


def test_the_index_embeds_each_chunks_text_alone(index, chunks, embed_model):
    """The nodes' metadata is not embedded, so the index holds exactly the vectors ragcal's index holds."""
    own = Embedder().encode([chunk.text for chunk in chunks])
    for chunk, vector in zip(chunks, own):
        assert index.vector_store.get(chunk.chunk_id) == vector.tolist()


def test_nodes_carry_the_chunk_id_as_id_and_in_metadata(chunks):
    nodes = nodes_from_chunks(chunks[:3], id_key="source")
    for chunk, node in zip(chunks, nodes):
        assert node.node_id == chunk.chunk_id == node.metadata["source"]
        assert node.metadata["page"] == chunk.doc_path
        assert node.get_content(metadata_mode="embed") == chunk.text
        assert "source" not in node.get_content(metadata_mode="llm") and chunk.doc_path in node.get_content("llm")
    assert nodes_from_chunks([]) == []


# ------------------------------------------------------------------ the store as a ragcal retriever


def test_the_adapter_returns_the_stores_cosine_scores_in_order(store, chunks):
    own = Embedder()
    vectors = dict(zip([chunk.chunk_id for chunk in chunks], own.encode([chunk.text for chunk in chunks])))
    query = own.encode([COVERED])[0]
    hits = store.hits(COVERED, 5)
    assert [hit.chunk_id for hit in hits] == sorted(vectors, key=lambda chunk: -cosine(query, vectors[chunk]))[:5]
    assert [hit.score for hit in hits] == pytest.approx(
        [cosine(query, vectors[hit.chunk_id]) for hit in hits], abs=1e-12
    )
    assert all(isinstance(hit.item, NodeWithScore) for hit in hits)
    assert hits[0].chunk_id.startswith("advanced/response-cookies.md#")
    assert store.score_scale == "llamaindex SimpleVectorStore (cosine)"
    assert store.config["model_fingerprint"] == Embedder().fingerprint
    assert store.config["framework"] == "llamaindex"


def test_a_retriever_is_read_as_built_and_must_return_enough(index):
    adapter = LlamaIndexStore(index.as_retriever(similarity_top_k=5))
    assert adapter.score_scale == "llamaindex VectorIndexRetriever"
    assert adapter.model is None and adapter.config["model_fingerprint"] == adapter.score_scale
    assert [hit.chunk_id for hit in adapter.hits(COVERED, 3)] == [
        hit.chunk_id for hit in LlamaIndexStore(index).hits(COVERED, 3)
    ]
    with pytest.raises(ValueError, match=r"similarity_top_k=5, but 10 documents .* similarity_top_k=10"):
        adapter.hits(COVERED, 10)
    with pytest.raises(ValueError, match="retriever_kwargs are for an index"):
        LlamaIndexStore(index.as_retriever(), retriever_kwargs={"filters": None})
    assert LlamaIndexStore(index, retriever_kwargs={"vector_store_query_mode": "mmr"}).score_scale == (
        "llamaindex SimpleVectorStore mmr (cosine)"
    )
    with pytest.raises(TypeError, match="LlamaIndexStore needs a LlamaIndex retriever .* got list"):
        LlamaIndexStore([])


def test_nodes_without_a_score_are_refused_with_the_store_named(chunks, store, postprocessor):
    """A summary index's retriever gives every node ``score=None``, as a fusion that drops scores does (#12497)."""
    summary = SummaryIndex(nodes_from_chunks(chunks[:4])).as_retriever()
    adapter = LlamaIndexStore(summary)
    message = r"LlamaIndex SummaryIndexRetriever returned no score for 4 of 4 documents \(question 'How do I set"
    with pytest.raises(StoreScoreError, match=message):
        adapter.search([COVERED], k=4)
    with pytest.raises(StoreScoreError, match="LlamaIndex SimpleVectorStore returned no score for 4 of 4"):
        postprocessor.postprocess_nodes(summary.retrieve(COVERED), query_str=COVERED)


class DistanceRetriever(BaseRetriever):
    """A user's retriever that reports cosine distances (1 - similarity): lower is closer."""

    def __init__(self, retriever):
        self.retriever = retriever
        super().__init__()

    def _retrieve(self, query_bundle):
        return [NodeWithScore(node=hit.node, score=1.0 - hit.score) for hit in self.retriever.retrieve(query_bundle)]


def test_distances_are_refused_with_what_to_do(index):
    adapter = LlamaIndexStore(DistanceRetriever(index.as_retriever(similarity_top_k=5)))
    with pytest.raises(StoreScoreError) as refused:
        adapter.search([COVERED], k=5)
    message = str(refused.value)
    assert message.startswith("LlamaIndex DistanceRetriever: scores rise down the ranked list")
    assert "build the store with a similarity metric" in message and "node postprocessor" in message


# ------------------------------------------------------------------ the gate as a node postprocessor


def test_the_postprocessor_decides_as_the_fitted_table_says(postprocessor, scored, index, gate_file):
    """Live, on the retriever's nodes, the gate takes the decision its table gives each labeled question."""
    table, _, _ = scored
    expected = read_gate_file(gate_file)["gate"].decide_table(table)["action"].tolist()
    retriever = index.as_retriever(similarity_top_k=postprocessor.depth)
    decided = []
    for question in table["query"]:
        nodes = postprocessor.postprocess_nodes(retriever.retrieve(question), query_str=question)
        decision = postprocessor.last_decision
        decided.append(decision.action)
        assert [node.node.node_id for node in nodes] == [chunk_id for chunk_id, _ in decision.passages]
        assert [node.score for node in nodes] == pytest.approx([score for _, score in decision.passages])
    assert decided == expected
    assert {"answer", "refuse"} <= set(decided)
    assert postprocessor.depth == DEPTH


def test_passed_nodes_are_marked_copies_and_a_refusal_passes_none(postprocessor, index, gate_file, chunks):
    retriever = index.as_retriever(similarity_top_k=postprocessor.depth)
    nodes = postprocessor.postprocess_nodes(retriever.retrieve(COVERED), query_str=COVERED)
    assert nodes and postprocessor.last_refusal is None
    threshold = read_gate_file(gate_file)["gate"].threshold
    assert nodes[0].score >= threshold and nodes[0].node.metadata["ragcal_action"] == "answer"
    assert "ragcal_action" not in nodes[0].node.get_content(metadata_mode="llm")
    stored = index.docstore.get_node(nodes[0].node.node_id)
    assert "ragcal_action" not in stored.metadata  # the store's own node is untouched

    assert postprocessor.postprocess_nodes(retriever.retrieve(UNRELATED), query_str=UNRELATED) == []
    refusal = postprocessor.last_refusal
    assert refusal["action"] == "refuse" and refusal["score"] < threshold
    assert UNRELATED in refusal["message"] and refusal["reasons"]
    # Worded from the nodes the retriever returned: their count, pages and heading paths (nodes_from_chunks).
    lines = refusal["message"].splitlines()
    assert lines[0].startswith(f"I searched the {postprocessor.store.store_label} store: none of the {postprocessor.depth} passages")
    headed = {f"{' › '.join(chunk.heading_path)} ({chunk.doc_path})" for chunk in chunks}
    assert lines[1] == "Related, but not an answer:" and all(line[2:] in headed for line in lines[2:5])


def test_a_query_engine_answers_a_refusal_with_the_gates_sentence(postprocessor, index):
    """ContextOnly takes ``empty_response`` (BaseSynthesizer's parameter); CompactAndRefine does not pass it on."""
    engine = RetrieverQueryEngine(
        index.as_retriever(similarity_top_k=postprocessor.depth),
        response_synthesizer=ContextOnly(llm=MockLLM(), empty_response=postprocessor.empty_response),
        node_postprocessors=[postprocessor],
    )
    refused = engine.query(UNRELATED)
    assert str(refused) == postprocessor.empty_response == REFUSAL_TEXT and refused.source_nodes == []
    assert UNRELATED in postprocessor.last_refusal["message"]  # the question's own refusal, beside the fixed text

    answered = engine.query(COVERED)
    passed = [chunk_id for chunk_id, _ in postprocessor.last_decision.passages]
    assert [node.node.node_id for node in answered.source_nodes] == passed
    assert answered.source_nodes[0].node.text in str(answered)  # ContextOnly answers with the passages passed on
    assert "ragcal_action" not in str(answered)

    with pytest.raises(TypeError, match="empty_response"):
        CompactAndRefine(llm=MockLLM(), empty_response=REFUSAL_TEXT)
    plain = RetrieverQueryEngine(
        index.as_retriever(similarity_top_k=postprocessor.depth),
        response_synthesizer=CompactAndRefine(llm=MockLLM()),
        node_postprocessors=[GatePostprocessor(store=postprocessor.store, gate=postprocessor.gate)],
    )
    refused = plain.query(UNRELATED)
    assert str(refused) == "Empty Response" and refused.source_nodes == []  # LlamaIndex's own text (#16857)
    answered = plain.query(COVERED)
    assert "page: advanced/response-cookies.md" in str(answered)  # MockLLM echoes its prompt: the passages passed on


def test_the_gated_query_engine_answers_with_the_questions_own_refusal(postprocessor, index):
    """With LlamaIndex's default synthesizer (CompactAndRefine, no empty_response), the refusal still flows."""
    engine = GatedQueryEngine(
        retriever=index.as_retriever(similarity_top_k=postprocessor.depth),
        gate=postprocessor,
        synthesizer=CompactAndRefine(llm=MockLLM()),
    )
    refused = engine.query(UNRELATED)
    decision, passed = postprocessor.decide(
        index.as_retriever(similarity_top_k=postprocessor.depth).retrieve(UNRELATED), UNRELATED
    )
    assert passed == [] and decision.action == "refuse"
    assert str(refused) == decision.message and UNRELATED in str(refused) and refused.source_nodes == []
    assert refused.metadata["ragcal_refusal"]["reasons"] == list(decision.reasons)
    answered = engine.query(COVERED)
    assert answered.metadata["ragcal_refusal"] is None
    assert "page: advanced/response-cookies.md" in str(answered)  # MockLLM echoes its prompt: the passages passed on
    assert answered.source_nodes and all(
        node.node.metadata["ragcal_action"] == "answer" for node in answered.source_nodes
    )


def test_a_gate_of_another_score_scale_is_refused(store, scored, index, tmp_path):
    table, config, _ = scored
    gate = fit_gate(table, "threshold", "keep@0.95", signal="dense_top1")
    retriever_scale = LlamaIndexStore(index.as_retriever(similarity_top_k=DEPTH)).score_scale
    path = save_gate(tmp_path / "other.json", gate, provenance={**config, "score_scale": retriever_scale})
    with pytest.raises(
        GateFileError,
        match=r"fitted on the scores of llamaindex VectorIndexRetriever, but "
        r"LlamaIndex SimpleVectorStore returns llamaindex SimpleVectorStore \(cosine\)",
    ):
        GatePostprocessor(store=store, gate=path)
    other_model = save_gate(tmp_path / "model.json", gate, provenance={**config, "model_fingerprint": "other@1"})
    with pytest.raises(GateFileError, match="fitted on embedding model other@1"):
        GatePostprocessor(store=store, gate=other_model)


def test_a_gate_scored_through_a_bare_index_says_how_to_give_the_model(store, index, labeled, tmp_path):
    # What a `ragcal score --llamaindex` factory that returns the bare index records: the scale, no model.
    table, config, _ = score_store(labeled, LlamaIndexStore(index), k=DEPTH)
    assert config["score_scale"] == "llamaindex SimpleVectorStore (cosine)" and config["model_fingerprint"] == config["score_scale"]
    path = save_gate(tmp_path / "bare.json", fit_gate(table, "threshold", "keep@0.95", signal="dense_top1"),
                     provenance=config)  # fmt: skip
    with pytest.raises(GateFileError, match=r"without its embedding model.*LlamaIndexStore\(index, embed_model=embed_model\)"
                                            r".*not the bare index"):  # fmt: skip
        GatePostprocessor(store=store, gate=path)
    # In front of the bare index again, there is nothing to compare: it is the same store, and it works.
    assert GatePostprocessor(store=LlamaIndexStore(index), gate=path).depth == DEPTH


# ------------------------------------------------------------------ the extra


def run_python(code: str) -> subprocess.CompletedProcess:
    root = str(Path(ragcal.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, timeout=120
    )


def test_without_llamaindex_the_import_error_names_the_extra():
    code = (
        "import sys\n"
        "sys.modules['llama_index'] = None\n"
        "try:\n"
        "    import ragcal.integrations.llamaindex\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    printed = run_python(code).stdout
    assert "ragcal.integrations.llamaindex needs LlamaIndex" in printed
    assert "pip install 'ragcal[llamaindex]'" in printed


def test_importing_ragcal_and_the_integrations_package_loads_no_llamaindex():
    code = "import sys, ragcal, ragcal.integrations, ragcal.integrations.common\nprint(sorted(sys.modules))"
    assert "llama_index" not in run_python(code).stdout


# ------------------------------------------------------------------ the whole FastAPI docs


@pytest.mark.slow
def test_the_quick_start_on_the_fastapi_docs_reproduces_ragcals_own_index(fastapi_index, tmp_path):
    """The documentation's LlamaIndex quick start, run as written (docs/frameworks-overview.md), then checked.

    Same vectors, same cosine: the adapter's dense_top1 and the gate's decisions are ragcal's own, per question.
    LlamaIndex's SimpleVectorStore computes cosine in float64 over the float32
    vectors, ragcal's faiss index the inner product in float32: the scores
    agree to float32 rounding (about 1e-7), not bit for bit.
    """
    from ragcal.scoring import score_table

    namespace, printed = run_quick_start("llama_index", tmp_path)
    index, store, table, config = (namespace[name] for name in ("index", "adapter", "table", "provenance"))
    # What the page says it prints: the cookie question answered with its passages, the bread one refused.
    answered, refused = printed.split("\n", 1)
    assert int(answered) > 0
    assert refused.startswith("0 I searched the store's documents (2,282 passages") and "sourdough" in refused

    queries = load_queries(FASTAPI_QUERIES, corpus_paths=fastapi_index.doc_paths)
    own_retrieved = fastapi_index.retrieve(queries["query"])
    own_table = score_table(queries, own_retrieved)

    # (a) dense_top1 question by question
    assert list(table["id"]) == list(own_table["id"])
    np.testing.assert_allclose(table["dense_top1"], own_table["dense_top1"], rtol=0, atol=1e-6)

    # (b) the postprocessor, live on the index's retriever, decides as the same gate on ragcal's own results, from
    # the same top passage
    path = tmp_path / "gate.json"  # written by the quick start
    gate = fit_gate(table, "threshold", "keep@0.95", signal="dense_top1")
    assert read_gate_file(path)["gate"] == read_gate_file(save_gate(tmp_path / "again.json", gate))["gate"]
    postprocessor = GatePostprocessor(store=store, gate=path)
    retriever = index.as_retriever(similarity_top_k=postprocessor.depth)
    rows = []
    for position, question in enumerate(queries["query"]):
        nodes = retriever.retrieve(question)
        postprocessor.postprocess_nodes(nodes, query_str=question)
        ours = gate.decide({name: results[position] for name, results in own_retrieved.items()}, query=question)
        theirs = postprocessor.last_decision
        rows.append((
            nodes[0].node.node_id, own_retrieved["dense"][position].chunk_ids[0], theirs.action, ours.action,
            [c for c, _ in theirs.passages], [c for c, _ in ours.passages],
        ))  # fmt: skip
    compared = pd.DataFrame(
        rows, columns=["llamaindex_top", "ragcal_top", "llamaindex", "ragcal", "llamaindex_passages", "ragcal_passages"]
    )
    assert (compared["llamaindex_top"] == compared["ragcal_top"]).all()
    assert (compared["llamaindex"] == compared["ragcal"]).all(), compared[compared["llamaindex"] != compared["ragcal"]]
    assert (compared["llamaindex_passages"] == compared["ragcal_passages"]).all()
    assert compared["llamaindex"].value_counts().get("refuse", 0) > 0

    # (c) a gate fitted on ragcal's own index is refused in front of the store, naming both scales
    own_gate = fit_gate(own_table, "threshold", "keep@0.95", signal="dense_top1")
    own_path = save_gate(tmp_path / "own.json", own_gate, rule="keep@0.95", provenance=fastapi_index.config)
    assert config["model_fingerprint"] == fastapi_index.config["model_fingerprint"]
    with pytest.raises(GateFileError, match=r"fitted on ragcal's own index .* returns llamaindex SimpleVectorStore"):
        GatePostprocessor(store=store, gate=own_path)
