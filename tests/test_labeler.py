"""The review labeler's logic (no browser): reading, labeling, saving atomically, moving between rows, its widget."""

import csv
import io
import os

import pandas as pd
import pytest

import ragcal._io
from ragcal.interactive import DEFAULT_SLICES, REVIEW_COLUMNS, LabelProgress, Labeler

HEADER = [
    *REVIEW_COLUMNS,
    "stratum",
    "stratum_size",
    "stratum_sampled",
    "page_1",
    "heading_1",
    "text_1",
    "page_2",
    "heading_2",
    "text_2",
    "page_3",
    "heading_3",
    "text_3",
    "note",
]


def review_row(number, *, answerable="", slice="", gold="", pages=("tutorial/cors.md", "advanced/cors.md", "")):
    """One review row; ``pages`` are the three passages' pages ("" where there are fewer passages)."""
    passages = []
    for rank, page in enumerate(pages, start=1):
        passages += [
            page,
            f"CORS > part {rank}" if page else "",
            f'text {rank}, with "quotes"\nand a newline' if page else "",
        ]
    return [
        f"live-{number}",
        f"question {number}, with a comma?",
        answerable,
        slice,
        gold,
        "refuse",
        "0.41250000000000001",  # more digits than a float prints: must come back as written
        "refuse/near",
        "12",
        "3",
        *passages,
        f"note {number}",
    ]


def write_review(path, rows, header=HEADER):
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    path.write_text(buffer.getvalue(), encoding="utf-8")
    return path


@pytest.fixture
def review(tmp_path):
    """Five rows, the first two labeled (answerable with gold; unrelated), the third with one passage only."""
    return write_review(
        tmp_path / "review.csv",
        [
            review_row(1, answerable="true", slice="answerable", gold="tutorial/cors.md"),
            review_row(2, answerable="false", slice="unrelated"),
            review_row(3, pages=("tutorial/cors.md", "", "")),
            review_row(4, pages=("a.md", "a.md", "b.md")),
            review_row(5),
        ],
    )


def read_cells(path):
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def test_opens_at_first_unlabeled_row_and_counts_progress(review):
    labeler = Labeler(review)
    assert len(labeler) == 5
    assert labeler.position == 2
    assert labeler.progress() == LabelProgress(labeled=2, total=5)
    assert str(labeler.progress()) == "2 / 5"
    assert labeler.page_columns == ("page_1", "page_2", "page_3")


def test_label_saves_the_strings_of_the_contract_and_moves_on(review):
    labeler = Labeler(review)
    assert labeler.label(2, answerable=True, gold=["tutorial/cors.md"]) == 3
    cells = read_cells(review).iloc[2]
    assert (cells["answerable"], cells["slice"], cells["gold"]) == ("true", "answerable", "tutorial/cors.md")
    assert labeler.label(3, answerable=False, slice="near-domain") == 4
    cells = read_cells(review).iloc[3]
    assert (cells["answerable"], cells["slice"], cells["gold"]) == ("false", "near-domain", "")
    # Gold pages are written once each and in rank order, whatever order they were given in.
    assert labeler.label(4, answerable=True, gold=["advanced/cors.md", "tutorial/cors.md"]) == 5  # all labeled
    assert read_cells(review).at[4, "gold"] == "tutorial/cors.md;advanced/cors.md"
    assert labeler.progress() == (5, 5)
    assert Labeler(review).position == 5


def test_every_other_cell_column_and_row_order_survive_a_label(review):
    before = read_cells(review)
    labeler = Labeler(review)
    labeler.label(4, answerable=False, slice="unrelated")
    after = read_cells(review)
    assert list(after.columns) == HEADER
    assert list(after["id"]) == [f"live-{number}" for number in range(1, 6)]
    changed = after.compare(before)
    assert list(changed.index) == [4]
    assert sorted({column for column, _ in changed.columns}) == ["answerable", "slice"]
    assert after.at[0, "score"] == "0.41250000000000001"
    assert after.at[0, "text_1"] == 'text 1, with "quotes"\nand a newline'
    # Relabeling a row overwrites its label only.
    labeler.label(0, answerable=False, slice="near-domain")
    assert tuple(read_cells(review).loc[0, ["answerable", "slice", "gold"]]) == ("false", "near-domain", "")


