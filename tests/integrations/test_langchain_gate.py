"""ragcal.integrations.langchain on LangChain's own stores (FAISS, Chroma's embedded client, the in-memory store).

Real LangChain objects throughout, on the bundled FastAPI docs embedded with ragcal's own MiniLM vectors.
"""

import json
import math
import subprocess
import sys
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from doc_snippets import run_quick_start

from ragcal.datasets import FASTAPI_QUERIES
from ragcal.gates import ask, certify_threshold_gate, fit_gate, load_gate, save_gate, support_levels
from ragcal.gates.files import GateFileError
from ragcal.gates.support import support_inputs
from ragcal.integrations.common import Hit, StoreGate, StoreScoreError, score_store
from ragcal.queries import load_queries
from ragcal.scoring import score_table
from ragcal.study.anchoring import tolerance_for
from ragcal.study.notebooks import RESULTS_DIR

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # langchain-community announces its own sunset on import
    from langchain_community.vectorstores import FAISS
    from langchain_community.vectorstores.utils import DistanceStrategy
from langchain_core.embeddings import Embeddings
from langchain_core.runnables import RunnableBranch, RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore

from ragcal.integrations.langchain import (
    GateCompressor,
    GatedRetriever,
    LangChainStore,
    RagcalEmbeddings,
    ScoredRetriever,
    documents_from_chunks,
)

UNRELATED = "What is the boiling point of water at the top of Mount Everest?"
COVERED = "How do I set a cookie on the response?"
PAGES = (
    "advanced/response-cookies.md",
    "tutorial/cors.md",
    "tutorial/background-tasks.md",
    "tutorial/cookie-params.md",
)


@pytest.fixture(scope="module")
def embeddings(fastapi_index):
    return RagcalEmbeddings(embedder=fastapi_index.dense.embedder)


@pytest.fixture(scope="module")
def queries():
    return load_queries(FASTAPI_QUERIES)


@pytest.fixture(scope="module")
def quick_start(tmp_path_factory):
    """The documentation's LangChain quick start, run as written (docs/frameworks-overview.md): names and output."""
    folder = tmp_path_factory.mktemp("quick_start")
    namespace, printed = run_quick_start("langchain", folder)
    return SimpleNamespace(namespace=namespace, printed=printed, folder=folder)


@pytest.fixture(scope="module")
def cosine_store(quick_start):
    """The quick start's FAISS store: inner product on ragcal's normalised vectors, cosine, as ragcal's own index."""
    return quick_start.namespace["store"]


@pytest.fixture(scope="module")
def small_chunks(fastapi_index):
    return [chunk for chunk in fastapi_index.chunks if chunk.doc_path in PAGES]


@pytest.fixture(scope="module")
def fitted(cosine_store, queries, tmp_path_factory):
    """A keep@0.95 threshold gate fitted through the FAISS store, saved with the store's provenance."""
    table, config, retrieved = score_store(queries, LangChainStore(cosine_store))
    gate = fit_gate(table, "threshold", "keep@0.95", signal="dense_top1")
    path = save_gate(tmp_path_factory.mktemp("gate") / "gate.json", gate, rule="keep@0.95", provenance=config)
    return SimpleNamespace(
        table=table, config=config, gate=gate, path=path, store=LangChainStore(cosine_store), retrieved=retrieved
    )


