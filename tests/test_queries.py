import pytest
from conftest import write

from ragcal.queries import QueryFileError, load_queries

HEADER = "id,query,answerable,slice,gold\n"


def test_valid_file(tmp_path):
    path = write(tmp_path / "q.csv", HEADER + "a,How?,TRUE,answerable,x.md;y.md\nb,Eggs?,false,unrelated,\n")
    frame = load_queries(path, corpus_paths={"x.md", "y.md"})
    assert frame["answerable"].tolist() == [True, False]
    assert frame["gold"].tolist() == [("x.md", "y.md"), ()]


@pytest.mark.parametrize(
    "body, message",
    [
        ("id,query,answerable,slice\na,How?,true,answerable\n", r"q\.csv: missing column\(s\) 'gold'"),
        (HEADER, r"q\.csv: no query rows"),
        (
            HEADER + "a,How?,true,answerable,x.md\na,Again?,true,answerable,x.md\n",
            r"q\.csv, line 3, column 'id': duplicate id 'a' \(first on line 2\)",
        ),
        (
            HEADER + "a,How?,maybe,answerable,x.md\n",
            r"q\.csv, line 2, column 'answerable': expected true or false \(or 1/0, yes/no\), got 'maybe'",
        ),
        (
            HEADER + "a,How?,true,answerable,x.md\nb,Why?,true,answerable,nope.md\n",
            r"q\.csv, line 3, column 'gold': nope\.md not in the corpus",
        ),
        (HEADER + "a,How?,false,near-domain,x.md\n", r"line 2, column 'gold': an unanswerable query cannot have gold"),
        (HEADER + ",How?,true,answerable,x.md\n", r"line 2, column 'id': empty id"),
        (HEADER + "a, ,true,answerable,x.md\n", r"line 2, column 'query': empty query"),
    ],
)
def test_errors_name_file_line_and_column(tmp_path, body, message):
    path = write(tmp_path / "q.csv", body)
    with pytest.raises(QueryFileError, match=message):
        load_queries(path, corpus_paths={"x.md"})


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(QueryFileError, match="not found"):
        load_queries(tmp_path / "absent.csv")
    with pytest.raises(QueryFileError, match="cannot be read as CSV"):
        load_queries(write(tmp_path / "empty.csv", ""))


@pytest.mark.parametrize("delimiter, name", [(";", "semicolon"), ("\t", "tab")])
def test_other_delimiter_is_named(tmp_path, delimiter, name):
    body = delimiter.join(["id", "query", "answerable", "slice", "gold"]) + "\n"
    body += delimiter.join(["a", "How?", "true", "answerable", "x.md"]) + "\n"
    path = write(tmp_path / "q.csv", body)
    with pytest.raises(QueryFileError) as raised:
        load_queries(path, corpus_paths={"x.md"})
    message = str(raised.value)
    assert message.startswith(f"{path}: ")
    assert f"looks {name}-delimited; ragcal reads comma-separated CSV" in message
    assert "missing column" not in message


@pytest.mark.parametrize("true_text, false_text", [("1", "0"), ("1.0", "0.0"), ("True", "FALSE"), ("yes", "no")])
def test_answerable_accepts_numbers_and_yes_no(tmp_path, true_text, false_text):
    path = write(tmp_path / "q.csv", HEADER + f"a,How?,{true_text},answerable,x.md\nb,Eggs?,{false_text},unrelated,\n")
    assert load_queries(path, corpus_paths={"x.md"})["answerable"].tolist() == [True, False]


@pytest.mark.parametrize(
    "gold, suggestion",
    [
        ("./tutorial/cors.md", "tutorial/cors.md"),
        ("docs/tutorial/cors.md", "tutorial/cors.md"),
        ("cors.md", "tutorial/cors.md"),
        (r"tutorial\cors.md", "tutorial/cors.md"),
    ],
)
def test_unknown_gold_path_suggests_the_close_match(tmp_path, gold, suggestion):
    path = write(tmp_path / "q.csv", HEADER + f"a,How?,true,answerable,{gold}\n")
    with pytest.raises(QueryFileError) as raised:
        load_queries(path, corpus_paths={"tutorial/cors.md", "tutorial/index.md", "index.md"})
    message = str(raised.value)
    assert f"{path}, line 2, column 'gold': {gold} not in the corpus" in message
    assert f"did you mean {suggestion}?" in message


def test_no_suggestion_when_nothing_is_close_or_the_match_is_ambiguous(tmp_path):
    path = write(tmp_path / "q.csv", HEADER + "a,How?,true,answerable,index.md;nope.md\n")
    with pytest.raises(QueryFileError) as raised:
        load_queries(path, corpus_paths={"a/index.md", "b/index.md"})
    message = str(raised.value)
    assert "index.md, nope.md not in the corpus" in message and "did you mean" not in message
