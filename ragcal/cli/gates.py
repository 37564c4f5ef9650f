"""``ragcal fit-gate`` and ``ragcal ask``: a calibrated gate as a file, and decisions with it."""

from __future__ import annotations

import sys
from pathlib import Path

from ..extras import require_extra
from ._options import (
    LazyChoices,
    LazyHelp,
    add_access_options,
    add_judge_options,
    add_rerank_options,
    add_signals_module,
    check_judge_depth,
    check_rerank_depth,
    index_arguments_from,
    report_visibility,
)


def _gate_kinds() -> tuple[str, ...]:
    """Gate kinds as the command line spells them (``floor-gap``), from the gate registry."""
    from ..gates import gate_kinds

    return tuple(kind.replace("_", "-") for kind in gate_kinds())


def add_parsers(commands) -> None:
    fit_gate = commands.add_parser(
        "fit-gate",
        help="fit a gate on a score table and save it as JSON with its provenance",
        description="Fits a gate on every row of the score table (use --heldout N to see how it does on questions "
        "it was not fitted on) and writes it with the model and chunking from the table's .meta.json.",
    )
    fit_gate.add_argument("scores", type=Path, help="score table CSV (its .meta.json beside it gives the provenance)")
    fit_gate.add_argument("--out", type=Path, required=True, help="gate JSON to write")
    fit_gate.add_argument(
        "--gate",
        choices=LazyChoices(_gate_kinds),
        default="threshold",
        metavar="KIND",
        help=LazyHelp(lambda: f"kind of gate, one of {', '.join(_gate_kinds())} (default threshold)"),
    )
    fit_gate.add_argument(
        "--signal", default=None, help="signal of a threshold gate (default dense_top1; rerank_top1 with --reranker)"
    )
    fit_gate.add_argument(
        "--rule",
        action="append",
        default=None,
        help="threshold rule (default keep@0.95); floor-gap takes keep@p only; for the chain it sets the broad stage. "
        "risk_guarantee@a and unsupported_guarantee@a certify the whole gate (any kind; need --runs and --queries). "
        "Repeat it with --joint to certify several bounds at once",
    )
    fit_gate.add_argument(
        "--joint",
        action="store_true",
        help="certify the gate (any kind: a threshold, floor-gap's 2-D grid, the chain's three stage bars, a "
        "learned gate's threshold) for every --rule together by Learn-then-Test (recall_guarantee, "
        "false_answer_guarantee, risk_guarantee, unsupported_guarantee); prints the certificate",
    )
    fit_gate.add_argument("--hedge-rule", default=None, help="threshold gate: a stricter rule whose band is hedged")
    fit_gate.add_argument("--retriever", default="dense", help="floor-gap: whose top and second score (default dense)")
    fit_gate.add_argument("--max-passages", type=int, default=10, help="cap on passages passed on (default 10)")
    fit_gate.add_argument("--delta", type=float, default=0.1, help="1 - confidence of the guarantee rules")
    fit_gate.add_argument("--lower-is-answerable", action="store_true", help="the signal is low for answerable queries")
    fit_gate.add_argument("--heldout", type=int, default=0, metavar="N", help="also report N held-out half splits")
    fit_gate.add_argument(
        "--runs",
        type=Path,
        default=None,
        help="folder of TREC runs from `ragcal score --runs`: with --queries, report supported answers and "
        "selective risk per slice, and allow the rules risk_guarantee@a and unsupported_guarantee@a",
    )
    fit_gate.add_argument(
        "--queries", type=Path, default=None, help="the labeled query CSV the table was scored from (gold pages)"
    )
    add_rerank_options(fit_gate, depth=False)
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
    add_signals_module(fit_gate)
    fit_gate.set_defaults(run=run_fit_gate)

    ask = commands.add_parser(
        "ask",
        help="decide on questions with a saved gate: answer, hedge or refuse, with passages and messages",
        description="Builds the index with the gate's model and chunking (and refuses a gate fitted on another "
        "model or chunking), then prints one decision per question.",
    )
    ask.add_argument("question", nargs="*", help="question(s) to ask")
    ask.add_argument("--queries", type=Path, default=None, help="CSV with a 'query' column (and 'id')")
    ask.add_argument("--json", action="store_true", help="one JSON object per line")
    ask.add_argument(
        "--candidates",
        type=Path,
        default=None,
        metavar="FILE.jsonl",
        help="decide on your system's own candidates instead of an index: a candidates JSONL (questions with their "
        "passages and scores, no labels needed), for a gate fitted on `ragcal score --candidates`; a gate on your "
        "scores (run_*) or BM25 needs no model stack",
    )
    add_gate_index_options(ask)
    ask.set_defaults(run=run_ask)


