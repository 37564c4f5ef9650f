import pytest

from ragcal.queries import QueryFileError, load_queries

from conftest import write

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
            HEADER + "a,How?,yes,answerable,x.md\n",
            r"q\.csv, line 2, column 'answerable': expected true or false, got 'yes'",
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
