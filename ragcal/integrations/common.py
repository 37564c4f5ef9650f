"""What the framework integrations share: the store as a ragcal retriever, and a gate bound to its score scale.

A LangChain, LlamaIndex or Haystack store answers a query with documents and a
score each. :class:`StoreRetriever` turns those into ragcal's
:class:`~ragcal.retrieval.base.RetrievalResult` (the retriever protocol of
:mod:`ragcal.retrieval.protocol`), so ``score_table``, ``fit-gate``,
certification and monitoring run on the scores the store really returns. Its
checks name the store and say what to do:

- a score that is missing (``None``) or NaN: the retriever returns no scores;
- scores that rise down a ranked list: distances where similarities are expected;
- one constant score over every question: nothing to calibrate.

:class:`StoreGate` is a saved gate in front of such a store. It refuses a gate
file fitted on another score scale: every gate file written from a store's
score table records the store's :attr:`StoreRetriever.score_scale`, and the two
must be equal, as must the embedding model's fingerprint when both are known.
The framework modules (:mod:`ragcal.integrations.langchain`,
:mod:`~ragcal.integrations.llamaindex`, :mod:`~ragcal.integrations.haystack`)
subclass :class:`StoreRetriever` and put a :class:`StoreGate` inside each
framework's own extension point.
"""

from __future__ import annotations

import importlib
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..retrieval.base import RetrievalResult
from .contents import (
    CONTENTS_CHECKS,
    PROBE_DEPTH,
    SAME_CONTENTS,
    check_contents_record,
    contents_overlap,
    document_hash,
    passage_of,
    probe_questions,
)

__all__ = [
    "EXTRAS",
    "StoreScoreError",
    "Hit",
    "StoreRetriever",
    "StoreGate",
    "refusal_of",
    "gate_metadata",
    "require",
    "ragcal_embedder",
    "score_store",
    "store_score_log",
    "load_factory",
    "store_retriever",
]

#: Optional extra -> (what it installs, the modules an integration imports).
EXTRAS = {
    "langchain": ("LangChain", ("langchain_core",)),
    "llamaindex": ("LlamaIndex", ("llama_index.core",)),
    "haystack": ("Haystack", ("haystack",)),
}

#: Documents per question a store is asked for: ragcal's own index keeps 100, so every dense_* signal is defined.
DEFAULT_DEPTH = 100

#: The view a store's ranked list fills: the dense signals (dense_top1, dense_gap, ...) read it.
VIEW = "dense"


class StoreScoreError(ValueError):
    """A store's scores cannot be calibrated as they are (missing, distances, constant); the message says why."""


def require(extra: str) -> None:
    """Import the framework of ``extra`` or raise an ImportError that names the extra to install."""
    what, modules = EXTRAS[extra]
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ImportError(
                f"ragcal.integrations.{extra} needs {what} ({module} is not importable: {error}); "
                f"install it with: pip install 'ragcal[{extra}]'"
            ) from error


@dataclass(frozen=True)
class Hit:
    """One document a store returned: its chunk id, its score as the store reports it, and the document itself."""

    chunk_id: str
    score: float | None
    item: object = field(default=None, repr=False, compare=False)


def _score(value) -> float:
    if value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


