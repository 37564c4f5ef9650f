"""The ``ragcal`` command.

- ``ragcal score QUERIES.csv [--corpus DIR] --out scores.csv [--runs DIR]``
- ``ragcal chunks CORPUS --out chunks.jsonl``: what would be indexed, one
  JSON object per chunk, with the same chunking options as ``score``
- ``ragcal evaluate QUERIES.csv --runs DIR --out retrieval.csv``: retrieval
  metrics with intervals from TREC run files
- ``ragcal calibrate SCORES.csv --signal NAME --rule keep@1.0 [--heldout N]``:
  threshold and per-slice outcome with intervals, for any score table
- ``ragcal fit-gate SCORES.csv --signal NAME --rule RULE --out gate.json``:
  a calibrated gate as a file (``--gate floor-gap`` or ``--gate chain`` for the
  other kinds; ``--learned [--signals a,b,c]`` for a logistic regression over
  several signals)
- ``ragcal ask --gate gate.json [--json] QUESTION...``: decisions with passages
  and helpful refusals
- ``ragcal reproduce [--results DIR]``: the main job of the README.

``score``, ``calibrate``, ``fit-gate`` and ``ask`` take ``--signals-module
mymod.py`` (repeatable): the file is imported first, so the signals it
registers are computed, fitted and asked like the built-in ones.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .corpus import CorpusError
from .datasets import FASTAPI_CORPUS
from .embedding import DEFAULT_MODEL
from .queries import QueryFileError

__all__ = ["main"]


def _add_chunking_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--chunker", choices=("headings", "fixed"), default="headings")
    parser.add_argument("--max-tokens", type=int, default=256, help="heading chunker limit (default 256)")
    parser.add_argument("--window", type=int, default=500, help="fixed chunker window (default 500)")
    parser.add_argument(
        "--no-includes",
        action="store_true",
        help="do not expand include directives ({* ... *}, {{#include ...}}, {{#rustdoc_include ...}})",
    )
    parser.add_argument(
        "--exclude",
        action="append",
        default=None,
        metavar="PATH",
        help="leave a page out (repeatable); default: none, or the bundled corpus's non-doc pages",
    )


def _add_index_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--corpus", type=Path, default=FASTAPI_CORPUS, help="Markdown folder (default: the bundled FastAPI docs)"
    )
    parser.add_argument("--model", default=DEFAULT_MODEL, help="embedding model name or folder")
    _add_chunking_options(parser)
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="embedding cache folder (default: $RAGCAL_CACHE_DIR or the user cache dir)",
    )
    parser.add_argument("--no-cache", action="store_true", help="embed everything, read and write no cache")
    parser.add_argument(
        "--dense-index",
        choices=("flat", "hnsw", "ivf"),
        default="flat",
        help="faiss index for dense search: flat (exact, default), hnsw or ivf (approximate: fit thresholds on the "
        "index you serve, see docs/approximate_search.md)",
    )


def _add_rerank_options(parser: argparse.ArgumentParser, *, depth: bool = True) -> None:
    parser.add_argument(
        "--reranker",
        default=None,
        metavar="PATH_OR_NAME",
        help="cross-encoder (folder or Hugging Face Hub name) that re-scores the fused candidates",
    )
    if depth:
        parser.add_argument(
            "--rerank-depth", type=int, default=None, help="fused candidates the reranker re-scores (default 50)"
        )


def _add_access_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--access",
        default=None,
        metavar="LEVELS",
        help="access levels the caller may see, comma-separated (default: the default level only)",
    )
    parser.add_argument(
        "--access-map", type=Path, default=None, metavar="FILE", help="CSV path_glob,level for pages without front matter"
    )
    parser.add_argument(
        "--default-access", default=None, metavar="LEVEL", help="level of a page nothing else places (default public)"
    )


def _access_options(args, provenance=None) -> dict:
    """build_index options for access control; a gate's provenance supplies what the command line leaves out."""
    from .access import DEFAULT_ACCESS, AccessPolicy

    provenance = provenance or {}
    access_map = args.access_map
    if access_map is None and provenance.get("access_map"):
        access_map = Path(provenance["access_map"])
    default = args.default_access or provenance.get("default_access") or DEFAULT_ACCESS
    policy = AccessPolicy.from_options(access_map=access_map, default=default)
    recorded = provenance.get("access_map_sha256")
    if args.access_map is None and recorded and policy.to_dict()["access_map_sha256"] != recorded:
        print(
            f"ragcal: warning: the access map {access_map} changed since the gate was fitted (sha256 differs); "
            "pages may sit at other levels now: re-check the gate on a labeled set",
            file=sys.stderr,
        )
    return {"access": policy, "allowed_levels": args.access if args.access is not None else default}


def _check_rerank_depth(args, provenance=None) -> None:
    if args.rerank_depth is not None and args.reranker is None and not (provenance or {}).get("reranker"):
        raise ValueError("--rerank-depth needs a reranker: pass --reranker PATH_OR_NAME")


