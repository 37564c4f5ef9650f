"""WordLlama's static token embeddings, read from the ``wordllama`` wheel's own files (their sha256 checked).

(Not named ``wordllama.py``: that is the third-party package this module loads.)
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._io import sha256_file
from ..extras import MissingExtraError
from .cache import default_cache_dir
from .models import ModelSpec

__all__ = [
    "WORDLLAMA_ENCODING_SCHEME",
    "WORDLLAMA_MODELS",
    "WORDLLAMA_PREFIX",
    "WordLlamaEmbedder",
    "WordLlamaFiles",
    "known_wordllama",
]

#: A ``--model`` string starting with this selects WordLlama: ``wordllama:NAME`` or ``wordllama:NAME:DIM``.
WORDLLAMA_PREFIX = "wordllama:"
#: How WordLlama vectors are computed, part of :attr:`WordLlamaEmbedder.cache_key`: every text alone (no padding),
#: the package's mean of its token vectors (``WordLlamaInference.embed``), then L2-normalised in float64.
WORDLLAMA_ENCODING_SCHEME = "mean1"
#: Texts per WordLlama call (length-sorted; the vectors do not depend on it).
WORDLLAMA_BATCH = 64
_WORDLLAMA_INSTALL = "pip install 'wordllama==0.4.0.post1' (or: pip install 'ragcal[retrieval]')"


@dataclass(frozen=True)
class WordLlamaFiles:
    """The files of one WordLlama model inside the ``wordllama`` wheel, and their sha256.

    Attributes
    ----------
    weights, tokenizer : str
        Paths relative to the package folder.
    weights_sha256, tokenizer_sha256 : str
        What the files must hash to; anything else is refused.
    dimension : int
        Columns of the weights.
    truncations : tuple of int
        The Matryoshka dimensions the model was trained at (its first 64,
        128, ... columns are embeddings on their own), ``dimension`` included.
    tensor_key : str, default="embedding.weight"
        The tensor of the safetensors file.
    """

    weights: str
    weights_sha256: str
    tokenizer: str
    tokenizer_sha256: str
    dimension: int
    truncations: tuple[int, ...]
    tensor_key: str = "embedding.weight"


#: The WordLlama models that ship in the ``wordllama`` wheel (0.4.0.post1), by the name after ``wordllama:``.
WORDLLAMA_MODELS = {
    "l2_supercat_256": WordLlamaFiles(
        weights="weights/l2_supercat_256.safetensors",
        weights_sha256="64b47a2dc493cb8e85944076601189739852d7b64e0e1eedcb1937a251cd9fd5",
        tokenizer="tokenizers/l2_supercat_tokenizer_config.json",
        tokenizer_sha256="93248f2a9ec36c7b35f700a033d5f36228aae48db61aee31007fa49062cdeb68",
        dimension=256,
        truncations=(64, 128, 256),
    ),
}


def known_wordllama() -> str:
    return "; ".join(
        f"{WORDLLAMA_PREFIX}{name} (or :{', :'.join(str(dim) for dim in files.truncations if dim != files.dimension)} "
        "to truncate)"
        for name, files in WORDLLAMA_MODELS.items()
    )


def _parse_wordllama(model: str) -> tuple[str, int]:
    """``"wordllama:l2_supercat_256:64"`` (prefix optional) -> ``("l2_supercat_256", 64)``; checked."""
    if not isinstance(model, str):
        raise TypeError(
            f"The 'model' parameter of WordLlamaEmbedder must be a str. Got {type(model).__name__} instead."
        )
    text = model[len(WORDLLAMA_PREFIX) :] if model.startswith(WORDLLAMA_PREFIX) else model
    base, _, truncation = text.partition(":")
    if base not in WORDLLAMA_MODELS:
        raise ValueError(f"Unknown WordLlama model {model!r}. Known: {known_wordllama()}.")
    files = WORDLLAMA_MODELS[base]
    if not truncation:
        return base, files.dimension
    if not truncation.isdigit() or int(truncation) not in files.truncations:
        raise ValueError(
            f"WordLlama model {model!r}: the truncation dimension must be one of "
            f"{', '.join(map(str, files.truncations))}. Got {truncation!r} instead."
        )
    return base, int(truncation)


def _wordllama_package_dir() -> Path:
    """The installed ``wordllama`` package's folder, found without importing it (its import configures logging)."""
    import importlib.util

    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError("the WordLlama embedder", "retrieval", "wordllama")
    return Path(next(iter(spec.submodule_search_locations)))


