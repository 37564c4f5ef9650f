"""From a public benchmark to a calibrated gate with the same commands as the bundled corpora.

A tiny BEIR folder (written here) goes through ``import-benchmark``, ``score``,
``calibrate`` and ``fit-gate``; then the same questions as a candidates JSONL
with the user's own scores go through ``score --candidates`` and ``fit-gate``
on the run's own score, with no corpus at all.
"""

import json

import pandas as pd
import pytest

from ragcal.cli import main
from ragcal.gates.files import load_gate

TOPICS = {
    "cors": "Cross-origin resource sharing: allow origins with CORSMiddleware and list the allowed methods.",
    "auth": "Authentication with OAuth2 password flow and bearer tokens; hash passwords before storing them.",
    "db": "Connect to a SQL database with SQLAlchemy sessions and close each session after the request.",
    "tests": "Write tests with the TestClient: call the app's routes and assert on the status code and JSON.",
    "deploy": "Deploy behind a proxy with several worker processes; set the root path when a prefix is stripped.",
    "files": "Receive uploaded files with UploadFile and read them asynchronously in chunks.",
}
ANSWERABLE = [
    ("How do I allow other origins with CORS middleware?", "cors"),
    ("Which methods does CORSMiddleware allow?", "cors"),
    ("How do I hash passwords for OAuth2 bearer tokens?", "auth"),
    ("What is the OAuth2 password flow?", "auth"),
    ("How do I close a SQLAlchemy session after a request?", "db"),
    ("How do I connect to a SQL database?", "db"),
    ("How do I test routes with the TestClient?", "tests"),
    ("How do I assert on the status code in tests?", "tests"),
    ("How do I deploy behind a proxy with workers?", "deploy"),
    ("How do I set the root path behind a proxy?", "deploy"),
    ("How do I read an uploaded file in chunks?", "files"),
    ("What is UploadFile for?", "files"),
]
UNANSWERABLE = [
    "What is the boiling point of water on Mars?",
    "Who won the football world cup in 1954?",
    "How many legs does a spider have?",
    "What is the capital of Mongolia?",
    "How do I bake sourdough bread?",
    "Which planet has the most moons?",
]


def write_beir(folder):
    (folder / "qrels").mkdir(parents=True)
    corpus = [{"_id": name, "title": name.upper(), "text": text} for name, text in TOPICS.items()]
    queries = [{"_id": f"a{n}", "text": text} for n, (text, _) in enumerate(ANSWERABLE)]
    queries += [{"_id": f"u{n}", "text": text} for n, text in enumerate(UNANSWERABLE)]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(line) + "\n" for line in corpus))
    (folder / "queries.jsonl").write_text("".join(json.dumps(line) + "\n" for line in queries))
    qrels = "query-id\tcorpus-id\tscore\n" + "".join(f"a{n}\t{doc}\t1\n" for n, (_, doc) in enumerate(ANSWERABLE))
    (folder / "qrels" / "test.tsv").write_text(qrels)
    return folder


@pytest.mark.slow
def test_beir_folder_to_a_calibrated_gate(tmp_path, capsys):
    source = write_beir(tmp_path / "beir")
    bench = tmp_path / "bench"
    assert main(["import-benchmark", "beir", str(source), "--out", str(bench)]) == 0
    queries = pd.read_csv(bench / "queries.csv")
    assert queries["answerable"].sum() == len(ANSWERABLE) and (~queries["answerable"]).sum() == len(UNANSWERABLE)

    scores = tmp_path / "scores.csv"
    assert main(["score", str(bench / "queries.csv"), "--corpus", str(bench / "corpus"), "--out", str(scores)]) == 0
    table = pd.read_csv(scores)
    assert len(table) == len(queries) and "dense_top1" in table.columns
    capsys.readouterr()

    assert main(["calibrate", str(scores), "--signal", "dense_top1"]) == 0
    assert "dense_top1" in capsys.readouterr().out

    gate = tmp_path / "gate.json"
    assert main(["fit-gate", str(scores), "--out", str(gate), "--rule", "keep@1.0"]) == 0
    fitted = load_gate(gate)
    answerable_scores = table.loc[table["answerable"], "dense_top1"]
    # keep@1.0 keeps every answerable question: the bar is at most the lowest answerable score.
    assert fitted.threshold <= answerable_scores.min() + 1e-12


@pytest.mark.slow
def test_own_candidates_to_a_gate_on_the_run_score(tmp_path, capsys):
    lines = []
    for n, (text, doc) in enumerate(ANSWERABLE):
        passages = [{"id": doc, "text": TOPICS[doc], "answers": True, "score": 20.0 - n % 3}]
        passages.append(
            {"id": "db" if doc != "db" else "cors", "text": TOPICS["db" if doc != "db" else "cors"], "score": 3.0}
        )
        lines.append({"id": f"a{n}", "query": text, "answerable": True, "passages": passages})
    for n, text in enumerate(UNANSWERABLE):
        passages = [
            {"id": "files", "text": TOPICS["files"], "score": 5.0 + n % 2},
            {"id": "tests", "text": TOPICS["tests"], "score": 1.0},
        ]
        lines.append({"id": f"u{n}", "query": text, "answerable": False, "slice": "unrelated", "passages": passages})
    candidates = tmp_path / "run.jsonl"
    candidates.write_text("".join(json.dumps(line) + "\n" for line in lines))
    scores = tmp_path / "scores.csv"
    assert main(["score", "--candidates", str(candidates), "--out", str(scores)]) == 0
    table = pd.read_csv(scores)
    assert table["run_top1"].tolist()[: len(ANSWERABLE)] == [20.0 - n % 3 for n in range(len(ANSWERABLE))]
    capsys.readouterr()
    assert main(["calibrate", str(scores), "--signal", "run_top1"]) == 0
    printed = capsys.readouterr().out
    # The user's own score separates the two kinds perfectly here: every answerable top score is above 18.
    assert "run_top1" in printed
    gate = tmp_path / "gate.json"
    assert main(["fit-gate", str(scores), "--out", str(gate), "--signal", "run_top1", "--rule", "keep@1.0"]) == 0
    fitted = load_gate(gate)
    assert 6.0 < fitted.threshold <= 18.0
