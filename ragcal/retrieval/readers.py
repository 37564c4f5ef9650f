"""Readers: steps after retrieval that read each query's retrieved passages and add one view of their own.

A judge (:class:`ragcal.judges.JudgeReader`) is a reader: it reads the first
passages of the dense list and adds the ``"judge"`` view, which the judge
signals read. Retrieval knows only this protocol, never the judges, so the
imports run one way: :mod:`ragcal.judges` builds on retrieval, not the reverse.

::

    from ragcal.judges import judge_reader
    index = build_index("docs/", readers=[judge_reader("judge/")])
    index.retrieve(["How do I set a cookie?"])["judge"]

:meth:`ragcal.retrieval.index.RetrievalIndex.retrieve` and
:func:`ragcal.candidate_scoring.score_candidates` both run the readers through
:func:`apply_readers`, in the order given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from .._params import parameter_error
from .base import RetrievalResult

__all__ = ["PassageReader", "check_readers", "apply_readers", "readers_config"]


@runtime_checkable
class PassageReader(Protocol):
    """What ragcal asks of a step after retrieval.

    Attributes
    ----------
    name : str
        The view it adds (``"judge"``); no two readers of an index share one,
        and none may be a retriever's name.

    Methods
    -------
    config() -> dict
        Its provenance, merged into the index's ``config`` and so into every
        score table and gate file (a gate on its view needs this very reader).
    __call__(queries, retrieved, texts, *, check_leakage=True) -> list of RetrievalResult
        One result per query, from the views retrieved so far (``{name:
        [result, ...]}``) and the passages' texts (chunk id -> text).
        ``check_leakage`` False means deciding, not measuring: a reader trained
        on questions may then see them.
    """

    name: str

    def config(self) -> dict: ...

    def __call__(
        self, queries: Sequence[str], retrieved: Mapping, texts: Mapping, *, check_leakage: bool = True
    ) -> list[RetrievalResult]: ...


def check_readers(readers, owner: str, *, taken=()) -> tuple:
    """``readers`` as a tuple, each a :class:`PassageReader` with a name of its own.

    Raises
    ------
    TypeError
        A reader without ``name``, ``config`` or ``__call__``.
    ValueError
        Two readers, or a reader and a retriever (``taken``), with one name.
    """
    readers = tuple(readers or ())
    names = set(taken)
    for reader in readers:
        if not isinstance(reader, PassageReader):
            raise parameter_error(
                "readers",
                owner,
                "a sequence of passage readers (name, config(), called with queries, retrieved, texts), "
                "e.g. ragcal.judges.judge_reader(...)",
                type(reader).__name__,
                error=TypeError,
            )
        if reader.name in names:
            raise ValueError(f"{owner}: the view {reader.name!r} is named twice (a retriever's or another reader's)")
        names.add(reader.name)
    return readers


def readers_config(readers) -> dict:
    """Every reader's provenance, in order (a later reader's key overrides an earlier one's)."""
    config = {}
    for reader in readers:
        config.update(reader.config())
    return config


def apply_readers(readers, queries, retrieved: dict, texts: Mapping, *, check_leakage: bool = True) -> dict:
    """Run ``readers`` in order; each adds its view to ``retrieved`` (changed in place, and returned).

    A later reader sees the views of the earlier ones.

    Raises
    ------
    ValueError
        A reader that returns other than one result per query.
    """
    queries = [str(query) for query in queries]
    for reader in readers:
        results = list(reader(queries, retrieved, texts, check_leakage=check_leakage))
        if len(results) != len(queries):
            raise ValueError(f"reader {reader.name!r} returned {len(results)} results for {len(queries)} queries")
        retrieved[reader.name] = results
    return retrieved
