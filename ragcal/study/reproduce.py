"""The main job: rebuild ``results/`` for every bundled corpus, then compare them.

For each corpus of :data:`ragcal.datasets.BUNDLED` (``results/<name>/``),
steps that each write their own files:

1. score table and TREC runs for the labeled set (default index);
2. retrieval metrics per retriever, computed from the run files;
3. the chunking sweep (:mod:`ragcal.chunk_sweep`): heading-aware chunks of
   128, 256 and 512 tokens and whole sections, fixed 500-token windows, and no
   include expansion, with paired differences against the default;
4. calibration: score statistics per slice, AUC per signal, sweeps, threshold
   rules and held-out outcomes over repeated splits, and the label curve of
   ``keep@0.95`` (``label_curve.csv``, :mod:`ragcal.study.label_curve`);
5. gates (threshold per rule, floor + gap, the default fallback chain), held
   out per slice, with the passages they pass on and the gates fitted on the
   whole set saved under ``gates/``;
6. learned gates (:mod:`ragcal.study.learned`): logistic regressions over
   signal sets against one ``dense_top1`` threshold, nested held out
   (``learned_auc.csv``, ``learned_gate.csv``, ``learned_coefficients.csv``);
7. the reranker's signals beside ``dense_top1`` (a tiny random cross-encoder
   unless one is given: a plumbing check, see :mod:`ragcal.study.rerank`;
   ``rerank_scores.csv``, anchored, and ``rerank_auc.csv``) and,
   for FastAPI, the live questions' score table that notebook 09 logs
   (``live_scores.csv``, :mod:`ragcal.study.monitoring`) and the
   access-control demonstration (:mod:`ragcal.study.access`);
8. ``summary.md`` with the numbers and their intervals (and, for FastAPI, the
   published ones beside them).

Then ``results/cross_corpus.md`` (:mod:`ragcal.study.cross_corpus`): what transfers
from one corpus to the other.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pandas as pd

from .._io import atomic_write_text
from ..calibration import fit_threshold, heldout_outcomes
from ..chunk_sweep import DEFAULT_VARIANT, MEASURE_LABELS, format_sweep, sweep_chunking
from ..datasets import BUNDLED, FASTAPI_LIVE_QUERIES, RUST_BOOK_QUERIES, BundledCorpus, bundled
from ..embedding import load_embedder
from ..formatting import interval_cell
from ..gates import DEFAULT_LEARNED_SIGNALS
from ..metrics import auc_table, group_stats, outcome_table, sweep
from ..queries import load_queries
from ..retrieval.index import IndexOptions, build_index
from ..runs import evaluate_runs, hardest_queries, read_trec_run, write_trec_runs
from ..score_tables import write_score_table
from ..scoring import score_table
from ..signals import SIGNALS
from .access import access_gating, access_score_tables, access_section
from .anchoring import Anchor, copy_reference
from .gates import AT_95, BASELINE_GATE, N_PASSAGE_SPLITS, evaluate_gates, gates_section
from .label_curve import evaluate_label_curve, label_curve_section
from .learned import LEARNED_RULE, LEARNED_SPLITS, baseline_gate_name, evaluate_learned_gates
from .learned_report import learned_gate_section
from .monitoring import LIVE_SCORES, live_scores
from .parallel import run_in_processes
from .published import SWEEP_GRID, published_split
from .qpp import evaluate_qpp, qpp_section
from .report import (
    HELDOUT_RULES,
    auc_section,
    differences_section,
    empty_section,
    group_stats_section,
    heldout_section,
    rule_of_thumb_section,
    sweep_section,
)
from .rerank import RERANK_SCORES, RERANK_SIGNALS, rerank_scores, rerank_section
from .selective import evaluate_selective, selective_section, support_inputs
from .timings import StageTimings

__all__ = ["SECOND_MODEL", "reproduce", "reproduce_corpus", "chunking_paragraph"]

#: The second embedding model of ``results/cross_model.md``: WordLlama's static embeddings, shipped in its wheel.
SECOND_MODEL = "wordllama:l2_supercat_256"
#: Chunks of the first corpus that the timing in ``results/cross_model.md`` embeds (a seeded sample).
TIMING_CHUNKS = 100


def _project_relative(path) -> str:
    """``path`` relative to the project root when it lies inside it (so results carry no machine paths)."""
    from ..datasets import DATA_DIR

    resolved = Path(path).resolve()
    root = DATA_DIR.parent.resolve()
    return resolved.relative_to(root).as_posix() if resolved.is_relative_to(root) else str(path)


def chunking_paragraph(chunking: pd.DataFrame, *, default: str = DEFAULT_VARIANT, fixed: str = "fixed-500") -> str:
    """A data-driven paragraph on seed 000's claim that fixed-size chunks fail quietly."""
    rows = chunking.set_index("variant")
    if default not in rows.index or fixed not in rows.index:
        return ""
    row = rows.loc[fixed]
    parts, wins, losses = [], 0, 0
    for metric in ("recall@5", "mrr@10", "dense_top1_auc"):
        label = MEASURE_LABELS[metric]
        # The differences are fixed windows minus the default: heading-aware wins when the interval is below zero.
        wins += row[f"{metric}_diff_high"] < 0
        losses += row[f"{metric}_diff_low"] > 0
        parts.append(
            f"{label} {interval_cell(rows.loc[default], metric)} vs {interval_cell(row, metric)}, "
            f"paired difference (fixed minus heading-aware) {interval_cell(row, f'{metric}_diff', sign=True)}"
        )
    if wins and not losses:
        claim = (
            f"Seed 000's claim holds here: heading-aware chunking ({default}) beats fixed 500-token windows, with "
            f"the paired 95% interval clear of zero on {wins} of 3 measures."
        )
    elif losses and not wins:
        claim = "Seed 000's claim does not hold here: fixed-size windows do better on this set."
    elif not wins and not losses:
        claim = (
            "With this many queries the data cannot tell heading-aware from fixed-size chunking apart: every "
            "paired interval includes zero."
        )
    else:
        claim = "The evidence is mixed."
    return (
        claim + " " + "; ".join(parts) + ". Caveat: MiniLM reads at most 256 word pieces, so a 500-token "
        "window is embedded from its first ~200 words only."
    )


