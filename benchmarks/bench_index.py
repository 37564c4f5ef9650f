"""Index build benchmark: ragcal's cold and warm builds against a bare encode.

Run with ``make benchmark`` (or ``.venv/bin/python benchmarks/bench_index.py``).
Everything is measured side by side in one process, so the ratios hold on a
noisy machine even when the seconds do not. Nothing here is asserted.

- bare: ``SentenceTransformer.encode`` of the same chunk texts, same batch size
- cold: :func:`ragcal.build_index` with an empty embedding cache
- warm: :func:`ragcal.build_index` again with a new Embedder (model reloaded)
  and every embedding cached
"""

import resource
import tempfile
import time

from ragcal.chunking import chunk_by_headings
from ragcal.corpus import load_corpus
from ragcal.datasets import FASTAPI_CORPUS, FASTAPI_EXCLUDE
from ragcal.embedding import Embedder, resolve_model
from ragcal.retrieval.index import build_index


def seconds(function):
    start = time.perf_counter()
    value = function()
    return time.perf_counter() - start, value


def main():
    chunks = chunk_by_headings(load_corpus(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE))
    texts = [chunk.text for chunk in chunks]
    from sentence_transformers import SentenceTransformer

    load_time, model = seconds(lambda: SentenceTransformer(resolve_model().location, device="cpu"))
    bare_time, _ = seconds(lambda: model.encode(texts, batch_size=64, normalize_embeddings=True))
    with tempfile.TemporaryDirectory() as cache_dir:
        cold_time, index = seconds(lambda: build_index(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE, cache_dir=cache_dir))
        warm_time, _ = seconds(lambda: build_index(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE, embedder=Embedder(cache_dir=cache_dir)))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"chunks: {len(texts)}")
    print(f"model load (bare SentenceTransformer): {load_time:6.1f} s")
    print(f"bare encode:                           {bare_time:6.1f} s")
    print(
        f"ragcal cold build (load+chunk+embed+index): {cold_time:6.1f} s  "
        f"= bare + {cold_time - bare_time:+.1f} s  (goal: <= bare + 30 s)"
    )
    print(
        f"ragcal warm build (model reload, all cached): {warm_time:6.1f} s  "
        f"= {warm_time - load_time:+.1f} s beyond a model load  (goal: <= 10 s)"
    )
    print(f"cold / bare ratio: {cold_time / bare_time:.2f}")
    print(f"peak resident memory: {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