def test_the_store_returns_ragcal_own_cosine_and_the_gate_decides_as_ragcal_ask(fastapi_index, queries, fitted):
    table, config, store_gate, path = fitted.table, fitted.config, fitted.gate, fitted.path
    retrieved = fitted.retrieved
    own = score_table(queries, fastapi_index.retrieve(queries["query"]))
    # Same vectors, same metric, the same number question by question, within the declared tolerance of a cosine
    # (ragcal.study.anchoring.TOLERANCES), not to the bit: the store searches one question at a time (faiss's own
    # inner product) and ragcal's index a batch (a BLAS product), whose kernels sum in another order on some
    # processors (3e-8 apart seen on an AMD EPYC).
    tolerance, _ = tolerance_for("dense_top1")
    np.testing.assert_allclose(table["dense_top1"].to_numpy(), own["dense_top1"].to_numpy(), rtol=0, atol=tolerance)
    np.testing.assert_allclose(
        table["dense_top10_mean"].to_numpy(), own["dense_top10_mean"].to_numpy(), rtol=0, atol=tolerance
    )
    own_gate = fit_gate(own, "threshold", "keep@0.95", signal="dense_top1")
    assert store_gate.threshold == pytest.approx(own_gate.threshold, abs=tolerance)
    assert config["score_scale"] == "langchain FAISS similarity_search_with_score (MAX_INNER_PRODUCT)"
    assert config["model_fingerprint"] == fastapi_index.config["model_fingerprint"]
    # The gate file in front of the store, question by question against `ragcal ask` on ragcal's own index.
    retriever = GatedRetriever(store=fitted.store, gate=path)
    assert retriever.k == 100 == config["store_depth"]
    decisions, _ = ask(own_gate, fastapi_index, queries["query"])
    outcomes = [retriever.decide(question) for question in queries["query"]]
    assert [(outcome["refusal"] is None) for outcome in outcomes] == [decision.answered for decision in decisions]
    for outcome, decision in zip(outcomes, decisions):
        assert [document.id for document in outcome["documents"]] == [chunk_id for chunk_id, _ in decision.passages]
    # Certified through the store: the very threshold make reproduce certified on ragcal's own scores.
    results, gold = support_inputs(queries, retrieved)
    certified, _ = certify_threshold_gate(
        table, "dense_top1", ["risk_guarantee@0.2"], support=support_levels(results, gold, "dense")
    )
    committed = json.loads((RESULTS_DIR / "fastapi" / "gates" / "threshold_risk_guarantee02.json").read_text())
    assert certified.threshold == pytest.approx(committed["gate"]["threshold"], abs=tolerance)


def test_the_quick_start_fits_the_same_gate_and_answers_and_refuses_as_its_page_says(quick_start, fitted):
    assert quick_start.namespace["table"].equals(fitted.table)  # the same store, asked again: the same table
    assert load_gate(quick_start.folder / "gate.json").threshold == fitted.gate.threshold
    answered, refused = quick_start.printed.split("\n", 1)
    action, passages, *message = answered.split()
    assert action == "answer" and int(passages) > 0 and not message
    assert refused.startswith("refuse 0 I searched the store's documents (2,282 passages") and "sourdough" in refused


def test_a_gate_fitted_on_ragcal_own_index_or_another_scale_is_refused(fitted, small_chunks, embeddings, tmp_path):
    config, gate, path = fitted.config, fitted.gate, fitted.path
    own_provenance = {key: value for key, value in config.items() if key not in ("score_scale", "store")}
    own = save_gate(tmp_path / "own.json", gate, provenance=own_provenance)
    l2 = FAISS.from_documents(documents_from_chunks(small_chunks), embeddings)
    with pytest.raises(GateFileError, match="ragcal's own index .* returns langchain FAISS"):
        GatedRetriever(store=LangChainStore(l2, scores="relevance"), gate=own)
    with pytest.raises(
        GateFileError,
        match=r"fitted on the scores of langchain FAISS similarity_search_with_score "
        r"\(MAX_INNER_PRODUCT\), but LangChain FAISS returns .*relevance_scores",
    ):
        GatedRetriever(store=LangChainStore(l2, scores="relevance"), gate=path)
    # ragcal ask's own check refuses the store's gate too: its scale is not the index's.
    with pytest.raises(GateFileError, match="fitted on the scores of langchain FAISS"):
        from ragcal.gates.files import check_provenance

        check_provenance(json.loads(path.read_text())["provenance"], {"model_fingerprint": config["model_fingerprint"]})