def _format_retrieval(table: pd.DataFrame) -> str:
    wide = table.assign(
        cell=[
            f"{value:.3f} [{low:.3f}, {high:.3f}]"
            for value, low, high in zip(table["value"], table["ci_low"], table["ci_high"])
        ]
    )
    return wide.pivot(index="retriever", columns="metric", values="cell")[
        list(dict.fromkeys(table["metric"]))
    ].to_markdown()


def reproduce(
    results_dir="results",
    *,
    corpora=None,
    embedder=None,
    n_splits: int = 1000,
    variants=None,
    reranker=None,
    second_model: str | None = SECOND_MODEL,
    timings: StageTimings | None = None,
    jobs: int = 1,
    reference_dir=None,
    anchors: list | None = None,
    log=print,
) -> dict:
    """Run the whole experiment for every bundled corpus, then compare them.

    Parameters
    ----------
    results_dir : str or Path, default="results"
        ``<results_dir>/<corpus name>/`` per corpus, and ``cross_corpus.md``
        (with its CSVs) when there are two corpora or more.
    corpora : sequence of str, default=None
        Names from :data:`ragcal.datasets.BUNDLED`; all of them when None.
    variants : dict, default=None
        The chunking sweep's variants (:data:`ragcal.chunk_sweep.CHUNKING_VARIANTS`
        when None); they must include the default, the baseline of the paired
        differences.
    reranker : str, default=None
        Cross-encoder for the "Reranker signals" section; None uses the tiny
        random one (see :mod:`ragcal.study.rerank`).
    second_model : str or None, default=SECOND_MODEL
        The model (:func:`ragcal.embedding.load_embedder`) that
        ``results/cross_model.md`` compares with ``embedder`` on every corpus
        (:mod:`ragcal.study.cross_model`), when there are two corpora or more;
        None skips the comparison.
    timings : StageTimings, default=None
        Records each stage's time (``ragcal reproduce --timings`` prints them).
    reference_dir : str or Path, default=None
        The committed results that model-derived quantities are anchored to
        (:mod:`ragcal.study.anchoring`): ``<reference_dir>/<corpus>/``;
        ``results_dir`` as it was before this run when None.
    anchors : list, default=None
        Receives every :class:`~ragcal.study.anchoring.Anchor` (per corpus,
        then per model and corpus of the cross-model report), for the verdict.
    jobs : int, default=1
        Processes for the corpora's studies (:func:`ragcal.study.parallel.run_in_processes`):
        with two or more, each corpus runs in its own process with its own
        embedder of the same model and cache, and writes the same bits. The
        cross-model report runs as one more task beside them (it needs the
        corpora's specs, not their results), anchored to a copy of the
        committed files taken before any task starts.

    Returns
    -------
    dict of str to dict
        The tables of :func:`reproduce_corpus` per corpus name.
    """
    from .cross_corpus import write_cross_corpus
    from .cross_model import model_label, write_cross_model, write_cross_model_timing

    results_dir = Path(results_dir)
    embedder = embedder or load_embedder()
    timings = timings if timings is not None else StageTimings()
    names = list(corpora) if corpora is not None else list(BUNDLED)
    specs = [bundled(name) for name in names]  # unknown names fail before any work
    reference_root = Path(reference_dir) if reference_dir is not None else results_dir
    options = {"n_splits": n_splits, "variants": variants, "reranker": reranker}
    comparing_models = second_model is not None and len(specs) > 1
    cross_model_options = {
        "rules": HELDOUT_RULES,
        "n_splits": n_splits,
        "timing_chunks": TIMING_CHUNKS,
    }
    cross_model_anchors = []
    if jobs > 1 and len(specs) > 1:
        model = {"model": embedder.name, "cache_dir": embedder.cache_dir, "use_cache": embedder.use_cache}
        tasks = [
            (_corpus_in_process, (spec, results_dir / spec.name), {**model, **options, "reference_dir": reference})
            for spec, reference in zip(specs, [reference_root / spec.name for spec in specs])
        ]
        with tempfile.TemporaryDirectory(prefix="ragcal-cross-model-reference-") as frozen:
            if comparing_models:
                # The cross-model report needs only the corpora's specs, so it runs beside their studies, taking the
                # first process that is free. It anchors to the committed results, which those studies overwrite
                # meanwhile: it reads a copy made before any of them starts.
                copied = Path(frozen)
                for name in names:
                    copy_reference(reference_root / name, copied / name)
                models = {"models": [embedder.name, second_model], "cache_dir": embedder.cache_dir}
                # Timed afterwards, here, on the cores it had before (cross_model_timing.md).
                tasks.append(
                    (_cross_model_in_process, (specs, results_dir), {**models, **cross_model_options,
                                                                     "measure_timing": False, "reference_dir": copied})
                )  # fmt: skip
            what = f"{len(specs)} corpora" + (" and the cross-model report" if comparing_models else "")
            with timings.stage(f"{what} in {min(jobs, len(tasks))} processes"):
                done = run_in_processes(tasks, jobs=jobs)
        tables = {}
        for spec, (corpus_tables, rows) in zip(specs, done):
            tables[spec.name] = corpus_tables
            timings.add_parallel(rows)
        if comparing_models:
            cross_model_anchors, rows = done[-1]
            timings.add_parallel(rows)
            other = load_embedder(second_model, cache_dir=embedder.cache_dir)
            with timings.stage("cross-model timing"):
                write_cross_model_timing(
                    specs[0],
                    {model_label(embedder): embedder, model_label(other): other},
                    results_dir,
                    timing_chunks=TIMING_CHUNKS,
                    log=log,
                )
    else:
        tables = {
            spec.name: reproduce_corpus(
                spec,
                results_dir / spec.name,
                embedder=embedder,
                **options,
                reference_dir=reference_root / spec.name,
                timings=timings,
                log=log,
            )
            for spec in specs
        }
    if len(tables) > 1:
        with timings.stage("cross-corpus report"):
            write_cross_corpus({BUNDLED[name]: tables[name] for name in names}, results_dir, log=log)
    if comparing_models and not (jobs > 1 and len(specs) > 1):  # like cross_corpus.md: for every corpus at once
        other = load_embedder(second_model, cache_dir=getattr(embedder, "cache_dir", None))
        with timings.stage("cross-model report"):
            write_cross_model(
                specs,
                {model_label(embedder): embedder, model_label(other): other},
                results_dir,
                **cross_model_options,
                reference_dir=reference_root,
                anchors=cross_model_anchors,
                log=log,
            )
    if anchors is not None:
        anchors += [tables[name]["anchor"] for name in names] + cross_model_anchors
    return tables


