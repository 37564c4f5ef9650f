"""ragcal's gate inside Haystack: real components, a real in-memory document store, a real Pipeline and router.

Most tests use the chunks of eight FastAPI pages and the labeled questions about them (plus the unanswerable
ones); one slow test runs the documentation's quick start, on the whole FastAPI docs and labeled set, and checks it.
"""

import json
import re
import subprocess
import sys

import numpy as np
import pytest
from doc_snippets import run_quick_start
from haystack import Document, Pipeline
from haystack.components.builders import PromptBuilder
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever, InMemoryEmbeddingRetriever
from haystack.components.routers import ConditionalRouter
from haystack.document_stores.in_memory import InMemoryDocumentStore

from ragcal.datasets import FASTAPI_CORPUS, FASTAPI_EXCLUDE, FASTAPI_QUERIES
from ragcal.embedding import load_embedder
from ragcal.gates import fit_gate, load_gate, save_gate
from ragcal.gates.files import GateFileError
from ragcal.integrations.common import Hit, StoreScoreError, score_store
from ragcal.integrations.haystack import (
    GateComponent,
    HaystackStore,
    RagcalDocumentEmbedder,
    RagcalTextEmbedder,
    documents_from_chunks,
)
from ragcal.queries import load_queries
from ragcal.retrieval.index import chunk_corpus

PAGES = (
    "advanced/response-cookies.md",
    "tutorial/cors.md",
    "tutorial/background-tasks.md",
    "tutorial/request-files.md",
    "tutorial/index.md",
    "tutorial/security/index.md",
    "tutorial/security/get-current-user.md",
    "deployment/docker.md",
)
COSINE_SCALE = "haystack InMemoryEmbeddingRetriever (cosine, scale_score=False)"
SCALED_SCALE = "haystack InMemoryEmbeddingRetriever (cosine, scale_score=True)"


@pytest.fixture(scope="module")
def all_chunks():
    return chunk_corpus(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE)[1]


@pytest.fixture(scope="module")
def chunks(all_chunks):
    return [chunk for chunk in all_chunks if chunk.doc_path in PAGES]


@pytest.fixture(scope="module")
def queries():
    """The labeled questions whose gold pages are all among PAGES, and every unanswerable one."""
    table = load_queries(FASTAPI_QUERIES)
    covered = table["gold"].map(lambda gold: bool(gold) and set(gold) <= set(PAGES))
    return table[covered | ~table["answerable"]].reset_index(drop=True)


@pytest.fixture(scope="module")
def text_embedder():
    return RagcalTextEmbedder()


@pytest.fixture(scope="module")
def embedded(chunks):
    return RagcalDocumentEmbedder().run(documents=documents_from_chunks(chunks))["documents"]


@pytest.fixture(scope="module")
def document_store(embedded):
    store = InMemoryDocumentStore(embedding_similarity_function="cosine")
    store.write_documents(embedded)
    return store


@pytest.fixture(scope="module")
def adapter(document_store, text_embedder):
    return HaystackStore(InMemoryEmbeddingRetriever(document_store), text_embedder=text_embedder)


@pytest.fixture(scope="module")
def fitted(adapter, queries, tmp_path_factory):
    """A keep@0.95 threshold on dense_top1, fitted on the scores the Haystack retriever returns, saved as a file."""
    table, config, _ = score_store(queries, adapter)
    gate = fit_gate(table, "threshold", "keep@0.95", signal="dense_top1")
    path = save_gate(tmp_path_factory.mktemp("gate") / "gate.json", gate, rule="keep@0.95", provenance=config)
    return path, gate, table


def test_the_stores_contents_are_recorded_with_its_document_count(fitted, adapter, chunks):
    path, _, _ = fitted
    recorded = json.loads(path.read_text())["provenance"]["store_contents"]
    assert recorded["count"] == adapter.document_count() == len(chunks)  # the store's count_documents()