def _report_visibility(index, queries_path=None) -> None:
    """Say what the caller sees; with a labeled set, name the answerable questions whose gold pages are all hidden."""
    if "n_visible" not in index.config:
        return
    levels = ", ".join(index.config["allowed_levels"])
    print(
        f"ragcal: access level(s) {levels} see {index.config['n_visible']:,} of {index.config['n_chunks']:,} chunks; "
        "the others take no part in any score",
        file=sys.stderr,
    )
    if queries_path is None:
        return
    from .queries import load_queries

    queries = load_queries(queries_path)
    visible = {chunk.doc_path for chunk in index.chunks}
    hidden = [row.id for row in queries.itertuples() if row.answerable and not set(row.gold) & visible]
    if hidden:
        shown = ", ".join(map(str, hidden[:10])) + (f" and {len(hidden) - 10} more" if len(hidden) > 10 else "")
        print(
            f"ragcal: warning: {len(hidden)} answerable question(s) have no gold page visible at level(s) {levels} "
            f"({shown}). For this caller they are unanswerable: relabel them (answerable=false) in a labeled set "
            "for this level before fitting a gate on it.",
            file=sys.stderr,
        )


def _add_signals_module(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--signals-module",
        action="append",
        type=Path,
        default=None,
        metavar="FILE.py",
        help="a Python file that registers signals with ragcal.signals.register_signal (repeatable)",
    )


def _load_signals_modules(args) -> None:
    from .signals import load_signals_module

    for path in getattr(args, "signals_module", None) or ():
        names = load_signals_module(path)
        print(f"{path}: registered {', '.join(names) if names else 'no signal'}", file=sys.stderr)


def _score(queries_path, out, runs, args):
    from .scoring import score_query_file, write_score_table, write_trec_runs

    _check_rerank_depth(args)
    # score_query_file validates the query file against the corpus before any expensive work or any write.
    table, index, retrieved = score_query_file(
        queries_path,
        args.corpus,
        model=args.model,
        chunker=args.chunker,
        max_tokens=args.max_tokens,
        window=args.window,
        expand_includes=not args.no_includes,
        exclude=args.exclude,
        cache_dir=args.cache_dir,
        use_cache=not args.no_cache,
        reranker=args.reranker,
        rerank_depth=args.rerank_depth if args.rerank_depth is not None else 50,
        **_access_options(args),
        dense_index=args.dense_index,
    )
    _report_visibility(index, queries_path)
    config = {**index.config, "queries": str(queries_path)}
    write_score_table(out, table, config=config)
    if runs is not None:
        write_trec_runs(runs, table["id"], retrieved, config=config)
    return table


def _chunks(args) -> None:
    """Write the chunks of ``args.corpus`` as JSON lines and print a one-line summary; no model is loaded."""
    import json

    from ._io import atomic_write_text
    from .access import AccessPolicy
    from .chunking import chunk_size_summary
    from .scoring import chunk_corpus

    policy = AccessPolicy.from_options(access_map=args.access_map, default=args.default_access)

    documents, chunks, _ = chunk_corpus(
        args.corpus,
        chunker=args.chunker,
        max_tokens=args.max_tokens,
        window=args.window,
        expand_includes=not args.no_includes,
        exclude=args.exclude,
    )
    lines = [
        json.dumps(
            {
                "chunk_id": chunk.chunk_id,
                "path": chunk.doc_path,
                "heading_path": list(chunk.heading_path),
                "text": chunk.text,
                "n_tokens": chunk.n_tokens,
                "oversized": chunk.oversized,
                "access_level": level,
            },
            ensure_ascii=False,
        )
        for chunk, level in zip(chunks, policy.levels(chunks))
    ]
    atomic_write_text(args.out, "".join(line + "\n" for line in lines))
    median = chunk_size_summary(chunks).iloc[0]["tokens_median"] if chunks else 0
    oversized = sum(chunk.oversized for chunk in chunks)
    print(
        f"wrote {args.out}: {len(documents)} pages, {len(chunks)} chunks, "
        f"median {median:g} tokens, {oversized} oversized"
    )


def _print_slice_summary(table, signal="dense_top1") -> None:
    summary = table.groupby("slice", sort=False)[signal].describe()[["count", "50%", "min", "max"]]
    summary = summary.rename(columns={"50%": "median"}).round(3).astype({"count": int})  # describe() counts in floats
    print(f"\n{signal} by slice:")
    print(summary.to_string())


def _read_table(path: Path, what: str = "score table"):
    """Read a CSV for a command, with errors that name the file (a foreign delimiter included)."""
    import pandas as pd

    from ._io import check_csv_delimiter

    if not path.is_file():
        raise ValueError(f"{path}: {what} not found")
    check_csv_delimiter(path)
    try:
        return pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: cannot be read as CSV ({error})") from error


def _rules() -> dict:
    from .calibration import RULES

    return RULES


def _warn(message) -> None:
    print(f"warning: {message}", file=sys.stderr)


def _fit_in_sample(rule, table, args, higher):
    """Fit one rule on the whole table; its warnings become plain 'warning:' lines; NaN when it cannot be fitted."""
    import math
    import warnings

    from .calibration import CalibrationWarning, fit_threshold, parse_rule

    if parse_rule(rule)[0] == "keep" and not table["answerable"].any():
        return math.nan
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CalibrationWarning)
        threshold = fit_threshold(
            rule, table[args.signal], table["answerable"], higher_is_answerable=higher, delta=args.delta
        )
    for warning in caught:
        _warn(warning.message)
    return threshold


