"""ragcal._io: output files are complete and get the usual permissions."""

import os
import stat

import pytest

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
