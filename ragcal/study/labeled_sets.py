"""The keyword check that keeps the bundled labeled query sets honest.

An *unanswerable* near-domain query is only unanswerable if the corpus does not
cover its topic. :func:`keyword_check` searches the corpus for the topic's
terms and decides:

- **covered** when a term appears in any heading, or when one page mentions the
  terms ``max_mentions`` times or more: some page is about the topic, so the
  label is wrong (or the corpus changed);
- otherwise **not covered**, with the passing mentions listed per page
  (``"release-notes.md:2; tutorial/background-tasks.md:1"``) so that they can be
  recorded next to the label and reviewed.

Terms match case-insensitively at the start of a word, so a stem such as
``paginat`` finds "pagination" and "paginate"; a space or hyphen in a term
matches either (``rate limit`` finds "rate-limiting").
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from ..chunking import chunk_by_headings

__all__ = ["KeywordCheck", "keyword_check", "term_pattern"]


def term_pattern(terms) -> re.Pattern:
    """One case-insensitive regex for a list of terms (see the module docstring)."""
    terms = [term.strip() for term in terms if term.strip()]
    if not terms:
        raise ValueError("keyword_check needs at least one non-empty term")
    alternatives = [r"[\s-]+".join(re.escape(word) for word in re.split(r"[\s-]+", term)) for term in terms]
    return re.compile(r"(?<!\w)(?:" + "|".join(alternatives) + ")", re.IGNORECASE)


@dataclass(frozen=True)
class KeywordCheck:
    """Outcome of :func:`keyword_check`.

    Attributes
    ----------
    covered : bool
    heading_hits : tuple of str
        ``"page: heading"`` for every heading that contains a term.
    mentions : dict of str to int
        Mentions per page, pages with none left out.
    """

    covered: bool
    heading_hits: tuple[str, ...]
    mentions: dict

    @property
    def summary(self) -> str:
        """Mentions as ``"page:count; ..."`` sorted by page, or ``"none"``."""
        if not self.mentions:
            return "none"
        return "; ".join(f"{page}:{count}" for page, count in sorted(self.mentions.items()))


def keyword_check(documents, terms, *, max_mentions: int = 5, chunks=None) -> KeywordCheck:
    """Search ``documents`` for a topic's ``terms``.

    Parameters
    ----------
    documents : list of Document
    terms : iterable of str
    max_mentions : int, default=5
        A page with this many mentions or more covers the topic.
    chunks : list of Chunk, default=None
        Heading-aware chunks of ``documents`` (computed when None); their
        heading paths supply the headings.

    Returns
    -------
    KeywordCheck
    """
    pattern = term_pattern(terms)
    chunks = chunk_by_headings(documents) if chunks is None else chunks
    headings = {(chunk.doc_path, title) for chunk in chunks for title in chunk.heading_path}
    heading_hits = tuple(sorted(f"{page}: {title}" for page, title in headings if pattern.search(title)))
    mentions = Counter()
    for document in documents:
        count = len(pattern.findall(document.text))
        if count:
            mentions[document.path] = count
    covered = bool(heading_hits) or any(count >= max_mentions for count in mentions.values())
    return KeywordCheck(covered, heading_hits, dict(mentions))