def _fallback_lines(repeated) -> list[str]:
    """One line per rule that could not be met on some calibration halves, saying what it did there."""
    lines = []
    for rule, group in repeated.groupby("rule", sort=False):
        fell_back = group[group["fallback"]]
        if fell_back.empty:
            continue
        counted = f"in {len(fell_back)} of {len(group)} splits"
        threshold = fell_back["threshold"].iloc[0]
        name = rule.split("@", 1)[0]
        if name == "keep":
            lines.append(f"{rule}: no answerable calibration questions {counted}, no threshold there (n/a)")
        elif name == "recall_guarantee":
            lines.append(
                f"{rule}: too few answerable calibration questions for the guarantee {counted}, "
                f"the rule answers everything there (threshold {threshold:+g})"
            )
        else:
            lines.append(
                f"{rule}: too few unanswerable calibration questions for the guarantee {counted}, "
                f"the rule refuses everything there (threshold {threshold:+g})"
            )
    return lines


def _print_log_summary(table, args, higher) -> None:
    """Per-slice statistics and the AUC with its interval, saying how the interval was made."""
    import warnings

    from .metrics import DegenerateInputWarning, group_stats
    from .score_logs import log_auc_table

    stats = group_stats(table, [args.signal]).drop(columns="signal")
    print(stats.to_string(index=False, float_format=lambda value: f"{value:.4f}"))
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("ignore", DegenerateInputWarning)
        auc = log_auc_table(table, args.signal, higher_is_answerable=higher, random_state=args.seed)
    for row in auc.itertuples():
        if row.auc != row.auc:  # NaN: one class or a constant score
            print(f"AUC (answerable vs {row.comparison}): n/a")
            continue
        scheme = (
            f"stratified bootstrap, 2000 resamples of all {row.n_answerable + row.n_unanswerable} rows"
            if row.interval == "bootstrap"
            else f"m-out-of-n bootstrap, 2000 resamples of a stratified {row.bootstrap_rows}-row subsample, "
            "rescaled to every row"
        )
        print(f"AUC (answerable vs {row.comparison}): {row.auc:.4f} [{row.ci_low:.4f}, {row.ci_high:.4f}] ({scheme})")


def _write_log_sweep(table, args, higher, thresholds) -> None:
    from ._io import atomic_write_text
    from .score_logs import log_sweep

    swept = log_sweep(table, args.signal, thresholds=thresholds, higher_is_answerable=higher)
    atomic_write_text(args.sweep, swept.to_csv(index=False))
    print(f"\nsweep ({swept.attrs['scheme']}; exact counts): {len(swept)} thresholds written to {args.sweep}")


def _calibrate(args) -> None:
    import math

    import pandas as pd

    from .calibration import heldout_outcomes, parse_rule
    from .metrics import outcome_table
    from .score_logs import read_score_log
    from .signals import SIGNALS

    rules = args.rule or ["keep@1.0"]
    for rule in rules:
        parse_rule(rule)
    # CSV or Parquet, only the needed columns, through pyarrow (ragcal.score_logs): fine for millions of rows.
    table = read_score_log(args.scores, [args.signal])
    higher = not args.lower_is_answerable
    if not args.lower_is_answerable and args.signal in SIGNALS:
        higher = SIGNALS[args.signal].higher_is_answerable
    print(
        f"{args.scores}: {len(table)} queries; signal {args.signal} "
        f"({'higher' if higher else 'lower'} means answerable); intervals: exact 95% binomial"
    )
    _print_log_summary(table, args, higher)
    # One class only: the other class's rates have no questions to count; say so rather than print nan%.
    undefined = {}
    if table["answerable"].all():
        undefined["unanswerable"] = "no unanswerable questions"
        _warn(f"{args.scores}: no unanswerable questions; refusal rates are undefined (shown as n/a)")
    if not table["answerable"].any():
        undefined["answerable"] = "no answerable questions"
        _warn(
            f"{args.scores}: no answerable questions; the share of answerable questions kept is undefined "
            "(shown as n/a), and keep@ rules have no threshold"
        )
    fitted_thresholds = []
    for rule in rules:
        threshold = _fit_in_sample(rule, table, args, higher)
        fitted_thresholds.append(threshold)
        if math.isnan(threshold):
            print(f"\n{rule}: no threshold (it keeps a share of the answerable questions, and there are none)")
            continue
        outcome = outcome_table(table, args.signal, [threshold], higher_is_answerable=higher).iloc[0]
        print(f"\n{rule}: answer when {args.signal} {'>=' if higher else '<='} {threshold:.4f}")
        print("  (fitted and scored on the same queries: an in-sample view; use --heldout for honest estimates)")
        groups = ["answerable_kept"] + [
            column[:-2]
            for column in outcome.index
            if column.endswith("_refused_k") and column != "unanswerable_refused_k"
        ]
        groups.append("unanswerable_refused")
        for group in groups:
            population = group.rsplit("_", 1)[0]
            size = outcome[population + "_n"]
            if size == 0:
                print(f"  {group:<28} n/a ({undefined.get(population, 'no questions')})")
                continue
            print(
                f"  {group:<28} {outcome[group]:6.1%}  ({int(outcome[group + '_k'])}/{int(size)})  "
                f"[{outcome[group + '_low']:.1%}, {outcome[group + '_high']:.1%}]"
            )
    if args.sweep is not None:
        _write_log_sweep(table, args, higher, fitted_thresholds)
    if args.heldout:
        repeated = heldout_outcomes(
            table,
            args.signal,
            rules,
            n_splits=args.heldout,
            random_state=args.seed,
            higher_is_answerable=higher,
            delta=args.delta,
        )
        columns = [
            column
            for column in repeated.columns
            if (column in ("threshold", "answerable_kept") or column.endswith("_refused"))
            and not (column == "answerable_kept" and "answerable" in undefined)
            and not (column.endswith("_refused") and "unanswerable" in undefined)
        ]
        quantiles = repeated.groupby("rule", sort=False)[columns].quantile([0.05, 0.5, 0.95])
        # Interpolating next to an infinite threshold (a rule that fell back) gives NaN; show the nearest split's.
        nearest = repeated.groupby("rule", sort=False)[["threshold"]].quantile(
            [0.05, 0.5, 0.95], interpolation="nearest"
        )
        quantiles["threshold"] = quantiles["threshold"].fillna(nearest["threshold"])
        summary = quantiles.unstack()
        print(f"\nheld out over {args.heldout} stratified half splits (5th / 50th / 95th percentile):")
        with pd.option_context("display.width", 200, "display.max_columns", 50):
            print(summary.round(3).to_string(na_rep="n/a"))
        for population, reason in undefined.items():
            print(f"(left out: {'refusal rates' if population == 'unanswerable' else 'answerable_kept'}, {reason})")
        for line in _fallback_lines(repeated):
            print(line)


