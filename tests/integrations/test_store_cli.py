"""``ragcal score --langchain module:function`` and ``fit-gate`` on its table: a real LangChain FAISS store."""

import json
import textwrap

import pandas as pd
import pytest

from ragcal.cli import main
from ragcal.datasets import FASTAPI_QUERIES
from ragcal.integrations.common import StoreGate
from ragcal.score_tables import read_provenance

FACTORY = """
import warnings

from ragcal.datasets import FASTAPI_CORPUS, FASTAPI_EXCLUDE
from ragcal.integrations.langchain import LangChainStore, RagcalEmbeddings, documents_from_chunks
from ragcal.retrieval.index import chunk_corpus

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from langchain_community.vectorstores import FAISS
    from langchain_community.vectorstores.utils import DistanceStrategy

PAGES = ("advanced/response-cookies.md", "tutorial/cookie-params.md", "tutorial/cors.md")


def documents():
    _, chunks, _ = chunk_corpus(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE)
    return documents_from_chunks([chunk for chunk in chunks if chunk.doc_path in PAGES])


def cosine():
    return FAISS.from_documents(documents(), RagcalEmbeddings(), distance_strategy=DistanceStrategy.MAX_INNER_PRODUCT)


def squared_l2():
    return FAISS.from_documents(documents(), RagcalEmbeddings())


def relevance():
    return LangChainStore(squared_l2(), scores="relevance")


def not_a_store():
    return 42
"""