def add_gate_index_options(parser) -> None:
    """``--gate`` and the options of the index it decides on; ``ask`` and ``serve`` take the same ones."""
    parser.add_argument("--gate", type=Path, required=True, help="gate JSON from ragcal fit-gate")
    parser.add_argument(
        "--corpus", type=Path, default=None, help="Markdown folder (default: the corpus the gate was fitted on)"
    )
    parser.add_argument("--model", default=None, help="embedding model (default: the gate's)")
    parser.add_argument(
        "--exclude",
        action="append",
        default=None,
        metavar="PATH",
        help="leave a page out (repeatable; default: the pages the gate's score table left out)",
    )
    parser.add_argument("--cache-dir", type=Path, default=None, help="embedding cache folder")
    add_rerank_options(parser)
    add_judge_options(parser)
    add_access_options(parser)
    add_signals_module(parser)


def _check_table_reranker(reranker: str, provenance: dict | None, scores_path: Path) -> None:
    """With ``fit-gate --reranker``: the score table's rerank scores must come from this very reranker."""
    from ..retrieval.rerank import CrossEncoderReranker

    fingerprint = CrossEncoderReranker(reranker, use_cache=False).fingerprint
    recorded = (provenance or {}).get("reranker_fingerprint")
    if recorded != fingerprint:
        raise ValueError(
            f"{scores_path}: its rerank scores come from {recorded or 'no reranker'}, not from {fingerprint}; "
            f"score it with `ragcal score --reranker {reranker}` first"
        )


def _check_logged_signal(signal: str, provenance: dict | None, scores_path: Path) -> None:
    """A logged signal has a recorded direction, but a gate computes its signals live: it must be registered.

    :func:`ragcal.signals.directions.signal_direction` also refuses a
    registered signal whose recorded direction is the other one.
    """
    from ..signals import SIGNALS
    from ..signals.directions import signal_direction

    direction = signal_direction(signal, provenance)
    if signal not in SIGNALS and direction.decided_by.startswith("recorded"):
        raise ValueError(
            f"{scores_path}: {signal} is a logged signal ({direction.word} means answerable, {direction.decided_by}); "
            "a gate computes its signals from retrieval when it decides, so register a function for it with "
            f"--signals-module FILE.py (higher_is_answerable={direction.higher_is_answerable}), or calibrate it "
            "with `ragcal calibrate`"
        )