def test_answerable_may_have_no_gold_when_no_retrieved_page_answers(review):
    labeler = Labeler(review)
    labeler.label(2, answerable=True)
    assert tuple(read_cells(review).loc[2, ["answerable", "slice", "gold"]]) == ("true", "answerable", "")


def test_gold_is_restricted_to_the_rows_retrieved_pages(review):
    labeler = Labeler(review)
    assert labeler.retrieved_pages(2) == ("tutorial/cors.md",)
    assert labeler.retrieved_pages(3) == ("a.md", "b.md")  # distinct, in rank order
    assert [passage["page"] for passage in labeler.passages(2)] == ["tutorial/cors.md"]  # empty passages left out
    content = review.read_bytes()
    with pytest.raises(
        ValueError, match=r"advanced/cors\.md not among the row's retrieved pages \(tutorial/cors\.md\)"
    ):
        labeler.label(2, answerable=True, gold=["advanced/cors.md"])
    with pytest.raises(ValueError, match="row 3 .*'live-4'.*c.md"):
        labeler.label(3, answerable=True, gold="c.md")
    assert review.read_bytes() == content
    assert labeler.position == 2


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"answerable": False}, "needs a slice"),
        ({"answerable": False, "slice": "answerable"}, "slice 'answerable' for a question labeled not answerable"),
        ({"answerable": False, "slice": "unrelated", "gold": ["tutorial/cors.md"]}, "it can have none"),
        ({"answerable": True, "slice": "  "}, "non-empty one-line"),
        ({"answerable": True, "slice": "two\nlines"}, "non-empty one-line"),
    ],
)
def test_inconsistent_labels_are_refused_and_nothing_is_saved(review, arguments, message):
    labeler = Labeler(review)
    content = review.read_bytes()
    with pytest.raises(ValueError, match=message):
        labeler.label(2, **arguments)
    assert review.read_bytes() == content
    assert labeler.progress() == (2, 5)


def test_bad_row_and_answerable_arguments(review):
    labeler = Labeler(review)
    for row in (-1, 5, 1.0, True):
        with pytest.raises(ValueError, match=r"row must be an int from 0 to 4"):
            labeler.label(row, answerable=True)
    with pytest.raises(TypeError, match="answerable must be True or False, got 'true'"):
        labeler.label(2, answerable="true")


def test_back_next_and_skip(review):
    labeler = Labeler(review)
    assert labeler.position == 2
    assert labeler.back() == 1  # back shows labeled rows too
    assert labeler.back() == 0
    assert labeler.back() == 0  # stops at the first row
    assert labeler.next() == 1
    assert labeler.skip() == 2  # next unlabeled after row 1
    assert labeler.skip() == 3
    assert labeler.skip() == 4
    assert labeler.skip() == 2  # wraps round to the first row skipped
    labeler.position = 4
    assert labeler.label(4, answerable=False, slice="unrelated") == 2  # the next unlabeled, wrapping round
    assert labeler.next() == 3
    assert labeler.next() == 4
    assert labeler.next() == 5  # past the last row
    assert labeler.next() == 5
    assert labeler.back() == 4
    # Labeling an earlier row moves on to the next unlabeled row after it.
    assert labeler.label(0, answerable=True) == 2
    labeler.label(2, answerable=True)
    labeler.label(3, answerable=True)
    assert labeler.position == 5
    assert labeler.skip() == 5  # nothing left to skip to


def test_skip_from_past_the_last_row_starts_again_at_the_first(tmp_path):
    path = write_review(tmp_path / "review.csv", [review_row(1), review_row(2), review_row(3)])
    labeler = Labeler(path)
    labeler.position = 3
    assert labeler.skip() == 0
    widget = labeler.widget()
    labeler.position = 3
    (skip,) = widget_parts(widget, "ragcal-skip")
    (next_button,) = widget_parts(widget, "ragcal-next")
    next_button.click()  # re-renders at the position set above: past the last row
    (position,) = widget_parts(widget, "ragcal-position")
    assert "end of the file" in position.value and "3 unlabeled" in position.value
    skip.click()
    assert position.value.startswith("<b>1 / 3</b>")


