"""Load a folder of Markdown pages into :class:`Document` objects.

A document keeps its path relative to the folder (the id that labeled query
files use in their ``gold`` column), its title (the first ``#`` heading), its
text and the metadata found in YAML front matter.

Include directives of the form ``{* ../../docs_src/app/main.py hl[3] *}`` (the
mkdocs convention of the FastAPI docs) are expanded into fenced code blocks so
that code examples are searchable; pass ``expand_includes=False`` to keep the
directive line as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

__all__ = ["Document", "CorpusError", "load_corpus", "METADATA_FIELDS"]

#: Front-matter keys that are lifted into ``Document.metadata`` under these names.
#: Other front-matter keys are kept too, unchanged.
METADATA_FIELDS = ("doc_type", "owner", "effective_date", "region", "access_level")

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_INCLUDE = re.compile(r"^\{\*\s*(?P<path>\S+)(?P<options>.*?)\s*\*\}[ \t]*$", re.MULTILINE)
_LINE_RANGE = re.compile(r"\bln\[(\d+):(\d+)\]")
_HEADING_ANCHOR = re.compile(r"\s*\{\s*#[^}]*\}\s*$")
_TITLE = re.compile(r"^#[ \t]+(.+?)[ \t]*$", re.MULTILINE)
_CODE_LANGUAGES = {".py": "python", ".toml": "toml", ".json": "json", ".yml": "yaml", ".yaml": "yaml"}


class CorpusError(ValueError):
    """A corpus folder or one of its files cannot be read as documents."""


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
        Include targets that could not be found; their directive lines are
        kept verbatim in ``text``.
    """

    path: str
    title: str
    text: str
    metadata: dict = field(default_factory=dict, compare=False)
    missing_includes: tuple[str, ...] = ()


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


def _resolve_include(target: str, include_root: Path) -> Path | None:
    """Find an include target.

    FastAPI writes include paths relative to its ``docs/en/`` folder whatever
    the page's depth, so leading ``../`` parts are dropped and the rest is
    looked up under ``include_root``.
    """
    relative = re.sub(r"^(\.\./|\./)+", "", target)
    candidate = include_root / relative
    return candidate if candidate.is_file() else None


def _expand_includes(text: str, include_root: Path, source: Path) -> tuple[str, tuple[str, ...]]:
    missing: list[str] = []

    def replace(match: re.Match) -> str:
        target = match.group("path")
        resolved = _resolve_include(target, include_root)
        if resolved is None:
            missing.append(target)
            return match.group(0)
        try:
            code = resolved.read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            raise CorpusError(f"{resolved}: included from {source} but is not UTF-8 text ({error})") from error
        line_range = _LINE_RANGE.search(match.group("options"))
        if line_range:
            first, last = int(line_range.group(1)), int(line_range.group(2))
            code = "\n".join(code.splitlines()[first - 1 : last])
        language = _CODE_LANGUAGES.get(resolved.suffix, "")
        fence = "````" if "```" in code else "```"
        return f"{fence}{language}\n{code.rstrip()}\n{fence}"

    return _INCLUDE.sub(replace, text), tuple(missing)


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
    missing: tuple[str, ...] = ()
    if expand_includes:
        body, missing = _expand_includes(body, include_root or root.parent, path)
    title_match = _TITLE.search(_strip_fences(body))
    title = strip_heading_anchor(title_match.group(1)) if title_match else path.stem.replace("-", " ")
    return Document(
        path=path.relative_to(root).as_posix(),
        title=title,
        text=body,
        metadata=metadata,
        missing_includes=missing,
    )


def _strip_fences(text: str) -> str:
    """Blank out fenced code so that ``# comment`` lines are not read as headings."""
    return re.sub(r"^(`{3,}|~{3,}).*?^\1[ \t]*$", "", text, flags=re.MULTILINE | re.DOTALL)


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
        as a fenced code block. ``ln[a:b]`` options select lines a to b.
    include_root : str or Path, default=None
        Folder that include paths are resolved against (after dropping their
        leading ``../``). Defaults to the parent of ``folder``, which is where
        ``docs_src/`` sits in the bundled FastAPI corpus.
    exclude : tuple of str, default=()
        Relative paths to leave out.

    Returns
    -------
    list of Document

    Raises
    ------
    CorpusError
        If the folder does not exist, holds no Markdown, or a file is not
        UTF-8 or has malformed front matter. The message names the path.
    """
    root = Path(folder)
    if not root.is_dir():
        raise CorpusError(f"{root}: corpus folder does not exist or is not a directory")
    if not any(root.iterdir()):
        raise CorpusError(f"{root}: folder is empty, no Markdown (*.md) files to load")
    excluded = set(exclude)
    paths = sorted(path for path in root.rglob("*.md") if path.is_file())
    paths = [path for path in paths if path.relative_to(root).as_posix() not in excluded]
    if not paths:
        raise CorpusError(f"{root}: no Markdown (*.md) files found")
    include_root = Path(include_root) if include_root is not None else root.parent
    return [
        load_document(path, root=root, expand_includes=expand_includes, include_root=include_root) for path in paths
    ]
