"""A corpus as one searchable index: chunks, a dense and two BM25 retrievers, fusion, a reranker, passage readers.

::

    index = build_index("path/to/markdown")
    retrieved = index.retrieve(["How do I set a cookie?"])   # {"dense": [...], "bm25_raw": [...], ...}

:func:`chunk_corpus` loads and chunks a folder as :func:`build_index` does,
without embedding anything. :meth:`RetrievalIndex.restrict` gives the view of
a caller who may see only some access levels (see :mod:`ragcal.access`).
"""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path

from .. import __version__
from .._params import check_choice, parameter_error
from ..access import DEFAULT_ACCESS, AccessPolicy, parse_levels
from ..chunking import chunk_by_headings, chunk_fixed_size
from ..corpus import load_corpus
from ..embedding.loading import load_embedder
from ..embedding.minilm import Embedder  # noqa: F401  (the name stays here: tests replace it; load_embedder builds one)
from ..embedding.models import DEFAULT_MODEL
from ..embedding.protocol import check_embedder, embedder_name
from .ann import DenseIndexSpec
from .bm25 import BM25Retriever
from .dense import DenseRetriever
from .diagnostics.registry import diagnostic_rows
from .fusion import reciprocal_rank_fusion
from .readers import apply_readers, check_readers, readers_config

__all__ = ["RetrievalIndex", "IndexOptions", "chunk_corpus", "build_index", "CHUNKERS"]

CHUNKERS = ("headings", "fixed")