def test_resumes_where_the_file_says(review):
    labeler = Labeler(review)
    labeler.label(2, answerable=False, slice="near-domain")
    labeler.skip()  # row 3 left for later
    labeler.label(4, answerable=True)
    assert Labeler(review).position == 3
    assert Labeler(review).progress() == (4, 5)


def test_a_failed_write_leaves_the_old_file_and_the_labeler_as_they_were(review, monkeypatch):
    labeler = Labeler(review)
    content = review.read_bytes()

    def full_disk(source, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ragcal._io.os, "replace", full_disk)
    with pytest.raises(OSError, match="No space left"):
        labeler.label(2, answerable=True)
    assert review.read_bytes() == content
    assert sorted(path.name for path in review.parent.iterdir()) == ["review.csv"]  # no temporary file left
    assert (labeler.position, labeler.progress()) == (2, (2, 5))
    monkeypatch.undo()
    labeler.label(2, answerable=True)  # the next try saves
    assert Labeler(review).progress() == (3, 5)


def test_the_write_goes_through_a_temporary_file_in_the_same_folder(review, monkeypatch):
    replaced = []
    real_replace = os.replace

    def recording_replace(source, target):
        replaced.append((os.path.dirname(source), os.fspath(target)))
        return real_replace(source, target)

    monkeypatch.setattr(ragcal._io.os, "replace", recording_replace)
    Labeler(review).label(2, answerable=True)
    assert replaced == [(str(review.parent), str(review))]


def test_a_file_changed_on_disk_is_not_overwritten(review):
    first, second = Labeler(review), Labeler(review)
    first.label(2, answerable=True)
    with pytest.raises(ValueError, match="changed on disk since this labeler read it"):
        second.label(3, answerable=False, slice="unrelated")
    assert read_cells(review).at[3, "answerable"] == ""
    assert read_cells(review).at[2, "answerable"] == "true"


def test_slice_options_are_the_defaults_then_the_files_own(tmp_path):
    path = write_review(
        tmp_path / "review.csv",
        [review_row(1, answerable="false", slice="out-of-date"), review_row(2, answerable="false", slice="unrelated")],
    )
    assert Labeler(path).slices == (*DEFAULT_SLICES, "out-of-date")
    assert Labeler(path, slices=("unrelated",)).slices == ("unrelated", "out-of-date")


def test_spreadsheet_labels_count_as_labeled(tmp_path):
    path = write_review(tmp_path / "review.csv", [review_row(1, answerable="Yes", slice="answerable"), review_row(2)])
    labeler = Labeler(path)
    assert (labeler.position, labeler.progress()) == (1, (1, 2))
    labeler.label(1, answerable=True)
    assert read_cells(path).at[0, "answerable"] == "Yes"  # a cell not labeled here is kept as it was


def test_k_is_read_from_the_page_columns(tmp_path):
    header = [*REVIEW_COLUMNS, "page_1", "heading_1", "text_1"]
    path = write_review(
        tmp_path / "review.csv", [["q1", "question", "", "", "", "answer", "0.7", "x.md", "X", "x"]], header
    )
    labeler = Labeler(path)
    assert (labeler.page_columns, labeler.retrieved_pages(0)) == (("page_1",), ("x.md",))


