"""A calibrated gate inside LlamaIndex, on LlamaIndex's own vector stores (``pip install 'ragcal[llamaindex]'``).

Two pieces, each a LlamaIndex class or usable where LlamaIndex takes one:

- :class:`LlamaIndexStore` reads a LlamaIndex retriever (or an index, through
  its ``as_retriever``) as a ragcal retriever, so a labeled set is scored, and
  a gate fitted and certified, on the scores its ``NodeWithScore`` objects
  carry (:func:`score_store`). A node without a score (``score=None``: a
  summary index, a retriever that drops the scores it fused) and scores that
  rise down the list (distances) are refused with what to do.
- :class:`GatePostprocessor`, a ``BaseNodePostprocessor``: the nodes the gate
  passes on, or none on refusal. A query engine whose synthesizer takes
  :attr:`GatePostprocessor.empty_response` as its ``empty_response`` then
  answers a refused question with that sentence instead of LlamaIndex's
  "Empty Response" (not every synthesizer takes it: see the class); the
  refusal of that very question (what was looked at, the closest passages,
  the reasons, the score) is :attr:`GatePostprocessor.last_refusal`.

Every node needs its chunk id (``<page>#<n>``, the ids of the labeled set's
gold pages) in ``metadata[id_key]`` or as its ``id_``. :class:`RagcalEmbedding`
puts ragcal's own embedder (MiniLM by default) behind LlamaIndex's
``BaseEmbedding``, and :func:`nodes_from_chunks` turns ragcal chunks into
``TextNode`` objects with those ids, whose metadata is not embedded (so the
vectors are ragcal's).

::

    embed_model = RagcalEmbedding()
    index = VectorStoreIndex(nodes_from_chunks(chunks), embed_model=embed_model)
    adapter = LlamaIndexStore(index, embed_model=embed_model)
    table, config, _ = score_store(queries, adapter)   # then fit and certify, save_gate(..., provenance=config)
    gate = GatePostprocessor(store=adapter, gate="gate.json")
    engine = RetrieverQueryEngine(
        index.as_retriever(similarity_top_k=gate.depth),
        response_synthesizer=ContextOnly(llm=llm, empty_response=gate.empty_response),
        node_postprocessors=[gate],
    )
    response = engine.query(question)   # no source nodes: refused, and gate.last_refusal says why
"""

from __future__ import annotations

from .common import require

require("llamaindex")

from typing import Any

from llama_index.core.base.response.schema import Response
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.vector_stores import SimpleVectorStore

from .common import Hit, StoreGate, StoreRetriever, gate_metadata, ragcal_embedder, refusal_of, score_store

__all__ = [
    "REFUSAL_TEXT",
    "GatePostprocessor",
    "GatedQueryEngine",
    "LlamaIndexStore",
    "RagcalEmbedding",
    "nodes_from_chunks",
    "score_store",
]

#: Metadata keys the gate adds to the nodes it passes on; kept out of the LLM's prompt and of embeddings.
GATE_KEYS = ("ragcal_action", "ragcal_message")

#: What a query engine answers when the gate refuses (the synthesizer's ``empty_response``): one fixed sentence,
#: because LlamaIndex fixes ``empty_response`` when the synthesizer is built; the question's own refusal is
#: :attr:`GatePostprocessor.last_refusal`.
REFUSAL_TEXT = (
    "I cannot answer this from the documents: the passages retrieved for it do not match it closely enough "
    "(a ragcal gate, calibrated on this store's scores, refused it)."
)


