"""Split documents into chunks.

Two chunkers share one output type, :class:`Chunk`:

- :func:`chunk_by_headings` follows the page structure. Each heading starts a
  section, and each chunk keeps its heading path (``"Tutorial - User Guide ›
  Security › Get Current User"``). Fenced code, tables, lists and admonition
  blocks (``/// tip ... ///``) are never cut. A section longer than
  ``max_tokens`` is split between blocks only; a single block that is longer
  than the limit becomes a chunk of its own and is flagged ``oversized``.
  A heading inside a blockquote (the Rust book's asides, ``> ### The Stack and
  the Heap``) starts a section that ends with the blockquote.
- :func:`chunk_fixed_size` cuts each page into windows of ``size`` tokens with
  no regard for structure: the tutorial default that seed 000 blames for quiet
  failures, kept as a baseline.

Tokens are counted with :func:`count_tokens`, a BERT-style pre-tokenizer
(words and single punctuation marks). It needs no model, and it is a lower
bound on the number of WordPiece tokens the embedding model sees.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath

import pandas as pd

from ._params import check_int
from .corpus import Document, strip_heading_anchor

__all__ = [
    "Chunk",
    "chunk_by_headings",
    "chunk_fixed_size",
    "chunk_size_summary",
    "count_tokens",
    "HEADING_SEPARATOR",
    "chunk_id",
    "page_of",
    "pages_of",
]

HEADING_SEPARATOR = " › "


def chunk_id(page: str, position: int) -> str:
    """The id of a page's ``position``-th chunk: ``<page path>#<position>`` (what TREC runs carry as docid)."""
    return f"{page}#{position}"


def page_of(chunk_id: str) -> str:
    """The page of a chunk id: ``"tutorial/cors.md#3"`` -> ``"tutorial/cors.md"``."""
    return chunk_id.rsplit("#", 1)[0]


def pages_of(chunk_ids) -> list[str]:
    """:func:`page_of` of each chunk id, in order (a pandas Series is split vectorised, and a list comes back)."""
    if isinstance(chunk_ids, pd.Series):
        return chunk_ids.str.rsplit("#", n=1).str[0].tolist()
    return [page_of(chunk_id) for chunk_id in chunk_ids]

_TOKEN = re.compile(r"\w+|[^\w\s]")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})")
_ADMONITION_OPEN = re.compile(r"^(/{3,})[ \t]*\S")
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d+[.)])[ \t]+")
_TABLE_ROW = re.compile(r"^[ \t]*\|")
_QUOTE_LINE = re.compile(r"^ {0,3}>")
_QUOTE_PREFIX = re.compile(r"^ {0,3}> ?")


def count_tokens(text: str) -> int:
    """Number of word and punctuation tokens in ``text``."""
    return len(_TOKEN.findall(text))


@dataclass(frozen=True)
class Chunk:
    """A retrievable piece of a document.

    Attributes
    ----------
    chunk_id : str
        ``"<doc path>#<n>"`` with n counting from 0 within the document. Stable
        for the same document text and chunking parameters.
    doc_path : str
        Relative path of the source document; the ``gold`` id in query files.
    heading_path : tuple of str
        Section titles from the top of the docs tree down to this chunk.
    body : str
        The Markdown text of the chunk.
    n_tokens : int
        :func:`count_tokens` of :attr:`text`.
    oversized : bool
        True when the chunk is a single block longer than the chunker's limit.
    metadata : dict
        The source document's front-matter metadata.
    """

    chunk_id: str
    doc_path: str
    heading_path: tuple[str, ...]
    body: str
    n_tokens: int
    oversized: bool = False
    metadata: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def text(self) -> str:
        """The text that is embedded and indexed: heading path, blank line, body."""
        if not self.heading_path:
            return self.body
        return HEADING_SEPARATOR.join(self.heading_path) + "\n\n" + self.body


# --------------------------------------------------------------------------- blocks


@dataclass
class _Block:
    kind: str  # heading, fence, admonition, table, list, paragraph, quote_end
    text: str
    level: int = 0
    quoted: bool = False  # a heading inside a blockquote


def _fence_end(lines: list[str], start: int) -> int:
    """Index just past the fence that opens at ``lines[start]``."""
    marker = _FENCE_OPEN.match(lines[start]).group(1)
    closing = re.compile(rf"^[ \t]*{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$")
    for index in range(start + 1, len(lines)):
        if closing.match(lines[index]):
            return index + 1
    return len(lines)  # unterminated: the rest of the page is code


def _admonition_end(lines: list[str], start: int) -> int:
    """Index just past the admonition that opens at ``lines[start]``.

    The closing line is the same number of slashes alone on a line, which lets
    ``////`` tabs hold ``///`` admonitions.
    """
    marker = _ADMONITION_OPEN.match(lines[start]).group(1)
    index = start + 1
    while index < len(lines):
        if _FENCE_OPEN.match(lines[index]):
            index = _fence_end(lines, index)
            continue
        if lines[index].strip() == marker:
            return index + 1
        index += 1
    return len(lines)


