"""Access levels of chunks, and which levels a caller may see.

Seed 000: "a passage the user isn't allowed to see never reaches the model".
ragcal applies that before anything is ranked. Every chunk gets one access
level:

1. ``access_level`` from its page's front matter, when the page has one;
2. otherwise the level of the first row of an access map whose glob matches
   the page path (a CSV with columns ``path_glob,level``, for corpora without
   front matter);
3. otherwise the default level (``"public"`` unless the user says otherwise).

A caller names the levels it may see (``allowed_levels``). The index it gets
back from :meth:`ragcal.retrieval.index.RetrievalIndex.restrict` holds only those
chunks: the dense index, the BM25 statistics (IDF and lengths), fusion, the
reranker, the signals, the refusal text and the run files are all computed
from that subset, so no score depends on restricted text.

Globs use :mod:`fnmatch` on page paths relative to the corpus root, so ``*``
also crosses ``/``; a row that ends in ``/`` covers its whole folder.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "DEFAULT_ACCESS",
    "AccessPolicy",
    "AccessMapError",
    "AccessWarning",
    "load_access_map",
    "parse_levels",
]

#: The level of a page that neither front matter nor the access map places.
DEFAULT_ACCESS = "public"
_LEVEL = re.compile(r"^[A-Za-z0-9_.-]+$")


class AccessMapError(ValueError):
    """An access map file cannot be read; the message names the file and line."""


class AccessWarning(UserWarning):
    """Something about access levels deserves a look (e.g. a map row that matches no page)."""


def _check_level(level, *, source: str) -> str:
    level = str(level).strip()
    if not _LEVEL.match(level):
        raise ValueError(f"{source}: access level {level!r} must be letters, digits, '_', '-' or '.'")
    return level


def parse_levels(levels) -> tuple[str, ...]:
    """``"public,internal"`` or an iterable of names -> a sorted tuple of distinct level names.

    Raises
    ------
    ValueError
        If no level is given or a name is not a plain word.
    """
    if isinstance(levels, str):
        levels = levels.split(",")
    parsed = sorted({_check_level(level, source="allowed levels") for level in levels if str(level).strip()})
    if not parsed:
        raise ValueError("allowed levels: name at least one access level, e.g. 'public' or 'public,internal'")
    return tuple(parsed)


def load_access_map(path) -> tuple[tuple[str, str], ...]:
    """Read an access map CSV (``path_glob,level``) into ``((glob, level), ...)`` in file order.

    Raises
    ------
    AccessMapError
        Missing file, missing columns, an empty glob or an invalid level;
        the message names the file and the line.
    """
    import csv

    path = Path(path)
    if not path.is_file():
        raise AccessMapError(f"{path}: access map not found")
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [column for column in ("path_glob", "level") if column not in (reader.fieldnames or [])]
        if missing:
            raise AccessMapError(
                f"{path}: missing column(s) {', '.join(missing)}; an access map has the header 'path_glob,level'"
            )
        rows = []
        for line, row in enumerate(reader, start=2):
            glob = (row.get("path_glob") or "").strip()
            if not glob:
                raise AccessMapError(f"{path}, line {line}: empty path_glob")
            try:
                level = _check_level(row.get("level") or "", source=f"{path}, line {line}")
            except ValueError as error:
                raise AccessMapError(str(error)) from None
            rows.append((glob, level))
    return tuple(rows)


@dataclass(frozen=True)
class AccessPolicy:
    """How chunks get their access level.

    Parameters
    ----------
    rules : tuple of (str, str), default=()
        ``(path glob, level)`` rows of an access map, first match wins.
    default : str, default="public"
        Level of a page that neither front matter nor ``rules`` place.
    source : str, default=None
        Where ``rules`` came from (a file path), for provenance.
    """

    rules: tuple = ()
    default: str = DEFAULT_ACCESS
    source: str | None = None
    _sha256: str = field(default="", repr=False)

    def __post_init__(self):
        object.__setattr__(self, "default", _check_level(self.default, source="default access level"))
        rules = tuple((str(glob).strip(), _check_level(level, source="access rule")) for glob, level in self.rules)
        # A row that ends in "/" covers its whole folder.
        object.__setattr__(self, "rules", tuple((g + "*" if g.endswith("/") else g, lv) for g, lv in rules))

    @classmethod
    def from_options(cls, *, access_map=None, default: str = DEFAULT_ACCESS) -> "AccessPolicy":
        """The policy of the ``--access-map`` and ``--default-access`` options."""
        if access_map is None:
            return cls(default=default)
        rules = load_access_map(access_map)
        digest = hashlib.sha256(Path(access_map).read_bytes()).hexdigest()
        # An absolute path, so that a gate file's provenance finds the map from any working folder.
        return cls(rules, default, str(Path(access_map).resolve()), digest)

    def level_of_page(self, path: str, metadata=None) -> str:
        """The level of the page ``path`` with front matter ``metadata``."""
        if metadata and metadata.get("access_level") not in (None, ""):
            return _check_level(metadata["access_level"], source=f"{path}: front matter access_level")
        for glob, level in self.rules:
            if fnmatch.fnmatchcase(path, glob):
                return level
        return self.default

    def levels(self, chunks) -> list[str]:
        """The level of every chunk, in order.

        Raises
        ------
        AccessMapError
            If a map row matches no page of the corpus: most often a typo, and
            the pages it meant to protect would silently get the default level.

        Warns
        -----
        AccessWarning
            For a page whose front matter and map row name different levels;
            the front matter wins.
        """
        levels = [self.level_of_page(chunk.doc_path, chunk.metadata) for chunk in chunks]
        pages = {chunk.doc_path: chunk.metadata for chunk in chunks}
        source = self.source or "access map"
        unused = [glob for glob, _ in self.rules if not any(fnmatch.fnmatchcase(page, glob) for page in pages)]
        if unused:
            raise AccessMapError(
                f"{source}: row(s) {', '.join(map(repr, unused))} match no page of the corpus; fix the glob (a typo "
                "would leave the pages it meant to protect at the default level) or remove the row"
            )
        disagree = []
        for page, metadata in pages.items():
            own = (metadata or {}).get("access_level")
            if own in (None, ""):
                continue
            mapped = next((level for glob, level in self.rules if fnmatch.fnmatchcase(page, glob)), None)
            if mapped is not None and mapped != str(own).strip():
                disagree.append(f"{page} (front matter {own}, map {mapped})")
        if disagree:
            warnings.warn(
                f"{source}: front matter and map disagree on {len(disagree)} page(s): {'; '.join(disagree[:5])}; "
                "the front matter wins",
                AccessWarning,
                stacklevel=2,
            )
        return levels

    def to_dict(self) -> dict:
        """Provenance: the map's path and sha256 and the default level."""
        return {"access_map": self.source, "access_map_sha256": self._sha256 or None, "default_access": self.default}
