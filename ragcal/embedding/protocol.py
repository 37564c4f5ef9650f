"""What ragcal needs of an embedding model (:class:`EmbedderProtocol`), and the checks that look for it."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["EmbedderProtocol", "check_embedder", "embedder_name"]


@runtime_checkable
class EmbedderProtocol(Protocol):
    """What the dense index, the saved index, score tables and gate files need of an embedding model.

    Attributes
    ----------
    name : str
        The model as the user named it (recorded as ``model`` in an index's
        ``config`` and a score table's ``.meta.json``; ``ragcal ask`` rebuilds
        an index from it, so :func:`load_embedder` should understand it).
    fingerprint : str
        What identifies the score scale: model, weights hash and anything
        else that changes a vector (max sequence length, truncation
        dimension). It is recorded as ``model_fingerprint`` in every index
        config, score table, gate file and golden set, and a gate is refused
        on an index whose fingerprint differs (:func:`ragcal.gates.check_provenance`).

    Methods
    -------
    encode(texts, *, show_progress_bar=None)
        ``ndarray`` of shape ``(len(texts), dimension)``, float32, one
        L2-normalised row per text (so inner product is cosine). A text's row
        must not depend on the other texts of the call.

    Notes
    -----
    Read when present, never required:

    - ``cache_dir``, ``cache_key`` and ``use_cache``: with all three (and
      ``use_cache`` true) :func:`ragcal.retrieval.index.build_index` saves the
      built index under ``cache_dir``, keyed by ``cache_key``, and loads it
      next time (:mod:`ragcal.retrieval.store`). ``cache_key`` must change
      whenever a vector could (it extends the fingerprint).
    - ``stats``, a dict ``{"cached": n, "encoded": n}`` summed over calls:
      ``ragcal score`` prints it and ``ragcal serve`` copies it.
    - ``spec.name``: embedders written before this protocol gave their name
      there; :func:`embedder_name` accepts either.

    The dense index reads the dimension from the vectors, so none is
    required. On Python 3.11, ``isinstance(x, EmbedderProtocol)`` evaluates
    ``name`` and ``fingerprint`` (a hub model's fingerprint loads the model);
    :func:`check_embedder` looks without evaluating anything.

    Examples
    --------
    >>> import numpy as np
    >>> class Constant:
    ...     name = fingerprint = "constant@1"
    ...     def encode(self, texts, *, show_progress_bar=None):
    ...         return np.ones((len(texts), 4), np.float32) / 2
    >>> isinstance(Constant(), EmbedderProtocol)
    True
    """

    @property
    def name(self) -> str: ...

    @property
    def fingerprint(self) -> str: ...

    def encode(self, texts, *, show_progress_bar=None) -> np.ndarray: ...


def embedder_name(embedder) -> str:
    """The model name of an embedder: its ``name``, else (an embedder written before the protocol) ``spec.name``."""
    name = getattr(embedder, "name", None)
    if name is None and getattr(embedder, "spec", None) is not None:
        name = embedder.spec.name
    if not isinstance(name, str) or not name:
        raise TypeError(f"{type(embedder).__name__} has no model name: give it a `name` (see EmbedderProtocol)")
    return name


def check_embedder(embedder, *, parameter: str = "embedder", function: str = "build_index"):
    """Return ``embedder`` unchanged if it has what :class:`EmbedderProtocol` asks for; raise TypeError otherwise.

    Nothing is evaluated (no property is read, no model is loaded): the
    members are looked up with :func:`inspect.getattr_static`.

    Raises
    ------
    TypeError
        Naming the parameter, the members that are missing and the type that arrived.
    """
    import inspect

    def has(member: str) -> bool:
        try:
            inspect.getattr_static(embedder, member)
        except AttributeError:
            return False
        return True

    missing = [member for member in ("fingerprint", "encode") if not has(member)]
    if not has("name") and not has("spec"):
        missing.insert(0, "name")
    if missing or not callable(getattr(type(embedder), "encode", None) or getattr(embedder, "encode", None)):
        raise TypeError(
            f"The {parameter!r} parameter of {function} must have a name, a fingerprint and "
            "encode(texts, *, show_progress_bar=None) (see ragcal.embedding.EmbedderProtocol). "
            f"Got a {type(embedder).__name__} instead, which lacks {', '.join(missing) or 'a callable encode'}."
        )
    return embedder