def _cross_model_in_process(specs, results_dir, *, models, cache_dir, reference_dir, **options):
    """:func:`ragcal.study.cross_model.write_cross_model` in a worker process: its anchors and its stage timing."""
    from .cross_model import model_label, write_cross_model

    timings = StageTimings()

    def log(message):
        print(f"[cross-model] {message}", flush=True)

    embedders = [load_embedder(name, cache_dir=cache_dir) for name in models]
    anchors = []
    with timings.stage("cross-model report"):
        write_cross_model(
            specs,
            {model_label(embedder): embedder for embedder in embedders},
            results_dir,
            reference_dir=reference_dir,
            anchors=anchors,
            log=log,
            **options,
        )
    return anchors, timings.rows


def _corpus_in_process(spec: BundledCorpus, results_dir, *, model: str, cache_dir, use_cache: bool, **options):
    """:func:`reproduce_corpus` in a worker process: its tables and its stage timings."""
    timings = StageTimings()

    def log(message):
        print(f"[{spec.name}] {message}", flush=True)

    embedder = load_embedder(model, cache_dir=cache_dir, use_cache=use_cache)
    tables = reproduce_corpus(spec, results_dir, embedder=embedder, **options, timings=timings, log=log)
    return tables, timings.rows


def reproduce_corpus(
    spec: BundledCorpus,
    results_dir,
    *,
    embedder=None,
    n_splits: int = 1000,
    variants=None,
    reranker=None,
    reference_dir=None,
    timings: StageTimings | None = None,
    log=print,
) -> dict:
    """Run the experiment on one corpus and its labeled set; write ``results_dir``; return the tables.

    The dense scores and the score table are anchored to the committed ones in ``reference_dir`` (default:
    ``results_dir`` as it was before this run) when within their declared tolerance (:mod:`ragcal.study.anchoring`);
    the tables hold the :class:`~ragcal.study.anchoring.Anchor` under ``"anchor"``.
    """
    results_dir = Path(results_dir)
    anchor = Anchor(reference_dir if reference_dir is not None else results_dir, label=spec.name)
    embedder = embedder or load_embedder()
    timings = timings if timings is not None else StageTimings()
    stage = lambda name: timings.stage(f"{spec.name}: {name}")  # noqa: E731
    with stage("index (chunk, embed)"):
        index = build_index(spec.corpus, exclude=spec.exclude, embedder=embedder)
    queries = load_queries(spec.queries, corpus_paths=index.doc_paths)
    log(f"{spec.name}: {len(index.chunks)} chunks, model {index.config['model_fingerprint']}")
    with stage("questions (retrieve, signals)"):
        retrieved = anchor.retrieved(index.retrieve(queries["query"]), queries["id"])
        table = anchor.table(score_table(queries, retrieved), decisions=True)
    config = {**index.config, "queries": _project_relative(spec.queries), "corpus": _project_relative(spec.corpus)}
    write_score_table(results_dir / "scores.csv", table, config=config)
    write_trec_runs(results_dir / "runs", queries["id"], retrieved, config=config)
    log(f"wrote {results_dir / 'scores.csv'} and {results_dir / 'runs'}/")

    retrieval = evaluate_runs(results_dir / "runs", queries)
    runs = {path.stem: read_trec_run(path) for path in sorted((results_dir / "runs").glob("*.run"))}
    hardest = hardest_queries(queries, runs)
    atomic_write_text(results_dir / "retrieval.csv", retrieval.to_csv(index=False, float_format="%.4f"))
    log(f"wrote {results_dir / 'retrieval.csv'}")

    with stage("chunking sweep"):
        chunking = sweep_chunking(
            queries, corpus_dir=spec.corpus, embedder=embedder, variants=variants, exclude=spec.exclude, log=log
        )
    atomic_write_text(results_dir / "chunking.csv", chunking.to_csv(index=False, float_format="%.4f"))
    log(f"wrote {results_dir / 'chunking.csv'}")

    with stage("calibration (AUC, sweeps, held-out splits)"):
        calibration = calibrate(table, results_dir, n_splits=n_splits, log=log)
    with stage("label curve"):
        labels = evaluate_label_curve(table, results_dir, log=log)
    with stage("QPP signals"):
        qpp = evaluate_qpp(table, runs, queries, results_dir, log=log)
    with stage("gates (held-out splits)"):
        gate_tables = evaluate_gates(
            table, queries, retrieved, results_dir, rules=HELDOUT_RULES, provenance=config, n_splits=n_splits, log=log
        )
    results_per_row, gold = support_inputs(queries, retrieved)
    with stage("learned gates"):
        learned = evaluate_learned_gates(
            table, results_dir, n_splits=min(n_splits, LEARNED_SPLITS), results=results_per_row, gold=gold, log=log
        )
    with stage("selective risk and certificates"):
        selective = evaluate_selective(
            table,
            queries,
            retrieved,
            results_dir,
            gate_heldout=gate_tables["heldout_gates"],
            provenance=config,
            n_splits=n_splits,
            log=log,
        )

    with stage("reranker signals"):
        reranked, rerank_description = rerank_scores(index, queries, reranker=reranker, cache_dir=embedder.cache_dir)
        # Anchored only to the same reranker's committed scores: another model's are another measurement.
        same_reranker = {key: rerank_description[key] for key in ("reranker_fingerprint", "rerank_depth")}
        reranked = anchor.table(reranked, RERANK_SCORES, provenance=same_reranker)
        rerank_auc = auc_table(reranked, list(RERANK_SIGNALS))
    write_score_table(results_dir / RERANK_SCORES, reranked, config={**config, **rerank_description})
    atomic_write_text(results_dir / "rerank_auc.csv", rerank_auc.to_csv(index=False, float_format="%.4f"))
    log(f"wrote {results_dir / RERANK_SCORES} and {results_dir / 'rerank_auc.csv'} ({rerank_description['reranker']})")
    access = None
    if spec.name == "fastapi":
        with stage("live questions (notebook 09's log)"):
            live, _ = live_scores(index)
            live = anchor.table(live, LIVE_SCORES)
        live_queries = " + ".join(_project_relative(path) for path in (FASTAPI_LIVE_QUERIES, RUST_BOOK_QUERIES))
        write_score_table(results_dir / LIVE_SCORES, live, config={**config, "queries": live_queries})
        log(f"wrote {results_dir / LIVE_SCORES}")
        with stage("access control"):
            access = access_demonstration(spec, queries, embedder, n_splits=n_splits)
        atomic_write_text(results_dir / "access.csv", access.to_csv(index=False, float_format="%.4f"))
        log(f"wrote {results_dir / 'access.csv'}")

    counts = queries["slice"].value_counts()
    published = spec.published
    sections = [
        f"# Results: {spec.title}",
        "",
        f"Generated by `make reproduce` (`ragcal reproduce`). Corpus `{config['corpus']}`, queries "
        f"`{config['queries']}`. Model `{config['model_fingerprint']}`, {config['chunker']} chunking (max "
        f"{config['max_tokens']} tokens, includes expanded), {config['n_chunks']:,} chunks from "
        f"{len(config['documents'])} pages. Queries: "
        + ", ".join(f"{count} {name}" for name, count in counts.items())
        + ".",
        "",
        "Intervals are 95% percentile bootstrap intervals over queries (2,000 resamples, seed 0)"
        + (
            ", set beside the published experiment's numbers."
            if published
            else ". The published experiment was run "
            "on the FastAPI docs only, so there is nothing published to set these numbers beside; see "
            "`results/cross_corpus.md` for the comparison with FastAPI."
        ),
        "",
        "## Score statistics per slice",
        "",
        group_stats_section(calibration["group_stats"], published=published),
        empty_section(calibration["group_stats"], published=published),
        auc_section(calibration["auc"], published=published),
        qpp_section(qpp, calibration["auc"]),
        sweep_section(calibration["published_sweep"], published=published),
        heldout_section(
            calibration["published_split"],
            calibration["heldout"],
            total_answerable=int(table["answerable"].sum()),
            published=published,
        ),
        label_curve_section(
            labels["label_curve"],
            labels["label_curve_outcome"],
            figure="figures/label_curve.png" if spec.name == "fastapi" else f"figures/{spec.name}/label_curve.png",
        ),
        rule_of_thumb_section(calibration["thresholds"], golden_file=f"tests/golden/{spec.name}_minilm.json"),
        gates_section(
            gate_tables["gates"],
            gate_tables["comparison"],
            gate_tables["passages"],
            baseline=BASELINE_GATE,
            n_splits=int(gate_tables["heldout_gates"]["split"].nunique()),
            n_passage_splits=N_PASSAGE_SPLITS,
            at_95=AT_95,
            fitted={name: json.dumps(gate.to_dict()) for name, gate in gate_tables["fitted"].items()},
        ),
        learned_gate_section(
            learned,
            baseline_gate=baseline_gate_name(),
            default_gate="learned default",
            rule=LEARNED_RULE,
            default_signals=DEFAULT_LEARNED_SIGNALS,
        ),
        selective_section(
            selective["risk_coverage_summary"],
            selective["risk_coverage"],
            selective["certified_gates"],
            selective["guarantees"],
            certificate=selective["certificate"],
            n_splits=n_splits,
            gate_json=selective["certified_gate_json"],
        ),
        rerank_section(rerank_auc, rerank_description),
    ]
    if access is not None:
        sections.append(access_section(access, n_splits=n_splits))
    if published:
        sections.append(
            differences_section(
                table, calibration["auc"], n_chunks=config["n_chunks"], n_pages=len(config["documents"])
            )
        )
    sections += [
        "## Retrieval (page level, answerable queries only)",
        "",
        _format_retrieval(retrieval),
        "",
        "## Chunking sweep",
        "",
        f"Every variant over the same questions; differences are paired against the default ({DEFAULT_VARIANT}: "
        "heading-aware, at most 256 word/punctuation tokens, includes expanded). `headings-whole` keeps every "
        "section whole. MiniLM reads at most 256 word pieces, so longer chunks are embedded from their beginning.",
        "",
        format_sweep(chunking),
        "",
        chunking_paragraph(chunking),
        "",
        "## The answerable queries that dense retrieval misses worst",
        "",
        "Rank of the first gold page among the distinct pages retrieved; nan: no gold page in the run (top 100 "
        "chunks, top 50 for rrf).",
        "",
        hardest.to_markdown(index=False, floatfmt=".0f"),
        "",
    ]
    atomic_write_text(results_dir / "summary.md", "\n".join(sections))
    log(f"wrote {results_dir / 'summary.md'}")
    return {
        "spec": spec,
        "queries": queries,
        "scores": table,
        "retrieval": retrieval,
        "chunking": chunking,
        "hardest": hardest,
        **calibration,
        **labels,
        **{f"gate_{name}" if name in ("gates",) else name: frame for name, frame in gate_tables.items()},
        "learned": learned,
        "selective": selective,
        "qpp": qpp,
        "anchor": anchor,
    }


