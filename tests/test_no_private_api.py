"""ragcal uses no private API of another package: no ``_``-prefixed module or name, imported or reached as an attribute.

Private internals (``scipy.optimize._lbfgsb``, ``sklearn._loss``) change without
notice between versions, so a user with another version gets a crash. The
check reads every ``.py`` under ``ragcal/`` with :mod:`ast` and flags

- ``import a._b`` and ``from a._b import c`` / ``from a import _c`` of any
  package other than ragcal (relative imports are ragcal's own);
- ``alias._b`` (and ``alias.b._c``) where ``alias`` was bound by importing a
  module of another package (``import numpy as np``, ``from scipy import optimize``);
- ``importlib.import_module("a._b")`` with a literal name.

Dunder names (``__version__``, ``__future__``) are public. Attributes of
objects (``model._fitted``) are not seen: only names reached from a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ragcal"
OWN = "ragcal"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_part(dotted: str) -> str | None:
    return next((part for part in dotted.split(".") if _private(part)), None)


def _foreign(module: str) -> bool:
    return module.split(".")[0] != OWN


def _module_aliases(tree: ast.AST) -> dict:
    """``{local name: module}`` for every name an import binds to a module of another package (anywhere in the file).

    ``from a import b`` binds ``b`` to ``a.b`` whether ``b`` is a module or not;
    a private attribute of a public function or class of another package is
    as much its internals as one of a module.
    """
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _foreign(alias.name):
                    if alias.asname:
                        aliases[alias.asname] = alias.name
                    else:  # ``import a.b`` binds ``a``
                        aliases[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module and _foreign(node.module):
            for alias in node.names:
                if alias.name != "*":
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _attribute_chain(node: ast.Attribute):
    """``(root name, [attr, ...])`` of ``root.a.b``, or None when the chain does not start at a plain name."""
    attributes = []
    while isinstance(node, ast.Attribute):
        attributes.append(node.attr)
        node = node.value
    return (node.id, attributes[::-1]) if isinstance(node, ast.Name) else None


def private_uses(source: str, filename: str = "<source>") -> list:
    """``["file:line: what"]`` for every use of another package's private API in ``source``."""
    tree = ast.parse(source, filename=filename)
    found = []

    def flag(node, what):
        found.append(f"{filename}:{node.lineno}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _foreign(alias.name) and _private_part(alias.name):
                    flag(node, f"import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module and _foreign(node.module):
            names = [alias.name for alias in node.names]
            if _private_part(node.module) or any(_private(name) for name in names):
                flag(node, f"from {node.module} import {', '.join(names)}")
    aliases = _module_aliases(tree)
    # A chain ``a.b.c`` is reported once, at its outermost attribute.
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            chain = _attribute_chain(node)
            if chain and chain[0] in aliases and any(_private(attribute) for attribute in chain[1]):
                flag(node, f"{'.'.join([chain[0], *chain[1]])} (of {aliases[chain[0]]})")
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            function = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            name = node.args[0].value
            if function == "import_module" and isinstance(name, str) and _foreign(name) and _private_part(name):
                flag(node, f"import_module({name!r})")
    return found


def test_ragcal_uses_no_private_api_of_another_package():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 50  # the walk found the package
    found = [use for path in files for use in private_uses(path.read_text(), str(path.relative_to(PACKAGE.parent)))]
    assert not found, "private API of another package:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "from scipy.optimize import _lbfgsb",
        "from sklearn._loss.loss import HalfBinomialLoss",
        "import sklearn.utils._param_validation",
        "import pandas._libs.lib as lib",
        "from numpy import _NoValue",
        "from scipy import optimize\noptimize._lbfgsb.setulb(1)",
        "import numpy as np\nx = np._NoValue",
        "def f():\n    import matplotlib as mpl\n    return mpl._api.check_in_list",
        "import scipy.optimize\nscipy.optimize._minimize.minimize",
        "from sklearn import linear_model\nlinear_model.LogisticRegression._check_solver",
        "import importlib\nimportlib.import_module('sklearn._loss')",
    ],
)
def test_the_check_flags_private_api(source):
    assert len(private_uses(source)) == 1


@pytest.mark.parametrize(
    "source",
    [
        "from __future__ import annotations",
        "import numpy as np\nprint(np.__version__)",
        "from scipy.optimize import minimize",
        "from ._params import check_float",  # ragcal's own private modules
        "from .._io import atomic_write_text",
        "from ragcal._params import parameter_error",
        "import ragcal._params\nragcal._params.check_int",
        "import numpy as np\nmodel = object()\nmodel._fitted = np.zeros(2)",  # an object's attribute, not a module's
    ],
)
def test_the_check_passes_public_api(source):
    assert private_uses(source) == []


def _subpackage(parts: list[str]) -> str | None:
    """The package directly under ragcal that a module path (``["ragcal", "gates", "evaluate"]``) belongs to.

    None for ragcal's own top-level modules (``ragcal._io``, ``ragcal.scoring``): they serve every package.
    """
    if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()):
        return parts[1]
    return None


def own_private_imports_across_packages() -> list[str]:
    """``from <ragcal module> import <name>`` where a ``_``-part is reached from another package under ragcal."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                keep = len(parts) - node.level + (1 if is_package else 0)
                target = parts[:keep] + (node.module.split(".") if node.module else [])
            elif isinstance(node, ast.ImportFrom) and node.module and not _foreign(node.module):
                target = node.module.split(".")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    target = alias.name.split(".")
                    crosses = _subpackage(target) not in (None, _subpackage(parts))
                    if not _foreign(alias.name) and _private_part(".".join(target[1:])) and crosses:
                        found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: import {alias.name}")
                continue
            else:
                continue
            for alias in node.names:
                if _private_part(".".join(target[1:] + [alias.name])) is None:
                    continue
                if _subpackage(target) not in (None, _subpackage(parts)):
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: from {'.'.join(target)} import {alias.name}")
    return found


def test_no_private_name_of_ragcal_is_imported_from_another_of_its_packages():
    # A package's `_`-names are its own business: another package reaching them ties the two together unseen.
    # ragcal's top-level private modules (_io, _params) are shared helpers of every package and are allowed.
    assert own_private_imports_across_packages() == []


def test_the_own_private_check_sees_what_it_should(tmp_path, monkeypatch):
    package = tmp_path / "ragcal"
    for name, text in {
        "__init__.py": "",
        "_io.py": "def write(): pass\n",
        "gates/__init__.py": "",
        "gates/evaluate.py": "def _counts(): pass\n",
        "gates/chain.py": "from .evaluate import _counts\nfrom .._io import write\n",
        "study/__init__.py": "",
        "study/learned.py": "from ..gates.evaluate import _counts\nfrom ragcal.gates import evaluate\n",
        "study/other.py": "import ragcal.gates._hidden\n",
    }.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    monkeypatch.setattr(__import__(__name__), "PACKAGE", package)
    assert own_private_imports_across_packages() == [
        "ragcal/study/learned.py:1: from ragcal.gates.evaluate import _counts",
        "ragcal/study/other.py:1: import ragcal.gates._hidden",
    ]