def _starts_block(line: str) -> bool:
    return bool(
        _HEADING.match(line) or _FENCE_OPEN.match(line) or _ADMONITION_OPEN.match(line) or _TABLE_ROW.match(line)
    )


def _list_end(lines: list[str], start: int) -> int:
    index = start + 1
    while index < len(lines):
        line = lines[index]
        if _FENCE_OPEN.match(line) and line[:1] in (" ", "\t"):
            index = _fence_end(lines, index)
            continue
        if not line.strip():
            following = next((i for i in range(index + 1, len(lines)) if lines[i].strip()), None)
            if following is None:
                return index
            next_line = lines[following]
            if next_line[:1] in (" ", "\t") or _LIST_ITEM.match(next_line):
                index = following
                continue
            return index
        if line[:1] not in (" ", "\t") and not _LIST_ITEM.match(line) and _starts_block(line):
            return index
        index += 1
    return index


def _quote_blocks(lines: list[str], start: int) -> tuple[list[_Block], int] | None:
    """Blocks of the blockquote that starts at ``lines[start]``, if it holds a heading.

    Returns ``(blocks, end)``: the quote's headings, its paragraphs (split at
    ``>`` lines) and fences (kept whole, so ``> # hidden`` rustdoc lines in a
    quoted fence are not headings), lines kept with their ``>`` prefix, then a
    ``quote_end`` block; ``end`` is the index just past the quote. Returns None
    for a quote without a heading, which stays one paragraph as before.
    """
    end = start
    while end < len(lines) and _QUOTE_LINE.match(lines[end]):
        end += 1
    inner = [_QUOTE_PREFIX.sub("", line, count=1) for line in lines[start:end]]
    blocks: list[_Block] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            blocks.append(_Block("paragraph", "\n".join(paragraph)))
            paragraph.clear()

    index = 0
    while index < len(inner):
        if _FENCE_OPEN.match(inner[index]):
            flush()
            fence_end = _fence_end(inner, index)
            blocks.append(_Block("fence", "\n".join(lines[start + index : start + fence_end])))
            index = fence_end
            continue
        if heading := _HEADING.match(inner[index]):
            flush()
            blocks.append(_Block("heading", strip_heading_anchor(heading.group(2)), len(heading.group(1)), quoted=True))
        elif not inner[index].strip():
            flush()
        else:
            paragraph.append(lines[start + index])
        index += 1
    flush()
    if not any(block.kind == "heading" for block in blocks):
        return None
    return blocks + [_Block("quote_end", "")], end


def _parse_blocks(text: str) -> list[_Block]:
    lines = text.split("\n")
    blocks: list[_Block] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.strip():
            index += 1
            continue
        if _QUOTE_LINE.match(line) and (quote := _quote_blocks(lines, index)) is not None:
            quote_blocks, index = quote
            blocks.extend(quote_blocks)
            continue
        if _FENCE_OPEN.match(line):
            end, kind = _fence_end(lines, index), "fence"
        elif _ADMONITION_OPEN.match(line):
            end, kind = _admonition_end(lines, index), "admonition"
        elif heading := _HEADING.match(line):
            blocks.append(_Block("heading", strip_heading_anchor(heading.group(2)), len(heading.group(1))))
            index += 1
            continue
        elif _TABLE_ROW.match(line):
            end, kind = index + 1, "table"
            while end < len(lines) and _TABLE_ROW.match(lines[end]):
                end += 1
        elif _LIST_ITEM.match(line):
            end, kind = _list_end(lines, index), "list"
        else:
            end, kind = index + 1, "paragraph"
            while end < len(lines) and lines[end].strip() and not _starts_block(lines[end]):
                end += 1
        blocks.append(_Block(kind, "\n".join(lines[index:end]).strip("\n").rstrip()))
        index = end
    return blocks


# --------------------------------------------------------------------------- heading-aware


def _section_titles(documents: list[Document]) -> dict[str, str]:
    """Title of each folder, taken from its ``index.md``; folder name otherwise."""
    titles = {}
    for document in documents:
        pure = PurePosixPath(document.path)
        if pure.name == "index.md":
            titles[pure.parent.as_posix()] = document.title
    return titles


def _ancestor_titles(document: Document, titles: dict[str, str]) -> list[str]:
    pure = PurePosixPath(document.path)
    folders = list(pure.parents)[:-1]  # drop "."
    if pure.name == "index.md":
        folders = folders[1:]  # an index page is the title of its own folder
    return [titles.get(folder.as_posix(), folder.name.replace("-", " ").title()) for folder in reversed(folders)]


def _heading_path(ancestors: list[str], stack: list[tuple[int, str]], page_title: str) -> tuple[str, ...]:
    titled = [title for _, title in stack]
    if not stack or stack[0][0] != 1:  # no H1 above: the page title stands in for it
        titled = [page_title] + titled
    return tuple(ancestors + titled)