def _sweep_chunking(args) -> None:
    from ._io import atomic_write_text
    from .chunk_sweep import format_sweep, parse_variants, sweep_chunking
    from .corpus import load_corpus
    from .cross_corpus import chunking_verdict
    from .datasets import default_exclude
    from .embedding import Embedder
    from .queries import load_queries

    variants = parse_variants(args.max_tokens, args.windows)
    if args.baseline not in variants:
        raise ValueError(f"--baseline {args.baseline!r} is not among the variants: {', '.join(variants)}")
    exclude = default_exclude(args.corpus) if args.exclude is None else tuple(args.exclude)
    documents = load_corpus(args.corpus, expand_includes=False, exclude=exclude)  # validates queries before embedding
    queries = load_queries(args.queries, corpus_paths={document.path for document in documents})
    table = sweep_chunking(
        queries,
        corpus_dir=args.corpus,
        embedder=Embedder(args.model, cache_dir=args.cache_dir),
        variants=variants,
        baseline=args.baseline,
        exclude=exclude,
        n_resamples=args.resamples,
        log=lambda message: print(message, file=sys.stderr),
    )
    if args.out is not None:
        atomic_write_text(args.out, table.to_csv(index=False, float_format="%.4f"))
        print(f"wrote {args.out}")
    print(format_sweep(table, default=args.baseline))
    print()
    print(chunking_verdict({str(args.corpus): table}, default=args.baseline)[1])


GATE_KINDS = ("threshold", "floor-gap", "chain", "learned")