@dataclass
class RetrievalIndex:
    """Chunks of a corpus with a dense and two BM25 retrievers over them, and optionally a reranker.

    Attributes
    ----------
    chunks : list of Chunk
    dense : DenseRetriever
    bm25 : dict of str to BM25Retriever
        ``{"bm25_raw": ..., "bm25_stopwords": ...}``.
    fuse : tuple of str
        Retrievers whose lists reciprocal rank fusion merges into ``"rrf"``.
    config : dict
        Everything the scores depend on: model fingerprint, chunker and its
        parameters, corpus digest, reranker, access levels. Written next to
        every output.
    levels : list of str, default=None
        Access level of every chunk (see :mod:`ragcal.access`); all
        ``"public"`` when None.
    reranker : CrossEncoderReranker, default=None
        Re-scores the fused candidates into the ``"rerank"`` view.
    readers : tuple of PassageReader, default=()
        Steps after retrieval (:mod:`ragcal.retrieval.readers`), run in order,
        each adding one view: a judge (:class:`ragcal.judges.JudgeReader`)
        adds ``"judge"``, which the judge signals read.
    """

    chunks: list
    dense: DenseRetriever
    bm25: dict
    fuse: tuple = ("dense", "bm25_stopwords")
    config: dict = field(default_factory=dict)
    levels: list | None = None
    reranker: object = None
    readers: tuple = ()
    _views: dict = field(default_factory=dict, repr=False, compare=False)
    _description: object = field(default=None, repr=False, compare=False)
    #: ``(cache folder, key)`` of the saved index this one was built or loaded as (its views are saved beside it).
    _saved: tuple | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if self.levels is None:
            self.levels = [DEFAULT_ACCESS] * len(self.chunks)
        if len(self.levels) != len(self.chunks):
            raise ValueError(f"{len(self.levels)} access levels for {len(self.chunks)} chunks")

    @property
    def doc_paths(self) -> set[str]:
        return {chunk.doc_path for chunk in self.chunks} | set(self.config.get("documents", ()))

    def hidden_gold_questions(self, queries) -> list:
        """Ids of the answerable queries none of whose gold pages this index (or view) holds.

        For a caller restricted to some access levels these questions are
        unanswerable, whatever the labeled set says.
        """
        visible = {chunk.doc_path for chunk in self.chunks}
        return [row.id for row in queries.itertuples() if row.answerable and not set(row.gold) & visible]

    @property
    def description(self):
        """:class:`~ragcal.retrieval.views.CorpusDescription` of this index (or view), built once.

        :meth:`retrieve` attaches it to every result, so that a refusal or
        hedge can only describe the view that was searched.
        """
        if self._description is None:
            from .views import CorpusDescription

            self._description = CorpusDescription.from_index(self)
        return self._description

    @property
    def retriever_names(self) -> tuple[str, ...]:
        reranked = ("rerank",) if self.reranker is not None else ()
        return ("dense", *self.bm25, "rrf", *reranked, *(reader.name for reader in self.readers))

    def restrict(self, allowed_levels) -> "RetrievalIndex":
        """The index a caller who may see ``allowed_levels`` searches: only the chunks at those levels.

        Its dense index holds only their vectors, its BM25 statistics (IDF,
        lengths) come only from their texts, and fusion, the reranker, the
        signals and refusal messages see nothing else. One view is built per
        distinct set of levels, then reused. When every chunk is visible,
        the view is the index itself.

        Raises
        ------
        ValueError
            If no chunk is visible at these levels.
        """
        allowed = parse_levels(allowed_levels)
        if allowed in self._views:
            return self._views[allowed]
        unknown = sorted(set(allowed) - set(self.levels))
        if unknown:  # fails closed (nothing extra is shown), but a typo deserves a word
            import warnings

            from ..access import AccessWarning

            warnings.warn(
                f"access level(s) {', '.join(unknown)} occur on no page of {self.config.get('corpus', 'the corpus')}",
                AccessWarning,
                stacklevel=2,
            )
        keep = [position for position, level in enumerate(self.levels) if level in allowed]
        if not keep:
            present = ", ".join(sorted(set(self.levels)))
            raise ValueError(
                f"no chunk of {self.config.get('corpus', 'the corpus')} is visible at access level(s) "
                f"{', '.join(allowed)}; the corpus has level(s) {present}"
            )
        if len(keep) == len(self.chunks):  # everything is visible: the view is the index itself
            self._views[allowed] = self
            return self
        chunks = [self.chunks[position] for position in keep]
        dense, bm25 = self._view_retrievers(allowed, keep, chunks)
        visible_pages = sorted({chunk.doc_path for chunk in chunks})
        config = {**self.config, "documents": visible_pages, "allowed_levels": list(allowed), "n_visible": len(keep)}
        view = RetrievalIndex(
            chunks,
            dense,
            bm25,
            fuse=self.fuse,
            config=config,
            levels=[self.levels[position] for position in keep],
            reranker=self.reranker,
            readers=self.readers,
        )
        self._views[allowed] = view
        return view

    def _view_retrievers(self, allowed, keep, chunks) -> tuple:
        """The dense and BM25 retrievers of a view: loaded when saved beside this index, else built (and saved)."""
        from . import store

        chunk_ids = [chunk.chunk_id for chunk in chunks]
        if self._saved is not None:
            loaded = store.load_view(
                *self._saved, allowed, keep, chunk_ids, embedder=self.dense.embedder, dense_spec=self.dense.index_spec
            )
            if loaded is not None:
                return loaded
        dense = self.dense.subset(keep)
        bm25 = {
            name: BM25Retriever.from_chunks(chunks, variant=r.variant, name=name, backend=r.backend)
            for name, r in self.bm25.items()
        }
        if self._saved is not None and all(r.backend == "sparse" for r in bm25.values()):
            store.save_view(*self._saved, allowed, keep, dense, bm25)
        return dense, bm25

    def retrieve(
        self,
        queries,
        *,
        depth: int = 100,
        rrf_k: int = 60,
        rrf_top: int = 50,
        allowed_levels=None,
        diagnostics: bool = True,
        check_leakage: bool = True,
    ) -> dict[str, list]:
        """Run every retriever on every query.

        Parameters
        ----------
        queries : sequence of str
        depth : int, default=100
            Results per retriever.
        rrf_k, rrf_top : int
            Reciprocal rank fusion's damping constant and list length (at
            least the reranker's depth, so that it has enough candidates).
        allowed_levels : str or sequence of str, default=None
            Search only the chunks at these access levels (see
            :meth:`restrict`); None searches the whole index.
        diagnostics : bool, default=True
            Attach each retriever's per-query diagnostics to its results
            (:func:`ragcal.retrieval.diagnostics.attach_diagnostics`), which
            signals such as ``bm25_norm_raw`` or ``dense_centroid_cosine`` read;
            without them those signals are NaN.
        check_leakage : bool, default=True
            Passed to every reader after retrieval: a judge then refuses
            questions it was trained on (what is measured on them flatters
            it); :func:`ragcal.gates.ask` passes False, since deciding on
            such a question is fine.

        Returns
        -------
        dict of str to list of RetrievalResult
            ``{retriever name: [result of query 0, query 1, ...]}`` for
            ``dense``, ``bm25_raw``, ``bm25_stopwords``, ``rrf`` and, with a
            reranker, ``rerank``, then one view per reader (a judge's: ``judge``).

        Raises
        ------
        JudgeLeakageError
            With a judge reader trained on any of ``queries``
            (:func:`ragcal.judges.check_not_trained_on`), unless
            ``check_leakage`` is False (deciding, not measuring).
        """
        if allowed_levels is not None:
            view = self.restrict(allowed_levels)
            return view.retrieve(
                queries, depth=depth, rrf_k=rrf_k, rrf_top=rrf_top, diagnostics=diagnostics, check_leakage=check_leakage
            )
        queries = [str(query) for query in queries]
        query_vectors = self.dense.encode_queries(queries)
        retrieved = {"dense": self.dense.search_vectors(query_vectors, k=depth)}
        for name, retriever in self.bm25.items():
            retrieved[name] = retriever.search(queries, k=depth)
        if self.reranker is not None:
            rrf_top = max(rrf_top, self.reranker.depth)
        retrieved["rrf"] = [
            reciprocal_rank_fusion([retrieved[name][position] for name in self.fuse], k=rrf_k, depth=depth, top=rrf_top)
            for position in range(len(queries))
        ]
        infos = {}
        if diagnostics:  # from the very retriever objects that produced each list (see retrieval/diagnostics/)
            infos = diagnostic_rows(retrieved, queries, {"dense": self.dense, **self.bm25}, query_vectors=query_vectors)
        needs_texts = self.reranker is not None or self.readers
        texts = {chunk.chunk_id: chunk.text for chunk in self.chunks} if needs_texts else {}
        if self.reranker is not None:
            retrieved["rerank"] = self.reranker.rerank(queries, retrieved["rrf"], texts)
        apply_readers(self.readers, queries, retrieved, texts, check_leakage=check_leakage)
        description = self.description
        stamp = {"view": description.view, "corpus": description}  # every result: the view searched, its words
        return {
            name: [
                result._with_info(info, **stamp)
                for result, info in zip(results, infos.get(name) or repeat(None, len(results)))
            ]
            for name, results in retrieved.items()
        }


