"""TREC run files: write them, read them, check them against a query file, and evaluate them.

A run is ``qid Q0 docid rank score tag`` per line, ranks from 1, one file per
retriever; the docid is a chunk id ``<page path>#<n>``, so ranx, pytrec_eval
and trec_eval read the files and page-level metrics need no guessing.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ._io import atomic_write_text
from .chunking import pages_of
from .formatting import listing
from .metrics.retrieval import retrieval_metrics
from .queries import close_path, gold_pages, unknown_paths_message

__all__ = [
    "read_trec_run",
    "trec_run_lines",
    "format_trec_run",
    "write_trec_run",
    "write_trec_runs",
    "check_queries_against_runs",
    "evaluate_runs",
    "hardest_queries",
]

def trec_run_lines(path, *, error=ValueError):
    """Every line of a TREC run file as ``(line number, qid, docid, rank, score, tag)``: ragcal's one TREC parser.

    Blank lines are skipped. The score may be NaN or infinite here; a reader
    that needs finite scores (:func:`ragcal.importers.trec.read_trec_lines`)
    checks it.

    Parameters
    ----------
    path : str or Path
    error : type of Exception, default=ValueError
        Raised, naming the file (and line, and field): the file is missing or
        unreadable, a line has not six fields, a rank is not an integer, a
        score is not a number, the text is not UTF-8.
    """
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: run file not found")
    try:
        stream = open(path, encoding="utf-8")
    except OSError as problem:
        raise error(f"{path}: cannot be read ({problem})") from problem
    with stream:
        line_number = 0
        try:
            for line_number, line in enumerate(stream, start=1):
                fields = line.split()
                if not fields:
                    continue
                where = f"{path}, line {line_number}"
                if len(fields) != 6:
                    raise error(f"{where}: expected 6 fields 'qid Q0 docid rank score tag', got {len(fields)}")
                qid, _, docid, rank_text, score_text, tag = fields
                try:
                    rank = int(rank_text)
                except ValueError:
                    raise error(f"{where}, field 'rank': expected an integer, got {rank_text!r}") from None
                try:
                    score = float(score_text)
                except ValueError:
                    raise error(f"{where}, field 'score': expected a finite number, got {score_text!r}") from None
                yield line_number, qid, docid, rank, score, tag
        except UnicodeDecodeError as problem:
            raise error(f"{path}, line {line_number + 1}: not UTF-8 text ({problem.reason})") from problem


def read_trec_run(path) -> pd.DataFrame:
    """Read a TREC run file into columns ``qid, docid, rank, score, tag``.

    Rows are sorted by query and rank. Raises ``ValueError`` naming the file
    and line on a malformed row (:func:`trec_run_lines`).
    """
    rows = [fields[1:] for fields in trec_run_lines(path)]
    frame = pd.DataFrame(rows, columns=["qid", "docid", "rank", "score", "tag"])
    return frame.sort_values(["qid", "rank"], kind="stable").reset_index(drop=True)




def check_queries_against_runs(
    runs: dict,
    gold: dict,
    *,
    documents=None,
    source: str = "queries",
    runs_label: str = "the runs",
    documents_label: str = "the corpus documents",
) -> None:
    """Refuse queries that the runs cannot score, before any metric is computed.

    A query id missing from every run, or a gold path that is not a page of
    the corpus, would silently score 0. Both raise ``ValueError``.

    Parameters
    ----------
    runs : dict of str to DataFrame
        As from :func:`read_trec_run`.
    gold : dict of str to collection of str
        Gold pages per answerable query id.
    documents : collection of str, default=None
        Every page of the corpus the runs were made from. When None, gold
        paths are only checked against the pages the runs retrieved, and only
        those that differ from one by a prefix (``./``, the corpus folder) are
        refused.
    source, runs_label, documents_label : str
        How the messages name the queries, the runs and ``documents``.
    """
    run_ids = set().union(*(set(run["qid"]) for run in runs.values()))
    missing = [query_id for query_id, pages in gold.items() if pages and query_id not in run_ids]
    if missing:
        raise ValueError(
            f"{source}: query id(s) {listing(missing)} not in any run file in {runs_label} "
            f"({len(missing)} of {sum(bool(pages) for pages in gold.values())} answerable queries; the runs hold ids "
            f"such as {listing(sorted(run_ids), limit=5)}). They would score 0 on every metric. Evaluate the query file the "
            f"runs were made from, or make runs for this file with `ragcal score {source} --out SCORES.csv --runs DIR`."
        )
    gold_paths = list(dict.fromkeys(path for pages in gold.values() for path in sorted(pages)))
    if documents is not None:
        known = set(documents)
        unknown = [path for path in gold_paths if path not in known]
        if unknown:
            raise ValueError(
                f"{source}, column 'gold': "
                + unknown_paths_message(
                    unknown[:10], known, corpus=f"the corpus of the runs ({documents_label}, {len(known)} documents)"
                )
            )
        return
    retrieved = {page for run in runs.values() for page in pages_of(run["docid"])}
    near = [path for path in gold_paths if path not in retrieved and close_path(path, retrieved)]
    if near:
        raise ValueError(
            f"{source}, column 'gold': "
            + unknown_paths_message(
                near[:10], retrieved, corpus=f"any run in {runs_label} (no meta.json there lists the corpus documents)"
            )
        )


def format_trec_run(query_ids, results, *, tag: str | None = None) -> str:
    """TREC run text (``qid Q0 docid rank score tag``), ranks from 1.

    Scores are written in full (the shortest text that reads back as the same
    float), so a gate cut at a bar fitted on the score table cuts the
    passages read back from a run exactly as it cut the retrieved ones.
    """
    lines = []
    for query_id, result in zip(query_ids, results):
        run_tag = tag or result.retriever
        for rank, (chunk_id, score) in enumerate(zip(result.chunk_ids, result.scores), start=1):
            if any(character.isspace() for character in chunk_id + str(query_id)):
                raise ValueError(f"TREC runs cannot hold ids with white space: {query_id!r} / {chunk_id!r}")
            lines.append(f"{query_id} Q0 {chunk_id} {rank} {float(score)!r} {run_tag}")
    return "\n".join(lines) + ("\n" if lines else "")


def write_trec_run(path, query_ids, results, *, tag: str | None = None) -> Path:
    """Write one retriever's results as a TREC run file (atomically)."""
    return atomic_write_text(path, format_trec_run(query_ids, results, tag=tag))