def _verified_file(path: Path, expected: str, *, read: bool = False) -> bytes | None:
    """Check that ``path`` exists and hashes to ``expected``; with ``read``, return the very bytes that were checked."""
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: WordLlama file not found (expected sha256 {expected}); reinstall the wordllama package: "
            f"{_WORDLLAMA_INSTALL}"
        )
    data = path.read_bytes() if read else None
    digest = hashlib.sha256(data).hexdigest() if read else sha256_file(path)
    if digest != expected:
        raise ValueError(
            f"{path}: sha256 is {digest}, expected {expected}. This is not the WordLlama file ragcal knows; "
            f"reinstall the wordllama package: {_WORDLLAMA_INSTALL}"
        )
    return data


def _wordllama_inference_class():
    """``wordllama.inference.WordLlamaInference``, imported without the root logging set-up its import does.

    ``wordllama`` calls ``logging.basicConfig(level=logging.INFO)`` when
    imported, which would make every library's INFO messages appear in the
    user's notebook; the root logger's handlers and level are put back.
    """
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        from wordllama.inference import WordLlamaInference
    except ImportError as error:
        if error.name is not None and error.name.split(".")[0] == "wordllama":
            raise MissingExtraError("the WordLlama embedder", "retrieval", "wordllama") from error
        raise ImportError(
            f"WordLlama models need the 'wordllama' package, which cannot be imported ({error}): {_WORDLLAMA_INSTALL}"
        ) from error
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    return WordLlamaInference