class StoreRetriever(ABC):
    """A framework's store or retriever as a ragcal retriever (``name``, ``search``).

    Subclasses set :attr:`framework` and implement :meth:`hits`. The scores are
    taken as the store returns them; :meth:`result` checks them.

    Parameters
    ----------
    store_label : str
        How messages name the store, e.g. ``"LangChain FAISS"``.
    score_scale : str
        What identifies the scale of the scores: the framework, the store's
        class, how scores are read and the store's metric. Recorded as
        ``score_scale`` in the score table's provenance and the gate file.
    embedding : object, default=None
        The framework's embedding object the store was built with: its
        ``name`` and ``fingerprint`` when it has them (ragcal's wrappers do),
        else its class name as the model and no fingerprint.
    name : str, default="dense"
        The view the results fill; the ``dense_*`` signals read ``"dense"``.
    """

    framework = ""

    def __init__(self, *, store_label: str, score_scale: str, embedding=None, name: str = VIEW):
        self.store_label = store_label
        self.score_scale = score_scale
        self.model = getattr(embedding, "name", None) or (type(embedding).__name__ if embedding is not None else None)
        self.model_fingerprint = getattr(embedding, "fingerprint", None)
        self.name = name

    @abstractmethod
    def hits(self, query: str, k: int) -> list[Hit]:
        """The store's top ``k`` for ``query``, in the store's order."""

    def chunk_id_from(self, metadata, identifier, text, *, field="metadata", helper="documents_from_chunks") -> str:
        """A document's chunk id: ``metadata[self.id_key]``, else ``identifier``; an error that says where to put it."""
        value = (metadata or {}).get(self.id_key) or identifier
        if not value:
            raise ValueError(
                f"{self.store_label}: a document has neither {field}[{self.id_key!r}] nor an id of its own, so its "
                f"page cannot be matched to the labeled set's gold pages; store the chunk id (<page>#<n>) there "
                f"({helper} does): {str(text)[:80]!r}"
            )
        return str(value)

    @property
    def config(self) -> dict:
        """Provenance of a score table scored through this store (read by ``fit-gate`` and :class:`StoreGate`)."""
        return {
            "model": self.model or "(the store's own embedding)",
            "model_fingerprint": self.model_fingerprint or self.score_scale,
            "score_scale": self.score_scale,
            "store": self.store_label,
            "framework": self.framework,
            "dense_index": self.score_scale,
        }

    def result(self, hits, *, query: str | None = None) -> RetrievalResult:
        """``hits`` as a :class:`RetrievalResult`, after checking that each score is there and none rises."""
        hits = list(hits)
        scores = np.array([_score(hit.score) for hit in hits], dtype=np.float64)
        asked = f" (question {query!r:.80})" if query is not None else ""
        missing = [hit.chunk_id for hit, score in zip(hits, scores) if math.isnan(score)]
        if missing:
            raise StoreScoreError(
                f"{self.store_label} returned no score for {len(missing)} of {len(hits)} documents{asked}, "
                f"e.g. {missing[0]!r}; a gate compares scores, so it needs them: {self.missing_score_advice()}"
            )
        if np.any(np.diff(scores) > 1e-9):
            raise StoreScoreError(
                f"{self.store_label}: scores rise down the ranked list{asked} "
                f"({', '.join(f'{score:.4g}' for score in scores[:3])} ...): these are distances (lower is closer), "
                f"where ragcal needs similarities (higher is closer). {self.distance_advice()}"
            )
        return RetrievalResult(self.name, tuple(hit.chunk_id for hit in hits), scores)

    def text_of(self, item) -> str:
        """The text of a document the store returned (``page_content``, ``get_content()`` or ``content``)."""
        for attribute in ("page_content", "content", "text"):
            value = getattr(item, attribute, None)
            if isinstance(value, str):
                return value
        get_content = getattr(item, "get_content", None)
        return str(get_content()) if callable(get_content) else ""

    def contents_probe(self, questions, *, depth: int = PROBE_DEPTH) -> dict:
        """What the store holds, as seen through its answers: the top ``depth`` documents of each question, hashed.

        Recorded in a gate's provenance (``store_contents``) by :func:`score_store`; :class:`StoreGate` asks the
        store in front of it the same questions and compares. Each document is ``sha256(chunk id, text)``, so a
        store whose ids are its own (``0``, ``1``, ...) is still told apart by its texts. ``count`` is
        :meth:`document_count` (None when the store does not say).
        """
        questions = [str(question) for question in questions]
        found = [self.hits(question, depth) for question in questions]
        return {
            "questions": questions,
            "count": self.document_count(),
            "depth": int(depth),
            "documents": [[document_hash(hit.chunk_id, self.text_of(hit.item)) for hit in hits] for hits in found],
            "top": [hits[0].chunk_id if hits else None for hits in found],
        }

    def document_count(self) -> int | None:
        """How many documents the store holds, when its framework says so through a public API; else None.

        Recorded with the store's contents (``store_contents["count"]``);
        each framework module reads what its stores offer.
        """
        return None

    def distance_advice(self) -> str:
        """What to do when the store returns distances (each framework module says it in its own terms)."""
        return "Read the store's relevance scores instead, or build it with a similarity metric (cosine)."

    def missing_score_advice(self) -> str:
        """What to do when the store returns documents without a score (each framework module may say it its way)."""
        return "retrieve with the store's scored search, or a retriever that keeps each document's score"

    def search(self, queries, *, k: int) -> list[RetrievalResult]:
        """One checked result per query; refuses a score that is the same for every document of every query."""
        queries = [str(query) for query in queries]
        results = [self.result(self.hits(query, k), query=query) for query in queries]
        scores = np.concatenate([result.scores for result in results]) if results else np.empty(0)
        if scores.size >= 2 and np.all(scores == scores[0]):
            raise StoreScoreError(
                f"{self.store_label} gave every document of all {len(queries)} questions the same score "
                f"{scores[0]:g}: a constant says nothing about any question, so there is no threshold to fit; "
                "the retriever reports a fixed default instead of its similarity: read the "
                "store's scored search instead"
            )
        return results