class RagcalEmbedding(BaseEmbedding):
    """ragcal's embedder (``load_embedder(model)``; MiniLM by default) as a LlamaIndex ``BaseEmbedding``.

    The vectors are the very ones ragcal's own index holds (L2-normalised,
    through ragcal's embedding cache, each text encoded alone), so a
    ``VectorStoreIndex`` built with them, whose default ``SimpleVectorStore``
    scores cosine, returns ragcal's scores (to float rounding: it computes in
    float64, ragcal's faiss index in float32).

    Parameters
    ----------
    model : str, default=None
        A ragcal ``--model`` string; ragcal's default (the packaged MiniLM) when None.
    embedder : object, default=None
        An embedder already loaded (``encode``, ``fingerprint``); ``model`` is then ignored.
    cache_dir : str or Path, default=None
    use_cache : bool, default=True
    **kwargs
        ``BaseEmbedding`` fields (``embed_batch_size``, default 64, ...).
    """

    embedder: Any = Field(default=None, exclude=True, description="ragcal's embedder (encode, fingerprint)")

    def __init__(self, model: str | None = None, *, embedder=None, cache_dir=None, use_cache: bool = True, **kwargs):
        embedder = ragcal_embedder(model, embedder=embedder, cache_dir=cache_dir, use_cache=use_cache)
        from ..embedding.protocol import embedder_name

        kwargs.setdefault("embed_batch_size", 64)
        super().__init__(embedder=embedder, model_name=embedder_name(embedder), **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "RagcalEmbedding"

    @property
    def name(self) -> str:
        return self.model_name

    @property
    def fingerprint(self) -> str:
        return self.embedder.fingerprint

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self.embedder.encode(list(texts), show_progress_bar=False).tolist() if texts else []

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embeddings([query])[0]

    # Async calls encode in the caller's thread: ragcal's embedding cache (SQLite) is used by the thread that
    # opened it, and the model is CPU-bound, so another thread would buy nothing.
    async def _aget_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embedding(text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._get_text_embeddings(texts)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


def nodes_from_chunks(chunks, *, id_key: str = "chunk_id") -> list[TextNode]:
    """ragcal chunks as LlamaIndex ``TextNode`` objects: the chunk's text, its id as ``id_`` and ``metadata[id_key]``.

    The metadata (``id_key``, ``page``, ``heading``) is excluded from what is
    embedded, so a ``VectorStoreIndex`` embeds the chunk's text alone, as
    ragcal's index does; the LLM sees the page and heading, not the id.
    """
    return [
        TextNode(
            id_=chunk.chunk_id,
            text=chunk.text,
            metadata={id_key: chunk.chunk_id, "page": chunk.doc_path, "heading": " > ".join(chunk.heading_path)},
            excluded_embed_metadata_keys=[id_key, "page", "heading", *GATE_KEYS],
            excluded_llm_metadata_keys=[id_key, *GATE_KEYS],
        )
        for chunk in chunks
    ]


class LlamaIndexStore(StoreRetriever):
    """A LlamaIndex retriever (or index) as a ragcal retriever, on the scores its nodes carry.

    Parameters
    ----------
    source : llama_index.core.base.base_retriever.BaseRetriever or an index
        A retriever (``index.as_retriever(similarity_top_k=k)``, any other)
        returns its own top ``similarity_top_k``, which must be at least the
        ``k`` it is asked for; an index (``VectorStoreIndex``, anything with
        ``as_retriever``) is read through ``index.as_retriever(similarity_top_k=k,
        **retriever_kwargs)`` at each call.
    embed_model : RagcalEmbedding, default=None
        The embedding model the index was built with; its name and fingerprint
        go into the score table's provenance and are checked against a gate
        file's. LlamaIndex keeps an index's model private, so it is not read
        from the index: pass it.
    id_key : str, default="chunk_id"
        Metadata key of each node's chunk id; the node's ``id_`` when absent.
    metric : str, default=None
        The store's similarity when it does not say; part of the score scale a
        gate is checked against. An index over the default ``SimpleVectorStore``
        scores ``cosine`` (its default query mode).
    retriever_kwargs : dict, default=None
        For an index: passed to ``as_retriever`` (``filters``, ...).
    name : str, default="dense"

    Notes
    -----
    The score scale names the class that was read: ``llamaindex
    SimpleVectorStore (cosine)`` for an index over the default store,
    ``llamaindex VectorIndexRetriever`` for a retriever (LlamaIndex keeps a
    retriever's store private). Fit and serve through the same kind of
    object: a gate fitted through the index is refused in front of the
    index's retriever passed on its own.
    """

    framework = "llamaindex"

    def __init__(
        self,
        source,
        *,
        embed_model=None,
        id_key: str = "chunk_id",
        metric: str | None = None,
        retriever_kwargs: dict | None = None,
        name: str = "dense",
    ):
        if hasattr(source, "retrieve"):
            self.retriever, self.index = source, None
            kind = type(source).__name__
        elif hasattr(source, "as_retriever"):
            self.retriever, self.index = None, source
            store = getattr(source, "vector_store", None)
            kind = type(store).__name__ if store is not None else type(source).__name__
            if metric is None and isinstance(store, SimpleVectorStore):
                metric = "cosine"
        else:
            raise TypeError(
                f"LlamaIndexStore needs a LlamaIndex retriever (retrieve) or index (as_retriever); got "
                f"{type(source).__name__}"
            )
        self.id_key = id_key
        self.retriever_kwargs = dict(retriever_kwargs or {})
        if self.retriever is not None and self.retriever_kwargs:
            raise ValueError("LlamaIndexStore: retriever_kwargs are for an index; a retriever is used as it was built")
        mode = self.retriever_kwargs.get("vector_store_query_mode")
        if mode is not None and str(getattr(mode, "value", mode)) != "default":
            kind = f"{kind} {getattr(mode, 'value', mode)}"  # mmr, svm, hybrid, ...: another score than the metric's
        super().__init__(
            store_label=f"LlamaIndex {kind}",
            score_scale=f"llamaindex {kind}" + (f" ({metric})" if metric else ""),
            embedding=embed_model,
            name=name,
        )

    def distance_advice(self) -> str:
        return (
            "LlamaIndex's vector stores report similarities (SimpleVectorStore: cosine); build the store with a "
            "similarity metric (cosine, or inner product on normalised embeddings such as RagcalEmbedding's), or "
            "give the retriever a node postprocessor that turns its distances into similarities before ragcal reads "
            "them."
        )

    def chunk_id(self, node) -> str:
        """The node's chunk id: ``metadata[id_key]``, else its ``node_id``."""
        node = node.node if isinstance(node, NodeWithScore) else node
        return self.chunk_id_from(node.metadata, node.node_id, node.get_content(), helper="nodes_from_chunks")

    def document_count(self) -> int | None:
        """How many nodes an index's docstore holds (``index.docstore.docs``); else None.

        None for a retriever (LlamaIndex keeps its index private) and for an
        empty docstore (a vector store that keeps the texts itself).
        """
        docstore = getattr(self.index, "docstore", None)
        docs = getattr(docstore, "docs", None)
        return len(docs) if isinstance(docs, dict) and docs else None

    def hits(self, query: str, k: int) -> list[Hit]:
        retriever = self.retriever
        if retriever is None:
            retriever = self.index.as_retriever(similarity_top_k=k, **self.retriever_kwargs)
        else:
            built = getattr(retriever, "similarity_top_k", None)
            if isinstance(built, int) and built < k:
                raise ValueError(
                    f"{self.store_label} was built with similarity_top_k={built}, but {k} documents per question "
                    f"are asked for: build it with similarity_top_k={k} (or ask for k={built})"
                )
        nodes = retriever.retrieve(query)[:k]
        return [Hit(self.chunk_id(node), node.score, node) for node in nodes]


def _with_gate(node: NodeWithScore, extra: dict) -> NodeWithScore:
    """A copy of ``node`` with ``extra`` in its metadata (the store's own node is left as it is)."""
    inner = node.node
    excluded_llm = list(dict.fromkeys([*inner.excluded_llm_metadata_keys, *GATE_KEYS]))
    excluded_embed = list(dict.fromkeys([*inner.excluded_embed_metadata_keys, *GATE_KEYS]))
    copy = inner.model_copy(
        update={
            "metadata": {**(inner.metadata or {}), **extra},
            "excluded_llm_metadata_keys": excluded_llm,
            "excluded_embed_metadata_keys": excluded_embed,
        }
    )
    return NodeWithScore(node=copy, score=node.score)


class GatePostprocessor(BaseNodePostprocessor):
    """A ``BaseNodePostprocessor`` that keeps the nodes a ragcal gate passes on, and none when it refuses.

    Parameters
    ----------
    store : LlamaIndexStore
        The store, read as it was read when the gate was fitted (its score
        scale and embedding model are checked against the gate file's; its
        ``id_key`` gives each node's chunk id).
    gate : str, Path or StoreGate
        The gate file; refused if fitted on another score scale, another
        embedding model or other contents. Pass a
        :class:`~ragcal.integrations.common.StoreGate` to set its options
        (``contents="warn"``, ``corpus=`` for refusals that name pages).
    empty_response : str, default=REFUSAL_TEXT
        The sentence a query engine should answer with on refusal: pass it as
        the synthesizer's ``empty_response``, which LlamaIndex returns when no
        node is left. It is one fixed sentence, as LlamaIndex fixes
        ``empty_response`` when the synthesizer is built; the message for the
        question just refused (what was looked at, the closest passages) is
        ``last_refusal["message"]``. In llama-index-core 0.14 the parameter
        belongs to ``BaseSynthesizer``: ``ContextOnly`` and ``NoText`` take
        it, but ``CompactAndRefine``, ``Refine``, ``TreeSummarize``,
        ``SimpleSummarize``, ``Accumulate`` and ``Generation`` do not pass it
        on, and answer a refusal with "Empty Response" and no source nodes.

    Notes
    -----
    Each node passed on is a copy with ``ragcal_action`` (answer or hedge)
    and, when hedging, ``ragcal_message`` in its metadata (kept out of the
    LLM's prompt), in the gate's order; its score is the store's.
    :attr:`last_decision` and :attr:`last_refusal` hold the last call's
    outcome: one postprocessor serves one query at a time for them to be that
    query's (the nodes returned are right in any case).
    """

    store: Any
    gate: Any
    empty_response: str = REFUSAL_TEXT
    _bound: StoreGate = PrivateAttr()
    _last: Any = PrivateAttr(default=None)

    def __init__(self, *, store, gate, **kwargs):
        # Bound before pydantic validates, so that a refused gate file raises its GateFileError as it is.
        bound = gate if isinstance(gate, StoreGate) else StoreGate(gate, store)
        super().__init__(store=store, gate=gate, **kwargs)
        self._bound = bound

    @classmethod
    def class_name(cls) -> str:
        return "RagcalGatePostprocessor"

    @property
    def depth(self) -> int:
        """How many nodes the gate's table was scored with (``store_depth``): the retriever's ``similarity_top_k``."""
        return self._bound.depth

    @property
    def last_decision(self):
        """The :class:`ragcal.Decision` of the last call (None before the first)."""
        return self._last

    @property
    def last_refusal(self) -> dict | None:
        """The last call's refusal (``message``, ``reasons``, ``score``, ...), None when it answered or before any."""
        return refusal_of(self._last) if self._last is not None else None

    def decide(self, nodes: list[NodeWithScore], query: str | None = None) -> tuple:
        """``(Decision, the nodes passed on)`` for one question: what :meth:`postprocess_nodes` does, with the
        decision returned rather than kept in :attr:`last_decision` (safe when queries run concurrently)."""
        hits = [Hit(self.store.chunk_id(node), node.score, node) for node in nodes]
        decision, passed = self._bound.decide(query, hits)
        extra = gate_metadata(decision)
        return decision, [_with_gate(hit.item, extra) for hit in passed]

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        decision, passed = self.decide(nodes, query_bundle.query_str if query_bundle is not None else None)
        self._last = decision
        return passed


class GatedQueryEngine(CustomQueryEngine):
    """A query engine that answers with any synthesizer, or with the refusal of the question itself.

    Retrieves with ``retriever``, lets ``gate`` (a :class:`GatePostprocessor`)
    decide, and synthesizes from the nodes it passes on; on refusal the
    response is the question's own refusal message (what was looked at, the
    closest passages, a next step), not a fixed ``empty_response``, with the
    refusal as a dict in ``response.metadata["ragcal_refusal"]`` (None when
    it answered) and no source nodes. Use it where the synthesizer does not
    take ``empty_response`` (``CompactAndRefine``, LlamaIndex's default, does not).

    Parameters
    ----------
    retriever : llama_index BaseRetriever
        Returns at least :attr:`GatePostprocessor.depth` nodes.
    gate : GatePostprocessor
    synthesizer : llama_index BaseSynthesizer
    """

    retriever: Any
    gate: Any
    synthesizer: Any

    def custom_query(self, query_str: str):
        decision, passed = self.gate.decide(self.retriever.retrieve(query_str), query_str)
        if not passed:
            return Response(
                response=decision.message, source_nodes=[], metadata={"ragcal_refusal": refusal_of(decision)}
            )
        response = self.synthesizer.synthesize(query_str, passed)
        response.metadata = {**(response.metadata or {}), "ragcal_refusal": None}
        return response
