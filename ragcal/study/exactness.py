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
import math
import re
from pathlib import Path

from .anchoring import TOLERANCES

__all__ = [
    "RUN_DEPENDENT_FILE",
    "TEXT_TOLERANCE",
    "compare_files",
    "compare_text",
    "differing_files",
    "read_run_dependent",
    "verdict_lines",
]

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


#: A number as printed in a result file: sign, digits, optional fraction and exponent.
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
#: Declared tolerance of a printed number, beyond one unit of its last printed digit: the largest absolute tolerance of
#: :data:`ragcal.study.anchoring.TOLERANCES` (a quantity printed to fewer digits may round to the next last digit).
TEXT_TOLERANCE = max(absolute for _, absolute, _, _ in TOLERANCES)


def _last_digit(token: str) -> float | None:
    """One unit of a number's last printed digit; None for an integer (compared exactly: a count, a decision)."""
    mantissa, _, exponent = token.lower().partition("e")
    if "." not in mantissa and not exponent:
        return None
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (int(exponent or 0) - decimals)


def compare_text(new: str, old: str) -> tuple[bool, float]:
    """Whether two texts are the same but for numbers within tolerance, and the largest difference of a number.

    Everything but numbers must be equal; integers must be equal (counts and
    decisions); a number with decimals may differ by :data:`TEXT_TOLERANCE`
    plus one unit of its last printed digit (a value that moved by 1e-7 can
    round to the next 4th decimal).
    """
    new_parts, old_parts = _NUMBER.split(new), _NUMBER.split(old)
    if new_parts != old_parts:
        return False, math.inf
    worst = 0.0
    for mine, theirs in zip(_NUMBER.findall(new), _NUMBER.findall(old)):
        if mine == theirs:
            continue
        unit = _last_digit(theirs)
        if unit is None or _last_digit(mine) is None:
            return False, math.inf
        deviation = abs(float(mine) - float(theirs))
        worst = max(worst, deviation)
        if not deviation <= TEXT_TOLERANCE + unit * (1 + 1e-9):
            return False, deviation
    return True, worst


def compare_files(actual, expected, *, ignore=()) -> dict:
    """Compare two folders file by file: identical, equal within tolerance, or different.

    Returns
    -------
    dict
        ``identical`` (list of paths), ``within`` (list of ``(path, largest
        deviation)``: text files equal but for numbers within tolerance, see
        :func:`compare_text`) and ``different`` (``"changed: "``,
        ``"missing: "`` or ``"extra: "`` paths, as :func:`differing_files`).
    """
    actual, expected = Path(actual), Path(expected)
    identical, within, different = [], [], []
    for problem in differing_files(actual, expected, ignore=ignore):
        kind, _, name = problem.partition(": ")
        if kind != "changed":
            different.append(problem)
            continue
        try:
            same, deviation = compare_text(
                (actual / name).read_text(encoding="utf-8"), (expected / name).read_text(encoding="utf-8")
            )
        except UnicodeDecodeError:
            same, deviation = False, math.inf
        (within.append((name, deviation)) if same else different.append(problem))
    changed = {problem.partition(": ")[2] for problem in different} | {name for name, _ in within}
    for path in sorted(expected.rglob("*")):
        name = path.relative_to(expected).as_posix()
        if path.is_file() and name not in changed and not any(fnmatch.fnmatch(name, glob) for glob in ignore):
            identical.append(name)
    return {"identical": identical, "within": within, "different": different}


def verdict_lines(comparison: dict, *, ignored: int = 0) -> list[str]:
    """The verdict of :func:`compare_files` in a few lines."""
    within, different = comparison["within"], comparison["different"]
    largest = within and f" (largest deviation {max(d for _, d in within):.2e}: {', '.join(n for n, _ in within[:5])})"
    lines = [
        f"files: {len(comparison['identical'])} identical to the committed ones"
        + (f" ({ignored} run-dependent files not compared)" if ignored else "")
        + f"; {len(within)} equal within the declared tolerance"
        + (largest if within else "")
        + f"; {len(different)} beyond tolerance"
    ]
    lines += [f"  beyond tolerance: {problem}" for problem in different[:20]]
    if len(different) > 20:
        lines.append(f"  ... and {len(different) - 20} more")
    return lines