def write_trec_runs(folder, query_ids, retrieved: dict, *, config: dict | None = None) -> list[Path]:
    """Write ``<folder>/<retriever>.run`` for each retriever, plus ``meta.json``, each atomically.

    ``meta.json`` is written last and records every run's sha256
    (``run_sha256``), so that a folder half-rewritten by a killed run is
    detected by :func:`evaluate_runs` instead of mixing two scorings.
    """
    import hashlib

    folder = Path(folder)
    texts = {name: format_trec_run(query_ids, results) for name, results in retrieved.items()}
    paths = [atomic_write_text(folder / f"{name}.run", text) for name, text in texts.items()]
    if config is not None:
        digests = {f"{name}.run": hashlib.sha256(text.encode("utf-8")).hexdigest() for name, text in texts.items()}
        config = {**config, "run_sha256": digests}
        paths.append(atomic_write_text(folder / "meta.json", json.dumps(config, indent=2) + "\n"))
    return paths


def evaluate_runs(runs_dir, queries: pd.DataFrame, *, source: str = "queries", **options) -> pd.DataFrame:
    """Retrieval metrics with intervals for every ``*.run`` file in ``runs_dir``.

    The queries are checked against the runs first
    (:func:`check_queries_against_runs`): an answerable query id
    in no run file, or a gold path that is not a document of the corpus listed
    in ``runs_dir/meta.json`` (written by ``ragcal score --runs``), raises
    ``ValueError`` naming ``source`` (the query file), since it would score 0.
    ``options`` go to :func:`ragcal.metrics.retrieval_metrics`.
    """
    runs_dir = Path(runs_dir)
    paths = sorted(runs_dir.glob("*.run"))
    if not paths:
        raise ValueError(f"{runs_dir}: no *.run files")
    runs = {path.stem: read_trec_run(path) for path in paths}
    meta_path = runs_dir / "meta.json"
    documents = None
    if meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            documents = meta.get("documents")
        except (json.JSONDecodeError, AttributeError, UnicodeDecodeError) as error:
            raise ValueError(f"{meta_path}: not a JSON object as ragcal score --runs writes it ({error})") from error
        from ._io import sha256_file

        changed = [
            path.name
            for path in paths
            if path.name in meta.get("run_sha256", {}) and sha256_file(path) != meta["run_sha256"][path.name]
        ]
        if changed:
            raise ValueError(
                f"{meta_path}: run file(s) {', '.join(changed)} are not the ones it describes (rewritten or edited "
                "since, or a run stopped half-way); score again with --runs"
            )
    gold = gold_pages(queries)
    check_queries_against_runs(
        runs, gold, documents=documents, source=source, runs_label=str(runs_dir), documents_label=str(meta_path)
    )
    return retrieval_metrics(runs, gold, **options)


def hardest_queries(queries: pd.DataFrame, runs: dict, *, retriever: str = "dense", n: int = 5) -> pd.DataFrame:
    """The answerable queries whose gold page ranks worst for ``retriever``.

    Returns
    -------
    DataFrame
        ``id, query, gold, <retriever>_gold_rank`` (page level, NaN when no
        gold page is in the run) and the top page of each run, worst first.
    """
    gold = gold_pages(queries)
    ranked = {
        name: {
            qid: list(dict.fromkeys(pages_of(group["docid"])))
            for qid, group in run.groupby("qid", sort=False)
        }
        for name, run in runs.items()
    }
    rows = []
    for row in queries[queries["answerable"]].itertuples():
        record = {"id": row.id, "query": row.query, "gold": ";".join(row.gold)}
        for name, pages in ranked.items():
            order = pages.get(row.id, [])
            rank = next((position for position, page in enumerate(order, start=1) if page in gold[row.id]), np.nan)
            record[f"{name}_gold_rank"] = rank
        record[f"{retriever}_top_page"] = ranked[retriever].get(row.id, [""])[0]
        rows.append(record)
    table = pd.DataFrame(rows)
    key = table[f"{retriever}_gold_rank"].fillna(np.inf)
    return table.assign(_key=key).sort_values("_key", ascending=False, kind="stable").drop(columns="_key").head(n)
