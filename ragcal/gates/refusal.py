"""Helpful refusals and hedges (seeds 001 and 003), worded from the data.

A refusal never says only "I don't know". It says

- what was searched: the corpus and how many passages were looked at;
- the closest pages that were found, with their heading paths, as "related,
  but not an answer";
- one next step: the owner of the closest page when its front matter names
  one; otherwise, when the closest passages share a word with the question,
  terms to rephrase with, drawn from those passages (highest tf-idf among
  the corpus's own vocabulary: words in at least 3 passages and in at most a
  tenth of them, not already in the question); otherwise (nothing in common:
  probably off-topic) a narrower question, with topics the corpus does cover.

Without a :class:`CorpusDescription` (a gate that is not bound to an index),
the message can only name what the retrievers returned: chunk ids and their
count.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..chunking import page_of, pages_of

__all__ = ["CorpusDescription", "refusal_message", "hedge_message", "closest_pages"]

#: Views searched for "closest" passages, most meaningful first; any other view comes after.
CLOSEST_VIEWS = ("rerank", "dense", "rrf", "bm25_stopwords", "bm25_raw")
_N_CLOSEST = 3
_N_TERMS = 3
_N_TOPICS = 6


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
    """

    name: str
    n_passages: int
    n_pages: int
    headings: dict = field(repr=False)
    owners: dict = field(repr=False)
    texts: dict = field(repr=False)
    idf: dict = field(repr=False)
    topics: tuple = ()

    @classmethod
    def from_index(cls, index, *, name: str | None = None) -> "CorpusDescription":
        """Describe a :class:`ragcal.retrieval.index.RetrievalIndex`."""
        chunks = index.chunks
        bm25 = index.bm25.get("bm25_stopwords") or next(iter(index.bm25.values()))
        pages_per_topic = Counter(
            dict.fromkeys((chunk.heading_path[0], chunk.doc_path) for chunk in chunks if chunk.heading_path)
        )
        topic_pages = Counter(topic for topic, _ in pages_per_topic)
        topics = tuple(sorted(topic_pages, key=lambda topic: -topic_pages[topic]))  # stable: corpus order on ties
        return cls(
            name=name or _corpus_label(index.config.get("corpus", "")),
            n_passages=len(chunks),
            n_pages=len({chunk.doc_path for chunk in chunks}),
            headings={chunk.chunk_id: tuple(chunk.heading_path) for chunk in chunks},
            owners={chunk.doc_path: str(chunk.metadata["owner"]) for chunk in chunks if chunk.metadata.get("owner")},
            texts={chunk.chunk_id: chunk.text for chunk in chunks},
            idf=dict(bm25.bm25.idf),
            topics=topics,
        )

    def heading(self, chunk_id: str) -> str:
        from ..chunking import HEADING_SEPARATOR

        return HEADING_SEPARATOR.join(self.headings.get(chunk_id, ())) or chunk_id

    def shares_words(self, chunk_ids, query: str | None) -> bool:
        """True when the query and these chunks have a word in common (stop words aside)."""
        from ..retrieval.bm25 import tokenize

        asked = set(tokenize(query or "", variant="stopwords"))
        return any(asked & set(tokenize(self.texts.get(chunk_id, ""), variant="stopwords")) for chunk_id in chunk_ids)

    def rephrasing_terms(self, chunk_ids, query: str | None, *, n: int = _N_TERMS, min_passages: int = 3) -> list[str]:
        """The ``n`` words of these chunks with the highest tf-idf that the query does not use.

        Only the corpus's vocabulary qualifies: words found in at least
        ``min_passages`` passages (no names or typos) and in at most a tenth
        of them (no filler). Corpora of fewer than 30 passages are too small
        for either filter.
        """
        from ..retrieval.bm25 import tokenize

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


def closest_pages(results, *, n: int = _N_CLOSEST) -> list[tuple[str, str, float]]:
    """``(page, best chunk id, score)`` of the first ``n`` distinct pages of the most meaningful non-empty view."""
    views = [name for name in CLOSEST_VIEWS if name in results] + [
        name for name in results if name not in CLOSEST_VIEWS
    ]
    for name in views:
        listed = results[name]
        if listed.is_empty:
            continue
        pages = {}
        for chunk_id, score in zip(listed.chunk_ids, listed.scores):
            pages.setdefault(page_of(chunk_id), (chunk_id, float(score)))
            if len(pages) == n:
                break
        return [(page, chunk_id, score) for page, (chunk_id, score) in pages.items()]
    return []


def _looked_at(results) -> int:
    return len({chunk_id for listed in results.values() for chunk_id in listed.chunk_ids})


def refusal_message(results, *, query: str | None = None, reasons=(), corpus: CorpusDescription | None = None) -> str:
    """The user-facing text of a refusal; see the module docstring."""
    subject = f"“{query.strip()}”" if query else "this question"
    closest = closest_pages(results)
    if corpus is not None:
        searched = (
            f"I searched {corpus.name} ({corpus.n_passages:,} passages from {corpus.n_pages:,} pages) and found "
            f"nothing that answers {subject}."
        )
    else:
        searched = (
            f"I looked at {_looked_at(results):,} passages ({', '.join(results) or 'no retriever'}) and none "
            f"answers {subject} well enough."
        )
    lines = [searched]
    if closest:
        lines.append("Related, but not an answer:")
        for page, chunk_id, _ in closest:
            lines.append(f"- {corpus.heading(chunk_id)} ({page})" if corpus is not None else f"- {chunk_id}")
    else:
        lines.append("No passage matched any word of the question.")
    lines.append(_next_step(closest, query, corpus))
    return "\n".join(lines)


def _next_step(closest, query, corpus) -> str:
    if corpus is not None:
        for page, _, _ in closest:
            if page in corpus.owners:
                return f"Next step: ask {corpus.owners[page]}, who owns {page}, whether the documentation covers this."
        chunk_ids = [chunk_id for _, chunk_id, _ in closest]
        terms = corpus.rephrasing_terms(chunk_ids, query) if corpus.shares_words(chunk_ids, query) else []
        if terms:
            quoted = ", ".join(f"“{term}”" for term in terms)
            return f"Next step: if one of those pages is close, rephrase with the terms it uses, such as {quoted}."
        if corpus.topics:
            topics = ", ".join(corpus.topics[:_N_TOPICS])
            return (
                f"Next step: {corpus.name} may not cover this topic at all; it covers {topics}. Ask about one of them."
            )
    return "Next step: ask a narrower question that names the feature, setting or error message you are after."


def hedge_message(passages, *, query: str | None = None, corpus: CorpusDescription | None = None) -> str:
    """The caveat that goes with a hedged answer: which pages it rests on, and that they may fall short."""
    pages = list(dict.fromkeys(pages_of(chunk_id for chunk_id, _ in passages)))[:_N_CLOSEST]
    where = f" in {corpus.name}" if corpus is not None else ""
    listed = "; ".join(pages) if pages else "no page"
    return (
        f"I found only partial information{where}, in {listed}. The answer may be incomplete: say what these "
        "passages support and what they leave open."
    )