def test_embedders_give_ragcal_vectors_with_haystack_inputs_and_outputs(chunks, text_embedder):
    ragcal_embedder = load_embedder()
    question = "How do I allow requests from my React app on another port?"
    embedding = text_embedder.run(text=question)["embedding"]
    assert isinstance(embedding, list) and embedding == ragcal_embedder.encode([question])[0].tolist()
    assert np.linalg.norm(embedding) == pytest.approx(1.0, abs=1e-6)
    originals = documents_from_chunks(chunks[:3])
    embedded = RagcalDocumentEmbedder().run(documents=originals)["documents"]
    expected = ragcal_embedder.encode([chunk.text for chunk in chunks[:3]])
    assert [document.embedding for document in embedded] == expected.tolist()
    assert [document.id for document in embedded] == [chunk.chunk_id for chunk in chunks[:3]]
    assert all(document.embedding is None for document in originals)  # copies; the inputs are left alone
    assert RagcalDocumentEmbedder().run(documents=[]) == {"documents": []}
    assert (text_embedder.name, text_embedder.fingerprint) == (ragcal_embedder.name, ragcal_embedder.fingerprint)
    rebuilt = RagcalTextEmbedder.from_dict(text_embedder.to_dict())
    assert rebuilt.fingerprint == text_embedder.fingerprint and rebuilt.to_dict() == text_embedder.to_dict()
    with pytest.raises(TypeError, match="expects a string"):
        text_embedder.run(text=["a list"])
    with pytest.raises(ValueError, match="1 of 1 documents have no text content"):
        RagcalDocumentEmbedder().run(documents=[Document(id="x", content=None)])


def test_documents_from_chunks_carry_the_chunk_id(chunks):
    documents = documents_from_chunks(chunks[:2], id_key="source_id")
    assert [document.id for document in documents] == [chunk.chunk_id for chunk in chunks[:2]]
    assert [document.meta["source_id"] for document in documents] == [chunk.chunk_id for chunk in chunks[:2]]
    assert [document.content for document in documents] == [chunk.text for chunk in chunks[:2]]
    assert documents[0].meta["page"] == chunks[0].doc_path


def test_store_reads_the_score_scale_from_public_settings(document_store, text_embedder, adapter):
    assert adapter.score_scale == COSINE_SCALE
    assert adapter.store_label == "Haystack InMemoryEmbeddingRetriever on InMemoryDocumentStore"
    assert adapter.config["model_fingerprint"] == text_embedder.fingerprint
    assert adapter.config["framework"] == "haystack"
    scaled = HaystackStore(InMemoryEmbeddingRetriever(document_store, scale_score=True), text_embedder=text_embedder)
    assert scaled.score_scale == SCALED_SCALE
    dot = InMemoryDocumentStore(embedding_similarity_function="dot_product")
    dot_adapter = HaystackStore(InMemoryEmbeddingRetriever(dot), text_embedder=text_embedder)
    assert dot_adapter.score_scale == "haystack InMemoryEmbeddingRetriever (dot_product, scale_score=False)"
    bm25 = HaystackStore(InMemoryBM25Retriever(document_store))
    assert bm25.score_scale == "haystack InMemoryBM25Retriever (BM25L, scale_score=False)"
    assert bm25.model is None and bm25.model_fingerprint is None


def test_hits_are_the_cosines_of_ragcal_vectors_and_scale_score_maps_them_to_half_cosine_plus_half(
    adapter, document_store, text_embedder, embedded
):
    question = "How do I read a file that the client uploads?"
    hits = adapter.hits(question, 5)
    query_vector = np.array(text_embedder.run(text=question)["embedding"])
    vectors = {document.id: np.array(document.embedding) for document in embedded}
    cosines = sorted((float(query_vector @ vector), chunk_id) for chunk_id, vector in vectors.items())[::-1][:5]
    assert [hit.chunk_id for hit in hits] == [chunk_id for _, chunk_id in cosines]
    np.testing.assert_allclose([hit.score for hit in hits], [cosine for cosine, _ in cosines], atol=1e-6)
    scaled = HaystackStore(InMemoryEmbeddingRetriever(document_store, scale_score=True), text_embedder=text_embedder)
    scaled_hits = scaled.hits(question, 5)
    assert [hit.chunk_id for hit in scaled_hits] == [hit.chunk_id for hit in hits]
    np.testing.assert_allclose([hit.score for hit in scaled_hits], [(hit.score + 1) / 2 for hit in hits], atol=1e-12)


def test_bm25_retriever_takes_the_question_text(document_store):
    bm25 = HaystackStore(InMemoryBM25Retriever(document_store))
    hits = bm25.hits("upload files with UploadFile", 3)
    assert len(hits) == 3 and hits[0].chunk_id.startswith("tutorial/request-files.md#")
    assert hits[0].score >= hits[1].score >= hits[2].score > 0


def test_store_refuses_what_it_cannot_calibrate(document_store, adapter, chunks):
    with pytest.raises(TypeError, match="needs the text_embedder"):
        HaystackStore(InMemoryEmbeddingRetriever(document_store))
    with pytest.raises(TypeError, match="HaystackStore needs a Haystack retriever component"):
        HaystackStore(document_store)
    anonymous = Document(content="a page with no chunk id")  # Haystack gives it a hash of its content as id
    with pytest.raises(ValueError, match=r"neither meta\['chunk_id'\] nor an id of its own"):
        adapter.chunk_id(anonymous)
    with pytest.raises(
        StoreScoreError,
        match="Haystack InMemoryEmbeddingRetriever on InMemoryDocumentStore returned no score for 1 of 2 documents",
    ):
        adapter.result([Hit("a.md#0", 0.5), Hit("a.md#1", None)])
    with pytest.raises(StoreScoreError, match="distances.*embedding_similarity_function='cosine'"):
        adapter.result([Hit("a.md#0", 0.2), Hit("a.md#1", 0.7)])


