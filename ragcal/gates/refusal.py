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
count. A description of only the passages a store returned
(:meth:`CorpusDescription.from_passages`, ``returned_only``) names their
pages and headings, and counts what was returned rather than the corpus.
"""

from __future__ import annotations

from ..chunking import page_of, pages_of
from ..retrieval.views import CorpusDescription, searched_corpus

__all__ = ["CorpusDescription", "searched_corpus", "refusal_message", "hedge_message", "closest_pages"]

#: Views searched for "closest" passages, most meaningful first; any other view comes after.
CLOSEST_VIEWS = ("rerank", "dense", "rrf", "bm25_stopwords", "bm25_raw")
_N_CLOSEST = 3
_N_TOPICS = 6


def closest_pages(results, *, n: int = _N_CLOSEST, page=page_of) -> list[tuple[str, str, float]]:
    """``(page, best chunk id, score)`` of the first ``n`` distinct pages of the most meaningful non-empty view.

    ``page`` maps a chunk id to its page (default: the part of the id before ``#``).
    """
    views = [name for name in CLOSEST_VIEWS if name in results] + [
        name for name in results if name not in CLOSEST_VIEWS
    ]
    for name in views:
        listed = results[name]
        if listed.is_empty:
            continue
        pages = {}
        for chunk_id, score in zip(listed.chunk_ids, listed.scores):
            pages.setdefault(page(chunk_id), (chunk_id, float(score)))
            if len(pages) == n:
                break
        return [(page, chunk_id, score) for page, (chunk_id, score) in pages.items()]
    return []


def _looked_at(results) -> int:
    return len({chunk_id for listed in results.values() for chunk_id in listed.chunk_ids})


def refusal_message(results, *, query: str | None = None, reasons=(), corpus: CorpusDescription | None = None) -> str:
    """The user-facing text of a refusal; see the module docstring.

    ``corpus`` is used only if it describes the view ``results`` came from;
    results that carry their own view's description use that one
    (:func:`searched_corpus`).
    """
    corpus = searched_corpus(results, corpus)
    subject = f"“{query.strip()}”" if query else "this question"
    closest = closest_pages(results, page=corpus.page if corpus is not None else page_of)
    if corpus is not None and corpus.returned_only:
        searched = (
            f"I searched {corpus.name}: none of the {corpus.n_passages:,} passages it returned (from "
            f"{corpus.n_pages:,} pages) answers {subject}."
        )
    elif corpus is not None:
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
        if corpus.topics and corpus.returned_only:
            topics = ", ".join(corpus.topics[:_N_TOPICS])
            return (
                f"Next step: {corpus.name} may not cover this topic at all; the passages it returned are about "
                f"{topics}. Ask about one of them."
            )
        if corpus.topics:
            topics = ", ".join(corpus.topics[:_N_TOPICS])
            return (
                f"Next step: {corpus.name} may not cover this topic at all; it covers {topics}. Ask about one of them."
            )
    return "Next step: ask a narrower question that names the feature, setting or error message you are after."


def hedge_message(passages, *, query: str | None = None, corpus: CorpusDescription | None = None) -> str:
    """The caveat that goes with a hedged answer: which pages it rests on, and that they may fall short."""
    chunk_ids = [chunk_id for chunk_id, _ in passages]
    pages = list(dict.fromkeys(map(corpus.page, chunk_ids) if corpus is not None else pages_of(chunk_ids)))
    pages = pages[:_N_CLOSEST]
    where = f" in {corpus.name}" if corpus is not None else ""
    listed = "; ".join(pages) if pages else "no page"
    return (
        f"I found only partial information{where}, in {listed}. The answer may be incomplete: say what these "
        "passages support and what they leave open."
    )