def run_fit_gate(args) -> None:
    from ..calibration import parse_rule
    from ..calibration.rules import get_rule
    from ..gates import fit_gate, save_gate
    from ..gates.evaluate import answered_shares
    from ..gates.fit import gate_columns
    from ..score_tables import check_score_table, provenance_path, read_csv_table, read_provenance

    if args.learned:
        if args.gate not in ("threshold", "learned"):
            raise ValueError(f"--learned fits a learned gate; it cannot be combined with --gate {args.gate}")
        args.gate = "learned"
    if args.signals and args.gate != "learned":
        raise ValueError("--signals names the signals of a learned gate; add --learned (or use --signal NAME)")
    rules = args.rule or ["keep@0.95"]
    if len(rules) > 1 and not args.joint:
        raise ValueError(f"{len(rules)} --rule options: add --joint to certify them together, or give one")
    for rule in rules:
        parse_rule(rule)
    args.rule = " + ".join(rules)
    if args.hedge_rule:
        parse_rule(args.hedge_rule)
    provenance = read_provenance(args.scores)
    if args.reranker is not None:
        require_extra("retrieval", "ragcal fit-gate --reranker")
        _check_table_reranker(args.reranker, provenance, args.scores)
    if args.signal is None:
        args.signal = "rerank_top1" if args.reranker is not None else "dense_top1"
    signals = None
    if args.gate == "threshold" and not args.lower_is_answerable:
        _check_logged_signal(args.signal, provenance, args.scores)
    if args.gate == "learned":
        from ..gates import DEFAULT_LEARNED_SIGNALS
        from ..signals import get_signal

        if args.signals:
            signals = [name.strip() for name in args.signals.split(",") if name.strip()]
            for name in signals:
                _check_logged_signal(name, provenance, args.scores)
                get_signal(name)  # an unknown name lists the registered ones
        else:
            signals = list(DEFAULT_LEARNED_SIGNALS)
            print(
                f"learned gate: no --signals given, using the default set {','.join(signals)} (picked from the "
                "bundled labeled sets' single-signal AUCs and checked against all 17 signals under nested held-out "
                "splits, where it did about as well; see the learned-gate section of results/<corpus>/summary.md)"
            )
    kind = args.gate.replace("-", "_")
    options = {
        "signal": args.signal,
        "signals": signals,
        "hedge_rule": args.hedge_rule,
        "higher_is_answerable": False if args.lower_is_answerable else None,
        "delta": args.delta,
        "max_passages": args.max_passages,
        "retriever": args.retriever,
        "use_reranker": True if args.reranker is not None else None,
    }

    def fit(table):
        return fit_gate(table, kind, args.rule, **options)

    table = check_score_table(read_csv_table(args.scores), gate_columns(kind, **options), source=str(args.scores))
    table = table.reset_index(drop=True)  # row i <-> the i-th runs' results and gold pages
    support = _support_inputs(args, table)
    certificate = None
    certify = args.joint or any(get_rule(rule).needs_support for rule in rules)
    if certify:
        if support is None and any(get_rule(rule).needs_support for rule in rules):
            raise ValueError("risk_guarantee and unsupported_guarantee need to know which answers are supported: "
                             "give --runs and --queries")
        if args.hedge_rule:
            raise ValueError("--hedge-rule does not combine with a certified gate (--joint, risk_guarantee@, "
                             "unsupported_guarantee@): the certificate covers what the gate answers, hedges included")
        certifier = _certifier(kind, rules, args, signals, support)

        def fit(table):
            return certifier(table)[0]

        gate, certificate = certifier(table)
    if certificate is None:
        gate = fit(table)
    if provenance is None:
        print(
            f"warning: {provenance_path(args.scores)} not found: the gate records no model "
            "or chunking, so `ragcal ask` will refuse to use it",
            file=sys.stderr,
        )
    answered, heldout = answered_shares(table, gate, n_splits=args.heldout, fit=fit)
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
    if certificate is not None:
        fitted["certificate"] = certificate.summary()
    save_gate(args.out, gate, rule=args.rule, fitted=fitted, provenance=provenance)
    print(f"wrote {args.out}: {args.gate} gate fitted with {args.rule} on {len(table)} queries from {args.scores}")
    if certificate is not None:
        print(certificate.summary())
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
    if "judge" in gate.retrievers and "judge" in (provenance or {}):
        fingerprint = provenance.get("judge_fingerprint")
        print(f"  judge: {provenance['judge']} ({fingerprint}; `ask` and `serve` need this very judge)")
    if (provenance or {}).get("score_scale"):
        print(
            f"  store: {provenance.get('store')}, scores {provenance['score_scale']}: decide in front of that store "
            f"with ragcal.integrations.{provenance.get('framework')} (`ask` and `serve` refuse this gate)"
        )
    print("answered per slice (in-sample: fitted and scored on the same queries):")
    for row in answered.itertuples():
        print(f"  {row.slice:<20} {row.share:6.1%}  ({row.k}/{row.n})  [{row.low:.1%}, {row.high:.1%}]")
    if heldout is not None:
        print(f"answered per slice, held out over {args.heldout} stratified half splits (mean, 5th-95th percentile):")
        for row in heldout.itertuples():
            print(f"  {row.slice:<20} {row.mean:6.1%}  [{row.p5:.1%}, {row.p95:.1%}]")
    if support is not None:
        _print_support(table, gate, support)


