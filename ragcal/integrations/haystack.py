"""A calibrated gate inside Haystack pipelines, on Haystack's own retrievers (``pip install 'ragcal[haystack]'``).

Three pieces, each usable in a Haystack ``Pipeline``:

- :class:`HaystackStore` reads a Haystack retriever component
  (``InMemoryEmbeddingRetriever`` with a text embedder, ``InMemoryBM25Retriever``,
  any retriever that returns scored ``Document`` objects) as a ragcal
  retriever, so a labeled set is scored, and a gate fitted and certified, on
  the scores that retriever returns (:func:`score_store`). Its score scale
  names the retriever, the store's similarity function and ``scale_score``:
  ``InMemoryDocumentStore(embedding_similarity_function="cosine")`` with
  ``scale_score=False`` returns ragcal's own cosine, ``scale_score=True``
  returns ``(cosine + 1) / 2``, another scale, and a gate fitted on one is
  refused on the other.
- :class:`GateComponent`, a ``@component`` with inputs ``query`` and
  ``documents`` (the retriever's) and outputs ``documents`` (what the gate
  passes on, in the gate's order, ``meta["ragcal_action"]`` set; none on
  refusal) and ``refusal`` (a dict with ``message``, ``reasons`` and ``score``,
  or None when it answers), for a ``ConditionalRouter`` to route on
  (``{{ refusal is not none }}``).
- :class:`RagcalTextEmbedder` and :class:`RagcalDocumentEmbedder`, ragcal's own
  embedder (MiniLM by default) as Haystack embedders with the inputs and
  outputs of Haystack's sentence-transformers ones (``text -> embedding``,
  ``documents -> documents``): the vectors of ragcal's own index.

Every document needs its chunk id (``<page>#<n>``, the ids of the labeled
set's gold pages) in ``meta[id_key]`` or as its ``id``;
:func:`documents_from_chunks` turns ragcal chunks into documents with both.

::

    store = InMemoryDocumentStore(embedding_similarity_function="cosine")
    store.write_documents(RagcalDocumentEmbedder().run(documents_from_chunks(chunks))["documents"])
    adapter = HaystackStore(InMemoryEmbeddingRetriever(store), text_embedder=RagcalTextEmbedder())
    table, config, _ = score_store(queries, adapter)   # then fit and certify, save_gate(..., provenance=config)
    gate = GateComponent("gate.json", adapter)        # in the pipeline: retriever.documents -> gate.documents
"""

from .common import require

require("haystack")

import copy  # noqa: E402
import dataclasses  # noqa: E402
import inspect  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from haystack import Document, component, default_to_dict  # noqa: E402
from haystack.core.errors import SerializationError  # noqa: E402
from haystack.core.serialization import component_from_dict, component_to_dict, import_class_by_name  # noqa: E402

from .common import Hit, StoreGate, StoreRetriever, gate_metadata, ragcal_embedder, refusal_of, score_store  # noqa: E402

__all__ = [
    "RagcalTextEmbedder",
    "RagcalDocumentEmbedder",
    "documents_from_chunks",
    "HaystackStore",
    "GateComponent",
    "score_store",
]

#: The id Haystack gives a document without one (a SHA-256 of its content): no page of any labeled set.
GENERATED_ID = re.compile(r"[0-9a-f]{64}")
#: Where a document store's init parameters name its similarity (Haystack's in-memory store, then others).
METRIC_KEYS = ("embedding_similarity_function", "similarity", "similarity_function", "distance", "metric")


class _RagcalEmbedder:
    """What the two embedder components share: ragcal's embedder, its name and fingerprint, and serialization."""

    def __init__(self, model: str | None = None, *, embedder=None, cache_dir=None, use_cache: bool = True):
        self.embedder = ragcal_embedder(model, embedder=embedder, cache_dir=cache_dir, use_cache=use_cache)
        self.cache_dir = cache_dir
        self.use_cache = bool(getattr(self.embedder, "use_cache", use_cache))

    @property
    def name(self) -> str:
        from ..embedding.protocol import embedder_name

        return embedder_name(self.embedder)

    @property
    def fingerprint(self) -> str:
        return self.embedder.fingerprint

    def to_dict(self) -> dict[str, Any]:
        """The model by name (``load_embedder`` rebuilds it), the cache folder and whether to use it."""
        cache_dir = None if self.cache_dir is None else str(self.cache_dir)
        return default_to_dict(self, model=self.name, cache_dir=cache_dir, use_cache=self.use_cache)

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        return cls(**data.get("init_parameters", {}))