def test_gate_component_refuses_documents_without_scores(adapter, fitted, document_store):
    """Documents straight from the store (a filter, not a search) carry no score: the gate refuses to guess."""
    gate = GateComponent(fitted[0], adapter)
    unscored = document_store.filter_documents(filters={"field": "meta.page", "operator": "==", "value": PAGES[1]})
    assert unscored and all(document.score is None for document in unscored)
    with pytest.raises(StoreScoreError, match=f"returned no score for {len(unscored)} of {len(unscored)} documents"):
        gate.run(query="How do I enable CORS?", documents=unscored)


def _pipeline(adapter, gate_path) -> Pipeline:
    """question -> text embedder -> retriever -> gate -> router: a prompt when it answers, the message when not."""
    gate = GateComponent(gate_path, adapter)
    routes = [
        {"condition": "{{ refusal is none }}", "output": "{{ query }}", "output_name": "answer", "output_type": str},
        {
            "condition": "{{ refusal is not none }}",
            "output": "{{ refusal['message'] }}",
            "output_name": "refusal",
            "output_type": str,
        },
    ]
    template = "{% for document in documents %}{{ document.meta['chunk_id'] }}\n{% endfor %}Question: {{ query }}"
    pipeline = Pipeline()
    # A component belongs to one pipeline: a new one, over the same loaded model, for each pipeline
    pipeline.add_component("text_embedder", RagcalTextEmbedder(embedder=adapter.text_embedder.embedder))
    pipeline.add_component("retriever", InMemoryEmbeddingRetriever(adapter.retriever.document_store, top_k=gate.depth))
    pipeline.add_component("gate", gate)
    pipeline.add_component("router", ConditionalRouter(routes))
    pipeline.add_component("prompt", PromptBuilder(template, required_variables=["documents", "query"]))
    pipeline.connect("text_embedder.embedding", "retriever.query_embedding")
    pipeline.connect("retriever.documents", "gate.documents")
    pipeline.connect("gate.refusal", "router.refusal")
    pipeline.connect("router.answer", "prompt.query")
    pipeline.connect("gate.documents", "prompt.documents")
    return pipeline


def _route(pipeline, question) -> dict:
    result = pipeline.run(
        {"text_embedder": {"text": question}, "gate": {"query": question}, "router": {"query": question}},
        include_outputs_from={"gate"},
    )
    return result


def test_pipeline_routes_each_question_as_ragcal_decides(adapter, fitted, queries):
    path, gate, table = fitted
    expected = gate.decide_table(table)["action"].tolist()
    assert "refuse" in expected and "answer" in expected  # both branches are taken on this set
    pipeline = _pipeline(adapter, path)
    for question, action in zip(queries["query"], expected):
        result = _route(pipeline, question)
        passed = result["gate"]["documents"]
        if action == "refuse":
            assert "prompt" not in result and passed == []
            refusal = result["gate"]["refusal"]
            assert result["router"]["refusal"] == refusal["message"] and refusal["message"]
            assert refusal["reasons"] and refusal["score"] < gate.threshold
            # Worded from the documents the store returned: their pages and heading paths (documents_from_chunks).
            assert refusal["message"].startswith(f"I searched the {adapter.store_label} store: none of the ")
            assert " › " in refusal["message"].splitlines()[2]
        else:
            assert result["gate"]["refusal"] is None and "refusal" not in result.get("router", {})
            assert passed and {document.meta["ragcal_action"] for document in passed} == {action}
            prompt = result["prompt"]["prompt"]
            assert prompt.startswith(passed[0].meta["chunk_id"]) and prompt.endswith(f"Question: {question}")
            scores = [document.score for document in passed]
            assert scores == sorted(scores, reverse=True) and scores[-1] >= gate.threshold


