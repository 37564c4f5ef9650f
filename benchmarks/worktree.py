"""A throw-away git worktree of an older commit, for the benchmarks that run old and new code side by side."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def worktree(commit: str):
    """A detached git worktree of ``commit`` under /tmp, removed on the way out."""
    tree = Path(tempfile.mkdtemp(prefix=f"bench-{commit[:12]}-"))
    tree.rmdir()
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(tree), commit], check=True)
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=True)