def _read_provenance(scores_path: Path) -> dict | None:
    import json

    meta = scores_path.with_name(scores_path.stem + ".meta.json")
    if not meta.is_file():
        return None
    try:
        return json.loads(meta.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{meta}: not valid JSON ({error})") from error


def _check_table_reranker(reranker: str, provenance: dict | None, scores_path: Path) -> None:
    """With ``fit-gate --reranker``: the score table's rerank scores must come from this very reranker."""
    from .retrieval.rerank import CrossEncoderReranker

    fingerprint = CrossEncoderReranker(reranker, use_cache=False).fingerprint
    recorded = (provenance or {}).get("reranker_fingerprint")
    if recorded != fingerprint:
        raise ValueError(
            f"{scores_path}: its rerank scores come from {recorded or 'no reranker'}, not from {fingerprint}; "
            f"score it with `ragcal score --reranker {reranker}` first"
        )


def _fit_gate(args) -> None:
    from .calibration import parse_rule

    if args.learned:
        if args.gate not in ("threshold", "learned"):
            raise ValueError(f"--learned fits a learned gate; it cannot be combined with --gate {args.gate}")
        args.gate = "learned"
    if args.signals and args.gate != "learned":
        raise ValueError("--signals names the signals of a learned gate; add --learned (or use --signal NAME)")
    from .gates import fit_default_chain, fit_floor_gap, fit_threshold_gate, gate_outcomes, save_gate
    from .gates.fit import DEFAULT_CHAIN_COLUMNS
    from .gates.floor_gap import floor_gap_columns
    from .metrics import check_score_table

    parse_rule(args.rule)
    if args.hedge_rule:
        parse_rule(args.hedge_rule)
    provenance = _read_provenance(args.scores)
    if args.reranker is not None:
        _check_table_reranker(args.reranker, provenance, args.scores)
    if args.signal is None:
        args.signal = "rerank_top1" if args.reranker is not None else "dense_top1"
    if args.gate == "threshold":
        needed = [args.signal]
        higher = False if args.lower_is_answerable else None

        def fit(table):
            return fit_threshold_gate(
                table,
                args.signal,
                args.rule,
                hedge_rule=args.hedge_rule,
                higher_is_answerable=higher,
                delta=args.delta,
                max_passages=args.max_passages,
            )

    elif args.gate == "floor-gap":
        needed = list(floor_gap_columns(args.retriever))

        def fit(table):
            return fit_floor_gap(table, rule=args.rule, retriever=args.retriever, max_passages=args.max_passages)

    elif args.gate == "chain":
        needed = list(DEFAULT_CHAIN_COLUMNS)

        def fit(table):
            return fit_default_chain(
                table,
                rule=args.rule,
                delta=args.delta,
                max_passages=args.max_passages,
                use_reranker=True if args.reranker is not None else None,
            )

    else:
        from .gates import DEFAULT_LEARNED_SIGNALS, fit_learned_gate
        from .signals import get_signal

        if args.signals:
            needed = [name.strip() for name in args.signals.split(",") if name.strip()]
            for name in needed:
                get_signal(name)  # an unknown name lists the registered ones
        else:
            needed = list(DEFAULT_LEARNED_SIGNALS)
            print(
                f"learned gate: no --signals given, using the default set {','.join(needed)} (picked from the "
                "bundled labeled sets' single-signal AUCs and checked against all 17 signals under nested held-out "
                "splits, where it did about as well; see the learned-gate section of results/<corpus>/summary.md)"
            )

        def fit(table):
            return fit_learned_gate(
                table,
                args.rule,
                signals=needed,
                hedge_rule=args.hedge_rule,
                delta=args.delta,
                max_passages=args.max_passages,
            )

    table = check_score_table(_read_table(args.scores), needed, source=str(args.scores))
    gate = fit(table)
    if provenance is None:
        print(
            f"warning: {args.scores.with_name(args.scores.stem + '.meta.json')} not found: the gate records no model "
            "or chunking, so `ragcal ask` will refuse to use it",
            file=sys.stderr,
        )
    in_sample = gate_outcomes(table, gate.decide_table(table))
    answered = in_sample[in_sample["outcome"] == "answered"]
    fitted = {
        "gate": args.gate,
        **(
            {"signals": list(gate.signals), "signals_from": "--signals" if args.signals else "default set"}
            if args.gate == "learned"
            else {}
        ),
        **({"signals_modules": [str(path) for path in args.signals_module]} if args.signals_module else {}),
        "n_calibration": int(len(table)),
        "slices": {str(name): int(count) for name, count in table["slice"].value_counts(sort=False).items()},
        "answered_in_sample": {row.slice: round(float(row.share), 4) for row in answered.itertuples()},
    }
    save_gate(args.out, gate, rule=args.rule, fitted=fitted, provenance=provenance)
    print(f"wrote {args.out}: {args.gate} gate fitted with {args.rule} on {len(table)} queries from {args.scores}")
    for key, value in gate.to_dict().items():
        if key not in ("stages", "params", "signals", "scaler_mean", "scaler_scale", "coefficients"):
            print(f"  {key}: {value}")
    if args.gate == "learned":
        print("  standardised coefficients (log-odds of answerable per standard deviation; mean, scale):")
        model = gate.model
        for name, coef, mean, scale in zip(model.signals, model.coef, model.mean, model.scale):
            print(f"    {name:<28} {coef:+8.3f}   ({mean:.4g}, {scale:.4g})")
    for stage in getattr(gate, "stages", ()):
        print(f"  stage {stage.name} ({stage.tier}): {stage.gate.signal} >= {stage.gate.threshold:.4f}")
    if any(name in table.columns for name in ("rerank_top1", "rerank_gap")) and "reranker" in (provenance or {}):
        print(f"  reranker: {provenance['reranker']} (its scores have their own scale; this gate's bars are on it)")
    print("answered per slice (in-sample: fitted and scored on the same queries):")
    for row in answered.itertuples():
        print(f"  {row.slice:<20} {row.share:6.1%}  ({row.k}/{row.n})  [{row.low:.1%}, {row.high:.1%}]")
    if args.heldout:
        from .gates import heldout_gates, summarize_heldout_gates

        summary = summarize_heldout_gates(heldout_gates(table, {args.gate: fit}, n_splits=args.heldout))
        summary = summary[summary["outcome"] == "answered"]
        print(f"answered per slice, held out over {args.heldout} stratified half splits (mean, 5th-95th percentile):")
        for row in summary.itertuples():
            print(f"  {row.slice:<20} {row.mean:6.1%}  [{row.p5:.1%}, {row.p95:.1%}]")


def _ask_queries(args):
    import pandas as pd

    if args.queries is None:
        if not args.question:
            raise ValueError("ragcal ask needs a QUESTION or --queries FILE.csv")
        return [None] * len(args.question), list(args.question)
    if not args.queries.is_file():
        raise ValueError(f"{args.queries}: query file not found")
    from ._io import check_csv_delimiter

    check_csv_delimiter(args.queries)
    frame = pd.read_csv(args.queries, dtype=str, keep_default_na=False)
    if "query" not in frame.columns:
        raise ValueError(f"{args.queries}: missing column 'query'; have {', '.join(frame.columns)}")
    ids = list(frame["id"]) if "id" in frame.columns else [str(n) for n in range(1, len(frame) + 1)]
    return ids + [None] * len(args.question), list(frame["query"]) + list(args.question)


def _print_decision(query, decision, gate) -> None:
    refusals = gate.refusals
    print(f"? {query}")
    score = "n/a" if decision.score != decision.score else f"{decision.score:.3f}"
    print(f"  {decision.action.upper():<6} score {score}  stage {decision.stage or '-'}  tier {decision.tier}")
    if decision.passages:
        print("  passages:")
        for chunk_id, passage_score in decision.passages:
            heading = refusals.heading(chunk_id) if refusals is not None else ""
            print(f"    {passage_score:8.3f}  {chunk_id}  {heading}")
    print("  reasons: " + "; ".join(decision.reasons))
    if decision.message:
        print("  " + decision.message.replace("\n", "\n  "))
    print()


def _gate_corpus(provenance: dict) -> Path:
    """The corpus a gate was fitted on, from its provenance; relative paths also from the project root."""
    from .datasets import DATA_DIR

    recorded = provenance.get("corpus")
    if not recorded:
        raise ValueError("the gate does not record its corpus; pass --corpus DIR")
    for candidate in (Path(recorded), DATA_DIR.parent / recorded):
        if candidate.is_dir():
            return candidate
    raise ValueError(f"the gate's corpus {recorded!r} is not a folder here; pass --corpus DIR")


def _ask(args) -> None:
    import json

    from .gates import GateFileError, ask, load_gate, read_gate_file
    from .gates.files import index_options
    from .scoring import build_index

    try:
        document = read_gate_file(args.gate)
    except GateFileError as error:
        if "unknown signal" not in str(error):
            raise
        raise GateFileError(
            f"{error}. If the gate reads signals of your own, pass the file that registers them: "
            "--signals-module FILE.py"
        ) from error
    ids, questions = _ask_queries(args)
    corpus = args.corpus if args.corpus is not None else _gate_corpus(document["provenance"])
    options = index_options(document["provenance"])
    if args.model:
        options["model"] = args.model
    if args.exclude is not None:
        options["exclude"] = args.exclude
    _check_rerank_depth(args, document["provenance"])
    if args.reranker is not None:
        options["reranker"] = args.reranker
    if args.rerank_depth is not None:
        options["rerank_depth"] = args.rerank_depth
    print(f"ragcal ask: corpus {corpus}", file=sys.stderr)
    index = build_index(corpus, cache_dir=args.cache_dir, **options, **_access_options(args, document["provenance"]))
    _report_visibility(index)
    gate = load_gate(args.gate, index=index)  # refuses another model, chunking or reranker
    decisions, _ = ask(gate, index, questions)
    for query_id, question, decision in zip(ids, questions, decisions):
        if args.json:
            record = {"id": query_id} if query_id is not None else {}
            record.update({"query": question, **decision.to_dict()})
            print(json.dumps(record, ensure_ascii=False))
        else:
            _print_decision(question, decision, gate)


def _golden(args) -> int:
    import json

    from .datasets import bundled
    from .embedding import Embedder
    from .golden import GOLDEN_IDS, compare_golden, golden_file, golden_snapshot, write_golden
    from .queries import load_queries
    from .scoring import build_index

    spec = bundled(args.corpus)
    index = build_index(spec.corpus, embedder=Embedder(cache_dir=args.cache_dir))
    queries = load_queries(spec.queries, corpus_paths=index.doc_paths)
    snapshot = golden_snapshot(index, queries, ids=GOLDEN_IDS[spec.name])
    if args.write is not None:
        write_golden(args.write, snapshot)
        print(f"wrote {args.write}; review its diff and commit it with the regenerated results/")
        return 0
    problems = compare_golden(snapshot, json.loads(golden_file(spec.name).read_text()))
    for problem in problems:
        print(f"golden: {problem}", file=sys.stderr)
    print(f"{spec.title}: golden set holds" if not problems else f"golden set broken: {len(problems)} problem(s)")
    return 1 if problems else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="ragcal", description="Calibrate when a RAG system should abstain.")
    commands = parser.add_subparsers(dest="command", required=True)

    score = commands.add_parser("score", help="write the per-query score table (and TREC runs)")
    score.add_argument("queries", type=Path, help="labeled query CSV: id,query,answerable,slice,gold")
    score.add_argument("--out", type=Path, required=True, help="score table CSV to write")
    score.add_argument("--runs", type=Path, default=None, help="folder for TREC run files, one per retriever")
    _add_index_options(score)
    _add_rerank_options(score)
    _add_access_options(score)
    _add_signals_module(score)

    chunks = commands.add_parser(
        "chunks",
        help="write what would be indexed, one JSON object per chunk (no model needed)",
        description="Load and chunk a Markdown folder as 'ragcal score' does and write one JSON object per line: "
        "chunk_id, path, heading_path, text (the indexed text), n_tokens, oversized, access_level.",
    )
    chunks.add_argument("corpus", type=Path, help="Markdown folder")
    chunks.add_argument("--out", type=Path, required=True, help="JSON-lines file to write")
    _add_chunking_options(chunks)
    chunks.add_argument(
        "--access-map", type=Path, default=None, metavar="FILE", help="CSV path_glob,level for pages without front matter"
    )
    chunks.add_argument("--default-access", default="public", metavar="LEVEL", help="level of unplaced pages")

    evaluate = commands.add_parser("evaluate", help="retrieval metrics (page level, with intervals) from TREC runs")
    evaluate.add_argument("queries", type=Path, help="labeled query CSV with gold pages")
    evaluate.add_argument("--runs", type=Path, required=True, help="folder of *.run files (from ragcal score --runs)")
    evaluate.add_argument("--out", type=Path, required=True, help="CSV to write")
    evaluate.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    evaluate.add_argument("--seed", type=int, default=0)

    calibrate = commands.add_parser(
        "calibrate",
        help="fit a threshold on a score table and show the per-slice outcome",
        description="Works on any CSV with 'answerable' (true/false), 'slice' and a numeric signal column, "
        "for instance scores logged by a production system.",
    )
    calibrate.add_argument("scores", type=Path, help="score table: CSV (also .csv.gz) or Parquet (.parquet, .pq)")
    calibrate.add_argument("--signal", default="dense_top1", help="signal column (default dense_top1)")
    calibrate.add_argument(
        "--rule",
        action="append",
        default=None,
        help="threshold rule, repeatable (default keep@1.0); one of: "
        + "; ".join(f"{name}@X: {meaning}" for name, meaning in _rules().items()),
    )
    calibrate.add_argument(
        "--delta", type=float, default=0.1, help="1 - confidence of the guarantee rules (default 0.1)"
    )
    calibrate.add_argument(
        "--lower-is-answerable",
        action="store_true",
        help="the signal is low for answerable queries (default: registry direction, else high)",
    )
    calibrate.add_argument(
        "--heldout",
        type=int,
        default=0,
        metavar="N",
        help="also fit on half of each slice and score the other half, over N random splits",
    )
    calibrate.add_argument("--seed", type=int, default=0)
    calibrate.add_argument(
        "--sweep",
        type=Path,
        default=None,
        metavar="OUT.csv",
        help="write the per-slice sweep with exact counts and intervals (every distinct score up to 20,000 of "
        "them, else a 1,001-point grid) plus the fitted thresholds",
    )
    _add_signals_module(calibrate)

    sweep_chunks = commands.add_parser(
        "sweep-chunking",
        help="compare chunkings on your corpus: retrieval and AUCs with paired intervals against the default",
        description="Builds the index once per chunking variant (embeddings are cached, so unchanged chunks are "
        "embedded once) and compares Recall@5, MRR@10, dense_top1 AUC and bm25_top1_raw AUC with paired bootstrap "
        "intervals against the baseline.",
    )
    sweep_chunks.add_argument("queries", type=Path, help="labeled query CSV: id,query,answerable,slice,gold")
    sweep_chunks.add_argument(
        "--corpus", type=Path, default=FASTAPI_CORPUS, help="Markdown folder (default: the bundled FastAPI docs)"
    )
    sweep_chunks.add_argument("--out", type=Path, default=None, help="CSV to write (default: print only)")
    sweep_chunks.add_argument(
        "--max-tokens",
        default="128,256,512,whole",
        help="heading-aware limits, comma-separated (default 128,256,512,whole)",
    )
    sweep_chunks.add_argument("--windows", default="500", help="fixed-size windows, comma-separated (default 500)")
    sweep_chunks.add_argument(
        "--baseline", default="headings-256", help="variant to compare against (default headings-256)"
    )
    sweep_chunks.add_argument("--model", default=DEFAULT_MODEL, help="embedding model name or folder")
    sweep_chunks.add_argument("--exclude", action="append", default=None, metavar="PATH", help="leave a page out")
    sweep_chunks.add_argument("--cache-dir", type=Path, default=None, help="embedding cache folder")
    sweep_chunks.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")

    fit_gate = commands.add_parser(
        "fit-gate",
        help="fit a gate on a score table and save it as JSON with its provenance",
        description="Fits a gate on every row of the score table (use --heldout N to see how it does on questions "
        "it was not fitted on) and writes it with the model and chunking from the table's .meta.json.",
    )
    fit_gate.add_argument("scores", type=Path, help="score table CSV (its .meta.json beside it gives the provenance)")
    fit_gate.add_argument("--out", type=Path, required=True, help="gate JSON to write")
    fit_gate.add_argument("--gate", choices=GATE_KINDS, default="threshold", help="kind of gate (default threshold)")
    fit_gate.add_argument(
        "--signal", default=None, help="signal of a threshold gate (default dense_top1; rerank_top1 with --reranker)"
    )
    fit_gate.add_argument(
        "--rule",
        default="keep@0.95",
        help="threshold rule (default keep@0.95); floor-gap takes keep@p only; for the chain it sets the broad stage",
    )
    fit_gate.add_argument("--hedge-rule", default=None, help="threshold gate: a stricter rule whose band is hedged")
    fit_gate.add_argument("--retriever", default="dense", help="floor-gap: whose top and second score (default dense)")
    fit_gate.add_argument("--max-passages", type=int, default=10, help="cap on passages passed on (default 10)")
    fit_gate.add_argument("--delta", type=float, default=0.1, help="1 - confidence of the guarantee rules")
    fit_gate.add_argument("--lower-is-answerable", action="store_true", help="the signal is low for answerable queries")
    fit_gate.add_argument("--heldout", type=int, default=0, metavar="N", help="also report N held-out half splits")
    _add_rerank_options(fit_gate, depth=False)
    fit_gate.add_argument(
        "--learned",
        action="store_true",
        help="fit a learned gate (logistic regression over several signals, scaled; same as --gate learned)",
    )
    fit_gate.add_argument(
        "--signals",
        default=None,
        metavar="A,B,C",
        help="learned gate: comma-separated signals (default: DEFAULT_LEARNED_SIGNALS, see the summaries)",
    )
    _add_signals_module(fit_gate)

    ask = commands.add_parser(
        "ask",
        help="decide on questions with a saved gate: answer, hedge or refuse, with passages and messages",
        description="Builds the index with the gate's model and chunking (and refuses a gate fitted on another "
        "model or chunking), then prints one decision per question.",
    )
    ask.add_argument("question", nargs="*", help="question(s) to ask")
    ask.add_argument("--gate", type=Path, required=True, help="gate JSON from ragcal fit-gate")
    ask.add_argument("--queries", type=Path, default=None, help="CSV with a 'query' column (and 'id')")
    ask.add_argument("--json", action="store_true", help="one JSON object per line")
    ask.add_argument(
        "--corpus", type=Path, default=None, help="Markdown folder (default: the corpus the gate was fitted on)"
    )
    ask.add_argument("--model", default=None, help="embedding model (default: the gate's)")
    ask.add_argument(
        "--exclude",
        action="append",
        default=None,
        metavar="PATH",
        help="leave a page out (repeatable; default: the pages the gate's score table left out)",
    )
    ask.add_argument("--cache-dir", type=Path, default=None, help="embedding cache folder")
    _add_rerank_options(ask)
    _add_access_options(ask)
    _add_signals_module(ask)

    golden = commands.add_parser("golden", help="check (or re-baseline) the pinned golden-set scores")
    golden.add_argument(
        "--write",
        type=Path,
        default=None,
        metavar="FILE",
        help="write a new baseline to FILE instead of checking tests/golden/<corpus>_minilm.json",
    )
    golden.add_argument("--corpus", default="fastapi", help="bundled corpus: fastapi (default) or rust-book")
    golden.add_argument("--cache-dir", type=Path, default=None, help="embedding cache folder")

    reproduce = commands.add_parser("reproduce", help="the main job: rebuild results/ for the bundled data")
    reproduce.add_argument("--results", type=Path, default=Path("results"), help="output folder (default results/)")
    reproduce.add_argument("--cache-dir", type=Path, default=None, help="embedding cache folder")
    reproduce.add_argument(
        "--figures", type=Path, default=None, help="figures folder (default: the checkout's figures/, else ./figures)"
    )
    reproduce.add_argument(
        "--executed-notebooks",
        type=Path,
        default=None,
        help="folder for the executed notebooks (default: the checkout's notebooks/, else ./notebooks)",
    )
    reproduce.add_argument(
        "--corpus",
        action="append",
        default=None,
        metavar="NAME",
        help="a bundled corpus to rebuild (repeatable; default: all of them, then the cross-corpus report)",
    )
    reproduce.add_argument(
        "--skip-notebooks",
        action="store_true",
        help="write results/ only; do not execute the notebooks (which write figures/)",
    )
    reproduce.add_argument(
        "--reranker",
        default=None,
        metavar="PATH_OR_NAME",
        help="cross-encoder for the 'Reranker signals' section (default: a tiny random one, a plumbing check)",
    )

    args = parser.parse_args(argv)
    try:
        _load_signals_modules(args)
        if args.command == "score":
            table = _score(args.queries, args.out, args.runs, args)
            print(f"wrote {args.out} ({len(table)} queries, {table.shape[1] - 4} signals)")
            _print_slice_summary(table)
        elif args.command == "chunks":
            _chunks(args)
        elif args.command == "evaluate":
            from ._io import atomic_write_text
            from .queries import load_queries
            from .reproduce import evaluate_runs

            table = evaluate_runs(
                args.runs,
                load_queries(args.queries),
                source=str(args.queries),
                n_resamples=args.resamples,
                random_state=args.seed,
            )
            atomic_write_text(args.out, table.to_csv(index=False, float_format="%.4f"))
            print(table.to_string(index=False, float_format=lambda value: f"{value:.3f}"))
        elif args.command == "calibrate":
            _calibrate(args)
        elif args.command == "sweep-chunking":
            _sweep_chunking(args)
        elif args.command == "fit-gate":
            _fit_gate(args)
        elif args.command == "ask":
            _ask(args)
        elif args.command == "golden":
            return _golden(args)
        elif args.command == "reproduce":
            from .datasets import BUNDLED, check_data_dir
            from .embedding import Embedder
            from .reproduce import reproduce

            check_data_dir()
            if args.reranker is not None:  # a bad reranker fails before any work
                from .retrieval.rerank import CrossEncoderReranker

                CrossEncoderReranker(args.reranker, use_cache=False)

            names = args.corpus or list(BUNDLED)
            tables = reproduce(
                args.results, corpora=names, embedder=Embedder(cache_dir=args.cache_dir), reranker=args.reranker
            )
            for name, corpus_tables in tables.items():
                print(f"\n{BUNDLED[name].title}:", end="")
                _print_slice_summary(corpus_tables["scores"])
            if not args.skip_notebooks:
                from .notebooks import reproduce_figures

                from .notebooks import FIGURES_DIR, NOTEBOOKS_DIR

                figures = args.figures or FIGURES_DIR
                executed = args.executed_notebooks or (
                    NOTEBOOKS_DIR if NOTEBOOKS_DIR.parent == FIGURES_DIR.parent else Path("notebooks")
                )
                reproduce_figures(
                    [BUNDLED[name] for name in names],
                    figures_dir=figures,
                    results_dir=args.results,
                    output_dir=executed,
                )
                print(f"figures written to {figures}/ (PNG and SVG); executed notebooks in {executed}/")
    except (QueryFileError, CorpusError, ValueError) as error:
        print(f"ragcal: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
