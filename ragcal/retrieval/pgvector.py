"""Dense retrieval through PostgreSQL + pgvector: calibrate on the engine you serve from.

:class:`PgvectorRetriever` keeps chunk embeddings in a table with an HNSW
index (``vector_cosine_ops``) and searches with pgvector's ``<=>`` operator.
``<=>`` is the cosine **distance**, ``1 - cosine similarity``: 0 for the same
direction, 2 for opposite ones, and *lower is better*. ragcal's thresholds and
signals are on cosine **similarity** (higher is better), so every score the
adapter returns is converted explicitly, ``similarity = 1 - distance``. A
threshold fitted on one convention and applied to the other answers nearly
everything that should be refused, and the reverse: the most common threshold
bug in RAG stacks.

The adapter takes a connection URL (``postgresql://user:password@host:5432/db``,
or any libpq string), so it points at the user's own database; ragcal's tests
and benchmarks start a throw-away server from the ``pgserver`` package instead.
Only psycopg (3) is needed at run time::

    retriever = PgvectorRetriever("postgresql://me@db.internal/rag", table="docs_chunks", embedder=embedder)
    retriever.load(chunk_ids, embeddings)            # or skip: the table and index already exist
    retrieved = retrieve_with({"dense": retriever}, queries["query"])

Searches run with ``enable_seqscan = off`` on the adapter's own connection so
that PostgreSQL uses the HNSW index even on a small table, where its planner
would rather scan: the scores are then those of the index that production
uses, at ``hnsw.ef_search`` (recorded in :attr:`PgvectorRetriever.index_config`).
"""

from __future__ import annotations

import re

import numpy as np

from .base import RetrievalResult

__all__ = ["PgvectorRetriever", "cosine_distance_to_similarity"]

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def cosine_distance_to_similarity(distance):
    """pgvector's cosine distance (``<=>``) to cosine similarity: ``1 - distance``.

    Examples
    --------
    >>> cosine_distance_to_similarity(0.25)
    0.75
    """
    return 1.0 - np.asarray(distance, dtype=np.float64) if np.ndim(distance) else 1.0 - float(distance)


def _vector_literal(row) -> str:
    # repr of each float32 value (as a Python float) round-trips exactly through pgvector's float4 parser.
    return "[" + ",".join(map(repr, np.asarray(row, dtype=np.float32).tolist())) + "]"