def test_gate_fitted_on_one_scale_is_refused_on_another(fitted, document_store, text_embedder, tmp_path):
    path, gate, _ = fitted
    scaled = HaystackStore(InMemoryEmbeddingRetriever(document_store, scale_score=True), text_embedder=text_embedder)
    both = f"fitted on the scores of {re.escape(COSINE_SCALE)}.*returns {re.escape(SCALED_SCALE)}"
    with pytest.raises(GateFileError, match=both) as error:
        GateComponent(path, scaled)
    assert "fit the gate again" in str(error.value)
    own_index = save_gate(tmp_path / "own.json", gate, rule="keep@0.95", provenance={"model_fingerprint": "x"})
    with pytest.raises(GateFileError, match="fitted on ragcal's own index"):
        GateComponent(own_index, HaystackStore(InMemoryEmbeddingRetriever(document_store), text_embedder=text_embedder))
    with pytest.raises(TypeError, match="needs a HaystackStore"):
        GateComponent(path, InMemoryEmbeddingRetriever(document_store))


def test_gate_component_and_pipeline_serialize(adapter, fitted):
    path = fitted[0]
    component = GateComponent(path, adapter)
    data = component.to_dict()
    assert data["type"] == "ragcal.integrations.haystack.GateComponent"
    assert data["init_parameters"]["gate"] == str(path)
    json.dumps(data)  # plain JSON: a YAML pipeline file can hold it
    rebuilt = GateComponent.from_dict(data)
    assert rebuilt.store.score_scale == adapter.score_scale and rebuilt.depth == component.depth
    assert rebuilt.to_dict() == data
    hits = adapter.hits("How do I enable CORS?", component.depth)
    documents = [hit.item for hit in hits]
    assert rebuilt.run(query="How do I enable CORS?", documents=documents) == component.run(
        query="How do I enable CORS?", documents=documents
    )
    pipeline_data = _pipeline(adapter, path).to_dict()
    loaded = Pipeline.from_dict(pipeline_data, allowed_modules=["ragcal.*"])
    assert loaded.to_dict() == pipeline_data


def test_import_error_names_the_extra():
    script = "import sys; sys.modules['haystack'] = None; import ragcal.integrations.haystack"
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert completed.returncode == 1
    assert "ragcal.integrations.haystack needs Haystack" in completed.stderr
    assert "pip install 'ragcal[haystack]'" in completed.stderr


@pytest.mark.slow
def test_the_quick_start_scores_the_whole_fastapi_docs_as_ragcal_and_decides_as_ragcal(fastapi_index, tmp_path):
    """The documentation's Haystack quick start, run as written (docs/frameworks-overview.md), then checked.

    Same vectors, cosine, scale_score=False: ragcal's own dense_top1 and decisions, question by question.
    """
    from ragcal.scoring import score_table

    namespace, printed = run_quick_start("haystack", tmp_path)
    document_store, adapter, table = namespace["store"], namespace["adapter"], namespace["table"]
    # What the page says it prints: the cookie question answered with its passages, the bread one refused.
    answered, refused = printed.split("\n", 1)
    assert int(answered) > 0  # passages, and no refusal message
    assert refused.startswith("0 I searched the store's documents (2,282 passages") and "sourdough" in refused

    queries = load_queries(FASTAPI_QUERIES, corpus_paths=fastapi_index.doc_paths)
    own = score_table(queries, fastapi_index.retrieve(queries["query"]))
    assert list(table["id"]) == list(own["id"])
    np.testing.assert_allclose(table["dense_top1"], own["dense_top1"], atol=1e-5)
    path = tmp_path / "gate.json"  # written by the quick start
    gate = load_gate(path)
    own_gate = fit_gate(own, "threshold", "keep@0.95", signal="dense_top1")
    assert gate.threshold == pytest.approx(own_gate.threshold, abs=1e-5)
    component = GateComponent(path, adapter)
    own_actions = own_gate.decide_table(own)["action"]
    # Every third question through the component (the scores above are compared on all of them): both actions occur.
    assert {"answer", "refuse"} <= set(own_actions.iloc[::3])
    for question, own_action in zip(queries["query"].iloc[::3], own_actions.iloc[::3]):
        documents = [hit.item for hit in adapter.hits(question, component.depth)]
        outputs = component.run(query=question, documents=documents)
        action = "refuse" if outputs["refusal"] is not None else outputs["documents"][0].meta["ragcal_action"]
        assert action == own_action, question

    scaled_retriever = InMemoryEmbeddingRetriever(document_store, scale_score=True)
    scaled = HaystackStore(scaled_retriever, text_embedder=RagcalTextEmbedder())
    some = queries.iloc[::6].reset_index(drop=True)  # every sixth question: the map is exact, the test is slow
    scaled_table, _, _ = score_store(some, scaled)
    np.testing.assert_allclose(scaled_table["dense_top1"], (table["dense_top1"].iloc[::6] + 1) / 2, atol=1e-12)
    with pytest.raises(GateFileError, match=f"{re.escape(COSINE_SCALE)}.*{re.escape(SCALED_SCALE)}"):
        GateComponent(path, scaled)