def chunk_corpus(
    corpus_dir,
    *,
    chunker: str = "headings",
    max_tokens: int = 256,
    window: int = 500,
    expand_includes: bool = True,
    exclude=(),
) -> tuple[list, list, dict]:
    """Load and chunk a Markdown folder exactly as :func:`build_index` does, without embedding.

    Parameters
    ----------
    corpus_dir : str or Path
    chunker : {"headings", "fixed"}, default="headings"
    max_tokens : int, default=256
        Limit of the heading-aware chunker.
    window : int, default=500
        Window of the fixed-size chunker.
    expand_includes : bool, default=True
    exclude : sequence of str, default=()
        Pages to leave out, as paths relative to ``corpus_dir`` (the bundled
        corpora's non-doc pages are :attr:`ragcal.datasets.BundledCorpus.exclude`).

    Returns
    -------
    documents : list of Document
    chunks : list of Chunk
    chunking : dict
        The chunker and its options, for provenance.
    """
    check_choice(chunker, "chunker", "chunk_corpus", CHUNKERS)
    exclude = tuple(exclude)
    documents = load_corpus(corpus_dir, expand_includes=expand_includes, exclude=exclude)
    if chunker == "headings":
        chunks = chunk_by_headings(documents, max_tokens=max_tokens)
    else:
        chunks = chunk_fixed_size(documents, size=window)
    chunking = _chunking_options(chunker, max_tokens=max_tokens, window=window, expand_includes=expand_includes)
    return documents, chunks, {**chunking, "excluded": list(exclude)}


def _chunking_options(chunker: str, *, max_tokens: int, window: int, expand_includes: bool) -> dict:
    """The chunker and the options it reads, for provenance and for the saved index's key."""
    if chunker == "headings":
        return {"chunker": "headings", "max_tokens": max_tokens, "expand_includes": expand_includes}
    return {"chunker": "fixed", "window": window, "expand_includes": expand_includes}


def _persistable(embedder) -> bool:
    """Whether ``embedder`` has an on-disk cache to save the index in (not a user's own embedder or ``--no-cache``)."""
    return (
        bool(getattr(embedder, "use_cache", False))
        and hasattr(embedder, "cache_dir")
        and hasattr(embedder, "cache_key")
    )


def _dense_build_parameters(spec: DenseIndexSpec) -> dict:
    """What the faiss index's content depends on (query-time ``ef_search`` and ``nprobe`` aside)."""
    if spec.kind == "hnsw":
        return {"kind": spec.kind, "hnsw_m": spec.hnsw_m, "ef_construction": spec.ef_construction}
    if spec.kind == "ivf":
        return {"kind": spec.kind, "nlist": spec.nlist}
    return {"kind": spec.kind}


