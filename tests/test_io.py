"""ragcal._io: output files are complete and get the usual permissions."""

import os
import re
import stat
from pathlib import Path

import pytest

import ragcal
from ragcal._io import atomic_write_text


@pytest.fixture
def umask():
    """Set a umask for one test and restore the previous one afterwards."""
    previous = os.umask(0o022)
    os.umask(previous)

    def set_umask(value):
        os.umask(value)

    yield set_umask
    os.umask(previous)


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077, 0o027], ids=oct)
def test_written_file_gets_0666_minus_umask(tmp_path, umask, mask):
    umask(mask)
    path = atomic_write_text(tmp_path / "out" / "results.csv", "a,b\n1,2\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask
    assert path.read_text() == "a,b\n1,2\n"


def test_overwriting_gives_the_same_permissions(tmp_path, umask):
    umask(0o022)
    path = tmp_path / "results.csv"
    atomic_write_text(path, "first\n")
    atomic_write_text(path, "second\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert path.read_text() == "second\n"
    assert list(tmp_path.iterdir()) == [path]


# A write that bypasses ragcal._io: a DataFrame or figure written straight to a path, a file opened for writing.
DIRECT_WRITE = re.compile(
    r"\.to_csv\((?!index=|\))|\.to_parquet\(|\.savefig\((?!buffer)|\.write_text\(|\.write_bytes\(|json\.dump\("
    r"|nbformat\.write\(|open\([^)]*['\"][wax]b?\+?['\"]"
)


#: Modules that write files one by one into a temporary folder of their own, which is renamed into place whole
#: once complete (and removed on any error): the folder is the atomic unit there, not each file.
WHOLE_FOLDER_WRITERS = {"importers/writing.py"}


def test_every_output_goes_through_the_atomic_writers():
    """Score tables, meta, runs, gate files, CSVs, figures, notebooks: temporary file and rename, nothing else.

    Comments and doctest examples (``>>>`` lines, which write their own example files) are not outputs."""
    package = Path(ragcal.__file__).parent
    offenders = [
        f"{path.relative_to(package)}:{number}: {line.strip()}"
        for path in sorted(package.rglob("*.py"))
        if path.name != "_io.py" and path.relative_to(package).as_posix() not in WHOLE_FOLDER_WRITERS
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if DIRECT_WRITE.search(line) and not line.lstrip().startswith(("#", ">>>"))
    ]
    assert not offenders, "\n".join(offenders)
    assert DIRECT_WRITE.search('table.to_csv(path, index=False)') and DIRECT_WRITE.search('open(p, "w")')
    assert not DIRECT_WRITE.search("atomic_write_text(path, table.to_csv(index=False))")


def test_an_interrupted_write_keeps_the_previous_file(tmp_path, monkeypatch):
    from ragcal import _io

    path = tmp_path / "scores.csv"
    _io.atomic_write_text(path, "old\n")

    def fail(*args):
        raise KeyboardInterrupt  # as a kill between writing and renaming would

    monkeypatch.setattr(_io.os, "replace", fail)
    with pytest.raises(KeyboardInterrupt):
        _io.atomic_write_text(path, "new, half written")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["scores.csv"]  # the temporary file is gone too
