"""Load a folder of Markdown pages into :class:`Document` objects.

A document keeps its path relative to the folder (the id that labeled query
files use in their ``gold`` column), its title (the first ``#`` heading), its
text and the metadata found in YAML front matter.

Two include syntaxes are expanded so that code examples are searchable; pass
``expand_includes=False`` to keep the directive lines as they are:

- ``{* ../../docs_src/app/main.py hl[3] *}``, the mkdocs convention of the
  FastAPI docs, becomes a fenced code block of the file (``ln[a:b]`` selects
  lines).
- ``{{#include ../listings/ch02/src/main.rs:io}}`` and ``{{#rustdoc_include
  ...}}``, mdBook's directives (the Rust book), are replaced by the raw
  selected lines: mdBook pages put them inside a code fence already. The path
  is relative to the page's folder; a suffix ``:NAME`` selects the lines
  between ``ANCHOR: NAME`` and ``ANCHOR_END: NAME`` markers, ``:N``,
  ``:N:M``, ``:N:`` and ``::M`` select lines by number (1-based, inclusive).
  Lines holding an ``ANCHOR:`` or ``ANCHOR_END:`` marker are never kept.

Every include target must resolve, symlinks followed, to a regular file inside
the include root (by default the parent of the Markdown folder). Anything else
(an absolute path, a path that climbs out, a symlink that leads out, a folder)
is rejected with an :class:`IncludeWarning`, recorded in
``Document.rejected_includes`` and never opened.

The Rust book's ``<Listing number="2-1" file-name="src/main.rs" caption="...">``
and ``</Listing>`` wrapper lines are replaced by readable text (``Listing 2-1:
<caption>`` and ``Filename: src/main.rs``).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import yaml

__all__ = ["Document", "CorpusError", "IncludeWarning", "corpus_pages", "load_corpus", "METADATA_FIELDS"]

#: Front-matter keys that are lifted into ``Document.metadata`` under these names.
#: Other front-matter keys are kept too, unchanged.
METADATA_FIELDS = ("doc_type", "owner", "effective_date", "region", "access_level")

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
# Either a FastAPI directive (a line of its own) or an mdBook one (anywhere, not escaped with a backslash). One
# pattern, so that the text an include brings in is never scanned for further directives.
_INCLUDE = re.compile(
    r"(?P<fastapi>^\{\*\s*(?P<path>\S+)(?P<options>.*?)\s*\*\}[ \t]*$)"
    r"|(?P<mdbook>(?<!\\)\{\{#(?P<kind>include|rustdoc_include)[ \t]+(?P<target>[^}\s]+)[ \t]*\}\})",
    re.MULTILINE,
)
_LINE_SELECTOR = re.compile(r"(?P<first>\d*)(?::(?P<last>\d*))?")
_ANCHOR_START = re.compile(r"ANCHOR:\s*(?P<name>[\w-]+)")
_ANCHOR_END = re.compile(r"ANCHOR_END:\s*(?P<name>[\w-]+)")
_ANCHOR_MARKER = re.compile(r"ANCHOR(?:_END)?:")
_LISTING_OPEN = re.compile(
    r"^(?P<quote>(?:>[ \t]?)*)<Listing(?P<attributes>(?:\s+[\w-]+\s*=\s*(?:\"[^\"]*\"|'[^']*'))*)\s*>[ \t]*$",
    re.MULTILINE,
)
_LISTING_CLOSE = re.compile(r"^(?:>[ \t]?)*</Listing>[ \t]*\n?", re.MULTILINE)
_ATTRIBUTE = re.compile(r"(?P<name>[\w-]+)\s*=\s*(?:\"(?P<double>[^\"]*)\"|'(?P<single>[^']*)')")
_LINE_RANGE = re.compile(r"\bln\[(\d+):(\d+)\]")
_HEADING_ANCHOR = re.compile(r"\s*\{\s*#[^}]*\}\s*$")
_TITLE = re.compile(r"^#[ \t]+(.+?)[ \t]*$", re.MULTILINE)
_CODE_LANGUAGES = {".py": "python", ".toml": "toml", ".json": "json", ".yml": "yaml", ".yaml": "yaml"}


class CorpusError(ValueError):
    """A corpus folder or one of its files cannot be read as documents."""


class IncludeWarning(UserWarning):
    """An include directive names a target outside the include root, or not a regular file.

    The target is not read: the directive stays in the text as written and the
    target is listed in ``Document.rejected_includes``.
    """


@dataclass(frozen=True)
class Document:
    """One Markdown page.

    Attributes
    ----------
    path : str
        Path relative to the corpus folder, with ``/`` separators
        (``tutorial/cors.md``).
    title : str
        Text of the first level-1 heading, without mkdocs anchors; the file
        stem when the page has none.
    text : str
        The Markdown body, front matter removed and (by default) include
        directives expanded.
    metadata : dict
        Front-matter values; see :data:`METADATA_FIELDS`.
    missing_includes : tuple of str
        Include targets that could not be found (no such file, or an mdBook
        anchor that the file does not define), as written in the directive
        (``../listings/ch02/src/main.rs:io``); their directives are kept
        verbatim in ``text``.
    rejected_includes : tuple of str
        Include targets refused because they resolve outside the include root
        (an absolute path, ``..`` climbing above it, a symlink leading out) or
        to something that is not a regular file. They are never opened, their
        directives are kept verbatim in ``text`` and each one issues an
        :class:`IncludeWarning`.
    """

    path: str
    title: str
    text: str
    metadata: dict = field(default_factory=dict, compare=False)
    missing_includes: tuple[str, ...] = ()
    rejected_includes: tuple[str, ...] = ()
    consulted: tuple[str, ...] = field(default=(), compare=False, repr=False)


def strip_heading_anchor(heading: str) -> str:
    """Remove a trailing mkdocs anchor such as ``{ #first-steps }``."""
    return _HEADING_ANCHOR.sub("", heading).strip()


def _split_front_matter(raw: str, source: Path) -> tuple[dict, str]:
    match = _FRONT_MATTER.match(raw)
    if match is None:
        return {}, raw
    try:
        metadata = yaml.safe_load(match.group(1)) or {}
    except yaml.YAMLError as error:
        raise CorpusError(f"{source}: invalid YAML front matter: {error}") from error
    if not isinstance(metadata, dict):
        raise CorpusError(f"{source}: front matter must be a YAML mapping, got {type(metadata).__name__}")
    return metadata, raw[match.end() :]


def _confine(candidate: Path, include_root: Path) -> tuple[Path | None, str | None]:
    """Resolve an include target and check that it may be read.

    Returns ``(path, None)`` for a regular file inside ``include_root``,
    ``(None, None)`` when nothing exists there, and ``(None, reason)`` when the
    target must be rejected. Symlinks are followed before the check, so a link
    inside the root that points out of it is rejected.
    """
    root = include_root.resolve()
    resolved = candidate.resolve()
    if not resolved.is_relative_to(root):
        return None, f"it resolves to {resolved}, outside the include root {root}"
    if not resolved.exists():
        return None, None
    if not resolved.is_file():
        return None, f"{resolved} is not a regular file"
    return resolved, None


def _fastapi_candidate(target: str, include_root: Path) -> Path:
    """Where a ``{* ... *}`` target points.

    FastAPI writes include paths relative to its ``docs/en/`` folder whatever
    the page's depth, so leading ``../`` parts are dropped and the rest is
    looked up under ``include_root``.
    """
    return include_root / re.sub(r"^(\.\./|\./)+", "", target)


def _read_include(path: Path, source: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise CorpusError(f"{path}: included from {source} but is not UTF-8 text ({error})") from error


def _anchored_lines(lines: list[str], anchor: str) -> list[str] | None:
    """Lines between ``ANCHOR: anchor`` and ``ANCHOR_END: anchor``; None if the anchor is never opened.

    Every stretch of the anchor is kept, as mdBook's ``rustdoc_include`` shows
    it (the Rust book opens one anchor twice to skip lines in the middle); an
    anchor that is never closed runs to the end of the file.
    """
    selected: list[str] = []
    found = inside = False
    for line in lines:
        start, end = _ANCHOR_START.search(line), _ANCHOR_END.search(line)
        if inside and end and end.group("name") == anchor:
            inside = False
        elif not inside and start and start.group("name") == anchor:
            found = inside = True
        elif inside:
            selected.append(line)
    return selected if found else None


def _select_mdbook_lines(code: str, selector: str) -> list[str] | None:
    """The lines an mdBook suffix selects, marker lines removed; None for an unknown anchor."""
    lines = code.splitlines()
    numbers = _LINE_SELECTOR.fullmatch(selector)
    if numbers is None:
        lines = _anchored_lines(lines, selector)
        if lines is None:
            return None
    elif numbers.group("last") is None and numbers.group("first"):  # ":N", line N alone
        first = int(numbers.group("first"))
        lines = lines[first - 1 : first] if first >= 1 else []
    else:  # whole file, ":N:M", ":N:" or "::M"
        first = int(numbers.group("first") or 1)
        last = int(numbers.group("last")) if numbers.group("last") else len(lines)
        lines = lines[max(first - 1, 0) : last]
    return [line for line in lines if not _ANCHOR_MARKER.search(line)]


def _expand_includes(
    text: str, include_root: Path, source: Path
) -> tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    missing: list[str] = []
    rejected: list[str] = []
    consulted: dict[str, None] = {}

    def resolve(target: str, path_text: str, candidate: Path) -> Path | None:
        if Path(path_text).is_absolute():
            resolved, reason = None, "absolute paths are not allowed"
        else:
            consulted[str(candidate.absolute())] = None
            resolved, reason = _confine(candidate, include_root)
        if reason is not None:
            rejected.append(target)
            warnings.warn(f"{source}: include {target!r} rejected: {reason}", IncludeWarning)
        elif resolved is None:
            missing.append(target)
        return resolved

    def replace_fastapi(match: re.Match) -> str:
        target = match.group("path")
        resolved = resolve(target, target, _fastapi_candidate(target, include_root))
        if resolved is None:
            return match.group(0)
        code = _read_include(resolved, source)
        line_range = _LINE_RANGE.search(match.group("options"))
        if line_range:
            first, last = int(line_range.group(1)), int(line_range.group(2))
            code = "\n".join(code.splitlines()[first - 1 : last])
        language = _CODE_LANGUAGES.get(resolved.suffix, "")
        fence = "````" if "```" in code else "```"
        return f"{fence}{language}\n{code.rstrip()}\n{fence}"

    def replace_mdbook(match: re.Match) -> str:
        target = match.group("target")
        path_text, _, selector = target.partition(":")
        resolved = resolve(target, path_text, source.parent / path_text)
        if resolved is None:
            return match.group(0)
        lines = _select_mdbook_lines(_read_include(resolved, source), selector)
        if lines is None:
            missing.append(target)
            return match.group(0)
        return "\n".join(lines)

    def replace(match: re.Match) -> str:
        return replace_fastapi(match) if match.group("fastapi") else replace_mdbook(match)

    return _INCLUDE.sub(replace, text), tuple(missing), tuple(rejected), tuple(consulted)


def _listing_caption(match: re.Match) -> str:
    """The text that stands in for an mdBook ``<Listing ...>`` opening line."""
    attributes = {
        attribute.group("name"): attribute.group("double") or attribute.group("single") or ""
        for attribute in _ATTRIBUTE.finditer(match.group("attributes"))
    }
    number, caption, file_name = attributes.get("number"), attributes.get("caption"), attributes.get("file-name")
    lines = []
    if number and caption:
        lines.append(f"Listing {number}: {caption}")
    elif number or caption:
        lines.append(f"Listing {number}" if number else caption)
    if file_name:
        lines.append(f"Filename: {file_name}")
    return "\n".join(match.group("quote") + line for line in lines) or match.group("quote").rstrip()


def _unwrap_listings(text: str) -> str:
    """Replace ``<Listing ...>`` lines by their caption and file name, and drop ``</Listing>`` lines."""
    return _LISTING_CLOSE.sub("", _LISTING_OPEN.sub(_listing_caption, text))


def load_document(
    path: Path, *, root: Path, expand_includes: bool = True, include_root: Path | None = None
) -> Document:
    """Read one Markdown file; see :func:`load_corpus` for the parameters."""
    path = Path(path)
    try:
        raw = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise CorpusError(f"{path}: not UTF-8 text ({error})") from error
    raw = raw.replace("\r\n", "\n")
    metadata, body = _split_front_matter(raw, path)
    body = _unwrap_listings(body)
    missing: tuple[str, ...] = ()
    rejected: tuple[str, ...] = ()
    consulted: tuple[str, ...] = ()
    if expand_includes:
        body, missing, rejected, consulted = _expand_includes(body, Path(include_root or root.parent), path)
    title_match = _TITLE.search(_strip_fences(body))
    title = strip_heading_anchor(title_match.group(1)) if title_match else path.stem.replace("-", " ")
    return Document(
        path=path.relative_to(root).as_posix(),
        title=title,
        text=body,
        metadata=metadata,
        missing_includes=missing,
        rejected_includes=rejected,
        consulted=consulted,
    )


def _strip_fences(text: str) -> str:
    """Blank out fenced code so that ``# comment`` lines are not read as headings."""
    return re.sub(r"^(`{3,}|~{3,}).*?^\1[ \t]*$", "", text, flags=re.MULTILINE | re.DOTALL)


def corpus_pages(folder, *, exclude=()) -> list[Path]:
    """The Markdown files :func:`load_corpus` reads from ``folder``, sorted by path, ``exclude`` left out.

    Raises
    ------
    CorpusError
        If the folder does not exist, is empty or holds no Markdown.
    """
    root = Path(folder)
    if not root.is_dir():
        raise CorpusError(f"{root}: corpus folder does not exist or is not a directory")
    if not any(root.iterdir()):
        raise CorpusError(f"{root}: folder is empty, no Markdown (*.md) files to load")
    excluded = set(exclude)
    # Sorted by path parts, which is how paths compare (and faster than comparing Path objects).
    paths = sorted((path for path in root.rglob("*.md") if path.is_file()), key=lambda path: path.parts)
    paths = [path for path in paths if path.relative_to(root).as_posix() not in excluded]
    if not paths:
        raise CorpusError(f"{root}: no Markdown (*.md) files found")
    return paths


def load_corpus(
    folder, *, expand_includes: bool = True, include_root=None, exclude: tuple[str, ...] = ()
) -> list[Document]:
    """Load every ``*.md`` file below ``folder``, sorted by path.

    Parameters
    ----------
    folder : str or Path
        The Markdown folder. Document paths are relative to it.
    expand_includes : bool, default=True
        Replace ``{* path ... *}`` include directives with the referenced file
        as a fenced code block (``ln[a:b]`` options select lines a to b), and
        mdBook's ``{{#include path}}`` and ``{{#rustdoc_include path}}`` with
        the selected lines of the file (see the module docstring for the
        ``:ANCHOR`` and line-number suffixes).
    include_root : str or Path, default=None
        The only folder that includes may read from. ``{* ... *}`` paths are
        resolved against it after dropping their leading ``../``; mdBook
        paths are resolved against the page's folder and must land inside
        it. Defaults to the parent of ``folder``, which is where ``docs_src/``
        sits in the bundled FastAPI corpus and ``listings/`` in the Rust book.
    exclude : tuple of str, default=()
        Relative paths to leave out.

    Returns
    -------
    list of Document

    Raises
    ------
    CorpusError
        If the folder does not exist, holds no Markdown, or a file (page or
        included file) is not UTF-8 or has malformed front matter. The message
        names the path.

    Warns
    -----
    IncludeWarning
        For each include that is absolute, resolves outside ``include_root``
        (symlinks followed) or is not a regular file. The target is not read
        and is listed in ``Document.rejected_includes``.

    Examples
    --------
    >>> from ragcal.datasets import RUST_BOOK_CORPUS, RUST_BOOK_EXCLUDE
    >>> documents = load_corpus(RUST_BOOK_CORPUS, exclude=RUST_BOOK_EXCLUDE)
    >>> len(documents), sum(len(document.missing_includes) for document in documents)
    (111, 0)
    """
    root = Path(folder)
    paths = corpus_pages(root, exclude=exclude)
    include_root = Path(include_root) if include_root is not None else root.parent
    return [
        load_document(path, root=root, expand_includes=expand_includes, include_root=include_root) for path in paths
    ]