def test_faiss_default_distances_are_refused_and_its_relevance_is_another_scale(small_chunks, embeddings, queries):
    l2 = FAISS.from_documents(documents_from_chunks(small_chunks), embeddings)
    with pytest.raises(
        StoreScoreError, match=r"LangChain FAISS: scores rise down the ranked list .*scores='relevance'"
    ):
        score_store(queries.head(3), LangChainStore(l2))
    cosine = FAISS.from_documents(
        documents_from_chunks(small_chunks), embeddings, distance_strategy=DistanceStrategy.MAX_INNER_PRODUCT
    )
    relevance, _, _ = score_store(queries, LangChainStore(l2, scores="relevance"), k=10)
    similarity, _, _ = score_store(queries, LangChainStore(cosine), k=10)
    # FAISS's L2 index returns the squared distance, 2 - 2 cos on unit vectors; LangChain's relevance is 1 - d / sqrt 2.
    cos = similarity["dense_top1"].to_numpy()
    np.testing.assert_allclose(relevance["dense_top1"].to_numpy(), 1 - (2 - 2 * cos) / math.sqrt(2), atol=2e-6)
    # A monotone map of the same scores: a rank rule fitted on either scale makes the same decisions...
    on_relevance = fit_gate(relevance, "threshold", "keep@0.95", signal="dense_top1")
    on_cosine = fit_gate(similarity, "threshold", "keep@0.95", signal="dense_top1")
    assert on_relevance.threshold != pytest.approx(on_cosine.threshold)
    np.testing.assert_array_equal(
        on_relevance.decide_table(relevance)["action"], on_cosine.decide_table(similarity)["action"]
    )
    # ... but one scale's threshold on the other answers differently: why a gate file is bound to its scale.
    moved = on_cosine.decide_table(relevance.assign(dense_top1=relevance["dense_top1"]))["action"]
    assert (moved != on_cosine.decide_table(similarity)["action"]).any()


def test_chroma_cosine_distance_is_refused_and_its_relevance_is_cosine(small_chunks, embeddings, queries):
    import chromadb
    from langchain_chroma import Chroma

    client = chromadb.EphemeralClient(chromadb.config.Settings(anonymized_telemetry=False))
    store = Chroma(
        collection_name="fastapi",
        embedding_function=embeddings,
        client=client,
        collection_metadata={"hnsw:space": "cosine"},
    )
    store.add_documents(documents_from_chunks(small_chunks), ids=[chunk.chunk_id for chunk in small_chunks])
    with pytest.raises(StoreScoreError, match="LangChain Chroma: scores rise down"):
        score_store(queries.head(3), LangChainStore(store, metric="cosine"))
    chroma, config, _ = score_store(queries, LangChainStore(store, scores="relevance", metric="cosine"), k=10)
    assert config["score_scale"] == "langchain Chroma similarity_search_with_relevance_scores (cosine)"
    cosine = FAISS.from_documents(
        documents_from_chunks(small_chunks), embeddings, distance_strategy=DistanceStrategy.MAX_INNER_PRODUCT
    )
    exact, _, _ = score_store(queries, LangChainStore(cosine), k=10)
    # 1 - cosine distance, computed by Chroma in float32 over its HNSW graph: cosine to float32 precision.
    np.testing.assert_allclose(chroma["dense_top1"].to_numpy(), exact["dense_top1"].to_numpy(), atol=1e-5)


class _Constant(Embeddings):
    def embed_documents(self, texts):
        return [[1.0, 0.0, 0.0] for _ in texts]

    def embed_query(self, text):
        return [1.0, 0.0, 0.0]


