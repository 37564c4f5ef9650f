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

**Access levels.** :meth:`PgvectorRetriever.load` stores each chunk's access
level in its own ``level`` column, and ``search(..., allowed_levels=)``
filters inside the engine, in the same statement as the ranking
(``WHERE level = ANY(%s) ORDER BY embedding <=> q``): a hidden chunk is never
fetched. An HNSW scan filters *after* it has collected ``ef_search``
candidates, so a selective filter can leave fewer than ``k`` rows, and even
``k`` rows are then not the view's true top ``k`` (recall falls with the
filter's selectivity). pgvector 0.8 and later keep scanning
(``hnsw.iterative_scan = strict_order``), and a query whose scan still comes
back short is searched again exactly (a sequential scan of the allowed rows).
Older servers cannot scan iteratively, so there every filtered query is
searched exactly: its scores are those of ragcal's own view of the same levels
(:meth:`ragcal.retrieval.index.RetrievalIndex.restrict`). Which one applies is
:attr:`PgvectorRetriever.index_config`'s ``filtered_search``, and
:attr:`PgvectorRetriever.exact_fallbacks` counts the queries that needed the exact search.
"""

from __future__ import annotations

import re

import numpy as np

from .._params import check_int, parameter_error
from ..access import DEFAULT_ACCESS, parse_levels
from .base import RetrievalResult, view_key

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
        Table with columns ``chunk_id text``, ``level text`` and
        ``embedding vector(dim)``; a plain SQL identifier.
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
        ``dense_index``, ``dense_metric``, the HNSW parameters and
        ``filtered_search`` (how a level filter keeps ``k`` results), for provenance.
    pgvector_version : tuple of int
        Of the server's ``vector`` extension.
    exact_fallbacks : int
        Queries whose HNSW scan came back with fewer than ``k`` rows and were
        searched again exactly.
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

        if not isinstance(table, str) or not _IDENTIFIER.match(table):
            raise parameter_error(
                "table", "PgvectorRetriever", "a plain SQL identifier (letters, digits, underscores)", table
            )
        check_int(ef_search, "ef_search", "PgvectorRetriever", low=1, high=1000)
        self.url = url
        self.table = table
        self.embedder = embedder
        self.name = name
        self.ef_search = ef_search
        self.use_index = use_index
        self.hnsw = {}
        self.exact_fallbacks = 0
        self._visible_cache = {}
        self._connection = psycopg.connect(url, autocommit=True)
        self._connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
        (version,) = self._connection.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        self.pgvector_version = tuple(int(part) for part in re.findall(r"\d+", version)[:3])

    # ------------------------------------------------------------------ loading

    def load(
        self, chunk_ids, embeddings, *, levels=None, m: int = 16, ef_construction: int = 64, replace: bool = True
    ) -> "PgvectorRetriever":
        """Create the table, copy the embeddings and access levels in and build the HNSW index.

        Parameters
        ----------
        chunk_ids : sequence of str
        embeddings : ndarray of shape (n_chunks, dim)
            L2-normalised rows (cosine distance does not need it, but ragcal's
            other engines compare inner products, which equal cosines only then).
        levels : sequence of str, default=None
            Access level of every chunk (e.g. from
            :meth:`ragcal.access.AccessPolicy.levels`), stored in the
            ``level`` column that ``search(..., allowed_levels=)`` filters on;
            all ``"public"`` when None.
        m, ef_construction : int, default=16, 64
            pgvector's HNSW parameters (its defaults).
        replace : bool, default=True
            Drop an existing table of that name first.
        """
        from psycopg import sql

        embeddings = np.asarray(embeddings, dtype=np.float32)
        if embeddings.ndim != 2 or embeddings.shape[0] != len(chunk_ids):
            raise ValueError(f"embeddings must have shape ({len(chunk_ids)}, dim); got {embeddings.shape}")
        levels = [DEFAULT_ACCESS] * len(chunk_ids) if levels is None else [str(level) for level in levels]
        if len(levels) != len(chunk_ids):
            raise ValueError(f"{len(levels)} access levels for {len(chunk_ids)} chunks")
        for level in set(levels):
            parse_levels([level])  # a plain word, as everywhere else in ragcal
        table = sql.Identifier(self.table)
        index = sql.Identifier(f"{self.table}_hnsw")
        with self._connection.transaction():
            if replace:
                self._connection.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
            self._connection.execute(
                sql.SQL(
                    "CREATE TABLE {} (position integer PRIMARY KEY, chunk_id text NOT NULL, level text NOT NULL, "
                    "embedding vector({}))"
                ).format(table, sql.Literal(embeddings.shape[1]))
            )
            with self._connection.cursor() as cursor:
                copy_rows = sql.SQL("COPY {} (position, chunk_id, level, embedding) FROM STDIN").format(table)
                with cursor.copy(copy_rows) as copy:
                    for position, (chunk_id, level, row) in enumerate(zip(chunk_ids, levels, embeddings)):
                        copy.write_row((position, str(chunk_id), level, _vector_literal(row)))
            self._connection.execute(
                sql.SQL(
                    "CREATE INDEX {} ON {} USING hnsw (embedding vector_cosine_ops) WITH (m = {}, ef_construction = {})"
                ).format(index, table, sql.Literal(int(m)), sql.Literal(int(ef_construction)))
            )
            self._connection.execute(sql.SQL("ANALYZE {}").format(table))
        self.hnsw = {"hnsw_m": int(m), "ef_construction": int(ef_construction)}
        self._visible_cache = {}
        return self

    @classmethod
    def from_chunks(cls, chunks, embedder, url: str, *, access=None, **options) -> "PgvectorRetriever":
        """Embed ``chunk.text`` of every chunk (through ragcal's cache) and load them into ``url``.

        ``access`` (an :class:`ragcal.access.AccessPolicy`) gives each chunk its level; all public when None.
        """
        load_options = {key: options.pop(key) for key in ("m", "ef_construction", "replace") if key in options}
        retriever = cls(url, embedder=embedder, **options)
        embeddings = embedder.encode([chunk.text for chunk in chunks])
        levels = access.levels(chunks) if access is not None else None
        return retriever.load([chunk.chunk_id for chunk in chunks], embeddings, levels=levels, **load_options)

    # ------------------------------------------------------------------ searching

    @property
    def iterative_scan(self) -> bool:
        """True when the server's pgvector (0.8 or later) can keep scanning HNSW until a filter leaves ``k`` rows."""
        return self.pgvector_version >= (0, 8)

    @property
    def index_config(self) -> dict:
        if not self.use_index:
            filtered = "exact (sequential scan of the allowed rows)"
        elif self.iterative_scan:
            filtered = "hnsw.iterative_scan=strict_order, exact search when a scan still returns fewer than k rows"
        else:
            filtered = "exact (pgvector < 0.8 has no iterative scan: a filtered HNSW scan loses recall)"
        return {
            "dense_index": "pgvector-hnsw" if self.use_index else "pgvector-exact",
            "dense_metric": "cosine similarity = 1 - pgvector cosine distance (<=>)",
            **self.hnsw,
            **({"ef_search": self.ef_search} if self.use_index else {}),
            "filtered_search": filtered,
            "pgvector_version": ".".join(map(str, self.pgvector_version)),
        }

    def _set_search_options(self, cursor, k: int, *, exact: bool = False, filtered: bool = False) -> None:
        # SET LOCAL: only for the surrounding transaction. Integers only, so formatting them in is safe.
        cursor.execute(f"SET LOCAL hnsw.ef_search = {min(max(self.ef_search, int(k)), 1000)}")
        if self.use_index and not exact:
            cursor.execute("SET LOCAL enable_seqscan = off")
            if filtered and self.iterative_scan:
                cursor.execute("SET LOCAL hnsw.iterative_scan = strict_order")
        else:
            cursor.execute("SET LOCAL enable_seqscan = on")
            cursor.execute("SET LOCAL enable_indexscan = off")

    def _visible(self, allowed) -> tuple[int, str]:
        """How many rows, and the view key of the chunk ids, that callers at ``allowed`` levels see."""
        from psycopg import sql

        if allowed not in self._visible_cache:
            table = sql.Identifier(self.table)
            if allowed is None:
                rows = self._connection.execute(sql.SQL("SELECT chunk_id FROM {}").format(table)).fetchall()
            else:
                self._check_level_column()
                statement = sql.SQL("SELECT chunk_id FROM {} WHERE level = ANY(%s)").format(table)
                rows = self._connection.execute(statement, (list(allowed),)).fetchall()
            self._visible_cache[allowed] = (len(rows), view_key(row[0] for row in rows))
        return self._visible_cache[allowed]

    def _check_level_column(self) -> None:
        found = self._connection.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_name = %s AND column_name = 'level'", (self.table,)
        ).fetchone()
        if found is None:
            raise ValueError(
                f"pgvector table {self.table!r} has no 'level' column, so it cannot filter by access level; "
                "load it again with PgvectorRetriever.load(..., levels=)"
            )

    def search_vectors(self, query_vectors, *, k: int = 100, allowed_levels=None) -> list[RetrievalResult]:
        """Top ``k`` chunks for each row of ``query_vectors``; scores are cosine similarities.

        ``allowed_levels`` (str or sequence of str) keeps only rows at those
        levels, inside the engine and before the ranking; ``k`` of them come
        back whenever that many exist (see the module docstring).
        """
        from psycopg import sql

        allowed = parse_levels(allowed_levels) if allowed_levels is not None else None
        query_vectors = np.atleast_2d(np.asarray(query_vectors, dtype=np.float32))
        n_visible, view = self._visible(allowed)
        if k < 1:
            return [RetrievalResult(self.name, (), np.empty(0), view=view) for _ in range(query_vectors.shape[0])]
        where = sql.SQL("WHERE level = ANY(%(levels)s) ") if allowed is not None else sql.SQL("")
        statement = sql.SQL(
            "SELECT chunk_id, embedding <=> %(query)s::vector AS cosine_distance FROM {} {}"
            "ORDER BY embedding <=> %(query)s::vector LIMIT %(k)s"
        ).format(sql.Identifier(self.table), where)
        expected = min(int(k), n_visible)
        results = []
        # Without iterative scans a filtered HNSW search is lossy, so it is exact (see the module docstring).
        exact = allowed is not None and not self.iterative_scan
        with self._connection.transaction(), self._connection.cursor() as cursor:
            self._set_search_options(cursor, k, exact=exact, filtered=allowed is not None)
            for row in query_vectors:
                parameters = {"query": _vector_literal(row), "k": int(k), "levels": list(allowed or ())}
                cursor.execute(statement, parameters)
                fetched = cursor.fetchall()
                if len(fetched) < expected and self.use_index and not exact:  # the HNSW scan came back short
                    with self._connection.transaction(force_rollback=True):  # the SET LOCALs end with it
                        self._set_search_options(cursor, k, exact=True)
                        cursor.execute(statement, parameters)
                        fetched = cursor.fetchall()
                    self.exact_fallbacks += 1
                distances = np.array([distance for _, distance in fetched], dtype=np.float64)
                similarities = cosine_distance_to_similarity(distances)
                # The index orders by distance; equal distances may come in any order, so sort stably by similarity.
                order = np.argsort(-similarities, kind="stable")
                chunk_ids = tuple(fetched[i][0] for i in order)
                results.append(RetrievalResult(self.name, chunk_ids, similarities[order], view=view))
        return results

    def search(self, queries, *, k: int = 100, allowed_levels=None) -> list[RetrievalResult]:
        """Embed query strings with the embedder and search (the :class:`~ragcal.retrieval.protocol.Retriever` method)."""
        if self.embedder is None:
            raise ValueError("PgvectorRetriever.search needs an embedder; use search_vectors for raw vectors")
        vectors = self.embedder.encode(list(queries), show_progress_bar=False)
        return self.search_vectors(vectors, k=k, allowed_levels=allowed_levels)

    def explain(self, query_vector, *, k: int = 10, allowed_levels=None) -> str:
        """PostgreSQL's plan for one search, to check that the HNSW index is used (and where the filter sits)."""
        from psycopg import sql

        allowed = parse_levels(allowed_levels) if allowed_levels is not None else None
        where = sql.SQL("WHERE level = ANY(%(levels)s) ") if allowed is not None else sql.SQL("")
        statement = sql.SQL(
            "EXPLAIN SELECT chunk_id FROM {} {}ORDER BY embedding <=> %(query)s::vector LIMIT %(k)s"
        ).format(sql.Identifier(self.table), where)
        exact = allowed is not None and not self.iterative_scan
        with self._connection.transaction(), self._connection.cursor() as cursor:
            self._set_search_options(cursor, k, exact=exact, filtered=allowed is not None)
            parameters = {"query": _vector_literal(query_vector), "k": int(k), "levels": list(allowed or ())}
            cursor.execute(statement, parameters)
            return "\n".join(row[0] for row in cursor.fetchall())

    def close(self) -> None:
        self._connection.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