def ragcal_embedder(model=None, *, embedder=None, cache_dir=None, use_cache: bool = True):
    """What a framework wrapper puts ragcal's vectors behind: ``embedder`` itself, else ``load_embedder(model)``."""
    if embedder is not None:
        return embedder
    from ..embedding import load_embedder

    options = {"cache_dir": cache_dir, "use_cache": use_cache}
    return load_embedder(model, **options) if model else load_embedder(**options)


def score_store(queries, retriever: StoreRetriever, *, k: int = DEFAULT_DEPTH):
    """Retrieve a labeled query table through a store and score it: ``(table, provenance config, results)``.

    ``queries`` is a labeled query table (:func:`ragcal.queries.load_queries`).
    The table has the signals the store's ranked list feeds (``dense_top1``,
    ``dense_gap``, the top-k shape, ...); write it with
    :func:`ragcal.score_tables.write_score_table` and ``config`` to fit and
    certify gates that :class:`StoreGate` accepts for this store.
    """
    from ..retrieval.protocol import retrieve_with
    from ..scoring import score_table

    retrieved = retrieve_with({retriever.name: retriever}, queries["query"], k=k, diagnostics=False)
    table = score_table(queries, retrieved)
    empty = [name for name in table.columns[4:] if table[name].isna().all()]  # need another retriever's statistics
    table = table.drop(columns=empty)
    contents = retriever.contents_probe(probe_questions(queries["query"]), depth=min(int(k), PROBE_DEPTH))
    return table, {**retriever.config, "store_depth": int(k), "store_contents": contents}, retrieved


def store_score_log(questions, retriever: StoreRetriever, *, ids=None, k: int = DEFAULT_DEPTH):
    """Unlabeled questions through a store: a live score log (``id``, ``query``, signals) for ``ragcal monitor``.

    The same signals as :func:`score_store`'s table, on the store's own
    scores, so that :func:`ragcal.monitoring.monitor` compares live traffic
    with the calibration table scored through the same store; write it with
    ``to_csv`` or :func:`ragcal.score_tables.write_score_table`. Returns
    ``(log, provenance config)``.
    """
    import pandas as pd

    questions = [str(question) for question in questions]
    ids = [f"q{position}" for position in range(len(questions))] if ids is None else [str(value) for value in ids]
    if len(ids) != len(questions):
        raise ValueError(f"store_score_log: {len(ids)} ids for {len(questions)} questions")
    unlabeled = pd.DataFrame({"id": ids, "query": questions, "answerable": None, "slice": "live"})
    table, config, _ = score_store(unlabeled, retriever, k=k)
    return table.drop(columns=["answerable", "slice"]), config


def refusal_of(decision) -> dict | None:
    """A refusal as a JSON-ready dict (``message``, ``reasons``, ``score``, ``stage``); None when the gate answers."""
    if decision.answered:
        return None
    data = decision.to_dict()
    return {key: data[key] for key in ("action", "message", "reasons", "score", "stage")}


def gate_metadata(decision) -> dict:
    """What each passed document's metadata gains: ``ragcal_action`` and, when hedging, ``ragcal_message``."""
    return {"ragcal_action": decision.action, **({"ragcal_message": decision.message} if decision.message else {})}