def _support_inputs(args, table):
    """(results per row, gold pages per row) from --runs and --queries; None without them."""
    if args.runs is None and args.queries is None:
        return None
    if args.runs is None or args.queries is None:
        raise ValueError("--runs and --queries go together: support needs the passages and the gold pages")
    from ..gates.support import gold_pages, results_from_runs
    from ..queries import load_queries

    queries = load_queries(args.queries).set_index("id")
    missing = [query_id for query_id in table["id"] if query_id not in queries.index]
    if missing:
        raise ValueError(f"{args.queries}: no row for {len(missing)} question(s) of {args.scores}, e.g. {missing[:3]}")
    ordered = queries.loc[list(table["id"])].reset_index()
    return results_from_runs(args.runs, table["id"]), gold_pages(ordered)


def _certifier(kind, rules, args, signals, support):
    """``certify(table) -> (gate, certificate)`` for the gate kind, support taken row by row (by the table's index).

    The rows of every table it is given are rows of the fitted score table
    (its index), so held-out splits (:func:`ragcal.gates.heldout_gates`) take
    the support of their own questions.
    """
    from ..gates import (
        certify_chain,
        certify_floor_gap_gate,
        certify_learned_gate,
        certify_threshold_gate,
        support_levels,
    )
    from ..gates.support import signal_support

    results, gold = support if support is not None else (None, None)
    options = {"delta": args.delta}
    if kind == "threshold":
        levels = None if support is None else signal_support(results, gold, args.signal, max_passages=args.max_passages)
        higher = False if args.lower_is_answerable else None

        def certify(table):
            rows = None if levels is None else levels[table.index]
            return certify_threshold_gate(table, args.signal, rules, support=rows, higher_is_answerable=higher,
                                          max_passages=args.max_passages, **options)
    elif kind == "floor_gap":
        levels = None if support is None else support_levels(
            results, gold, args.retriever, max_passages=args.max_passages
        )

        def certify(table):
            rows = None if levels is None else levels[table.index]
            return certify_floor_gap_gate(table, rules, support=rows, retriever=args.retriever,
                                     max_passages=args.max_passages, **options)
    elif kind == "chain":
        if args.reranker is not None:
            raise ValueError("certifying the chain covers its hybrid, keyword and broad stages; drop --reranker")

        def certify(table):
            picked = (None, None) if support is None else (
                [results[row] for row in table.index], [gold[row] for row in table.index]
            )
            return certify_chain(table, rules, results=picked[0], gold=picked[1], max_passages=args.max_passages,
                                 **options)
    else:
        levels = None if support is None else support_levels(results, gold, "dense", max_passages=args.max_passages)

        def certify(table):
            rows = None if levels is None else levels[table.index]
            return certify_learned_gate(table, rules, support=rows, signals=signals, max_passages=args.max_passages,
                                        **options)
    return certify


def _print_support(table, gate, support) -> None:
    """Supported answers and selective risk per slice (in-sample), passages cut as the gate cuts them."""
    from ..gates import gate_outcomes, table_support

    results, gold = support
    decisions = gate.decide_table(table)
    outcomes = gate_outcomes(table, decisions, supported=table_support(gate, table, results, gold))
    print("supported answers and selective risk (in-sample; exact 95% intervals):")
    for row in outcomes[outcomes["outcome"].isin(["supported", "unsupported", "selective_risk"])].itertuples():
        share = "   n/a" if row.n == 0 else f"{row.share:6.1%}"
        interval = "" if row.n == 0 else f"  [{row.low:.1%}, {row.high:.1%}]"
        print(f"  {row.slice:<20} {row.outcome:<15} {share}  ({row.k}/{row.n}){interval}")


def _ask_queries(args):
    import pandas as pd

    if args.queries is None:
        if not args.question:
            raise ValueError("ragcal ask needs a QUESTION or --queries FILE.csv")
        return [None] * len(args.question), list(args.question)
    if not args.queries.is_file():
        raise ValueError(f"{args.queries}: query file not found")
    from .._io import check_csv_delimiter

    check_csv_delimiter(args.queries)
    frame = pd.read_csv(args.queries, dtype=str, keep_default_na=False)
    if "query" not in frame.columns:
        raise ValueError(f"{args.queries}: missing column 'query'; have {', '.join(frame.columns)}")
    ids = list(frame["id"]) if "id" in frame.columns else [str(n) for n in range(1, len(frame) + 1)]
    return ids + [None] * len(args.question), list(frame["query"]) + list(args.question)