def _reissue(build_warnings) -> None:
    """Warn again what loading and chunking the corpus warned (also when the index comes from the cache)."""
    from ..access import AccessWarning
    from ..corpus import IncludeWarning

    categories = {"AccessWarning": AccessWarning, "IncludeWarning": IncludeWarning}
    for name, message in build_warnings:
        warnings.warn(message, categories.get(name, UserWarning), stacklevel=3)


@dataclass(frozen=True)
class IndexOptions:
    """How :func:`build_index` turns a folder into an index: chunking, access levels, faiss kind, caching.

    Everything here is recorded in the index's ``config`` (caching aside), so
    a gate fitted on one index is refused on an index built otherwise.

    Parameters
    ----------
    chunker : {"headings", "fixed"}, default="headings"
    max_tokens : int or None, default=256
        Limit of the heading-aware chunker (None: one chunk per section).
    window : int, default=500
        Window of the fixed-size chunker.
    expand_includes : bool, default=True
    access : AccessPolicy, default=None
        How chunks get their access level (front matter ``access_level``, an
        access map, a default); every chunk is ``"public"`` when None.
    dense_index : {"flat", "hnsw", "ivf"} or DenseIndexSpec, default="flat"
        faiss index of the dense retriever (see :mod:`ragcal.retrieval.ann`).
        Recorded in ``config`` (``dense_index`` and its parameters): a
        threshold fitted on approximate scores is on another scale.
    use_cache : bool, default=True
        Read and write the embedding cache (and a reranker's score cache).
    persist : bool, default=True
        Save the built index in the cache folder of the embedder, and load it
        from there when the pages, options, model, index kind and access
        policy are all the same (:mod:`ragcal.retrieval.store`). A changed
        page, included file, option or model never loads a stale index; a
        corrupt one is rebuilt with an :class:`~ragcal.retrieval.store.IndexCacheWarning`.
        Nothing is saved without a cache (``use_cache=False``) or with an
        embedder of your own that has none.
    """

    chunker: str = "headings"
    max_tokens: int = 256
    window: int = 500
    expand_includes: bool = True
    access: AccessPolicy | None = None
    dense_index: object = "flat"
    use_cache: bool = True
    persist: bool = True

    def __post_init__(self):
        check_choice(self.chunker, "chunker", "IndexOptions", CHUNKERS)


