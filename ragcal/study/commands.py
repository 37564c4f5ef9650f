"""``ragcal reproduce``, ``ragcal golden`` and ``ragcal try-signal``: the commands of our study on the bundled corpora.

The command line (:mod:`ragcal.cli`) adds these parsers beside the library's
commands; nothing in the library imports this module.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def add_parsers(commands) -> None:
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
    golden.add_argument(
        "--model",
        default=None,
        help="embedding model (default MiniLM; wordllama:l2_supercat_256 checks tests/golden/<corpus>_wordllama.json)",
    )
    golden.set_defaults(run=run_golden)

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
        "--splits",
        type=int,
        default=1000,
        metavar="N",
        help="held-out half splits per evaluation (default 1000, what results/ holds); fewer for a quick look",
    )
    reproduce.add_argument(
        "--chunking",
        default=None,
        metavar="VARIANTS",
        help="comma-separated chunking variants to sweep, e.g. headings-256,fixed-500 (default: all six of "
        "ragcal.chunk_sweep.CHUNKING_VARIANTS; headings-256, the baseline, must be one)",
    )
    reproduce.add_argument(
        "--reference",
        type=Path,
        default=None,
        metavar="DIR",
        help="committed results to anchor to and compare with (default: the --results folder as it was before "
        "this run); see ragcal.study.anchoring",
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
    reproduce.add_argument(
        "--second-model",
        default=None,
        metavar="MODEL",
        help="the model results/cross_model.md compares with MiniLM (default wordllama:l2_supercat_256; none: skip)",
    )
    reproduce.add_argument(
        "--benchmark",
        default=None,
        metavar="NAME",
        help="rebuild only results/<NAME>/ and figures/<NAME>/ of a public benchmark (squad2-A), imported from "
        "data/benchmarks/ (ragcal.study.imported); a plain reproduce does every benchmark after the bundled corpora",
    )
    reproduce.add_argument(
        "--judge",
        action="store_true",
        help="opt-in: rebuild only results/judge/ and figures/judge/: judges cross-fitted on SQuAD 2.0 half A and the "
        "bundled corpora against the retrieval signals (ragcal.study.judge; about an hour of CPU on two cores the "
        "first time, the judges are then reused from the cache). A plain reproduce leaves them as they are",
    )
    reproduce.add_argument(
        "--llm",
        action="store_true",
        help="opt-in: ask the local LLM (SmolLM2) again for its verdicts on the SQuAD sample and rewrite "
        "results/squad2-A/llm_*.csv (about 13 minutes cold on two cores). Without it the benchmark study reads the "
        "verdicts already in results/squad2-A/llm_found_answer.csv",
    )
    reproduce.add_argument(
        "--timings", action="store_true", help="print each stage's wall-clock time at the end"
    )
    reproduce.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="processes for the parts that do not depend on each other (the corpora's studies, the notebooks); "
        "default: the cores this process may use. Every number of processes writes the same bits",
    )
    reproduce.set_defaults(run=run_reproduce)

    trial = commands.add_parser(
        "try-signal",
        help="a new signal beside dense_top1 on every bundled corpus and benchmark: AUC and a held-out keep@0.95 gate",
    )
    trial.add_argument(
        "file", type=Path, metavar="FILE.py", help="a Python file that defines and registers signals (register_signal)"
    )
    trial.add_argument(
        "--corpus",
        action="append",
        default=None,
        metavar="NAME",
        help="a bundled corpus (repeatable); default: every bundled corpus and benchmark, and with --benchmark only "
        "the datasets named",
    )
    trial.add_argument(
        "--benchmark",
        action="append",
        default=None,
        metavar="NAME",
        help="a public benchmark, e.g. squad2-A (repeatable); see --corpus for the default",
    )
    trial.add_argument(
        "--splits",
        type=int,
        default=None,
        metavar="N",
        help="held-out splits per dataset (default: ragcal.study.try_signal.DEFAULT_SPLITS; the output states it)",
    )
    trial.add_argument("--resamples", type=int, default=2000, metavar="N", help="bootstrap resamples (default 2000)")
    trial.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="cache folder: embeddings, saved indexes, retrieved lists (default: $RAGCAL_CACHE_DIR or the user cache)",
    )
    trial.set_defaults(run=run_try_signal)


def run_try_signal(args) -> int:
    """``ragcal try-signal FILE.py``: the signals FILE.py registers, beside ``dense_top1``, on every dataset."""
    from ..datasets import check_data_dir
    from ..signals import load_signals_module
    from .try_signal import trial_report, try_signal

    check_data_dir()
    names = load_signals_module(args.file)
    if not names:
        raise ValueError(
            f"{args.file}: registers no signal; decorate a function with ragcal.signals.register_signal(name, "
            "retrievers=...)"
        )
    print(f"{args.file}: registered {', '.join(names)}", file=sys.stderr)
    named = args.corpus is not None or args.benchmark is not None
    options = {"corpora": args.corpus or (), "benchmarks": args.benchmark or ()} if named else {}
    rows = try_signal(
        names,
        n_splits=args.splits,
        n_resamples=args.resamples,
        cache_dir=args.cache_dir,
        log=lambda line: print(line, file=sys.stderr),
        **options,
    )
    print(trial_report(rows))
    return 0


def run_golden(args) -> int:
    import json

    from ..datasets import bundled
    from ..embedding import DEFAULT_MODEL, load_embedder
    from ..queries import load_queries
    from ..retrieval.index import build_index
    from .golden import GOLDEN_IDS, compare_golden, golden_file, golden_snapshot, write_golden

    spec = bundled(args.corpus)
    model = args.model or DEFAULT_MODEL
    index = build_index(spec.corpus, exclude=spec.exclude, embedder=load_embedder(model, cache_dir=args.cache_dir))
    queries = load_queries(spec.queries, corpus_paths=index.doc_paths)
    snapshot = golden_snapshot(index, queries, ids=GOLDEN_IDS[spec.name])
    if args.write is not None:
        write_golden(args.write, snapshot)
        print(f"wrote {args.write}; review its diff and commit it with the regenerated results/")
        return 0
    problems = compare_golden(snapshot, json.loads(golden_file(spec.name, model).read_text()))
    for problem in problems:
        print(f"golden: {problem}", file=sys.stderr)
    print(f"{spec.title}: golden set holds" if not problems else f"golden set broken: {len(problems)} problem(s)")
    return 1 if problems else 0


def chunking_variants(names: str) -> dict:
    """The variants of ``--chunking``: known names, the default (the baseline) among them, in the given order."""
    from ..chunk_sweep import CHUNKING_VARIANTS, DEFAULT_VARIANT

    chosen = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in CHUNKING_VARIANTS]
    if unknown:
        raise ValueError(f"--chunking: unknown variant {unknown[0]!r}; known: {', '.join(CHUNKING_VARIANTS)}")
    if DEFAULT_VARIANT not in chosen:
        raise ValueError(f"--chunking must include {DEFAULT_VARIANT}, the baseline of the paired differences")
    return {name: CHUNKING_VARIANTS[name] for name in dict.fromkeys(chosen)}


def run_reproduce(args) -> None:
    import tempfile

    from .timings import StageTimings

    timings = StageTimings()
    anchors = []
    with tempfile.TemporaryDirectory(prefix="ragcal-committed-") as before:
        compared = _snapshot_outputs(args, Path(before))
        try:
            _run_reproduce(args, timings, anchors=anchors)
        finally:
            if getattr(args, "timings", False):
                print("\nstage timings (wall clock):\n" + timings.format())
        print("\n" + "\n".join(_verdict(compared, anchors)))


def _output_folders(args) -> dict:
    """The folders a ``ragcal reproduce`` writes, by the name they have in a checkout (results, figures, notebooks)."""
    from .notebooks import FIGURES_DIR, NOTEBOOKS_DIR

    folders = {"results": Path(args.results)}
    if not args.skip_notebooks and not args.judge:
        folders["figures"] = Path(args.figures or FIGURES_DIR)
        folders["notebooks"] = Path(
            args.executed_notebooks or (NOTEBOOKS_DIR if NOTEBOOKS_DIR.parent == FIGURES_DIR.parent else "notebooks")
        )
    return folders


def _snapshot_outputs(args, before: Path) -> list:
    """Copy what the run will overwrite, as committed, into ``before``: ``(name, folder, committed copy)`` each.

    With ``--reference``, the results are compared with that folder instead (nothing copied for them).
    """
    import shutil

    pairs = []
    for name, folder in _output_folders(args).items():
        if name == "results" and args.reference is not None:
            pairs.append((name, folder, Path(args.reference)))
        elif folder.is_dir():
            shutil.copytree(folder, before / name)
            pairs.append((name, folder, before / name))
    return pairs


def _verdict(compared, anchors) -> list[str]:
    """The exactness verdict: anchored quantities, then every output file against the committed one."""
    from .anchoring import anchor_report
    from .exactness import RUN_DEPENDENT_FILE, compare_files, read_run_dependent, verdict_lines

    lines = ["exactness verdict (what this run wrote against the committed files):"]
    lines += anchor_report(anchors)
    totals = {"identical": [], "within": [], "different": []}
    ignored = 0
    for name, folder, committed in compared:
        listing = committed / RUN_DEPENDENT_FILE.name if name == "results" else None
        globs = read_run_dependent(listing) if listing is not None and listing.is_file() else []
        ignore = [glob.removeprefix(f"{name}/") for glob in globs]
        comparison = compare_files(folder, committed, ignore=ignore)
        ignored += sum(1 for path in folder.rglob("*") if path.is_file() and _ignored(path.relative_to(folder), ignore))
        shown = Path(os.path.relpath(folder)).as_posix() if folder.is_absolute() else folder.as_posix()
        for key in totals:
            totals[key] += [
                (f"{shown}/{item[0]}", item[1]) if isinstance(item, tuple) else _prefixed(item, shown)
                for item in comparison[key]
            ]
    if not compared:
        lines.append("files: no committed files to compare with")
    else:
        lines += verdict_lines(totals, ignored=ignored)
    return lines


def _ignored(relative, globs) -> bool:
    import fnmatch

    return any(fnmatch.fnmatch(relative.as_posix(), glob) for glob in globs)


def _prefixed(item: str, folder: str) -> str:
    kind, separator, name = item.partition(": ")
    return f"{kind}: {folder}/{name}" if separator else f"{folder}/{item}"


def _run_reproduce(args, timings, *, anchors=None) -> None:
    from ..datasets import BUNDLED, check_data_dir
    from ..embedding import load_embedder
    from ..metrics.outcomes import slice_summary
    from .parallel import default_jobs
    from .reproduce import SECOND_MODEL, reproduce

    check_data_dir()
    if args.judge:  # the judge study instead of the bundled corpora
        with timings.stage("judge study"):
            return run_judge(args)
    if args.benchmark is not None:  # an imported benchmark instead of the bundled corpora
        if args.splits < 1:
            raise ValueError(f"--splits must be at least 1. Got {args.splits} instead.")
        return run_benchmark(args, timings=timings, anchors=anchors)
    variants = None if args.chunking is None else chunking_variants(args.chunking)
    second = args.second_model or SECOND_MODEL
    second = None if second.lower() == "none" else second
    if second is not None:  # a bad model name fails before any work
        load_embedder(second, cache_dir=args.cache_dir)
    if args.reranker is not None:  # a bad reranker fails before any work
        from ..retrieval.rerank import CrossEncoderReranker

        CrossEncoderReranker(args.reranker, use_cache=False)

    if args.splits < 1:
        raise ValueError(f"--splits must be at least 1. Got {args.splits} instead.")
    jobs = default_jobs() if args.jobs is None else args.jobs
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1. Got {jobs} instead.")
    names = args.corpus or list(BUNDLED)
    tables = reproduce(
        args.results,
        corpora=names,
        embedder=load_embedder(cache_dir=args.cache_dir),
        n_splits=args.splits,
        variants=variants,
        reranker=args.reranker,
        second_model=second,
        timings=timings,
        jobs=jobs,
        reference_dir=args.reference,
        anchors=anchors,
    )
    for name, corpus_tables in tables.items():
        print(f"\n{BUNDLED[name].title}:", end="")
        print("\ndense_top1 by slice:")
        print(slice_summary(corpus_tables["scores"], "dense_top1").to_string())
    # The whole job runs every public benchmark too, whose summary reads the corpora's results.
    from .imported import BENCHMARKS

    whole_job = args.corpus is None
    benchmarks = [argparse.Namespace(**{**vars(args), "benchmark": name}) for name in BENCHMARKS] if whole_job else []
    if not args.skip_notebooks:
        from .notebooks import ANCHOR_VARIABLE, FIGURES_DIR, NOTEBOOKS_DIR, reproduce_figures

        figures = args.figures or FIGURES_DIR
        executed = args.executed_notebooks or (
            NOTEBOOKS_DIR if NOTEBOOKS_DIR.parent == FIGURES_DIR.parent else Path("notebooks")
        )
        # The notebooks' own score tables are anchored as the study's were (ragcal.study.anchoring).
        os.environ[ANCHOR_VARIABLE] = str(Path(args.results).resolve())
        # In parallel, the benchmarks' studies and notebooks run in the notebooks' pool, after the slowest notebook in
        # its process, instead of one by one afterwards with a core idle.
        pooled, benchmarks = (benchmarks, []) if jobs > 1 else ([], benchmarks)
        stage = "notebooks (figures)" + "".join(f" and {benchmark.benchmark}" for benchmark in pooled)
        with timings.stage(stage):
            done = reproduce_figures(
                [BUNDLED[name] for name in names],
                figures_dir=figures,
                results_dir=args.results,
                output_dir=executed,
                jobs=jobs,
                then=[(_benchmark_in_process, (benchmark,), {}) for benchmark in pooled],
            )
        print(f"figures written to {figures}/ (PNG and SVG); executed notebooks in {executed}/")
        for benchmark_anchors, rows in done:
            if anchors is not None:
                anchors += benchmark_anchors
            timings.add_parallel(rows)
    for benchmark in benchmarks:
        print(f"\n{benchmark.benchmark}:")
        run_benchmark(benchmark, timings=timings, anchors=anchors)
    if whole_job:
        print(
            "\nNot rebuilt (opt-in, slow): the judge study in results/judge/ (ragcal reproduce --judge) and the "
            "LLM's verdicts on SQuAD (ragcal reproduce --benchmark squad2-A --llm)."
        )


def run_judge(args) -> None:
    """``ragcal reproduce --judge``: the judge study on every corpus, then its notebook (figures/judge/)."""
    from ..embedding import load_embedder
    from .judge import reproduce_judge

    reproduce_judge(args.results, cache_dir=args.cache_dir, embedder=load_embedder(cache_dir=args.cache_dir))
    print((args.results / "judge" / "summary.md").read_text(encoding="utf-8"))
    if not args.skip_notebooks:
        from .notebooks import FIGURES_DIR, NOTEBOOKS_DIR, reproduce_judge_figures

        figures = (args.figures or FIGURES_DIR) / "judge"
        executed = args.executed_notebooks or (
            NOTEBOOKS_DIR if NOTEBOOKS_DIR.parent == FIGURES_DIR.parent else Path("notebooks")
        )
        reproduce_judge_figures(figures_dir=figures, results_dir=args.results / "judge", output_dir=executed)
        print(f"figures written to {figures}/ (PNG and SVG); executed notebook in {executed}/")


def _benchmark_in_process(args) -> tuple:
    """:func:`run_benchmark` in a worker process: its anchors and its stage timings."""
    from .timings import StageTimings

    timings, anchors = StageTimings(), []
    print(f"\n{args.benchmark}:", flush=True)
    run_benchmark(args, timings=timings, anchors=anchors)
    return anchors, timings.rows


def run_benchmark(args, *, timings=None, anchors=None) -> None:
    """``ragcal reproduce --benchmark NAME``: the benchmark study, then its notebook (figures/<NAME>/)."""
    from ..embedding import load_embedder
    from .imported import BENCHMARKS
    from .imported_reproduce import reproduce_benchmark
    from .timings import StageTimings

    timings = timings if timings is not None else StageTimings()
    if args.benchmark not in BENCHMARKS:
        raise ValueError(f"--benchmark: unknown benchmark {args.benchmark!r}; known: {', '.join(BENCHMARKS)}")
    tables = reproduce_benchmark(
        args.benchmark,
        args.results,
        embedder=load_embedder(cache_dir=args.cache_dir),
        max_splits=args.splits,
        cache_dir=args.cache_dir,
        llm=getattr(args, "llm", False),
        timings=timings,
        anchors=anchors,
    )
    print(tables["auc_clustered"].to_string(index=False, float_format="%.3f"))
    if not args.skip_notebooks:
        from .notebooks import FIGURES_DIR, NOTEBOOKS_DIR, reproduce_benchmark_figures

        figures = (args.figures or FIGURES_DIR) / args.benchmark
        executed = args.executed_notebooks or (
            NOTEBOOKS_DIR if NOTEBOOKS_DIR.parent == FIGURES_DIR.parent else Path("notebooks")
        )
        with timings.stage(f"{args.benchmark}: notebook (figures)"):
            reproduce_benchmark_figures(
                args.benchmark, figures_dir=figures, results_dir=args.results / args.benchmark, output_dir=executed
            )
        print(f"figures written to {figures}/ (PNG and SVG); executed notebook in {executed}/")