@pytest.fixture
def folder(tmp_path, monkeypatch):
    (tmp_path / "my_langchain_store.py").write_text(textwrap.dedent(FACTORY), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_score_through_a_store_then_fit_a_gate_it_accepts(folder, capsys):
    out = folder / "scores.csv"
    code = main(["score", str(FASTAPI_QUERIES), "--langchain", "my_langchain_store:cosine", "--out", str(out),
                 "--store-depth", "20", "--runs", "runs"])  # fmt: skip
    printed = capsys.readouterr().out
    assert code == 0
    assert "through LangChain FAISS" in printed
    assert "score scale: langchain FAISS similarity_search_with_score (MAX_INNER_PRODUCT)" in printed
    table = pd.read_csv(out)
    assert len(table) == 189 and {"dense_top1", "dense_gap", "dense_top10_mean"} <= set(table.columns)
    assert not {"bm25_top1_raw", "rrf_top1"} & set(table.columns)  # the store gives one ranked list
    provenance = read_provenance(out)
    assert provenance["store_depth"] == 20 and provenance["factory"] == "my_langchain_store:cosine"
    assert provenance["queries_sha256"]
    assert main(["fit-gate", str(out), "--out", "gate.json", "--rule", "keep@0.9"]) == 0
    printed = capsys.readouterr().out
    assert "decide in front of that store with ragcal.integrations.langchain" in printed
    document = json.loads((folder / "gate.json").read_text())
    assert document["provenance"]["score_scale"] == provenance["score_scale"]
    # Certified from the store's own runs: the support of each answer comes from the passages the store returned.
    assert main(["fit-gate", str(out), "--out", "certified.json", "--rule", "risk_guarantee@0.3", "--runs", "runs",
                 "--queries", str(FASTAPI_QUERIES)]) == 0  # fmt: skip
    assert "Learn-then-Test: risk_guarantee@0.3" in capsys.readouterr().out
    assert (folder / "runs" / "dense.run").is_file()
    from my_langchain_store import cosine, relevance

    from ragcal.integrations.langchain import LangChainStore

    assert StoreGate(folder / "gate.json", LangChainStore(cosine())).depth == 20
    with pytest.raises(ValueError, match="relevance_scores"):
        StoreGate(folder / "gate.json", relevance())


def test_distances_a_bad_factory_and_a_corpus_are_refused_in_one_line(folder, capsys):
    def error(*arguments):
        assert main(["score", str(FASTAPI_QUERIES), "--out", "s.csv", *arguments]) == 2
        message = capsys.readouterr().err
        assert message.startswith("ragcal: error: ") and message.count("\n") == 1
        return message

    assert "LangChain FAISS: scores rise down the ranked list" in error("--langchain", "my_langchain_store:squared_l2")
    assert "scores='relevance'" in error("--langchain", "my_langchain_store:squared_l2")
    assert "expected module:function" in error("--langchain", "my_langchain_store")
    assert "cannot import 'no_such_module'" in error("--langchain", "no_such_module:build")
    assert "has no function 'missing'" in error("--langchain", "my_langchain_store:missing")
    assert "LangChainStore needs a LangChain VectorStore" in error("--langchain", "my_langchain_store:not_a_store")
    assert "--corpus cannot be used with --langchain" in error("--langchain", "my_langchain_store:cosine",
                                                               "--corpus", str(folder))  # fmt: skip
    assert "one store at a time" in error("--langchain", "a:b", "--haystack", "c:d")
    assert not (folder / "s.csv").exists()
    assert main(["score", str(FASTAPI_QUERIES), "--langchain", "my_langchain_store:relevance", "--out", "r.csv"]) == 0
    assert "relevance_scores (EUCLIDEAN_DISTANCE)" in read_provenance(folder / "r.csv")["score_scale"]


OTHER_FACTORIES = """
from ragcal.datasets import FASTAPI_CORPUS, FASTAPI_EXCLUDE
from ragcal.retrieval.index import chunk_corpus

PAGES = ("advanced/response-cookies.md", "tutorial/cookie-params.md", "tutorial/cors.md")


def chunks():
    _, every, _ = chunk_corpus(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE)
    return [chunk for chunk in every if chunk.doc_path in PAGES]


def llamaindex_index():
    from llama_index.core import VectorStoreIndex

    from ragcal.integrations.llamaindex import RagcalEmbedding, nodes_from_chunks

    return VectorStoreIndex(nodes_from_chunks(chunks()), embed_model=RagcalEmbedding())


def haystack_retriever_alone():
    from haystack.components.retrievers.in_memory import InMemoryEmbeddingRetriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    return InMemoryEmbeddingRetriever(InMemoryDocumentStore(embedding_similarity_function="cosine"))


def haystack_store():
    from haystack.components.retrievers.in_memory import InMemoryEmbeddingRetriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from ragcal.integrations.haystack import (
        HaystackStore,
        RagcalDocumentEmbedder,
        RagcalTextEmbedder,
        documents_from_chunks,
    )

    store = InMemoryDocumentStore(embedding_similarity_function="cosine")
    store.write_documents(RagcalDocumentEmbedder().run(documents_from_chunks(chunks()))["documents"])
    return HaystackStore(InMemoryEmbeddingRetriever(store), text_embedder=RagcalTextEmbedder())
"""


def test_score_through_llamaindex_and_haystack(tmp_path, monkeypatch, capsys):
    (tmp_path / "other_stores.py").write_text(textwrap.dedent(OTHER_FACTORIES), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    tables = {}
    for framework, spec in (
        ("llamaindex", "other_stores:llamaindex_index"),
        ("haystack", "other_stores:haystack_store"),
    ):
        out = tmp_path / f"{framework}.csv"
        assert (
            main(["score", str(FASTAPI_QUERIES), f"--{framework}", spec, "--out", str(out), "--store-depth", "10"]) == 0
        )
        tables[framework] = pd.read_csv(out)
        assert read_provenance(out)["framework"] == framework
    printed = capsys.readouterr().out
    assert "score scale: llamaindex SimpleVectorStore (cosine)" in printed
    assert "score scale: haystack InMemoryEmbeddingRetriever (cosine, scale_score=False)" in printed
    # The same vectors, the same cosine: the two stores agree question by question.
    assert (tables["llamaindex"]["dense_top1"] - tables["haystack"]["dense_top1"]).abs().max() < 1e-6
    assert (
        main(["score", str(FASTAPI_QUERIES), "--haystack", "other_stores:haystack_retriever_alone", "--out", "x.csv"])
        == 2
    )
    assert "--haystack other_stores:haystack_retriever_alone:" in capsys.readouterr().err
