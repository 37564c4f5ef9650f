"""Which corpus view a result came from, and what a message about that view may say.

Access control gives every caller a *view* of a corpus: the chunks at the
levels it may see (:meth:`ragcal.retrieval.index.RetrievalIndex.restrict`).
A decision's wording (counts, topics, headings, owners, terms) must describe
the view that was searched, never a larger one. So every retriever stamps its
results with :func:`~ragcal.retrieval.base.view_key` of the chunks it holds, and
:meth:`~ragcal.retrieval.index.RetrievalIndex.retrieve` also attaches the
view's :class:`CorpusDescription`. :func:`searched_corpus` picks the
description a decision may use; gates call it for every refusal and hedge, so
a gate bound to another view is rebound to the searched one (or words its
message from the results alone).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .base import view_key

__all__ = ["CorpusDescription", "Passage", "searched_corpus", "ViewMismatchError"]

_N_TERMS = 3


class ViewMismatchError(ValueError):
    """Results of one query come from different corpus views (e.g. one retriever restricted, another not)."""


def _corpus_label(corpus_dir) -> str:
    path = Path(str(corpus_dir))
    # The bundled layouts keep the pages in docs/ or src/ below a folder named after the project.
    name = path.parent.name if path.name in ("docs", "src") and path.parent.name else path.name
    return f"the {name} documentation" if name else "the documentation"


@dataclass(frozen=True)
class CorpusDescription:
    """What a refusal may say about the corpus that was searched.

    Build it with :meth:`from_index`; bind it to a gate with ``gate.bind(description)``.

    Attributes
    ----------
    name : str
        How the corpus is named to the user, e.g. ``"the fastapi documentation"``.
    n_passages, n_pages : int
    headings : dict of str to tuple of str
        Heading path of every chunk id.
    owners : dict of str to str
        Page path -> ``owner`` from its front matter, for pages that have one.
    texts : dict of str to str
        Indexed text of every chunk id (for rephrasing terms).
    idf : dict of str to float
        Inverse document frequency of each token (BM25 without stop words).
    topics : tuple of str
        Top-level section titles, those with the most pages first.
    view : str
        :func:`~ragcal.retrieval.base.view_key` of the described chunks (computed when empty).
    pages : dict of str to str
        Page of each chunk id whose id does not name it (``<page>#<n>``); empty for ragcal's own chunks.
    returned_only : bool
        True when it describes only the passages a store returned for one
        question (:meth:`from_passages`), not the whole corpus: a refusal then
        counts what it was given, not what the corpus holds.
    """

    name: str
    n_passages: int
    n_pages: int
    headings: dict = field(repr=False)
    owners: dict = field(repr=False)
    texts: dict = field(repr=False)
    idf: dict = field(repr=False)
    topics: tuple = ()
    view: str = ""
    pages: dict = field(default_factory=dict, repr=False)
    returned_only: bool = False

    def __post_init__(self):
        if not self.view:
            object.__setattr__(self, "view", view_key(self.headings))

    @classmethod
    def from_index(cls, index, *, name: str | None = None) -> "CorpusDescription":
        """Describe a :class:`ragcal.retrieval.index.RetrievalIndex`."""
        bm25 = index.bm25.get("bm25_stopwords") or next(iter(index.bm25.values()))
        return cls.from_chunks(
            index.chunks, name=name or _corpus_label(index.config.get("corpus", "")), idf=dict(bm25.bm25.idf)
        )

    @classmethod
    def from_chunks(cls, chunks, *, name: str = "the documentation", idf=None) -> "CorpusDescription":
        """Describe the chunks a store was built from (``documents_from_chunks(chunks)``, ...), for its refusals.

        ``idf`` (token -> inverse document frequency, for rephrasing terms) is
        computed by BM25 without stop words over the chunks when None.
        """
        passages = [
            Passage(chunk.chunk_id, chunk.doc_path, tuple(chunk.heading_path), chunk.text, chunk.metadata.get("owner"))
            for chunk in chunks
        ]
        return cls._describe(passages, name=name, idf=idf)

    @classmethod
    def from_passages(cls, passages, *, name: str) -> CorpusDescription:
        """Describe the passages a store returned for one question, when nothing describes the whole store.

        Parameters
        ----------
        passages : sequence of Passage
            In the store's order, each with its page and heading path as the
            store's documents record them (:func:`ragcal.integrations.contents.passage_of`).
        name : str
            How the refusal names what was searched, e.g. ``"the LangChain FAISS store"``.

        The counts, topics and rephrasing terms (tf-idf over these passages
        alone) describe what was returned, and :attr:`returned_only` makes a
        refusal say so.
        """
        return cls._describe(list(passages), name=name, returned_only=True)

    @classmethod
    def _describe(cls, passages, *, name: str, idf=None, returned_only: bool = False) -> CorpusDescription:
        """The description of ``passages``; ``idf`` by BM25 without stop words over their texts when None."""
        from ..chunking import page_of
        from .bm25 import BM25Retriever

        if idf is None:
            ids, texts = [passage.chunk_id for passage in passages], [passage.text for passage in passages]
            idf = dict(BM25Retriever(ids, texts, variant="stopwords").bm25.idf) if passages else {}
        return cls(
            name=name,
            n_passages=len(passages),
            n_pages=len({passage.page for passage in passages}),
            headings={passage.chunk_id: tuple(passage.heading_path) for passage in passages},
            owners={passage.page: str(passage.owner) for passage in passages if passage.owner},
            texts={passage.chunk_id: passage.text for passage in passages},
            idf=dict(idf),
            topics=_topics((passage.heading_path, passage.page) for passage in passages),
            pages={passage.chunk_id: passage.page for passage in passages if passage.page != page_of(passage.chunk_id)},
            returned_only=returned_only,
        )

    def page(self, chunk_id: str) -> str:
        """The page of a chunk id: as recorded (:attr:`pages`), else the part of the id before ``#``."""
        from ..chunking import page_of

        return self.pages.get(chunk_id) or page_of(chunk_id)

    def heading(self, chunk_id: str) -> str:
        from ..chunking import HEADING_SEPARATOR

        return HEADING_SEPARATOR.join(self.headings.get(chunk_id, ())) or chunk_id

    def shares_words(self, chunk_ids, query: str | None) -> bool:
        """True when the query and these chunks have a word in common (stop words aside)."""
        from .bm25 import tokenize

        asked = set(tokenize(query or "", variant="stopwords"))
        return any(asked & set(tokenize(self.texts.get(chunk_id, ""), variant="stopwords")) for chunk_id in chunk_ids)

    def rephrasing_terms(self, chunk_ids, query: str | None, *, n: int = _N_TERMS, min_passages: int = 3) -> list[str]:
        """The ``n`` words of these chunks with the highest tf-idf that the query does not use.

        Only the corpus's vocabulary qualifies: words found in at least
        ``min_passages`` passages (no names or typos) and in at most a tenth
        of them (no filler). Corpora of fewer than 30 passages are too small
        for either filter.
        """
        from .bm25 import tokenize

        total = self.n_passages
        rarest, commonest = math.inf, -math.inf
        if total >= 30:  # BM25's idf falls as a word's passage count rises
            rarest = math.log((total - min_passages + 0.5) / (min_passages + 0.5))
            commonest = math.log((total - total / 10 + 0.5) / (total / 10 + 0.5))
        asked = set(tokenize(query or "", variant="stopwords"))
        counts = Counter(
            token
            for chunk_id in chunk_ids
            for token in tokenize(self.texts.get(chunk_id, ""), variant="stopwords")
            if len(token) > 2
            and not token.isdigit()
            and token not in asked
            and token in self.idf
            and commonest <= self.idf[token] <= rarest
        )
        weighted = sorted(counts, key=lambda token: (-counts[token] * self.idf[token], token))
        return weighted[:n]


@dataclass(frozen=True)
class Passage:
    """One passage a store returned, as its document describes it: what a refusal may name."""

    chunk_id: str
    page: str
    heading_path: tuple = ()
    text: str = ""
    owner: str | None = None


def _topics(headed_pages) -> tuple:
    """Top-level section titles of ``(heading path, page)`` pairs, those with the most pages first (stable)."""
    pages_per_topic = Counter(dict.fromkeys((path[0], page) for path, page in headed_pages if path))
    topic_pages = Counter(topic for topic, _ in pages_per_topic)
    return tuple(sorted(topic_pages, key=lambda topic: -topic_pages[topic]))


def searched_corpus(results, bound=None):
    """The :class:`CorpusDescription` a decision on ``results`` may word its message with.

    Parameters
    ----------
    results : mapping of str to RetrievalResult
        One query's results, as a gate's ``decide`` receives them.
    bound : CorpusDescription, default=None
        The description the gate was bound to.

    Returns
    -------
    CorpusDescription or None
        - the description the results carry (they came from
          :meth:`RetrievalIndex.retrieve`): always the searched view, whatever
          the gate was bound to;
        - else ``bound``, if it describes the view the results are stamped with;
        - else, for results built by hand (no stamp), ``bound`` if it holds
          every chunk they name;
        - else None: the message names only what was retrieved.

    Raises
    ------
    ViewMismatchError
        If the results come from different views.
    """
    listed = [result for result in results.values()]
    views = {result.view for result in listed if result.view}
    if len(views) > 1:
        names = ", ".join(f"{result.retriever}={result.view}" for result in listed if result.view)
        raise ViewMismatchError(
            f"one query's results come from {len(views)} corpus views ({names}); retrieve every view the gate reads "
            "from the same index or access view"
        )
    carried = [result.corpus for result in listed if result.corpus is not None]
    if carried:
        return carried[0]
    if bound is None:
        return None
    if views:
        return bound if views == {bound.view} else None
    named = {chunk_id for result in listed for chunk_id in result.chunk_ids}
    return bound if named <= bound.headings.keys() else None
