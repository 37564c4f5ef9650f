"""A calibrated gate inside LangChain, on LangChain's own vector stores (``pip install 'ragcal[langchain]'``).

Three pieces, each a LangChain class:

- :class:`LangChainStore` reads a LangChain ``VectorStore`` (FAISS, Chroma, any
  other) as a ragcal retriever, so a labeled set is scored, and a gate fitted
  and certified, on the scores that store returns (:func:`score_store`,
  or ``ragcal score queries.csv --langchain module:factory``). A store whose
  scores rise down the list (FAISS's default squared L2 distance, Chroma's
  distances) is refused with what to do: read ``scores="relevance"`` (the
  store's own ``similarity_search_with_relevance_scores``) or build it with a
  similarity metric.
- :class:`GatedRetriever`, a ``BaseRetriever``: the documents the gate passes
  on, or none on refusal; :meth:`GatedRetriever.decide` (and the runnable
  :meth:`GatedRetriever.as_decision`) also gives the refusal, a dict with
  ``message``, ``reasons`` and ``score``, for a ``RunnableBranch`` to route on.
- :class:`GateCompressor`, a ``BaseDocumentCompressor`` for
  ``ContextualCompressionRetriever``: over :class:`ScoredRetriever`, which keeps
  each document's store score in its metadata.

Every document needs its chunk id (``<page>#<n>``, the ids of the labeled
set's gold pages) in ``metadata[id_key]`` or as its ``id``.
:class:`RagcalEmbeddings` puts ragcal's own embedder (MiniLM by default) behind
LangChain's ``Embeddings``, and :func:`documents_from_chunks` turns ragcal
chunks into documents with those ids.

::

    store = FAISS.from_documents(documents_from_chunks(chunks), RagcalEmbeddings(),
                                 distance_strategy=DistanceStrategy.MAX_INNER_PRODUCT)
    adapter = LangChainStore(store)
    table, config, _ = score_store(queries, adapter)   # then fit and certify, save_gate(..., provenance=config)
    retriever = GatedRetriever(store=adapter, gate="gate.json")
"""

from __future__ import annotations

from .common import require

require("langchain")

import warnings  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import Any  # noqa: E402

from langchain_core.callbacks import CallbackManagerForRetrieverRun  # noqa: E402
from langchain_core.documents import BaseDocumentCompressor, Document  # noqa: E402
from langchain_core.embeddings import Embeddings  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langchain_core.runnables import RunnableLambda  # noqa: E402
from pydantic import ConfigDict, PrivateAttr  # noqa: E402

from .common import Hit, StoreGate, StoreRetriever, gate_metadata, ragcal_embedder, refusal_of, score_store  # noqa: E402

__all__ = [
    "RagcalEmbeddings",
    "documents_from_chunks",
    "LangChainStore",
    "ScoredRetriever",
    "GatedRetriever",
    "GateCompressor",
    "score_store",
]

SCORES = ("raw", "relevance")


class RagcalEmbeddings(Embeddings):
    """ragcal's embedder (``load_embedder(model)``; MiniLM by default) as LangChain ``Embeddings``.

    The vectors are the very ones ragcal's own index holds (L2-normalised,
    through ragcal's embedding cache), so a store built with them and an inner
    product metric returns ragcal's cosine scores.
    """

    def __init__(self, model: str | None = None, *, embedder=None, cache_dir=None, use_cache: bool = True):
        self.embedder = ragcal_embedder(model, embedder=embedder, cache_dir=cache_dir, use_cache=use_cache)

    @property
    def name(self) -> str:
        from ..embedding.protocol import embedder_name

        return embedder_name(self.embedder)

    @property
    def fingerprint(self) -> str:
        return self.embedder.fingerprint

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embedder.encode(list(texts)).tolist() if texts else []

    def embed_query(self, text: str) -> list[float]:
        return self.embedder.encode([text])[0].tolist()


def documents_from_chunks(chunks, *, id_key: str = "chunk_id") -> list[Document]:
    """ragcal chunks as LangChain documents: the chunk's text, its id in ``metadata[id_key]`` and as ``id``."""
    return [
        Document(
            page_content=chunk.text,
            metadata={id_key: chunk.chunk_id, "page": chunk.doc_path, "heading": " > ".join(chunk.heading_path)},
            id=chunk.chunk_id,
        )
        for chunk in chunks
    ]