class WordLlamaEmbedder:
    """Encode texts with a WordLlama model (static token embeddings), from the ``wordllama`` wheel's own files.

    A text's vector is the mean of its tokens' vectors (WordLlama's own
    ``WordLlamaInference.embed``), optionally truncated to its first ``DIM``
    columns (the model is trained for that, Matryoshka style), then
    L2-normalised. No model hub is contacted: the weights and tokenizer are
    read from the installed package and must match the sha256 in
    :data:`WORDLLAMA_MODELS`.

    Parameters
    ----------
    model : str, default="l2_supercat_256"
        ``NAME`` or ``NAME:DIM``, with or without the ``wordllama:`` prefix:
        ``"wordllama:l2_supercat_256"`` (256 dimensions) or
        ``"wordllama:l2_supercat_256:64"`` (its first 64, or 128). Names are
        the keys of :data:`WORDLLAMA_MODELS`.
    cache_dir : str or Path or None, default=None
        Where :func:`~ragcal.retrieval.index.build_index` saves the built
        index; :func:`default_cache_dir` when None.
    use_cache : bool, default=True
        False: ``build_index`` neither saves nor loads the index.
    package_dir : str or Path or None, default=None
        A folder laid out like the ``wordllama`` package (``weights/``,
        ``tokenizers/``); the installed package when None. Its files are
        checked all the same.

    Raises
    ------
    ValueError
        An unknown model or truncation (the message lists the known ones), or
        a file whose sha256 is not the expected one (both are named).
    FileNotFoundError
        A missing file, named with its expected sha256.
    ImportError
        The ``wordllama`` package is not installed (with the install command).

    Notes
    -----
    The files are checked at construction, so a bad install fails before
    any work, and read, checked again and loaded on the first :meth:`encode`
    (the bytes loaded are the bytes checked).

    No embedding cache: WordLlama embeds the 2,282 chunks of the bundled
    FastAPI docs in about 0.9 s and short questions at over 10,000 a second,
    and a warm ``build_index`` loads the chunk vectors with the saved index
    anyway (0.1 s). Caching its vectors in SQLite would save under a second
    and write every text to disk, so vectors are always computed and
    :attr:`stats` counts every text as encoded. ``use_cache`` and
    ``cache_dir`` still let ``build_index`` save the whole index (chunks,
    faiss and BM25) keyed by :attr:`cache_key`.

    Each text is encoded alone (no padding), so its vector is the same bits
    whatever else is in the call. A text with no token (the empty string)
    has no direction: its row is all zeros, so its cosine with every chunk is 0.

    Examples
    --------
    >>> embedder = WordLlamaEmbedder("wordllama:l2_supercat_256", use_cache=False)
    >>> embedder.fingerprint
    'wordllama:l2_supercat_256@64b47a2dc493/dim256'
    >>> embedder.encode(["How do I add CORS?"]).shape
    (1, 256)
    """

    def __init__(self, model: str = "l2_supercat_256", *, cache_dir=None, use_cache: bool = True, package_dir=None):
        base, dimension = _parse_wordllama(model)
        self.files = WORDLLAMA_MODELS[base]
        folder = Path(package_dir) if package_dir is not None else _wordllama_package_dir()
        self.weights_path = folder / self.files.weights
        self.tokenizer_path = folder / self.files.tokenizer
        _verified_file(self.weights_path, self.files.weights_sha256)
        _verified_file(self.tokenizer_path, self.files.tokenizer_sha256)
        truncation = "" if dimension == self.files.dimension else f":{dimension}"
        self.spec = ModelSpec(
            f"{WORDLLAMA_PREFIX}{base}{truncation}", str(self.weights_path), self.files.weights_sha256
        )
        self._base = base
        self._dimension = dimension
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.use_cache = use_cache
        self._model = None
        self.last_stats = {"cached": 0, "encoded": 0}
        self.stats = {"cached": 0, "encoded": 0}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    @property
    def name(self) -> str:
        """``wordllama:NAME`` or ``wordllama:NAME:DIM`` (a truncation), what :func:`load_embedder` reads back."""
        return self.spec.name

    @property
    def dimension(self) -> int:
        """Columns of every vector: the model's, or the truncation asked for."""
        return self._dimension

    @property
    def fingerprint(self) -> str:
        """``wordllama:NAME@<12 hex of weights sha256>/dim<DIM>``, e.g. ``wordllama:l2_supercat_256@64b47a2dc493/dim256``.

        The tokenizer is not hashed in: its sha256 is fixed by the model name
        (:data:`WORDLLAMA_MODELS`) and checked.
        """
        return f"{WORDLLAMA_PREFIX}{self._base}@{self.files.weights_sha256[:12]}/dim{self._dimension}"

    @property
    def cache_key(self) -> str:
        """The saved index's model key: :attr:`fingerprint`, :data:`WORDLLAMA_ENCODING_SCHEME` and the package version.

        The package's version is in it because its code computes the vectors
        (the fingerprint, which gate files check, names the weights only).
        """
        from importlib.metadata import PackageNotFoundError, version

        try:
            package = version("wordllama")
        except PackageNotFoundError:
            package = "unknown"
        return f"{self.fingerprint}/{WORDLLAMA_ENCODING_SCHEME}/wordllama-{package}"

    @property
    def model(self):
        """The loaded ``wordllama.inference.WordLlamaInference`` (weights truncated to :attr:`dimension`)."""
        if self._model is None:
            import safetensors.numpy
            from tokenizers import Tokenizer

            inference_class = _wordllama_inference_class()
            weights = _verified_file(self.weights_path, self.files.weights_sha256, read=True)
            tokenizer = _verified_file(self.tokenizer_path, self.files.tokenizer_sha256, read=True)
            tensors = safetensors.numpy.load(weights)
            if self.files.tensor_key not in tensors:
                raise ValueError(f"{self.weights_path}: no tensor {self.files.tensor_key!r} (found {sorted(tensors)})")
            embedding = tensors[self.files.tensor_key]
            if embedding.ndim != 2 or embedding.shape[1] != self.files.dimension:
                raise ValueError(
                    f"{self.weights_path}: tensor {self.files.tensor_key!r} has shape {embedding.shape}, "
                    f"expected (vocabulary, {self.files.dimension})"
                )
            self._model = inference_class(
                embedding[:, : self._dimension], Tokenizer.from_str(tokenizer.decode("utf-8"))
            )
        return self._model

    def encode(self, texts, *, show_progress_bar=None) -> np.ndarray:
        """Embed ``texts`` as float32, L2-normalised rows (all zeros for a text with no token).

        Parameters
        ----------
        texts : sequence of str
        show_progress_bar : bool or None, default=None
            Accepted for :class:`EmbedderProtocol`; no bar is shown (the whole
            bundled FastAPI corpus takes under a second).

        Returns
        -------
        ndarray of shape (len(texts), dimension), dtype float32
        """
        texts = [str(text) for text in texts]
        pooled = np.zeros((len(texts), self._dimension), dtype=np.float64)
        if texts:
            # Batches of texts of similar length (sorted by characters): WordLlama pools with a mask over the padding,
            # and the vectors are bitwise those of each text alone (tests/embedding/test_embedders.py), in about half
            # the time of one text at a time (800 FastAPI chunks: 1.2 s against 2.1 s).
            order = sorted(range(len(texts)), key=lambda position: (len(texts[position]), position))
            for start in range(0, len(order), WORDLLAMA_BATCH):
                rows = order[start : start + WORDLLAMA_BATCH]
                pooled[rows] = self.model.embed([texts[row] for row in rows], norm=False, batch_size=len(rows))
        norms = np.sqrt(np.einsum("ij,ij->i", pooled, pooled))
        output = np.zeros((len(texts), self._dimension), dtype=np.float32)
        has_tokens = norms > 0
        output[has_tokens] = pooled[has_tokens] / norms[has_tokens, None]
        self.last_stats = {"cached": 0, "encoded": len(texts)}
        self.stats = {key: self.stats[key] + self.last_stats[key] for key in self.stats}
        return output