def test_a_constant_score_and_a_missing_one_are_refused(small_chunks, queries):
    store = InMemoryVectorStore(_Constant())
    store.add_documents(documents_from_chunks(small_chunks[:5]))
    with pytest.raises(StoreScoreError, match=r"LangChain InMemoryVectorStore gave every document of all 4 .* same"):
        score_store(queries.head(4), LangChainStore(store), k=3)
    adapter = LangChainStore(store)
    with pytest.raises(StoreScoreError, match=r"LangChain InMemoryVectorStore returned no score for 1 of 2 .*'b#1'"):
        adapter.result([Hit("a#0", 0.5), Hit("b#1", None)], query="q")
    with pytest.raises(StoreScoreError, match="no score"):
        adapter.result([Hit("a#0", float("nan"))])
    assert adapter.result([]).chunk_ids == ()  # nothing found is a result, not an error


def test_a_chain_routes_on_the_refusal(fitted):
    gate, path = fitted.gate, fitted.path
    retriever = GatedRetriever(store=fitted.store, gate=path)
    answer = RunnableLambda(lambda outcome: "From the docs: " + outcome["documents"][0].page_content[:60])
    chain = retriever.as_decision() | RunnableBranch(
        (lambda outcome: outcome["refusal"] is not None, lambda outcome: "REFUSED: " + outcome["refusal"]["message"]),
        answer,
    )
    refused = chain.invoke(UNRELATED)
    assert refused.startswith("REFUSED: ") and len(refused) > 40
    assert chain.invoke(COVERED).startswith("From the docs: ")
    outcome = retriever.decide(UNRELATED)
    assert outcome["documents"] == [] and outcome["refusal"]["score"] < gate.threshold
    assert outcome["refusal"]["reasons"] == [
        f"dense_top1 {outcome['refusal']['score']:.3f} fails >= {gate.threshold:.3f}"
    ]
    assert retriever.invoke(UNRELATED) == []
    passed = retriever.invoke(COVERED)
    assert passed and all(document.metadata["score"] >= gate.threshold for document in passed)
    assert passed[0].metadata["chunk_id"].startswith("advanced/response-cookies.md#")
    assert {document.metadata["ragcal_action"] for document in passed} == {"answer"}


def test_the_compressor_in_a_contextual_compression_retriever(fitted):
    from langchain_classic.retrievers import ContextualCompressionRetriever

    path = fitted.path
    store = fitted.store
    compressor = GateCompressor(store=store, gate=path)
    retriever = ContextualCompressionRetriever(
        base_compressor=compressor, base_retriever=ScoredRetriever(store=store, k=100)
    )
    assert retriever.invoke(UNRELATED) == []
    assert compressor.last_refusal["message"] and compressor.last_decision.action == "refuse"
    kept = retriever.invoke(COVERED)
    direct = GatedRetriever(store=store, gate=path).invoke(COVERED)
    assert [document.id for document in kept] == [document.id for document in direct]
    assert compressor.last_refusal is None
    bare = store.store.similarity_search(COVERED, k=3)  # documents without their scores
    with pytest.raises(ValueError, match=r"3 of 3 documents carry no metadata\['score'\]"):
        compressor.compress_documents(bare, COVERED)


def test_ragcal_ask_refuses_a_gate_fitted_through_a_store(fitted, fastapi_index):
    with pytest.raises(GateFileError, match="fitted on the scores of langchain FAISS .* ragcal own index"):
        load_gate(fitted.path, index=fastapi_index)


def test_store_gate_needs_a_gate_on_the_store_view(fitted, tmp_path):
    table, config = fitted.table, fitted.config
    bm25 = fit_gate(
        table.assign(bm25_top1_stopwords=table["dense_top1"]), "threshold", "keep@0.9", signal="bm25_top1_stopwords"
    )
    other = save_gate(tmp_path / "bm25.json", bm25, provenance=config)
    with pytest.raises(GateFileError, match=r"reads the view\(s\) \['bm25_stopwords'\], but LangChain FAISS gives one"):
        StoreGate(other, fitted.store)