def _ask_candidates(args):
    """``ask --candidates``: the gate decides on each question's own candidates (ragcal.gates.ask_candidates)."""
    from ..gates import ask_candidates, read_gate_file
    from ..importers.candidates import read_candidates_jsonl

    given = [option for dest, option in INDEX_ONLY.items() if getattr(args, dest) is not None]
    if args.question or args.queries is not None or given:
        extra = [*(["QUESTION"] if args.question else []), *(["--queries"] if args.queries is not None else []), *given]
        raise ValueError(f"{', '.join(extra)} cannot be used with --candidates: the file holds the questions and "
                         "their passages")  # fmt: skip
    document = read_gate_file(args.gate)
    gate = document["gate"]
    if set(gate.retrievers) & {"dense", "rrf"}:
        require_extra("retrieval", f"ragcal ask --candidates with a gate on {', '.join(gate.retrievers)} scores")
    candidates = read_candidates_jsonl(args.candidates, require_labels=False)
    decisions, table = ask_candidates(gate, candidates, provenance=document["provenance"], cache_dir=args.cache_dir)
    return list(table["id"]), list(table["query"]), decisions, gate


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


def load_gate_and_index(args, *, command: str = "ask"):
    """Read ``--gate``, build the index it was fitted for, and load the gate on it: what ``ask`` and ``serve`` do.

    The index reproduces the gate's model, chunking, excluded pages and
    reranker and judge (from its provenance, unless the options say
    otherwise) and is restricted to ``--access``; :func:`ragcal.gates.load_gate`
    then refuses a gate fitted on another model, chunking, reranker or judge.

    Returns
    -------
    document : dict
        The gate file (:func:`ragcal.gates.read_gate_file`).
    gate : Gate
        Loaded for ``index``.
    index : RetrievalIndex
        The view of the ``--access`` levels (the default level without it).
    """
    from ..gates import GateFileError, load_gate, read_gate_file
    from ..gates.files import gate_corpus
    from ..retrieval.index import build_index

    try:
        document = read_gate_file(args.gate)
    except GateFileError as error:
        if "unknown signal" not in str(error):
            raise
        raise GateFileError(
            f"{error}. If the gate reads signals of your own, pass the file that registers them: "
            "--signals-module FILE.py"
        ) from error
    corpus = args.corpus if args.corpus is not None else gate_corpus(document["provenance"])
    check_rerank_depth(args, document["provenance"])
    check_judge_depth(args, document["provenance"])
    print(f"ragcal {command}: corpus {corpus}", file=sys.stderr)
    index = build_index(corpus, **index_arguments_from(args, corpus, recorded=document["provenance"]))
    report_visibility(index)
    gate = load_gate(args.gate, index=index)  # refuses another model, chunking, reranker or judge
    return document, gate, index


#: ``ask`` options that describe an index of a corpus, with their defaults: refused with ``--candidates``.
INDEX_ONLY = {
    "corpus": "--corpus",
    "model": "--model",
    "exclude": "--exclude",
    "reranker": "--reranker",
    "rerank_depth": "--rerank-depth",
    "judge": "--judge",
    "judge_depth": "--judge-depth",
    "access": "--access",
    "access_map": "--access-map",
    "default_access": "--default-access",
}


def run_ask(args) -> None:
    import json

    from ..gates import ask

    if args.candidates is not None:
        ids, questions, decisions, gate = _ask_candidates(args)
    else:
        require_extra("retrieval", "ragcal ask (without --candidates)")
        ids, questions = _ask_queries(args)
        _, gate, index = load_gate_and_index(args, command="ask")
        decisions, _ = ask(gate, index, questions)
    for query_id, question, decision in zip(ids, questions, decisions):
        if args.json:
            record = {"id": query_id} if query_id is not None else {}
            record.update({"query": question, **decision.to_dict()})
            print(json.dumps(record, ensure_ascii=False))
        else:
            _print_decision(question, decision, gate)
