"""Small file helpers: every output file is written whole or not at all, and a CSV
written with another separator is named as such instead of as missing columns."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write_text", "atomic_write_bytes", "check_csv_delimiter", "delimiter_problem", "sha256_file"]

_OTHER_DELIMITERS = ((";", "semicolon"), ("\t", "tab"))


def sha256_file(path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def delimiter_problem(header: str) -> str | None:
    """Say so when a CSV header has no comma but semicolons or tabs; None otherwise.

    Spreadsheets in many locales save "CSV" with ``;``. Read with commas, such
    a file has one column named like the whole header, and every column looks
    missing although the header visibly holds them.
    """
    if "," in header:
        return None
    for character, name in _OTHER_DELIMITERS:
        if character in header:
            return (
                f"looks {name}-delimited; ragcal reads comma-separated CSV, save the file with commas between columns"
            )
    return None


def check_csv_delimiter(path) -> None:
    """Raise ``ValueError`` naming ``path`` when its header line is not comma-separated (see :func:`delimiter_problem`)."""
    path = Path(path)
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as stream:
            header = stream.readline()
    except OSError:
        return  # the reader that follows reports a missing or unreadable file
    problem = delimiter_problem(header)
    if problem:
        raise ValueError(f"{path}: {problem}")


def _current_umask() -> int:
    """The process umask (reading it means setting it, so it is set straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_text(path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder.

    The file appears under its name only once it is complete, so a crash or a
    full disk never leaves a truncated output behind. It gets the permissions
    of an ordinary new file, ``0666 & ~umask`` (``-rw-r--r--`` under the usual
    umask 022), not the owner-only mode of the temporary file.
    """
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path, data: bytes) -> Path:
    """:func:`atomic_write_text` for bytes (figures, Parquet): temporary file, fsync, rename in the same folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if hasattr(os, "fchmod"):  # POSIX; mkstemp's 0600 is not an issue elsewhere
            os.fchmod(handle, 0o666 & ~_current_umask())
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    return path
