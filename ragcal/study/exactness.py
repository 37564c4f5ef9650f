"""Is the study exact? Compare what a run wrote with the committed files, byte for byte.

``make reproduce`` must rewrite every committed file of ``results/``,
``figures/`` and ``notebooks/`` to the byte. The only exceptions are listed in
``results/run-dependent.txt``: one glob a line (relative to the project root),
each followed by a ``#`` comment that says why it cannot be exact (timings).

:func:`differing_files` is what the reduced-study test (``tests/study/
test_reduced_snapshot.py``) and a check after a full run use.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

__all__ = ["RUN_DEPENDENT_FILE", "differing_files", "read_run_dependent"]

#: The list of run-dependent files, relative to the project root.
RUN_DEPENDENT_FILE = Path("results") / "run-dependent.txt"


def read_run_dependent(path) -> list[str]:
    """The globs of a run-dependent list: one a line, each with a ``#`` comment saying why; blank lines skipped.

    Raises
    ------
    ValueError
        A line without its comment, or a comment without a glob, naming the file and the line.
    """
    path = Path(path)
    globs = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        glob, _, why = line.partition("#")
        if not glob.strip() or not why.strip():
            raise ValueError(
                f"{path}:{number}: each line is a glob and a '# why' comment (timings only). Got {line!r} instead."
            )
        globs.append(glob.strip())
    return globs


def differing_files(actual, expected, *, ignore=()) -> list[str]:
    """Files that differ between two folders: changed, missing from ``actual`` or extra in it.

    Parameters
    ----------
    actual, expected : str or Path
        The folder a run wrote and the committed one.
    ignore : sequence of str, default=()
        Globs (``fnmatch``, against paths relative to the folders, ``/``-separated) left out of the comparison.

    Returns
    -------
    list of str
        ``"changed: <path>"``, ``"missing: <path>"`` or ``"extra: <path>"``, sorted by path; empty when every
        file is byte-identical.
    """
    actual, expected = Path(actual), Path(expected)

    def files(root: Path) -> set[str]:
        found = {path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file()}
        return {name for name in found if not any(fnmatch.fnmatch(name, glob) for glob in ignore)}

    mine, theirs = files(actual), files(expected)
    problems = []
    for name in sorted(mine | theirs):
        if name not in mine:
            problems.append(f"missing: {name}")
        elif name not in theirs:
            problems.append(f"extra: {name}")
        elif (actual / name).read_bytes() != (expected / name).read_bytes():
            problems.append(f"changed: {name}")
    return problems