class LangChainStore(StoreRetriever):
    """A LangChain ``VectorStore`` as a ragcal retriever, on the scores the store returns.

    Parameters
    ----------
    store : langchain_core.vectorstores.VectorStore
    scores : {"raw", "relevance"}, default="raw"
        ``"raw"``: ``similarity_search_with_score``, the store's own number
        (a distance for FAISS by default and for Chroma, which are refused);
        ``"relevance"``: ``similarity_search_with_relevance_scores``, the
        store's conversion to a similarity.
    id_key : str, default="chunk_id"
        Metadata key of each document's chunk id; the document's ``id`` when absent.
    metric : str, default=None
        The store's metric when it does not say; part of the score scale a
        gate is checked against. FAISS's ``distance_strategy`` is read from
        the store. A Chroma store's metric is its collection's space, which
        LangChain's ``Chroma`` does not make public: pass ``metric=`` or
        ``collection=``; without either, a Chroma store is refused, because
        a gate fitted on a cosine collection is wrong on an L2 one.
    collection : chromadb.Collection, default=None
        For a Chroma store: its collection (``client.get_collection(name)``),
        whose space is read from its public ``configuration`` (or its
        ``hnsw:space`` metadata).
    search_kwargs : dict, default=None
        Passed to every search (a metadata ``filter``, ...).
    name : str, default="dense"
    """

    framework = "langchain"

    def __init__(
        self,
        store,
        *,
        scores: str = "raw",
        id_key: str = "chunk_id",
        metric: str | None = None,
        collection=None,
        search_kwargs: dict | None = None,
        name: str = "dense",
    ):
        from .._params import check_choice

        check_choice(scores, "scores", "LangChainStore", SCORES)
        if not hasattr(store, "similarity_search_with_score"):
            raise TypeError(
                f"LangChainStore needs a LangChain VectorStore (similarity_search_with_score); got "
                f"{type(store).__name__}"
            )
        self.store = store
        self.collection = collection
        self.scores = scores
        self.id_key = id_key
        self.search_kwargs = dict(search_kwargs or {})
        self._said_out_of_range = False
        kind = type(store).__name__
        strategy = getattr(store, "distance_strategy", None)
        metric = metric or (getattr(strategy, "value", None) or (str(strategy) if strategy is not None else None))
        if type(store).__module__.startswith("langchain_chroma"):
            metric = _chroma_metric(metric, collection)
        method = "similarity_search_with_score" if scores == "raw" else "similarity_search_with_relevance_scores"
        super().__init__(
            store_label=f"LangChain {kind}",
            score_scale=f"langchain {kind} {method}" + (f" ({metric})" if metric else ""),
            embedding=getattr(store, "embeddings", None),
            name=name,
        )

    def distance_advice(self) -> str:
        if self.scores == "raw":
            return (
                "Pass scores='relevance' to calibrate the store's similarity_search_with_relevance_scores, or build "
                "the store with a similarity metric (FAISS: distance_strategy=DistanceStrategy.MAX_INNER_PRODUCT on "
                "normalised embeddings is cosine)."
            )
        return "The store's relevance function does not turn its distances into similarities: give it one."

    def chunk_id(self, document) -> str:
        """The document's chunk id: ``metadata[id_key]``, else its ``id``."""
        return self.chunk_id_from(document.metadata, getattr(document, "id", None), document.page_content)

    def document_count(self) -> int | None:
        """How many documents the store holds, where LangChain's store says so; else None.

        FAISS: its faiss index's ``ntotal``; Chroma: ``collection.count()``
        (given ``collection=``); ``InMemoryVectorStore``: its ``store`` dict.
        """
        total = getattr(getattr(self.store, "index", None), "ntotal", None)
        if isinstance(total, int):
            return total
        if self.collection is not None and callable(getattr(self.collection, "count", None)):
            return int(self.collection.count())
        held = getattr(self.store, "store", None)
        return len(held) if isinstance(held, dict) else None

    def hits(self, query: str, k: int) -> list[Hit]:
        search = (
            self.store.similarity_search_with_score
            if self.scores == "raw"
            else self.store.similarity_search_with_relevance_scores
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            found = search(query, k=k, **self.search_kwargs)
        for warning in caught:
            if str(warning.message).startswith("Relevance scores must be between 0 and 1"):
                # LangChain's own warning prints every document; say it once, shortly.
                if not self._said_out_of_range:
                    self._said_out_of_range = True
                    warnings.warn(
                        f"{self.store_label}'s relevance scores fall outside [0, 1] (its relevance function does "
                        "not map this metric into it); ragcal calibrates them as they are",
                        UserWarning,
                        stacklevel=2,
                    )
            else:
                warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
        return [Hit(self.chunk_id(document), score, document) for document, score in found]


#: Chroma's distance spaces (a collection's ``hnsw`` or ``spann`` ``space``).
CHROMA_SPACES = ("cosine", "l2", "ip")


def _chroma_metric(metric, collection) -> str:
    """A Chroma store's space: read from ``collection`` (public configuration, then metadata), checked against
    ``metric`` when both are given; refused when neither is."""
    found = None
    if collection is not None:
        configuration = getattr(collection, "configuration", None) or {}
        for index in ("hnsw", "spann"):
            found = found or ((configuration.get(index) or {}).get("space") if isinstance(configuration, dict) else None)
        found = found or (getattr(collection, "metadata", None) or {}).get("hnsw:space")
        if found is None:
            raise ValueError(
                f"LangChainStore: the Chroma collection {getattr(collection, 'name', '?')!r} names no space in its "
                "configuration or metadata; pass metric= (cosine, l2 or ip)"
            )
    if metric is not None and found is not None and str(metric) != str(found):
        raise ValueError(f"LangChainStore: metric={metric!r}, but the Chroma collection's space is {found!r}")
    metric = metric or found
    if metric is None:
        raise ValueError(
            "LangChainStore: a Chroma store's distance space (cosine, l2 or ip) is part of its score scale, and "
            "LangChain's Chroma does not make it public; a gate fitted on a cosine collection would be wrong on an "
            "l2 one. Pass metric= (the space you built it with: collection_metadata={'hnsw:space': 'cosine'} or "
            "collection_configuration={'hnsw': {'space': 'cosine'}} is metric='cosine'; Chroma's default is 'l2'), "
            "or collection=client.get_collection(name) to read it"
        )
    if str(metric) not in CHROMA_SPACES:
        raise ValueError(f"LangChainStore: Chroma space {metric!r} is none of {', '.join(CHROMA_SPACES)}")
    return str(metric)


def _with_score(document: Document, score, key: str, extra=None) -> Document:
    metadata = {**(document.metadata or {}), key: score, **(extra or {})}
    return Document(page_content=document.page_content, metadata=metadata, id=document.id)


class ScoredRetriever(BaseRetriever):
    """The store's top ``k``, each with its store score in ``metadata[score_key]`` (for :class:`GateCompressor`)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    store: Any
    k: int = 10
    score_key: str = "score"

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [_with_score(hit.item, hit.score, self.score_key) for hit in self.store.hits(query, self.k)]


def _gate(gate, store) -> StoreGate:
    return gate if isinstance(gate, StoreGate) else StoreGate(gate, store)


class GatedRetriever(BaseRetriever):
    """A ``BaseRetriever`` that returns the documents a ragcal gate passes on, and none when it refuses.

    Parameters
    ----------
    store : LangChainStore
        The store, read as it was read when the gate was fitted.
    gate : str, Path or StoreGate
        The gate file; refused if fitted on another score scale, another
        embedding model or other contents. Pass a
        :class:`~ragcal.integrations.common.StoreGate` to set its options
        (``contents="warn"``, ``corpus=`` for refusals that name pages).
    k : int, default=None
        How many documents the store returns for the gate to look at; the
        gate's own ``store_depth`` (what its table was scored with) when None.

    Notes
    -----
    Each returned document's metadata gains ``score`` (the store's),
    ``ragcal_action`` (answer or hedge) and, when hedging, ``ragcal_message``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    store: Any
    gate: Any
    k: int | None = None

    def __init__(self, **data: Any):
        bound = _gate(data.get("gate"), data.get("store"))  # before pydantic, so that a GateFileError stays one
        super().__init__(**{**data, "gate": bound})  # self.gate is the StoreGate from here on
        if self.k is None:
            self.k = bound.depth

    def decide(self, query: str) -> dict:
        """``{"question", "documents", "refusal", "decision"}``: ``refusal`` is None when the gate answers."""
        decision, passed = self.gate.decide(query, self.store.hits(query, self.k))
        extra = gate_metadata(decision)
        documents = [_with_score(hit.item, hit.score, "score", extra) for hit in passed]
        return {"question": query, "documents": documents, "refusal": refusal_of(decision), "decision": decision}

    def as_decision(self) -> RunnableLambda:
        """A runnable ``question -> decide(question)``: route on ``["refusal"]`` with a ``RunnableBranch``."""
        return RunnableLambda(self.decide, name="ragcal_gate")

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        outcome = self.decide(query)
        if outcome["refusal"] is not None:
            run_manager.on_text(outcome["refusal"]["message"] or "refused")
        return outcome["documents"]