class PgvectorRetriever:
    """Cosine search in a pgvector table with an HNSW index.

    Parameters
    ----------
    url : str
        libpq connection URL or string of the database.
    table : str, default="ragcal_chunks"
        Table with columns ``chunk_id text``, ``embedding vector(dim)``; a
        plain SQL identifier.
    embedder : Embedder, default=None
        Embeds query strings in :meth:`search`.
    name : str, default="dense"
    ef_search : int, default=100
        ``hnsw.ef_search`` for each search; at least ``k`` is used (pgvector
        returns no more than ``ef_search`` rows from an HNSW scan).
    use_index : bool, default=True
        False searches exactly (sequential scan), for comparison.

    Attributes
    ----------
    index_config : dict
        ``dense_index``, ``dense_metric`` and the HNSW parameters, for provenance.
    """

    def __init__(
        self,
        url: str,
        *,
        table: str = "ragcal_chunks",
        embedder=None,
        name: str = "dense",
        ef_search: int = 100,
        use_index: bool = True,
    ):
        import psycopg

        if not _IDENTIFIER.match(table):
            raise ValueError(
                f"The 'table' parameter of PgvectorRetriever must be a plain SQL identifier "
                f"(letters, digits, underscores). Got {table!r} instead."
            )
        if not isinstance(ef_search, int) or not 1 <= ef_search <= 1000:
            raise ValueError(
                f"The 'ef_search' parameter of PgvectorRetriever must be an int in [1, 1000]. Got {ef_search!r}."
            )
        self.url = url
        self.table = table
        self.embedder = embedder
        self.name = name
        self.ef_search = ef_search
        self.use_index = use_index
        self.hnsw = {}
        self._connection = psycopg.connect(url, autocommit=True)
        self._connection.execute("CREATE EXTENSION IF NOT EXISTS vector")

    # ------------------------------------------------------------------ loading

    def load(
        self, chunk_ids, embeddings, *, m: int = 16, ef_construction: int = 64, replace: bool = True
    ) -> "PgvectorRetriever":
        """Create the table, copy the embeddings in and build the HNSW index.

        Parameters
        ----------
        chunk_ids : sequence of str
        embeddings : ndarray of shape (n_chunks, dim)
            L2-normalised rows (cosine distance does not need it, but ragcal's
            other engines compare inner products, which equal cosines only then).
        m, ef_construction : int, default=16, 64
            pgvector's HNSW parameters (its defaults).
        replace : bool, default=True
            Drop an existing table of that name first.
        """
        from psycopg import sql

        embeddings = np.asarray(embeddings, dtype=np.float32)
        if embeddings.ndim != 2 or embeddings.shape[0] != len(chunk_ids):
            raise ValueError(f"embeddings must have shape ({len(chunk_ids)}, dim); got {embeddings.shape}")
        table = sql.Identifier(self.table)
        index = sql.Identifier(f"{self.table}_hnsw")
        with self._connection.transaction():
            if replace:
                self._connection.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
            self._connection.execute(
                sql.SQL(
                    "CREATE TABLE {} (position integer PRIMARY KEY, chunk_id text NOT NULL, embedding vector({}))"
                ).format(table, sql.Literal(embeddings.shape[1]))
            )
            with self._connection.cursor() as cursor:
                with cursor.copy(sql.SQL("COPY {} (position, chunk_id, embedding) FROM STDIN").format(table)) as copy:
                    for position, (chunk_id, row) in enumerate(zip(chunk_ids, embeddings)):
                        copy.write_row((position, str(chunk_id), _vector_literal(row)))
            self._connection.execute(
                sql.SQL(
                    "CREATE INDEX {} ON {} USING hnsw (embedding vector_cosine_ops) WITH (m = {}, ef_construction = {})"
                ).format(index, table, sql.Literal(int(m)), sql.Literal(int(ef_construction)))
            )
            self._connection.execute(sql.SQL("ANALYZE {}").format(table))
        self.hnsw = {"hnsw_m": int(m), "ef_construction": int(ef_construction)}
        return self

    @classmethod
    def from_chunks(cls, chunks, embedder, url: str, **options) -> "PgvectorRetriever":
        """Embed ``chunk.text`` of every chunk (through ragcal's cache) and load them into ``url``."""
        load_options = {key: options.pop(key) for key in ("m", "ef_construction", "replace") if key in options}
        retriever = cls(url, embedder=embedder, **options)
        embeddings = embedder.encode([chunk.text for chunk in chunks])
        return retriever.load([chunk.chunk_id for chunk in chunks], embeddings, **load_options)

    # ------------------------------------------------------------------ searching

    @property
    def index_config(self) -> dict:
        return {
            "dense_index": "pgvector-hnsw" if self.use_index else "pgvector-exact",
            "dense_metric": "cosine similarity = 1 - pgvector cosine distance (<=>)",
            **self.hnsw,
            **({"ef_search": self.ef_search} if self.use_index else {}),
        }

    def _set_search_options(self, cursor, k: int) -> None:
        # SET LOCAL: only for the surrounding transaction. Integers only, so formatting them in is safe.
        cursor.execute(f"SET LOCAL hnsw.ef_search = {min(max(self.ef_search, int(k)), 1000)}")
        if self.use_index:
            cursor.execute("SET LOCAL enable_seqscan = off")
        else:
            cursor.execute("SET LOCAL enable_indexscan = off")

    def search_vectors(self, query_vectors, *, k: int = 100) -> list[RetrievalResult]:
        """Top ``k`` chunks for each row of ``query_vectors``; scores are cosine similarities."""
        from psycopg import sql

        query_vectors = np.atleast_2d(np.asarray(query_vectors, dtype=np.float32))
        if k < 1:
            return [RetrievalResult(self.name, (), np.empty(0)) for _ in range(query_vectors.shape[0])]
        statement = sql.SQL(
            "SELECT chunk_id, embedding <=> %(query)s::vector AS cosine_distance FROM {} "
            "ORDER BY embedding <=> %(query)s::vector LIMIT %(k)s"
        ).format(sql.Identifier(self.table))
        results = []
        with self._connection.transaction(), self._connection.cursor() as cursor:
            self._set_search_options(cursor, k)
            for row in query_vectors:
                cursor.execute(statement, {"query": _vector_literal(row), "k": int(k)})
                fetched = cursor.fetchall()
                distances = np.array([distance for _, distance in fetched], dtype=np.float64)
                similarities = cosine_distance_to_similarity(distances)
                # The index orders by distance; equal distances may come in any order, so sort stably by similarity.
                order = np.argsort(-similarities, kind="stable")
                results.append(RetrievalResult(self.name, tuple(fetched[i][0] for i in order), similarities[order]))
        return results

    def search(self, queries, *, k: int = 100) -> list[RetrievalResult]:
        """Embed query strings with the embedder and search (the :class:`~ragcal.retrieval.protocol.Retriever` method)."""
        if self.embedder is None:
            raise ValueError("PgvectorRetriever.search needs an embedder; use search_vectors for raw vectors")
        return self.search_vectors(self.embedder.encode(list(queries), show_progress_bar=False), k=k)

    def explain(self, query_vector, *, k: int = 10) -> str:
        """PostgreSQL's plan for one search, to check that the HNSW index is used."""
        from psycopg import sql

        statement = sql.SQL(
            "EXPLAIN SELECT chunk_id FROM {} ORDER BY embedding <=> %(query)s::vector LIMIT %(k)s"
        ).format(sql.Identifier(self.table))
        with self._connection.transaction(), self._connection.cursor() as cursor:
            self._set_search_options(cursor, k)
            cursor.execute(statement, {"query": _vector_literal(query_vector), "k": int(k)})
            return "\n".join(row[0] for row in cursor.fetchall())

    def close(self) -> None:
        self._connection.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
