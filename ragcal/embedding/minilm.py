"""Sentence-transformers models (MiniLM by default): batched, and exact, through the embedding cache.

A text's vector must not depend on which other texts share its batch, in what
order, or on what the cache already holds: the committed results are rebuilt
bit for bit from a cache filled in any order. Batched encoding usually breaks
that, because each text is padded to the longest one in its batch and the
padded length changes the last bits of the result.

Here every text is padded to a length fixed by its own token count: the next
multiple of :data:`LENGTH_BUCKET` tokens (capped at the model's maximum
sequence length). Texts of the same bucket are encoded together, so the
forward pass runs at batch speed, and each row of a batch is computed exactly
as it would be alone at that padded length, whatever the number of rows
(``tests/embedding/test_batching.py`` checks it bit for bit against texts
encoded alone, shuffled, and in batches of other sizes).

The bits still depend on the CPU kernels torch selects (AVX2 or AVX-512): the
kernel name is part of the cache key (:attr:`Embedder.cache_key`), and
:mod:`ragcal.numerics` pins it for the study.

sentence-transformers (and torch) are imported when the model is first used.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import numpy as np

from ..extras import import_extra, require_extra
from .cache import CACHE_COMMIT_EVERY, EmbeddingCache, default_cache_dir
from .models import DEFAULT_MODEL, resolve_model

__all__ = [
    "ENCODING_SCHEME",
    "LENGTH_BUCKET",
    "Embedder",
    "dimension_from_folder",
    "fixed_shapes_from_folder",
    "length_buckets",
    "supports_fixed_shapes",
]

#: Token lengths are padded up to a multiple of this many tokens (the model's maximum sequence length caps it).
LENGTH_BUCKET = 16
#: Tokens per forward pass (rows = this // padded length): it sets the speed only, never the bits.
TOKENS_PER_BATCH = 8192
# How vectors are computed, appended to the fingerprint to make the cache key. "pad16": every text padded to the next
# multiple of 16 tokens. Entries written under an earlier scheme ("b1": each text alone, unpadded; before it,
# length-sorted batches of 64) are never read. Change this tag whenever the scheme changes.
ENCODING_SCHEME = f"pad{LENGTH_BUCKET}"


def length_buckets(lengths, *, max_length: int, tokens_per_batch: int = TOKENS_PER_BATCH, bucket: int = LENGTH_BUCKET):
    """Group texts by padded length: ``(padded_length, rows)`` batches, in increasing padded length.

    Parameters
    ----------
    lengths : sequence of int
        Token count of each text (special tokens included, already truncated to ``max_length``).
    max_length : int
        The model's maximum sequence length; no text is padded beyond it.
    tokens_per_batch : int, default=TOKENS_PER_BATCH
        Each batch holds ``max(1, tokens_per_batch // padded_length)`` rows.
    bucket : int, default=LENGTH_BUCKET

    Returns
    -------
    iterator of (int, list of int)
        The padded length (a function of the text's own length only) and the
        positions of the texts in the batch, in their input order.

    Examples
    --------
    >>> list(length_buckets([3, 20, 5, 40], max_length=32, tokens_per_batch=32))
    [(16, [0, 2]), (32, [1, 3])]
    """
    padded = [min(-(-max(int(length), 1) // bucket) * bucket, max_length) for length in lengths]
    for length in sorted(set(padded)):
        rows = [position for position, value in enumerate(padded) if value == length]
        size = max(1, tokens_per_batch // length)
        for start in range(0, len(rows), size):
            yield length, rows[start : start + size]


def supports_fixed_shapes(model) -> bool:
    """Whether ``model`` (a ``SentenceTransformer``) can be fed padded token batches directly.

    True for a transformer followed by pooling modules (MiniLM and most
    sentence-transformers models): its tokenizer is then all the input
    preparation there is. Other models (lower-casing in the module, prompts,
    other modalities) are encoded one text at a time instead.
    """
    modules = list(model.children()) if hasattr(model, "children") else []
    first = modules[0] if modules else None
    return (
        type(first).__name__ == "Transformer"
        and getattr(model, "tokenizer", None) is not None
        and not getattr(first, "do_lower_case", False)
        and not getattr(model, "default_prompt_name", None)
    )


#: Files of a saved tokenizer: one of them next to the first module's configuration means the module has a tokenizer.
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt")


def _json_file(path: Path):
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _modules(folder: Path) -> list:
    """The entries of ``folder/modules.json`` in their ``idx`` order; empty when there is no such readable list."""
    modules = _json_file(folder / "modules.json")
    if not isinstance(modules, list) or not all(isinstance(module, dict) for module in modules):
        return []
    try:
        return sorted(modules, key=lambda module: int(module.get("idx", 0)))
    except (TypeError, ValueError):
        return []


def fixed_shapes_from_folder(folder) -> bool | None:
    """True when the sentence-transformers model saved in ``folder`` is one :func:`supports_fixed_shapes` accepts.

    Read from its configuration files, without importing sentence-transformers
    or loading the weights (about 5 seconds, which a run that finds every
    vector in the cache does not otherwise spend): ``modules.json`` starts with
    a ``Transformer`` module whose folder holds a tokenizer, its
    ``sentence_bert_config.json`` does not lower-case, and
    ``config_sentence_transformers.json`` sets no default prompt. None when the
    files do not settle it (no ``modules.json``, another first module, an
    unreadable file, or any of the above not so): the caller then loads the
    model and asks :func:`supports_fixed_shapes`. :attr:`Embedder.model`
    checks, once it loads the model, that the two agree.
    """
    folder = Path(folder)
    modules = _modules(folder)
    if not modules:
        return None
    first = modules[0]
    if str(first.get("type", "")).rsplit(".", 1)[-1] != "Transformer":
        return None
    module_folder = folder / str(first.get("path", ""))
    if not any((module_folder / name).is_file() for name in _TOKENIZER_FILES):
        return None
    module_config = _json_file(module_folder / "sentence_bert_config.json")
    if not isinstance(module_config, dict) or module_config.get("do_lower_case", False):
        return None
    model_config = folder / "config_sentence_transformers.json"
    settings = _json_file(model_config) if model_config.is_file() else {}
    if not isinstance(settings, dict) or settings.get("default_prompt_name"):
        return None
    return True


def dimension_from_folder(folder) -> int | None:
    """The vector length of the sentence-transformers model saved in ``folder``, read from its configuration files.

    Settled only for the plain layout (MiniLM's): ``modules.json`` lists a
    ``Transformer``, then a ``Pooling`` module with one pooling mode, then
    optionally ``Normalize``; the length is the pooling module's
    ``word_embedding_dimension``. None otherwise, and the caller loads the model.
    """
    folder = Path(folder)
    modules = _modules(folder)
    kinds = [str(module.get("type", "")).rsplit(".", 1)[-1] for module in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return None
    pooling = _json_file(folder / str(modules[1].get("path", "")) / "config.json")
    if not isinstance(pooling, dict):
        return None
    modes = [key for key, value in pooling.items() if key.startswith("pooling_mode") and value not in (False, None)]
    dimension = pooling.get("word_embedding_dimension")
    if len(modes) != 1 or not isinstance(dimension, int) or isinstance(dimension, bool) or dimension <= 0:
        return None
    return dimension


@functools.cache  # asked on every encode (through the cache key); the processor does not change
def processor_model(cpuinfo="/proc/cpuinfo") -> str:
    """The processor's maker, family and model as Linux names them (``GenuineIntel-6-167``); else the machine's kind.

    Read from the first processor of ``cpuinfo`` (x86: ``vendor_id``,
    ``cpu family``, ``model``; Arm: ``CPU implementer``, ``CPU architecture``,
    ``CPU part``); where there is no such file, :func:`platform.machine`.
    """
    import platform

    fields = {}
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if not line.strip():
                    if fields:
                        break  # the first processor's block is enough
                    continue
                name, _, value = line.partition(":")
                fields.setdefault(name.strip(), value.strip())
    except OSError:
        pass
    names = (
        ("vendor_id", "cpu family", "model")
        if "vendor_id" in fields
        else ("CPU implementer", "CPU architecture", "CPU part")
    )
    parts = [fields[name].replace(" ", "") for name in names if fields.get(name)]
    return "-".join(parts) if parts else (platform.machine() or "unknown")


def kernel_capability(memo_dir=None) -> str:
    """What a vector's last bits depend on: torch's kernels (``"AVX2"``, ...), MKL's mode if set, the processor.

    Their last bits differ: ``"AVX2-mklAUTO-STRICT-GenuineIntel-6-167"`` under
    the pinned kernels (:mod:`ragcal.numerics`) on this project's Intel Xeon,
    ``"AVX512-GenuineIntel-6-167"`` there with none. MKL's matrix kernels
    follow the processor (its ``AUTO`` path, and any path on a processor
    that is not Intel's), so the processor (:func:`processor_model`) is part
    of it: an embedding cache shared between machines never hands one
    machine's last bits to another. torch's part is :func:`torch_capability`
    (``memo_dir``: the cache folder whose memo may answer without importing torch).
    """
    import os

    capability = torch_capability(memo_dir)
    mkl = os.environ.get("MKL_CBWR")
    mode = f"{capability}-mkl{mkl.replace(',', '-')}" if mkl else capability
    return f"{mode}-{processor_model()}"


#: The file, in a cache folder, that remembers :func:`torch_capability` for each torch build, setting and processor.
CAPABILITY_MEMO = "torch_capability.json"


def torch_capability(memo_dir=None, *, cpuinfo="/proc/cpuinfo") -> str:
    """torch's CPU kernels, ``torch.backends.cpu.get_cpu_capability()`` (``"AVX2"``, ``"AVX512"``, ...).

    Importing torch to ask takes about a second of CPU, which a process that
    finds every vector in the cache (a notebook, a command on a warm cache)
    needs for nothing else. So the answer is remembered in ``memo_dir``
    (:data:`CAPABILITY_MEMO`), under everything it depends on: the torch
    build (the sha256 of its installed ``RECORD``, which lists every file's
    hash), ``ATEN_CPU_CAPABILITY`` (torch's own setting), and the processor's
    maker, model and instruction-set flags as ``cpuinfo`` lists them. A
    process that has imported torch asks torch, and records the answer; one
    that has not reads the memo, and asks torch only when it holds no entry.
    Without ``memo_dir``, or without ``cpuinfo``'s flags (not Linux), torch
    is always asked.
    """
    import sys

    memo_path = Path(memo_dir) / CAPABILITY_MEMO if memo_dir is not None else None
    key = _capability_memo_key(cpuinfo) if memo_path is not None else None
    slot = (memo_path, key)  # the cache key is asked on every encode: the file is read once per process
    if "torch" not in sys.modules and key is not None:
        if slot not in _MEMO_READ:
            _MEMO_READ[slot] = _read_capability_memo(memo_path).get(key)
        if isinstance(_MEMO_READ[slot], str):
            return _MEMO_READ[slot]
    torch = import_extra("torch", "retrieval", "the MiniLM embedder's kernel check")
    capability = str(torch.backends.cpu.get_cpu_capability())
    if key is not None and slot not in _MEMO_CHECKED and memo_path.parent.is_dir():
        memo = _read_capability_memo(memo_path)
        if memo.get(key) != capability:
            import json

            from .._io import atomic_write_text

            try:
                atomic_write_text(memo_path, json.dumps({**memo, key: capability}, indent=1, sort_keys=True) + "\n")
            except OSError:
                pass  # a read-only cache folder: torch is asked again by the next process
        _MEMO_CHECKED.add(slot)
    return capability


#: What this process read from a memo file for a key, and the (file, key) pairs it has checked against torch.
_MEMO_READ: dict = {}
_MEMO_CHECKED: set = set()


def _capability_memo_key(cpuinfo) -> str | None:
    """What :func:`torch_capability` depends on, hashed; None when torch's build or the processor's flags are
    unknown."""
    import json
    import os

    build, flags = _torch_build(), _cpu_flags(cpuinfo)
    if build is None or flags is None:
        return None
    facts = {
        "torch": build,
        "ATEN_CPU_CAPABILITY": os.environ.get("ATEN_CPU_CAPABILITY"),
        "processor": processor_model(cpuinfo),
        "flags": flags,
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()


@functools.cache  # the installed torch does not change under a running process
def _torch_build() -> str | None:
    """The sha256 of torch's installed ``RECORD`` (every file with its hash); None when torch is not installed."""
    from importlib import metadata

    try:
        record = metadata.distribution("torch").read_text("RECORD")
    except metadata.PackageNotFoundError:
        return None
    return hashlib.sha256(record.encode()).hexdigest() if record else None


@functools.cache  # nor does the processor
def _cpu_flags(cpuinfo) -> tuple | None:
    """The first processor's instruction-set flags (x86 ``flags``, Arm ``Features``) in ``cpuinfo``, sorted."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                name, _, value = line.partition(":")
                if name.strip() in ("flags", "Features"):
                    return tuple(sorted(value.split()))
    except OSError:
        pass
    return None


def _read_capability_memo(path: Path) -> dict:
    import json

    try:
        memo = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # none yet, or damaged: torch is asked and the file written again
    return memo if isinstance(memo, dict) else {}


class Embedder:
    """Encode texts with a sentence-transformers model, through the cache.

    Parameters
    ----------
    model : str, default=DEFAULT_MODEL
        Model name, hub id or local folder (see :func:`resolve_model`).
    cache_dir : str or Path or None, default=None
        Folder of the embedding cache; :func:`default_cache_dir` when None.
    use_cache : bool, default=True
        False encodes everything and touches no file.
    batch_size : int, default=64
        Sets when the progress bar appears by default (more than
        ``2 * batch_size`` texts to encode). The forward passes hold
        ``tokens_per_batch`` tokens each.
    tokens_per_batch : int, default=TOKENS_PER_BATCH
        Speed only: a text's vector is the same whatever the batch.
    device : str, default="cpu"

    Notes
    -----
    The model is loaded on first use, not at construction.

    Each text is padded to a length set by its own token count (see
    :func:`length_buckets`), so its vector depends on the model, the text and
    the CPU kernels only: the same bits whether it is encoded cold, read
    from a cache filled by another run, or encoded next to other texts.

    :attr:`fingerprint` identifies the model (weights and max sequence
    length) and is what score tables and gate files record; it did not change
    with the encoding scheme, so existing gate files stay valid. The cache is
    keyed by :attr:`cache_key` instead, which adds :data:`ENCODING_SCHEME`, so
    vectors cached with an earlier scheme are never reused.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        cache_dir=None,
        use_cache: bool = True,
        batch_size: int = 64,
        tokens_per_batch: int = TOKENS_PER_BATCH,
        device: str = "cpu",
    ):
        require_extra("retrieval", "the MiniLM embedder (ragcal.embedding.Embedder)")
        self.spec = resolve_model(model)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.use_cache = use_cache
        self.batch_size = batch_size
        self.tokens_per_batch = tokens_per_batch
        self.device = device
        self._model = None
        self._read_from_folder = {}  # what cache_key and dimension read from the folder, checked when the model loads
        self._cache = None
        self.last_stats = {"cached": 0, "encoded": 0}
        self.stats = {"cached": 0, "encoded": 0}  # over every call, e.g. for a command's summary line

    @property
    def model(self):
        """The loaded ``SentenceTransformer``."""
        if self._model is None:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as transformers_logging

            # Loading takes well under a second: no "Loading weights" progress bar (in a notebook it becomes a widget
            # that reads "model not found" once the notebook is saved and reopened).
            was_enabled = transformers_logging.is_progress_bar_enabled()
            transformers_logging.disable_progress_bar()
            try:
                self._model = SentenceTransformer(self.spec.location, device=self.device)
            finally:
                if was_enabled:
                    transformers_logging.enable_progress_bar()
            loaded = {"fixed shapes": supports_fixed_shapes(self._model), "dimension": self._loaded_dimension()}
            for fact, read in self._read_from_folder.items():
                if read != loaded[fact]:
                    raise RuntimeError(
                        f"{self.spec.location}: its configuration files give {fact} = {read!r}, the loaded model "
                        f"{loaded[fact]!r}; the embedding cache was read with the wrong {fact}"
                    )
        return self._model

    @property
    def name(self) -> str:
        """The model name that was asked for (:attr:`ModelSpec.name`), as recorded in an index's ``config``."""
        return self.spec.name

    @property
    def fingerprint(self) -> str:
        """``name@<12 hex of weights sha256>`` plus the max sequence length.

        For a hub model the hash is taken over the loaded parameters.
        """
        digest = self.spec.weights_sha256
        if digest is None:
            import torch  # noqa: F401  (present whenever the model is)

            hasher = hashlib.sha256()
            for name, tensor in sorted(self.model.state_dict().items()):
                hasher.update(name.encode())
                hasher.update(tensor.detach().cpu().contiguous().numpy().tobytes())
            digest = hasher.hexdigest()
        max_length = self.model.max_seq_length if self._model is not None else self._max_seq_length_from_config()
        return f"{self.spec.name}@{digest[:12]}/max{max_length}"

    @property
    def cache_key(self) -> str:
        """The cache's ``model`` key: :attr:`fingerprint`, :data:`ENCODING_SCHEME`, the CPU kernels and the processor.

        Vectors computed with other kernels (AVX-512 against AVX2) differ in
        their last bits, so they are cached apart and never mixed.
        """
        fixed = self._from_folder("fixed shapes", fixed_shapes_from_folder)
        if fixed is None:
            fixed = supports_fixed_shapes(self.model)
        scheme = ENCODING_SCHEME if fixed else "b1"
        memo_dir = self.cache_dir if self.use_cache else None
        return f"{self.fingerprint}/{scheme}/{kernel_capability(memo_dir).lower()}"

    def _max_seq_length_from_config(self):
        config = Path(self.spec.location) / "sentence_bert_config.json"
        if config.is_file():
            import json

            return json.loads(config.read_text()).get("max_seq_length")
        return self.model.max_seq_length

    def _from_folder(self, fact: str, reader):
        """``reader(folder)`` while the model is not loaded (a run whose vectors are all cached never loads it)."""
        if self._model is not None or not Path(self.spec.location).is_dir():
            return None
        if fact in self._read_from_folder:  # read once: cache_key is asked on every encode
            return self._read_from_folder[fact]
        read = reader(self.spec.location)
        if read is not None:
            self._read_from_folder[fact] = read
        return read

    @property
    def dimension(self) -> int:
        read = self._from_folder("dimension", dimension_from_folder)
        return read if read is not None else self._loaded_dimension()

    def _loaded_dimension(self) -> int:
        model = self.model
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    def _encode_uncached(self, texts: list[str], show_progress_bar, *, store=None) -> np.ndarray:
        """Encode ``texts`` in batches of one fixed shape per length bucket (see :func:`length_buckets`).

        ``store(texts, vectors)``, when given, is called after every batch, so
        that a run killed half-way has committed what it encoded (each call is
        one transaction).
        """
        model, dimension = self.model, self.dimension
        output = np.empty((len(texts), dimension), dtype=np.float32)
        if not texts:
            return output
        if not supports_fixed_shapes(model):
            return self._encode_one_by_one(texts, output, show_progress_bar, store=store)
        tokenizer, max_length = model.tokenizer, model.max_seq_length
        lengths = [len(ids) for ids in tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]]
        batches = list(length_buckets(lengths, max_length=max_length, tokens_per_batch=self.tokens_per_batch))
        if show_progress_bar is None:
            show_progress_bar = len(texts) > 2 * self.batch_size
        from ..progress import progress_bar

        with progress_bar(total=len(texts), desc="Embedding", unit="text", disable=not show_progress_bar) as bar:
            for padded_length, rows in batches:
                output[rows] = self._forward_fixed([texts[row] for row in rows], padded_length)
                if store is not None:
                    store([texts[row] for row in rows], output[rows])
                bar.update(len(rows))
        return output

    def _forward_fixed(self, texts: list[str], padded_length: int) -> np.ndarray:
        """One forward pass over ``texts``, every one padded to ``padded_length`` tokens, L2-normalised."""
        import torch

        model = self.model
        features = model.tokenizer(
            texts, truncation=True, max_length=padded_length, padding="max_length", return_tensors="pt"
        )
        features = {name: tensor.to(model.device) for name, tensor in features.items()}
        # oneDNN picks its matrix kernels by CPU (AVX2 or AVX-512, with other last bits) and has no switch to pin them;
        # without it torch multiplies through MKL, which MKL_CBWR pins (ragcal.numerics), and is no slower here.
        with torch.inference_mode(), torch.backends.mkldnn.flags(enabled=False, allow_tf32=None):
            vectors = model(features)["sentence_embedding"]
            vectors = torch.nn.functional.normalize(vectors, p=2, dim=1)
        return vectors.cpu().numpy().astype(np.float32, copy=False)

    def _encode_one_by_one(self, texts, output, show_progress_bar, *, store=None) -> np.ndarray:
        """A model :func:`supports_fixed_shapes` refuses: each text alone (a batch of one, never padded)."""
        from ..progress import progress

        if show_progress_bar is None:
            show_progress_bar = len(texts) > 2 * self.batch_size
        dimension = self.dimension
        for position, text in enumerate(progress(texts, desc="Embedding", unit="text", disable=not show_progress_bar)):
            vector = self.model.encode(
                [text], batch_size=1, show_progress_bar=False, convert_to_numpy=True, normalize_embeddings=True
            )
            output[position] = np.asarray(vector, dtype=np.float32).reshape(dimension)
            done = position + 1
            if store is not None and (done % CACHE_COMMIT_EVERY == 0 or done == len(texts)):
                start = (done - 1) // CACHE_COMMIT_EVERY * CACHE_COMMIT_EVERY
                store(texts[start:done], output[start:done])
        return output

    def encode(self, texts, *, show_progress_bar=None) -> np.ndarray:
        """Embed ``texts`` as float32, L2-normalised rows.

        Cached texts are read from disk; only the others go through the model,
        one text at a time (with a progress bar when there are many), and are
        then stored. A text's vector does not depend on the other texts or on
        what was cached.

        Returns
        -------
        ndarray of shape (len(texts), dimension), dtype float32
        """
        texts = [str(text) for text in texts]
        if not self.use_cache:
            self.last_stats = {"cached": 0, "encoded": len(texts)}
            self.stats["encoded"] += len(texts)
            return (
                self._encode_uncached(texts, show_progress_bar) if texts else np.zeros((0, self.dimension), np.float32)
            )
        if self._cache is None:
            self._cache = EmbeddingCache(self.cache_dir / "embeddings.sqlite")
        cache_key, dimension = self.cache_key, self.dimension
        found = self._cache.get(cache_key, texts, dimension)
        missing = [position for position in range(len(texts)) if position not in found]
        output = np.empty((len(texts), dimension), dtype=np.float32)
        for position, vector in found.items():
            output[position] = vector
        if missing:
            unique_missing = list(dict.fromkeys(texts[position] for position in missing))
            fresh = self._encode_uncached(
                unique_missing, show_progress_bar, store=lambda done, vectors: self._cache.put(cache_key, done, vectors)
            )
            by_text = dict(zip(unique_missing, fresh))
            for position in missing:
                output[position] = by_text[texts[position]]
        self.last_stats = {"cached": len(found), "encoded": len(missing)}
        self.stats = {key: self.stats[key] + self.last_stats[key] for key in self.stats}
        return output