class StoreGate:
    """A saved gate in front of one store: decides on the store's hits.

    Parameters
    ----------
    path : str or Path
        A gate file (``ragcal fit-gate``, :func:`ragcal.gates.save_gate`)
        fitted on a score table scored through this kind of store.
    retriever : StoreRetriever
        Gives the store's score scale (and model fingerprint) to check.
    contents : {"refuse", "warn"}, default="refuse"
        What to do in front of a store that holds other contents than the
        one the gate was fitted through. The gate file keeps the store's
        answers to a few of its labeled questions (``store_contents``, hashed
        ids and texts); the store in front of it is asked the same questions,
        and when fewer than half of the documents are the same
        (:data:`SAME_CONTENTS`) the gate is refused, or, with ``"warn"``, a
        :class:`~ragcal.gates.files.GateWarning` says so and the gate is used
        (for a store that grew or was re-chunked on purpose, until the gate
        is fitted again).
    corpus : CorpusDescription or sequence of Chunk, default=None
        What the store holds, for the refusals: with it (or the chunks the
        store was built from, described by
        :meth:`~ragcal.retrieval.views.CorpusDescription.from_chunks`), a
        refusal names the corpus and its size, the closest pages with their
        heading paths, and what the corpus covers, as ``ragcal ask`` does;
        without it, a refusal names the pages and heading paths of the
        documents the store returned (their ``page`` and ``heading``
        metadata, which ``documents_from_chunks`` writes), counts those
        documents, and draws its topics and terms from them
        (:meth:`describe_returned`); documents with neither give chunk ids.

    Attributes
    ----------
    depth : int
        How many documents per question the store returned when the gate's
        table was scored (``store_depth``); the integrations ask the store for
        as many, so that signals over the top k (``dense_top10_mean``, ...)
        mean what they meant when the gate was fitted.

    Raises
    ------
    GateFileError
        A gate fitted on another score scale, another embedding model, or one
        that reads other views than the store's ranked list; or (unless
        ``contents="warn"``) in front of a store with other contents.
    """

    def __init__(self, path, retriever: StoreRetriever, *, contents: str = "refuse", corpus=None):
        from .._params import check_choice
        from ..gates.files import GateFileError, read_gate_file

        check_choice(contents, "contents", "StoreGate", CONTENTS_CHECKS)

        self.path = Path(path)
        document = read_gate_file(self.path)
        self.gate = document["gate"]
        self.provenance = document["provenance"]
        self.retriever = retriever
        self.depth = int(self.provenance.get("store_depth") or DEFAULT_DEPTH)
        other = [name for name in self.gate.retrievers if name != retriever.name]
        if other:
            raise GateFileError(
                f"{self.path}: the gate reads the view(s) {other}, but {retriever.store_label} gives one ranked list "
                f"({retriever.name!r}): fit the gate on that list's signals (dense_top1, dense_gap, ...)"
            )
        fitted = self.provenance.get("score_scale")
        if fitted != retriever.score_scale:
            where = f"the scores of {fitted}" if fitted else "ragcal's own index (its cosine scores, not a store's)"
            raise GateFileError(
                f"{self.path}: fitted on {where}, but {retriever.store_label} returns {retriever.score_scale}; "
                "a threshold on another score scale is wrong, not approximate: score a labeled set through this "
                f"store ({retriever.framework} adapter in ragcal.integrations, or `ragcal score --{retriever.framework}"
                " module:factory`) and fit the gate again"
            )
        recorded = self.provenance.get("model_fingerprint")
        known = retriever.model_fingerprint
        if known and recorded and recorded == fitted:  # scored without the model: only the scale was recorded
            fix = (
                "LlamaIndexStore(index, embed_model=embed_model)"
                if retriever.framework == "llamaindex"
                else f"the {retriever.framework} adapter with the store's embedding model"
            )
            raise GateFileError(
                f"{self.path}: the gate's table was scored through {retriever.store_label} without its embedding "
                f"model, so it does not say which model its threshold belongs to, and cannot be checked against "
                f"{known}. Score the labeled set again through {fix} (a factory for `ragcal score "
                f"--{retriever.framework}` returns that, not the bare index) and fit the gate again"
            )
        if known and recorded and recorded != known:
            raise GateFileError(
                f"{self.path}: fitted on embedding model {recorded}, but {retriever.store_label} embeds with {known}; "
                "a threshold on another model's scale is wrong: score and fit again with this model"
            )
        self.contents_overlap = self._check_contents(contents)
        self.described = corpus is not None
        if corpus is not None:
            from ..retrieval.views import CorpusDescription

            if not isinstance(corpus, CorpusDescription):
                corpus = CorpusDescription.from_chunks(corpus, name="the store's documents")
            self.gate = self.gate.bind(corpus)

    def describe_returned(self, hits):
        """What the store returned for one question, for a refusal when ``corpus=`` was not given.

        A :class:`~ragcal.retrieval.views.CorpusDescription` of those
        documents alone (``returned_only``): their pages and heading paths as
        their metadata records them (:func:`passage_of`), their top-level
        sections, and terms to rephrase with from their texts. None when no
        document records a page or heading.
        """
        from ..retrieval.views import CorpusDescription

        passages = [passage_of(hit, self.retriever.text_of(hit.item)) for hit in hits]
        if not passages or any(passage is None for passage in passages):
            return None
        return CorpusDescription.from_passages(passages, name=f"the {self.retriever.store_label} store")

    def _check_contents(self, contents: str) -> float | None:
        """Ask the store the gate file's probe questions; refuse (or warn) when it answers with other documents."""
        import warnings

        from ..gates.files import GateFileError, GateWarning

        recorded = self.provenance.get("store_contents")
        if not recorded:
            warnings.warn(
                f"{self.path}: the gate file does not record what its store held (written before ragcal did), so "
                f"{self.retriever.store_label} cannot be checked against it; score and fit again to record it",
                GateWarning,
                stacklevel=3,
            )
            return None
        check_contents_record(recorded, self.path)
        seen = self.retriever.contents_probe(recorded["questions"], depth=int(recorded["depth"]))
        overlap = contents_overlap(recorded, seen)
        then, now = recorded.get("count"), seen.get("count")
        resized = then is not None and now is not None and then != now
        sizes = f"; it holds {now:,} documents, that store held {then:,}" if resized else ""
        if overlap >= SAME_CONTENTS:
            if resized:
                warnings.warn(
                    f"{self.path}: {self.retriever.store_label} holds {now:,} documents, the store this gate was "
                    f"fitted through held {then:,}; their top documents for its labeled questions agree "
                    f"({overlap:.0%}), so the gate is used: score and fit it again once the store has settled",
                    GateWarning,
                    stacklevel=3,
                )
            return overlap
        examples = "; ".join(
            f"{question!r:.60}: {before!r} then, {now!r} now"
            for question, before, now in list(zip(recorded["questions"], recorded["top"], seen["top"]))[:2]
        )
        message = (
            f"{self.path}: {self.retriever.store_label} holds other contents than the store this gate was fitted "
            f"through: of the top {recorded['depth']} documents for {len(recorded['questions'])} of its labeled "
            f"questions, {overlap:.0%} are the same (first documents: {examples}){sizes}. A threshold fitted on one "
            "corpus says nothing about another: score a labeled set through this store and fit the gate again"
        )
        if contents == "refuse":
            raise GateFileError(
                message + "; or, if the store changed on purpose, bind it with StoreGate(path, store, "
                "contents='warn') and pass that as the gate"
            )
        warnings.warn(message, GateWarning, stacklevel=3)
        return overlap

    def decide(self, query: str, hits) -> tuple:
        """``(Decision, the hits it passes on in the gate's order)``; no hits on refusal.

        Without ``corpus=``, a refusal or hedge is worded from the documents
        the store returned (:meth:`describe_returned`); an answer, which has no
        message, is decided without describing them.
        """
        import dataclasses

        hits = list(hits)
        result = self.retriever.result(hits, query=query)
        decision = self.gate.decide({self.retriever.name: result}, query=query)
        if not self.described and decision.action != "answer":
            described = dataclasses.replace(result, corpus=self.describe_returned(hits))
            decision = self.gate.decide({self.retriever.name: described}, query=query)
        by_id = {}
        for hit in hits:
            by_id.setdefault(hit.chunk_id, hit)
        return decision, [by_id[chunk_id] for chunk_id, _ in decision.passages if chunk_id in by_id]