def build_index(
    corpus_dir,
    *,
    embedder=None,
    options: IndexOptions | None = None,
    exclude=(),
    reranker=None,
    readers=(),
    allowed_levels=None,
    cache_dir=None,
) -> RetrievalIndex:
    """Load, chunk, embed (through the cache) and index a Markdown folder; or load the index saved by an earlier build.

    ::

        index = build_index("docs/", options=IndexOptions(chunker="fixed", window=400))
        index = build_index("docs/", embedder="wordllama:l2_supercat_256", readers=[judge_reader("judge/")])

    Parameters
    ----------
    corpus_dir : str or Path
    embedder : EmbedderProtocol or str, default=None
        A ready embedder (anything with a name, a fingerprint and ``encode``,
        see :class:`ragcal.embedding.EmbedderProtocol`), or the model
        :func:`ragcal.embedding.load_embedder` loads: a sentence-transformers
        name or folder, or ``wordllama:NAME[:DIM]``. The packaged MiniLM
        (``DEFAULT_MODEL``) when None.
    options : IndexOptions, default=None
        Chunking, access levels, faiss kind and caching; the defaults when None.
    exclude : sequence of str, default=()
        Pages to leave out, as paths relative to ``corpus_dir`` (the bundled
        corpora's non-doc pages are :attr:`ragcal.datasets.BundledCorpus.exclude`).
    reranker : str or CrossEncoderReranker, default=None
        A cross-encoder (folder or Hub name, re-scoring 50 candidates; a
        :class:`~ragcal.retrieval.rerank.CrossEncoderReranker` for another
        depth) that re-scores the fused candidates into a ``"rerank"`` view.
        It is loaded before anything is embedded, so a bad one fails early.
    readers : sequence of PassageReader, default=()
        Steps after retrieval (:mod:`ragcal.retrieval.readers`), such as a
        judge (:func:`ragcal.judges.judge_reader`), each adding one view.
        Applied at retrieve time, like the reranker, so a saved index serves
        with any reader or none; their provenance goes into ``config``.
    allowed_levels : str or sequence of str, default=None
        Return only what a caller at these levels may see
        (:meth:`RetrievalIndex.restrict`); None returns the whole index.
    cache_dir : str or Path, default=None
        The embedding cache (and the saved index, and the reranker's scores);
        the default cache folder when None.
    """
    options = options if options is not None else IndexOptions()
    if not isinstance(options, IndexOptions):
        raise parameter_error("options", "build_index", "an IndexOptions", type(options).__name__, error=TypeError)
    chunker, max_tokens, window = options.chunker, options.max_tokens, options.window
    expand_includes, dense_index, use_cache = options.expand_includes, options.dense_index, options.use_cache
    if isinstance(reranker, (str, Path)):
        from .rerank import CrossEncoderReranker

        reranker = CrossEncoderReranker(str(reranker), cache_dir=cache_dir, use_cache=use_cache)
    readers = check_readers(readers, "build_index", taken=("dense", "bm25_raw", "bm25_stopwords", "rrf", "rerank"))
    access = options.access or AccessPolicy()
    if embedder is None or isinstance(embedder, (str, Path)):
        embedder = load_embedder(str(embedder or DEFAULT_MODEL), cache_dir=cache_dir, use_cache=use_cache)
    else:
        check_embedder(embedder)
    spec = dense_index if isinstance(dense_index, DenseIndexSpec) else DenseIndexSpec(kind=dense_index)
    chunking = _chunking_options(chunker, max_tokens=max_tokens, window=window, expand_includes=expand_includes)
    exclude = list(exclude)
    persisting = options.persist and _persistable(embedder)
    loaded = saved_at = None  # the saved index found; (cache folder, key) this index is saved under
    if persisting:
        from . import store

        slot, key = store.index_key(
            corpus_dir,
            options={**chunking, "exclude": sorted(exclude)},
            embedder_key=embedder.cache_key,
            dense_build=_dense_build_parameters(spec),
            access=access.to_dict(),
        )
        loaded = store.load_index(embedder.cache_dir, key, embedder=embedder, dense_spec=spec)
    if loaded is not None:
        chunks, levels, dense, bm25, facts, build_warnings = loaded
        _reissue(build_warnings)
        saved_at = (embedder.cache_dir, key)
    else:
        caught = []
        try:  # what loading and chunking warn is recorded, so that a load of the saved index warns it again
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                documents, chunks, _ = chunk_corpus(
                    corpus_dir,
                    chunker=chunker,
                    max_tokens=max_tokens,
                    window=window,
                    expand_includes=expand_includes,
                    exclude=exclude,
                )
                if not chunks:
                    raise ValueError(f"{corpus_dir}: the corpus produced no chunks")
                levels = access.levels(chunks)
        finally:
            build_warnings = [(type(warning.message).__name__, str(warning.message)) for warning in caught]
            _reissue(build_warnings)
        dense = DenseRetriever.from_chunks(chunks, embedder, index=spec)
        bm25 = {
            f"bm25_{variant}": BM25Retriever.from_chunks(chunks, variant=variant) for variant in ("raw", "stopwords")
        }
        facts = {
            "documents": sorted(document.path for document in documents),
            "n_chunks": len(chunks),
            "chunks_sha256": hashlib.sha256(
                "\x00".join(f"{c.chunk_id}\x01{c.text}" for c in chunks).encode()
            ).hexdigest(),
        }
        if persisting:
            entry = store.save_index(
                RetrievalIndex(chunks, dense, bm25, levels=levels),
                embedder.cache_dir,
                slot=slot,
                key=key,
                facts=facts,
                includes=store.include_states(documents),
                build_warnings=build_warnings,
            )
            saved_at = (embedder.cache_dir, key) if entry is not None else None
    config = {
        "ragcal_version": __version__,
        "corpus": str(corpus_dir),
        "documents": facts["documents"],
        "excluded": exclude,
        "n_chunks": facts["n_chunks"],
        "chunks_sha256": facts["chunks_sha256"],
        "model": embedder_name(embedder),
        "model_fingerprint": embedder.fingerprint,
        **chunking,
        **access.to_dict(),
        **(reranker.to_dict() if reranker is not None else {}),
        **readers_config(readers),
        **dense.index_config,
    }
    index = RetrievalIndex(
        chunks, dense, bm25, config=config, levels=levels, reranker=reranker, readers=readers,
        _saved=saved_at,
    )
    return index.restrict(allowed_levels) if allowed_levels is not None else index