@component
class RagcalTextEmbedder(_RagcalEmbedder):
    """ragcal's embedder (``load_embedder(model)``; MiniLM by default) as a Haystack text embedder.

    ``run(text)`` gives ``{"embedding": list of float}``, as Haystack's
    ``SentenceTransformersTextEmbedder`` does; the vector is the very one
    ragcal's own index compares (L2-normalised, through ragcal's embedding
    cache), so an in-memory store with the ``"cosine"`` similarity and
    ``scale_score=False`` returns ragcal's cosine scores.

    Parameters
    ----------
    model : str, default=None
        What :func:`ragcal.embedding.load_embedder` reads; its default (MiniLM) when None.
    embedder : EmbedderProtocol, default=None
        A ready ragcal embedder; overrides ``model``.
    cache_dir : str or Path, default=None
    use_cache : bool, default=True
    """

    @component.output_types(embedding=list[float])
    def run(self, text: str):
        if not isinstance(text, str):
            raise TypeError(
                f"RagcalTextEmbedder expects a string; got {type(text).__name__} (embed documents with "
                "RagcalDocumentEmbedder)"
            )
        return {"embedding": self.embedder.encode([text])[0].tolist()}


@component
class RagcalDocumentEmbedder(_RagcalEmbedder):
    """ragcal's embedder as a Haystack document embedder: ``run(documents)`` gives them back with ``embedding`` set.

    Each document's ``content`` is embedded (as ragcal embeds ``chunk.text``);
    the documents returned are copies, the ones given are left as they were.
    Parameters as :class:`RagcalTextEmbedder`.
    """

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]):
        documents = list(documents)
        empty = [document.id for document in documents if not isinstance(document.content, str)]
        if empty:
            raise ValueError(
                f"RagcalDocumentEmbedder: {len(empty)} of {len(documents)} documents have no text content "
                f"(e.g. id {empty[0]!r}); only text is embedded"
            )
        if not documents:
            return {"documents": []}
        vectors = self.embedder.encode([document.content for document in documents])
        return {
            "documents": [
                dataclasses.replace(document, embedding=vector.tolist()) for document, vector in zip(documents, vectors)
            ]
        }


def documents_from_chunks(chunks, *, id_key: str = "chunk_id") -> list[Document]:
    """ragcal chunks as Haystack documents: the chunk's text, its id as ``id`` and in ``meta[id_key]``."""
    return [
        Document(
            id=chunk.chunk_id,
            content=chunk.text,
            meta={id_key: chunk.chunk_id, "page": chunk.doc_path, "heading": " > ".join(chunk.heading_path)},
        )
        for chunk in chunks
    ]


def _setting(item, keys):
    """The first of ``keys`` that ``item`` has as a public attribute, else in its ``to_dict()`` init parameters."""
    for key in keys:
        if getattr(item, key, None) is not None:
            return getattr(item, key)
    parameters = {}
    if callable(getattr(item, "to_dict", None)):
        try:
            parameters = item.to_dict().get("init_parameters") or {}
        except (SerializationError, TypeError, ValueError):  # it cannot serialize itself: its attributes were read
            pass
    return next((parameters[key] for key in keys if parameters.get(key) is not None), None)