def _pack(blocks: list[str], max_tokens: int) -> list[tuple[str, bool]]:
    """Greedily group consecutive blocks into pieces of at most ``max_tokens``."""
    pieces: list[tuple[str, bool]] = []
    current: list[str] = []
    current_tokens = 0
    for block in blocks:
        block_tokens = count_tokens(block)
        if current and current_tokens + block_tokens > max_tokens:
            pieces.append(("\n\n".join(current), False))
            current, current_tokens = [], 0
        if block_tokens > max_tokens:
            pieces.append((block, True))
            continue
        current.append(block)
        current_tokens += block_tokens
    if current:
        pieces.append(("\n\n".join(current), False))
    return pieces


def chunk_by_headings(documents, *, max_tokens: int | None = 256) -> list[Chunk]:
    """Chunk documents along their headings.

    Parameters
    ----------
    documents : list of Document
        As returned by :func:`ragcal.corpus.load_corpus`. Folder titles for
        the heading path come from the ``index.md`` pages in this list.
    max_tokens : int or None, default=256
        Longest chunk body, in :func:`count_tokens` tokens. Longer sections
        are split between blocks. MiniLM-L6-v2 reads at most 256 WordPiece
        tokens. None keeps every section whole.

    Returns
    -------
    list of Chunk
        In document order. Sections without body text (a heading directly
        followed by a sub-heading) produce no chunk; their titles live on in
        the heading paths below them.
    """
    max_tokens = check_int(max_tokens, "max_tokens", "chunk_by_headings", low=1, allow_none=True)
    documents = list(documents)
    titles = _section_titles(documents)
    chunks: list[Chunk] = []
    for document in documents:
        ancestors = _ancestor_titles(document, titles)
        stack: list[tuple[int, str]] = []
        outside_quote: list[tuple[int, str]] | None = None  # the headings in force before a quoted heading
        sections: list[tuple[tuple[str, ...], list[str]]] = [(_heading_path(ancestors, stack, document.title), [])]
        for block in _parse_blocks(document.text):
            if block.kind == "heading":
                if block.quoted and outside_quote is None:
                    outside_quote = stack
                stack = [(level, title) for level, title in stack if level < block.level]
                stack.append((block.level, block.text))
                sections.append((_heading_path(ancestors, stack, document.title), []))
            elif block.kind == "quote_end":
                stack, outside_quote = outside_quote, None
                sections.append((_heading_path(ancestors, stack, document.title), []))
            else:
                sections[-1][1].append(block.text)
        position = 0
        for heading_path, blocks in sections:
            for body, oversized in _pack(blocks, math.inf if max_tokens is None else max_tokens):
                chunk = Chunk(
                    chunk_id=chunk_id(document.path, position),
                    doc_path=document.path,
                    heading_path=heading_path,
                    body=body,
                    n_tokens=0,
                    oversized=oversized,
                    metadata=document.metadata,
                )
                chunks.append(replace(chunk, n_tokens=count_tokens(chunk.text)))
                position += 1
    return chunks


# --------------------------------------------------------------------------- fixed-size


def chunk_fixed_size(documents, *, size: int = 500, overlap: int = 0) -> list[Chunk]:
    """Cut each document into windows of ``size`` tokens, ignoring structure.

    Windows start every ``size - overlap`` tokens and end on a token boundary
    of the original text. Chunks carry no heading path.

    Parameters
    ----------
    documents : list of Document
    size : int, default=500
        Window length in :func:`count_tokens` tokens.
    overlap : int, default=0
        Tokens shared by consecutive windows; ``0 <= overlap < size``.

    Returns
    -------
    list of Chunk
    """
    size = check_int(size, "size", "chunk_fixed_size", low=1)
    overlap = check_int(overlap, "overlap", "chunk_fixed_size", low=0, high=size - 1)
    chunks = []
    for document in documents:
        spans = [match.span() for match in _TOKEN.finditer(document.text)]
        for position, start in enumerate(range(0, max(len(spans) - overlap, 1), size - overlap)):
            window = spans[start : start + size]
            if not window:
                break
            body = document.text[window[0][0] : window[-1][1]]
            chunks.append(
                Chunk(
                    chunk_id=chunk_id(document.path, position),
                    doc_path=document.path,
                    heading_path=(),
                    body=body,
                    n_tokens=len(window),
                    metadata=document.metadata,
                )
            )
    return chunks


def chunk_size_summary(chunks) -> pd.DataFrame:
    """Count, size quantiles and oversized count of a chunk list, as one row."""
    sizes = pd.Series([chunk.n_tokens for chunk in chunks], dtype="int64")
    return pd.DataFrame(
        [
            {
                "documents": len({chunk.doc_path for chunk in chunks}),
                "chunks": len(sizes),
                "tokens_min": sizes.min(),
                "tokens_median": sizes.median(),
                "tokens_p90": sizes.quantile(0.9),
                "tokens_max": sizes.max(),
                "oversized": sum(chunk.oversized for chunk in chunks),
            }
        ]
    )
