"""Names of a package loaded on first use: ``import ragcal`` stays cheap and torch or faiss load only when needed.

::

    _API = {"build_index": "retrieval.index", ...}      # name -> module, relative to the package
    __getattr__, __dir__ = lazy_names(__name__, _API, globals())
"""

from __future__ import annotations

from importlib import import_module

__all__ = ["lazy_names"]


def lazy_names(package: str, api: dict, namespace: dict):
    """The module-level ``__getattr__`` and ``__dir__`` (PEP 562) of ``package``, which load ``api``'s names lazily.

    A name is imported from its module at first use and then stored in
    ``namespace`` (the package's ``globals()``), so later look-ups skip the
    hook. ``dir(package)`` lists the names before they are loaded.
    """

    def __getattr__(name):
        if name in api:
            value = getattr(import_module(f".{api[name]}", package), name)
            namespace[name] = value  # later look-ups skip this function
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(namespace) | set(namespace.get("__all__", ())) | set(api))

    return __getattr__, __dir__