class HaystackStore(StoreRetriever):
    """A Haystack retriever component as a ragcal retriever, on the scores it returns (``Document.score``).

    Parameters
    ----------
    retriever : Haystack retriever component
        Its ``run`` takes ``query_embedding`` (an embedding retriever, which
        needs ``text_embedder``) or ``query`` (a text retriever such as
        ``InMemoryBM25Retriever``) and ``top_k``, and returns
        ``{"documents": [Document, ...]}`` with each ``score`` set.
    text_embedder : Haystack text embedder, default=None
        Turns the question into the embedding retriever's ``query_embedding``
        (``run(text=...)["embedding"]``); :class:`RagcalTextEmbedder` gives the
        model's name and fingerprint to the score table's provenance.
    id_key : str, default="chunk_id"
        Meta key of each document's chunk id; the document's ``id`` when absent.
    metric : str, default=None
        The store's similarity when its init parameters do not say
        (the in-memory store's ``embedding_similarity_function`` is read).
    filters : dict, default=None
        Passed to every ``retriever.run`` (a Haystack metadata filter).
    name : str, default="dense"
    """

    framework = "haystack"

    def __init__(
        self,
        retriever,
        *,
        text_embedder=None,
        id_key: str = "chunk_id",
        metric: str | None = None,
        filters: dict | None = None,
        name: str = "dense",
    ):
        run = getattr(retriever, "run", None)
        inputs = inspect.signature(run).parameters if callable(run) else {}
        kind = type(retriever).__name__
        self.takes_embedding = "query_embedding" in inputs
        if not (self.takes_embedding or "query" in inputs) or "top_k" not in inputs:
            raise TypeError(
                f"HaystackStore needs a Haystack retriever component whose run takes query_embedding or query, and "
                f"top_k; {kind} has run({', '.join(inputs)})"
            )
        if self.takes_embedding and text_embedder is None:
            raise TypeError(
                f"HaystackStore: {kind} retrieves by query_embedding, so it needs the text_embedder the documents "
                "were embedded with (RagcalTextEmbedder for ragcal's own vectors)"
            )
        self.retriever = retriever
        self.text_embedder = text_embedder if self.takes_embedding else None
        self.id_key = id_key
        self.metric = metric
        self.filters = dict(filters) if filters else None
        document_store = getattr(retriever, "document_store", None)
        metric = metric or _setting(document_store, METRIC_KEYS if self.takes_embedding else ("bm25_algorithm",))
        metric = getattr(metric, "value", metric)  # a store's similarity may be an Enum
        scale_score = _setting(retriever, ("scale_score",))
        details = [metric] if metric else []
        details += [f"scale_score={scale_score}"] if scale_score is not None else []
        store_kind = f" on {type(document_store).__name__}" if document_store is not None else ""
        super().__init__(
            store_label=f"Haystack {kind}{store_kind}",
            score_scale=f"haystack {kind}" + (f" ({', '.join(details)})" if details else ""),
            embedding=self.text_embedder,
            name=name,
        )

    def distance_advice(self) -> str:
        return (
            "Haystack's document stores return similarities when built with one: InMemoryDocumentStore("
            "embedding_similarity_function='cosine') on normalised embeddings is cosine; for another store, set its "
            "similarity to cosine or dot product, or pass scale_score=True to the retriever if it turns distances "
            "into similarities."
        )

    def chunk_id(self, document) -> str:
        """The document's chunk id: ``meta[id_key]``, else its ``id`` unless Haystack generated it."""
        # The id Haystack derives from a document's content names no page: not an id of the document's own.
        own = None if document.id is None or GENERATED_ID.fullmatch(str(document.id)) else document.id
        return self.chunk_id_from(document.meta, own, document.content, field="meta")

    def document_count(self) -> int | None:
        """The retriever's document store's ``count_documents()`` (part of Haystack's DocumentStore protocol)."""
        count = getattr(getattr(self.retriever, "document_store", None), "count_documents", None)
        return int(count()) if callable(count) else None

    def hits(self, query: str, k: int) -> list[Hit]:
        options = {"top_k": int(k), **({"filters": self.filters} if self.filters else {})}
        if self.takes_embedding:
            options["query_embedding"] = self.text_embedder.run(text=query)["embedding"]
        else:
            options["query"] = query
        documents = self.retriever.run(**options)["documents"]
        return [Hit(self.chunk_id(document), document.score, document) for document in documents]

    def to_dict(self) -> dict[str, Any]:
        """The retriever and text embedder as Haystack serializes them (a document store keeps no documents there)."""
        embedder = component_to_dict(self.text_embedder, "text_embedder") if self.text_embedder is not None else None
        return default_to_dict(
            self,
            retriever=component_to_dict(self.retriever, "retriever"),
            text_embedder=embedder,
            id_key=self.id_key,
            metric=self.metric,
            filters=self.filters,
            name=self.name,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "HaystackStore":
        parameters = copy.deepcopy(dict(data.get("init_parameters", {})))  # a component's from_dict may change it
        for key in ("retriever", "text_embedder"):
            if parameters.get(key) is not None:
                parameters[key] = component_from_dict(_component_class(parameters[key]["type"]), parameters[key], key)
        return cls(parameters.pop("retriever"), **parameters)


def _component_class(name: str) -> type:
    """This module's embedders by name; any other class through Haystack's import (its allowlist applies)."""
    own = {f"{__name__}.{kind.__name__}": kind for kind in (RagcalTextEmbedder, RagcalDocumentEmbedder)}
    return own[name] if name in own else import_class_by_name(name)


@component
class GateComponent:
    """A ragcal gate as a Haystack component: the documents it passes on, or a refusal to route on.

    Connect the retriever's ``documents`` (the same retriever the gate was
    fitted through, asked for :attr:`depth` documents) and the question to it;
    route on ``refusal`` with a ``ConditionalRouter``
    (``"{{ refusal is not none }}"``).

    Parameters
    ----------
    gate : str, Path or StoreGate
        The gate file; refused (:class:`ragcal.gates.GateFileError`) if fitted
        on another score scale than ``store``'s (another retriever, similarity
        or ``scale_score``), another embedding model or other contents. A
        :class:`~ragcal.integrations.common.StoreGate` bound to the store
        carries its own options (``contents="warn"``, ``corpus=`` for helpful
        refusals).
    store : HaystackStore
        The retriever as it was read when the gate was fitted: gives the score
        scale to check and reads each document's chunk id.

    Outputs
    -------
    documents : list of Document
        What the gate passes on, in the gate's order, each with
        ``meta["ragcal_action"]`` (answer or hedge) and, when hedging,
        ``meta["ragcal_message"]``; empty on refusal.
    refusal : dict or None
        ``message``, ``reasons``, ``score`` (plus ``action`` and ``stage``)
        when the gate refuses; None when it answers.

    Notes
    -----
    ``to_dict`` keeps the gate file's path (as given: give an absolute one)
    and the store's retriever and text embedder as Haystack serializes them.
    A document store's documents are not part of that (an
    ``InMemoryDocumentStore`` comes back on its ``index`` name: the same
    shared store in the same process, an empty one in another); the component
    reads only the rebuilt store's score scale and chunk ids, the documents
    come from the pipeline's retriever. Loading a pipeline with this component
    in Haystack 3 needs ``Pipeline.from_dict(data, allowed_modules=["ragcal.*"])``
    (Haystack's deserialization allowlist).
    """

    def __init__(self, gate, store: HaystackStore):
        if not isinstance(store, HaystackStore):
            raise TypeError(
                "GateComponent needs a HaystackStore (the adapter the gate was fitted through); got "
                f"{type(store).__name__}"
            )
        self.bound = gate if isinstance(gate, StoreGate) else StoreGate(gate, store)
        self.gate = str(self.bound.path) if isinstance(gate, StoreGate) else gate
        self.store = store

    @property
    def depth(self) -> int:
        """How many documents per question the gate's table was scored with: the retriever's ``top_k``."""
        return self.bound.depth

    @component.output_types(documents=list[Document], refusal=dict | None)
    def run(self, query: str, documents: list[Document]):
        documents = list(documents)
        decision, passed = self.bound.decide(
            query, [Hit(self.store.chunk_id(document), document.score, document) for document in documents]
        )
        extra = gate_metadata(decision)
        passed_on = [dataclasses.replace(hit.item, meta={**(hit.item.meta or {}), **extra}) for hit in passed]
        return {"documents": passed_on, "refusal": refusal_of(decision)}

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, gate=str(Path(self.gate)), store=self.store.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "GateComponent":
        parameters = data.get("init_parameters", {})
        return cls(parameters["gate"], HaystackStore.from_dict(parameters["store"]))