def test_importing_ragcal_loads_no_framework_and_a_missing_one_names_its_extra():
    frameworks = ("langchain_core", "langchain_community", "llama_index", "haystack", "chromadb")
    code = (
        "import sys, ragcal, ragcal.integrations, ragcal.integrations.common, ragcal.gates, ragcal.retrieval\n"
        "from ragcal import fit_gate, ask, score_table\n"
        f"print([name for name in {frameworks!r} if name in sys.modules])"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
    code = "import sys; sys.modules['langchain_core'] = None\nimport ragcal.integrations.langchain"
    failed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert failed.returncode == 1
    assert "ragcal.integrations.langchain needs LangChain" in failed.stderr
    assert "pip install 'ragcal[langchain]'" in failed.stderr


def test_a_live_log_through_the_store_feeds_monitor(fitted, fastapi_index):
    from ragcal.datasets import FASTAPI_LIVE_QUERIES
    from ragcal.integrations.common import store_score_log
    from ragcal.monitoring import monitor

    live = load_queries(FASTAPI_LIVE_QUERIES)
    log, config = store_score_log(live["query"], fitted.store, ids=live["id"])
    assert list(log.columns[:2]) == ["id", "query"] and "answerable" not in log.columns
    assert config["score_scale"] == fitted.config["score_scale"]
    # The same scores as ragcal's own index gives those questions.
    own = fastapi_index.retrieve(live["query"])["dense"]
    np.testing.assert_array_equal(log["dense_top1"].to_numpy(), [result.scores[0] for result in own])
    report = monitor(fitted.gate, log, fitted.table, min_rows=20)
    assert (report.n_live, report.n_calibration) == (44, 189)
    row = report.signals.set_index("signal").loc["dense_top1"]
    assert row["live_median"] == pytest.approx(log["dense_top1"].median())
    with pytest.raises(ValueError, match="2 ids for 3 questions"):
        store_score_log(["a", "b", "c"], fitted.store, ids=["x", "y"])


def chroma_store(name, space, chunks, embeddings):
    import chromadb
    from langchain_chroma import Chroma

    client = chromadb.EphemeralClient(chromadb.config.Settings(anonymized_telemetry=False))
    store = Chroma(collection_name=name, embedding_function=embeddings, client=client,
                   collection_metadata={"hnsw:space": space})  # fmt: skip
    store.add_documents(documents_from_chunks(chunks), ids=[chunk.chunk_id for chunk in chunks])
    return store, client.get_collection(name)


def test_a_chroma_store_says_its_space_or_is_refused(small_chunks, embeddings, queries, tmp_path):
    cosine, cosine_collection = chroma_store("docs-cosine", "cosine", small_chunks, embeddings)
    l2, l2_collection = chroma_store("docs-l2", "l2", small_chunks, embeddings)
    # LangChain's Chroma keeps its collection private: without metric= or collection=, the scale is unknown.
    with pytest.raises(ValueError, match="does not make it public.*Pass metric=.*collection=client.get_collection"):
        LangChainStore(cosine, scores="relevance")
    # The collection's public configuration says its space; a metric that contradicts it is refused.
    assert LangChainStore(cosine, scores="relevance", collection=cosine_collection).score_scale.endswith("(cosine)")
    assert LangChainStore(l2, scores="relevance", collection=l2_collection).score_scale.endswith("(l2)")
    # The collection also says how many documents it holds (recorded with the store's contents).
    assert LangChainStore(l2, scores="relevance", collection=l2_collection).document_count() == len(small_chunks)
    assert LangChainStore(l2, scores="relevance", metric="l2").document_count() is None  # Chroma alone does not say
    with pytest.raises(ValueError, match="metric='cosine', but the Chroma collection's space is 'l2'"):
        LangChainStore(l2, scores="relevance", metric="cosine", collection=l2_collection)
    with pytest.raises(ValueError, match="'angular' is none of cosine, l2, ip"):
        LangChainStore(l2, scores="relevance", metric="angular")
    # The case that fooled a gate: keep@0.95 fitted through the cosine collection, put in front of the L2 one.
    table, config, _ = score_store(queries, LangChainStore(cosine, scores="relevance", collection=cosine_collection), k=10)
    gate = fit_gate(table, "threshold", "keep@0.95", signal="dense_top1")
    path = save_gate(tmp_path / "gate.json", gate, rule="keep@0.95", provenance=config)
    with pytest.raises(GateFileError, match=r"fitted on the scores of langchain Chroma .*\(cosine\), but .* \(l2\)"):
        GatedRetriever(store=LangChainStore(l2, scores="relevance", collection=l2_collection), gate=path)
    GatedRetriever(store=LangChainStore(cosine, scores="relevance", metric="cosine"), gate=path)  # the same store: fine


COOKING = [
    "Bloom the coffee grounds for thirty seconds before pressing the French press plunger.",
    "A sourdough starter needs feeding with equal weights of flour and water every day.",
    "Sear the steak in a very hot cast-iron pan, then rest it for five minutes.",
    "Blanch green beans in salted boiling water, then shock them in ice water.",
    "Caramelise onions slowly over low heat for forty minutes, stirring now and then.",
] * 4


def test_a_gate_in_front_of_a_store_with_other_contents_is_refused_or_warns(fitted, embeddings):
    from langchain_core.documents import Document

    from ragcal.gates.files import GateWarning

    # Twenty cooking notes in a store of the same kind, metric and model: the score scale alone cannot tell them.
    cooking = FAISS.from_documents(
        [Document(page_content=f"{text} (recipe {n})", metadata={"chunk_id": f"recipe{n}.md#0"})
         for n, text in enumerate(COOKING)],
        embeddings, distance_strategy=DistanceStrategy.MAX_INNER_PRODUCT,
    )  # fmt: skip
    with pytest.raises(GateFileError, match=r"holds other contents than the store this gate was fitted through: .* 0% "
                                            r"are the same .*; it holds 20 documents, that store held 2,282\. "
                                            r".*contents='warn'"):  # fmt: skip
        GatedRetriever(store=LangChainStore(cooking), gate=fitted.path)
    # The documented switch: bind the gate with contents="warn", and it decides (and says why it is unsure).
    with pytest.warns(GateWarning, match="holds other contents"):
        bound = StoreGate(fitted.path, LangChainStore(cooking), contents="warn")
    assert bound.contents_overlap == 0.0
    retriever = GatedRetriever(store=LangChainStore(cooking), gate=bound)
    assert retriever.decide("How do I use a French press?")["decision"].action in {"answer", "hedge", "refuse"}
    # The very store it was fitted through: every probe finds the same documents.
    assert StoreGate(fitted.path, fitted.store).contents_overlap == 1.0
    recorded = fitted.config["store_contents"]
    assert len(recorded["questions"]) == 8 and recorded["depth"] == 5 and recorded["count"] == 2282
    assert all(len(documents) == 5 for documents in recorded["documents"])
    with pytest.raises(ValueError, match="'contents' parameter of StoreGate must be one of 'refuse', 'warn'"):
        StoreGate(fitted.path, fitted.store, contents="ignore")


def test_a_store_that_grew_keeps_its_gate_and_says_how_much_it_grew(fitted, fastapi_index, embeddings):
    from langchain_core.documents import Document

    from ragcal.gates.files import GateWarning

    # The same documents and three cooking notes: the probes find the same top documents, the count differs.
    grown = FAISS.from_documents(
        documents_from_chunks(fastapi_index.chunks)
        + [Document(page_content=text, id=f"note{n}") for n, text in enumerate(COOKING[:3])],
        embeddings, distance_strategy=DistanceStrategy.MAX_INNER_PRODUCT,
    )  # fmt: skip
    with pytest.warns(GateWarning, match=r"holds 2,285 documents, the store this gate was fitted through held 2,282; "
                                         r"their top documents .* agree \(93%\), so the gate is used"):  # fmt: skip
        bound = StoreGate(fitted.path, LangChainStore(grown))
    assert bound.contents_overlap == pytest.approx(0.93, abs=0.005)  # a note reaches an unrelated probe's top 5
    # In memory: the store's own dict is its count.
    memory = InMemoryVectorStore(embeddings)
    memory.add_documents([Document(page_content=text) for text in COOKING[:3]])
    assert LangChainStore(memory).document_count() == 3


def test_a_gate_file_without_a_contents_record_warns_that_it_cannot_check(fitted, tmp_path):
    from ragcal.gates.files import GateWarning

    document = json.loads(fitted.path.read_text())
    del document["provenance"]["store_contents"]
    old = tmp_path / "old_gate.json"
    old.write_text(json.dumps(document))
    with pytest.warns(GateWarning, match="does not record what its store held"):
        assert StoreGate(old, fitted.store).contents_overlap is None
    # A record edited by hand: one line that names the file and the field.
    for broken in ({"questions": "q"}, {**fitted.config["store_contents"], "documents": [[1]] * 8},
                   {**fitted.config["store_contents"], "depth": 0},
                   {**fitted.config["store_contents"], "count": "many"}):  # fmt: skip
        document["provenance"]["store_contents"] = broken
        old.write_text(json.dumps(document))
        with pytest.raises(GateFileError, match=r"old_gate\.json: field 'provenance.store_contents' must hold"):
            StoreGate(old, fitted.store)


def test_a_refusal_through_the_store_reads_as_well_as_ragcal_ask(fitted, fastapi_index):
    decisions, _ = ask(fitted.gate, fastapi_index, [UNRELATED])
    asked = decisions[0].message.splitlines()
    # Given only the gate: worded from the 100 documents the store returned (their page and heading metadata).
    bare = GatedRetriever(store=fitted.store, gate=fitted.path).decide(UNRELATED)["refusal"]["message"].splitlines()
    pages = {document.metadata["page"] for document in fitted.store.store.similarity_search(UNRELATED, k=100)}
    assert bare[0] == (
        f"I searched the LangChain FAISS store: none of the 100 passages it returned (from {len(pages)} pages) "
        f"answers “{UNRELATED}”."
    )
    assert bare[1:5] == asked[1:5]  # the same closest pages under the same heading paths
    assert bare[5].startswith("Next step: ")  # its terms come from what was returned, not from the whole corpus
    # Given what the store holds (the chunks it was built from), the same refusal as `ragcal ask`'s.
    described = StoreGate(fitted.path, fitted.store, corpus=fastapi_index.chunks)
    message = GatedRetriever(store=fitted.store, gate=described).decide(UNRELATED)["refusal"]["message"]
    assert message.splitlines()[1:] == asked[1:]  # the closest pages, their headings, the next step
    assert "passages from 153 pages" in message and "›" in message and "Related, but not an answer" in message


def test_documents_that_name_no_page_give_a_refusal_that_names_their_ids(embeddings, small_chunks, tmp_path):
    from langchain_core.documents import Document

    store = InMemoryVectorStore(embeddings)
    store.add_documents([Document(page_content=chunk.text) for chunk in small_chunks],
                        ids=[f"doc-{n}" for n in range(len(small_chunks))])  # fmt: skip
    bound = LangChainStore(store)
    queries = load_queries(FASTAPI_QUERIES)
    table, config, _ = score_store(queries, bound, k=10)
    path = save_gate(tmp_path / "gate.json", fit_gate(table, "threshold", "keep@0.95", signal="dense_top1"),
                     rule="keep@0.95", provenance=config)  # fmt: skip
    message = GatedRetriever(store=bound, gate=path).decide(UNRELATED)["refusal"]["message"]
    assert message.startswith("I looked at 10 passages (dense)") and "\n- doc-" in message