#: The adapter class of each framework module, which takes the framework's store or retriever as its one argument.
ADAPTERS = {"langchain": "LangChainStore", "llamaindex": "LlamaIndexStore", "haystack": "HaystackStore"}


def store_retriever(framework: str, store) -> StoreRetriever:
    """``store`` as it is if it already is a :class:`StoreRetriever`, else wrapped in ``framework``'s adapter."""
    if isinstance(store, StoreRetriever):
        return store
    if framework not in ADAPTERS:
        raise ValueError(f"unknown framework {framework!r}; known: {', '.join(ADAPTERS)}")
    module = importlib.import_module(f"ragcal.integrations.{framework}")
    return getattr(module, ADAPTERS[framework])(store)


def load_factory(spec: str, *, option: str):
    """``"module:function"`` -> what the function returns (called with no arguments), for ``ragcal score``."""
    module_name, _, function_name = str(spec).partition(":")
    if not module_name or not function_name:
        raise ValueError(f"{option} {spec!r}: expected module:function (a function that returns the store)")
    import sys

    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # the user's module beside them, as `python -m` would find it
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"{option} {spec!r}: cannot import {module_name!r} ({error})") from None
    factory = getattr(module, function_name, None)
    if not callable(factory):
        raise ValueError(f"{option} {spec!r}: {module_name} has no function {function_name!r}")
    return factory()