@pytest.mark.parametrize(
    ("header", "rows", "message"),
    [
        (
            [column for column in HEADER if column != "decision"],
            [[cell for column, cell in zip(HEADER, review_row(1)) if column != "decision"]],
            r"review\.csv: not a review CSV: missing column\(s\) 'decision'",
        ),
        (
            [column for column in HEADER if column != "text_2"],
            [[cell for column, cell in zip(HEADER, review_row(1)) if column != "text_2"]],
            r"review\.csv: not a review CSV: missing column\(s\) 'text_2'",
        ),
        (
            ["id", "query", "answerable", "slice", "gold"],
            [["a01", "question", "true", "answerable", "x.md"]],
            r"review\.csv: not a review CSV: no 'page_1' column",
        ),
        (HEADER, [], r"review\.csv: no rows to label"),
        (HEADER, [review_row(1, answerable="maybe")], r"review\.csv, line 2, column 'answerable': .*got 'maybe'"),
        (
            HEADER,
            [review_row(1), review_row(2, answerable="false", slice="unrelated", gold="tutorial/cors.md")],
            r"review\.csv, line 3, column 'gold': .* on a row not answerable",
        ),
        (HEADER, [review_row(1, gold="tutorial/cors.md")], r"line 2, column 'gold': .* on a row not labeled"),
    ],
)
def test_bad_files_are_named_with_the_problem(tmp_path, header, rows, message):
    path = write_review(tmp_path / "review.csv", rows, header)
    with pytest.raises(ValueError, match=message):
        Labeler(path)


def test_missing_empty_and_semicolon_files(tmp_path):
    with pytest.raises(ValueError, match=r"nowhere\.csv: review file not found"):
        Labeler(tmp_path / "nowhere.csv")
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match=r"empty\.csv: cannot be read as CSV"):
        Labeler(empty)
    semicolons = tmp_path / "semicolons.csv"
    semicolons.write_text(";".join(HEADER) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"semicolons\.csv: looks semicolon-delimited"):
        Labeler(semicolons)


def widget_parts(widget, name):
    """Every widget under ``widget`` carrying the CSS class ``name``."""
    found = [widget] if name in widget._dom_classes else []
    for child in getattr(widget, "children", ()):
        found += widget_parts(child, name)
    return found


def test_widget_buttons_label_the_row_shown_and_show_the_next(review):
    labeler = Labeler(review)
    widget = labeler.widget()
    (part,) = widget_parts(widget, "ragcal-labeler")

    def one(name):
        (element,) = widget_parts(widget, name)
        return element

    assert one("ragcal-position").value.startswith("<b>3 / 5</b>")
    assert "question 3, with a comma?" in one("ragcal-query").value
    assert "refuse" in one("ragcal-decision").value and "0.413" in one("ragcal-decision").value
    assert "text 1, with &quot;quotes&quot;" in one("ragcal-passages").value
    assert [box.description for box in widget_parts(widget, "ragcal-gold")] == ["tutorial/cors.md"]
    assert one("ragcal-slice").options == DEFAULT_SLICES and one("ragcal-slice").value is None
    # Not answerable without a slice: explained, nothing saved, same row.
    one("ragcal-not-answerable").click()
    assert "needs a slice" in one("ragcal-status").value and labeler.progress() == (2, 5)
    (gold_box,) = widget_parts(widget, "ragcal-gold")
    gold_box.value = True
    one("ragcal-answerable").click()
    assert tuple(read_cells(review).loc[2, ["answerable", "slice", "gold"]]) == (
        "true",
        "answerable",
        "tutorial/cors.md",
    )
    assert one("ragcal-position").value.startswith("<b>4 / 5</b>")
    assert [box.description for box in widget_parts(widget, "ragcal-gold")] == ["a.md", "b.md"]
    one("ragcal-slice").value = "near-domain"
    one("ragcal-not-answerable").click()
    assert read_cells(review).at[3, "slice"] == "near-domain"
    one("ragcal-back").click()
    assert one("ragcal-position").value.startswith("<b>4 / 5</b>")
    assert "labeled: not answerable, slice near-domain" in one("ragcal-current-label").value
    assert one("ragcal-slice").value == "near-domain"
    one("ragcal-skip").click()  # to row 5, the only one unlabeled
    one("ragcal-slice").value = "unrelated"
    one("ragcal-not-answerable").click()
    assert one("ragcal-position").value.startswith("<b>done</b>")
    assert one("ragcal-answerable").disabled and not one("ragcal-back").disabled
    assert Labeler(review).progress() == (5, 5)