class GateCompressor(BaseDocumentCompressor):
    """A ``BaseDocumentCompressor`` that keeps what a ragcal gate passes on; nothing on refusal.

    Use it over :class:`ScoredRetriever` in a ``ContextualCompressionRetriever``:
    it reads each document's store score from ``metadata[score_key]``. The
    last decision (with its refusal message) is :attr:`last_refusal` /
    :attr:`last_decision`, for a caller that wants the reason; a chain that
    routes on the refusal uses :meth:`GatedRetriever.as_decision` instead.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    store: Any
    gate: Any
    score_key: str = "score"
    _last: Any = PrivateAttr(default=None)

    def __init__(self, **data: Any):
        bound = _gate(data.get("gate"), data.get("store"))  # before pydantic, so that a GateFileError stays one
        super().__init__(**{**data, "gate": bound})  # self.gate is the StoreGate from here on

    @property
    def last_decision(self):
        """The :class:`ragcal.Decision` of the last call (None before the first)."""
        return self._last

    @property
    def last_refusal(self) -> dict | None:
        return refusal_of(self._last) if self._last is not None else None

    def compress_documents(self, documents: Sequence[Document], query: str, callbacks=None) -> Sequence[Document]:
        documents = list(documents)
        missing = [document for document in documents if self.score_key not in (document.metadata or {})]
        if missing:
            raise ValueError(
                f"GateCompressor: {len(missing)} of {len(documents)} documents carry no metadata[{self.score_key!r}] "
                "(the store's score), so the gate has nothing to compare; retrieve them with ScoredRetriever"
            )
        hits = [
            Hit(self.store.chunk_id(document), document.metadata[self.score_key], document) for document in documents
        ]
        decision, passed = self.gate.decide(query, hits)
        self._last = decision
        return [hit.item for hit in passed]