def access_demonstration(spec: BundledCorpus, queries: pd.DataFrame, embedder, *, n_splits: int = 1000):
    """The access-control table of :mod:`ragcal.study.access` for the FastAPI docs and the demonstration map."""
    from ..access import AccessPolicy
    from ..datasets import FASTAPI_ACCESS_MAP

    index = build_index(
        spec.corpus,
        exclude=spec.exclude,
        embedder=embedder,
        options=IndexOptions(access=AccessPolicy.from_options(access_map=FASTAPI_ACCESS_MAP)),
    )
    return access_gating(access_score_tables(index, queries), queries, n_splits=n_splits)


def calibrate(
    table: pd.DataFrame,
    results_dir,
    *,
    signal: str = "dense_top1",
    n_splits: int = 1000,
    rules=HELDOUT_RULES,
    log=print,
) -> dict:
    """Calibration tables for a score table; writes group_stats, auc, sweep and heldout CSVs."""
    results_dir = Path(results_dir)
    directions = {name: SIGNALS[name].higher_is_answerable for name in SIGNALS if name in table.columns}
    signals = [name for name in table.columns if name in directions]
    stats = group_stats(table, signals)
    aucs = auc_table(table, signals, directions=directions)
    sweeps = pd.concat(
        [sweep(table, name, higher_is_answerable=directions[name]) for name in signals], ignore_index=True
    )
    heldout = heldout_outcomes(table, signal, rules, n_splits=n_splits)
    thresholds = pd.DataFrame(
        [{"rule": rule, "threshold": fit_threshold(rule, table[signal], table["answerable"])} for rule in rules]
    )
    tables = {
        "group_stats": stats,
        "auc": aucs,
        "sweep": sweeps,
        "heldout": heldout,
        "thresholds": thresholds,
        "published_sweep": outcome_table(table, signal, SWEEP_GRID),
        "published_split": published_split(table, signal),
    }
    for name in ("group_stats", "auc", "sweep", "heldout", "thresholds"):
        atomic_write_text(results_dir / f"{name}.csv", tables[name].to_csv(index=False, float_format="%.4f"))
        log(f"wrote {results_dir / name}.csv")
    return tables
