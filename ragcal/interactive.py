"""Interactive tools for JupyterLab: a threshold slider and a review labeler.

:class:`ThresholdExplorer` computes once (distribution, sweep, fitted
thresholds) and then, for each slider position, redraws the score
distribution and the per-slice trade-off with the threshold marked and
prints the per-slice counts. Without a widget front end (headless execution,
a static notebook viewer) the same output is available from
:meth:`ThresholdExplorer.show`, which the notebooks call too.

:class:`Labeler` labels a review CSV (written by ``ragcal review``) one
question at a time and saves every label to the file atomically as it is
given. Its logic (reading, validating, labeling, saving, moving between rows)
is plain methods; :meth:`Labeler.widget` only wires ipywidgets controls to
them. See ``docs/labeling.md``.
"""

from __future__ import annotations

import html
import math
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from ._io import atomic_write_text
from .metrics import outcome_table
from .monitoring.review_files import LABELING_COLUMNS, read_review_cells
from .plotting import ScoreDistributionDisplay, TradeoffDisplay, figure_style
from .queries import parse_answerable

__all__ = ["LabelProgress", "Labeler", "ThresholdExplorer"]


class ThresholdExplorer:
    """Explore one signal's threshold interactively.

    Parameters
    ----------
    table : DataFrame
        Score table.
    signal : str, default="dense_top1"
    higher_is_answerable : bool, default=True
    rules : tuple of str, default=("keep@1.0", "keep@0.95")
        Fitted thresholds, marked alongside the slider's.
    """

    def __init__(
        self,
        table: pd.DataFrame,
        signal: str = "dense_top1",
        *,
        higher_is_answerable: bool = True,
        rules=("keep@1.0", "keep@0.95"),
    ):
        self.table = table
        self.signal = signal
        self.higher_is_answerable = higher_is_answerable
        self.distribution = ScoreDistributionDisplay.from_score_table(
            table, signal, rules=rules, higher_is_answerable=higher_is_answerable
        )
        self.tradeoff = TradeoffDisplay.from_score_table(
            table, signal, thresholds=self.distribution.thresholds, higher_is_answerable=higher_is_answerable
        )
        scores = table[signal].dropna()
        self.low, self.high = float(scores.min()), float(scores.max())

    def counts_at(self, threshold: float) -> pd.DataFrame:
        """Per-slice outcome at ``threshold``: counts, shares and exact 95% intervals."""
        outcome = outcome_table(self.table, self.signal, [threshold], higher_is_answerable=self.higher_is_answerable)
        row = outcome.iloc[0]
        groups = [column[: -len("_k")] for column in outcome.columns if column.endswith("_k")]
        rows = []
        for group in groups:
            size = int(row[group.rsplit("_", 1)[0] + "_n"])
            share, low, high = row[group], row[group + "_low"], row[group + "_high"]
            rows.append(
                {
                    "group": group.replace("_", " "),
                    "count": f"{int(row[group + '_k'])}/{size}",
                    "share": "n/a" if size == 0 else f"{share:.1%}",
                    "95% interval": "n/a" if size == 0 else f"[{low:.1%}, {high:.1%}]",
                }
            )
        return pd.DataFrame(rows).set_index("group")

    def figure_at(self, threshold: float):
        """Distribution and trade-off side by side, with ``threshold`` marked."""
        import matplotlib.pyplot as plt

        marked = {"slider": threshold, **self.distribution.thresholds}
        with figure_style():
            figure, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.0), layout="constrained")
        replace(self.distribution, thresholds=marked).plot(ax=left, legend=False)
        replace(self.tradeoff, thresholds=marked).plot(ax=right)
        left.set_title("score distribution", loc="left")
        right.set_title("per-slice trade-off", loc="left")
        return figure

    def show(self, threshold: float):
        """Static output for one threshold: the figure and the per-slice counts."""
        from IPython.display import display

        figure = self.figure_at(threshold)
        display(figure)
        display(self.counts_at(threshold))
        import matplotlib.pyplot as plt

        plt.close(figure)

    def slider_range(self, anchor: float, *, step: float = 0.005) -> tuple[float, float]:
        """Ends of a slider whose grid of ``step`` passes through ``anchor``.

        The browser's slider only takes ``min + k * step``; anchoring the grid
        on the starting threshold keeps the handle exactly where the counts
        are. One end answers every question and the other refuses every one:
        for the usual orientation the left end is at or below the lowest score
        and the right end above the highest (mirrored for the other).
        """
        below = math.ceil((anchor - self.low) / step)
        above = math.floor((self.high - anchor) / step)
        if self.higher_is_answerable:
            return anchor - below * step, anchor + (above + 1) * step
        return anchor - (below + 1) * step, anchor + above * step

    def widget(self, threshold: float | None = None, *, step: float = 0.005):
        """An ipywidgets slider that redraws :meth:`show` on every move.

        It starts at ``threshold`` (default: the ``keep@1.0`` threshold) exactly,
        not rounded, so its first counts equal the rule's outcome; the readout
        shows three decimals.
        """
        import ipywidgets as widgets

        start = (
            self.distribution.thresholds.get("keep@1.0", (self.low + self.high) / 2) if threshold is None else threshold
        )
        low, high = self.slider_range(float(start), step=step)
        slider = widgets.FloatSlider(
            value=float(start),
            min=low,
            max=high,
            step=step,
            description=self.signal,
            readout_format=".3f",
            continuous_update=False,
            layout=widgets.Layout(width="60%"),
        )
        output = widgets.Output()

        def redraw(change=None):
            with output:
                output.clear_output(wait=True)
                self.show(slider.value)

        slider.observe(redraw, names="value")
        redraw()
        return widgets.VBox([slider, output])


#: Columns a review CSV must have to be labeled, besides ``page_<i>, heading_<i>, text_<i>`` for i = 1..K (see
#: ``docs/labeling.md``); the review files' reader checks them (:func:`ragcal.monitoring.review_files.read_review_cells`).
REVIEW_COLUMNS = LABELING_COLUMNS
#: Slices the dropdown always offers; any other slice already in the file is added after them.
DEFAULT_SLICES = ("answerable", "near-domain", "unrelated")
_PAGE_COLUMN = re.compile(r"page_(\d+)")


class LabelProgress(NamedTuple):
    """How far a review file is labeled: ``labeled`` rows out of ``total``."""

    labeled: int
    total: int

    def __str__(self) -> str:
        return f"{self.labeled} / {self.total}"


class Labeler:
    """Label a review CSV one question at a time, saving each label as it is given.

    Every label lives in the file (only :attr:`position` is in memory): each
    :meth:`label` rewrites the file atomically (a temporary file in the same folder, then ``os.replace``), with
    every other column and the row order unchanged, so that closing the browser
    or the kernel loses nothing. A new ``Labeler`` on the same file opens at
    the first row still unlabeled. A row is labeled when its ``answerable``
    cell holds a label (``true``/``false``).

    Parameters
    ----------
    path : str or Path
        Review CSV: columns ``id, query, answerable, slice, gold, decision,
        score`` and, for i = 1..K, ``page_<i>, heading_<i>, text_<i>`` (the
        top K retrieved passages; empty where there are fewer). Extra columns
        (``stratum``, ...) are kept as they are.
    slices : sequence of str, default=("answerable", "near-domain", "unrelated")
        Slices the dropdown offers; the slices already in the file are added.

    Attributes
    ----------
    position : int
        Row shown now, 0-based. ``len(labeler)`` once every row is labeled
        (or after :meth:`next` past the last row).
    slices : tuple of str
        The slice options.
    page_columns : tuple of str
        ``page_1, ..., page_K``, in passage order.

    Raises
    ------
    ValueError
        The file is missing, not comma-separated, has no rows, lacks a column
        (named), or holds an ``answerable`` cell that is not a label or gold
        pages on a row not labeled answerable (file, line and column named).

    Examples
    --------
    >>> labeler = Labeler("review.csv")                             # doctest: +SKIP
    >>> labeler.label(labeler.position, answerable=True, gold=["tutorial/cors.md"])  # doctest: +SKIP
    >>> labeler.progress()                                          # doctest: +SKIP
    LabelProgress(labeled=1, total=40)
    >>> labeler.widget()                                            # doctest: +SKIP
    """

    def __init__(self, path, *, slices=DEFAULT_SLICES):
        self.path = Path(path)
        self._table = read_review_cells(self.path, columns=LABELING_COLUMNS, passages=True)
        self._stamp = _file_stamp(self.path)
        self.page_columns = tuple(
            sorted(
                (column for column in self._table.columns if _PAGE_COLUMN.fullmatch(column)),
                key=lambda column: int(column.split("_")[1]),
            )
        )
        in_file = [value for value in self._table["slice"].str.strip().unique() if value]
        self.slices = tuple(dict.fromkeys([*slices, *in_file]))
        self.position = self._next_unlabeled(-1)

    def __len__(self) -> int:
        return len(self._table)

    @property
    def table(self) -> pd.DataFrame:
        """A copy of the file's cells, every column as text (as read, as written)."""
        return self._table.copy()

    def progress(self) -> LabelProgress:
        """Rows labeled and rows in the file."""
        return LabelProgress(sum(self.is_labeled(row) for row in range(len(self))), len(self))

    def is_labeled(self, row: int) -> bool:
        """Whether ``row`` holds an ``answerable`` label."""
        return parse_answerable(self._table.at[self._check_row(row), "answerable"]) is not None

    def passages(self, row: int) -> list[dict]:
        """The row's retrieved passages, in rank order: ``{"page", "heading", "text"}``, empty ones left out."""
        cells = self._table.iloc[self._check_row(row)]
        passages = []
        for page_column in self.page_columns:
            number = page_column.split("_")[1]
            passage = {
                "page": cells[page_column].strip(),
                "heading": cells[f"heading_{number}"],
                "text": cells[f"text_{number}"],
            }
            if passage["page"] or passage["text"].strip():
                passages.append(passage)
        return passages

    def retrieved_pages(self, row: int) -> tuple[str, ...]:
        """The distinct pages among the row's passages, in rank order: the gold pages a label may name."""
        return tuple(dict.fromkeys(passage["page"] for passage in self.passages(row) if passage["page"]))

    def label(self, row: int, *, answerable: bool, slice: str | None = None, gold=()) -> int:
        """Label ``row``, save the file, and move to the next unlabeled row; return the new :attr:`position`.

        Parameters
        ----------
        row : int
            0-based row of the file. A labeled row may be labeled again.
        answerable : bool
            Whether the documentation answers the question.
        slice : str, default=None
            For an answerable row, ``"answerable"`` when None. A row that is
            not answerable needs one (e.g. ``"near-domain"``, ``"unrelated"``),
            and it cannot be ``"answerable"``.
        gold : iterable of str, default=()
            Pages that answer the question, taken from
            :meth:`retrieved_pages`. May be empty for an answerable row: the
            docs answer it, but none of the retrieved pages does (a retrieval
            miss, the case a wrong refusal often is). Must be empty for a row
            that is not answerable.

        Returns
        -------
        int
            The next unlabeled row after ``row`` (wrapping round to the
            start), or ``len(self)`` when every row is labeled.

        Raises
        ------
        ValueError
            A bad row, slice or gold page (nothing is saved), or the file
            changed on disk since this labeler last read or wrote it.
        OSError
            The file could not be written; it is left as it was, and so is the
            labeler.
        """
        row = self._check_row(row)
        if not isinstance(answerable, bool):
            raise TypeError(f"answerable must be True or False, got {answerable!r}")
        if isinstance(gold, str):
            gold = [gold]
        gold = [str(page).strip() for page in gold]
        where = f"{self.path}, row {row} ({self._table.at[row, 'id']!r})"
        if slice is None:
            if not answerable:
                raise ValueError(
                    f"{where}: a question that is not answerable needs a slice, e.g. near-domain or unrelated"
                )
            slice = "answerable"
        if not isinstance(slice, str) or not slice.strip() or "\n" in slice:
            raise ValueError(f"{where}: slice must be a non-empty one-line text, got {slice!r}")
        slice = slice.strip()
        if not answerable and slice == "answerable":
            raise ValueError(f"{where}: slice 'answerable' for a question labeled not answerable")
        if gold and not answerable:
            raise ValueError(f"{where}: gold pages {gold} for a question labeled not answerable; it can have none")
        retrieved = self.retrieved_pages(row)
        outside = [page for page in gold if page not in retrieved]
        if outside:
            raise ValueError(
                f"{where}: gold page(s) {', '.join(outside)} not among the row's retrieved pages "
                f"({', '.join(retrieved) or 'none'})"
            )
        labeled = self._table.copy()
        labeled.at[row, "answerable"] = "true" if answerable else "false"
        labeled.at[row, "slice"] = slice
        labeled.at[row, "gold"] = ";".join(page for page in retrieved if page in gold)
        self._save(labeled)
        self.position = self._next_unlabeled(row)
        return self.position

    def next(self) -> int:
        """Move one row forward, labeled or not (to ``len(self)`` past the last); return the new position."""
        self.position = min(self.position + 1, len(self))
        return self.position

    def back(self) -> int:
        """Move one row back, labeled or not, to see or change its label; return the new position."""
        self.position = max(self.position - 1, 0)
        return self.position

    def skip(self) -> int:
        """Leave the current row as it is and move to the next unlabeled row (wrapping round); return it."""
        self.position = self._next_unlabeled(self.position)
        return self.position

    def widget(self):
        """The labeler as an ipywidgets ``VBox``, showing the row at :attr:`position`.

        It shows the position (``3 / 40``), how many rows are labeled, the
        question, the gate's decision and score, the row's label if it has
        one, and its passages (page, heading, text). The controls call
        :meth:`label`, :meth:`back`, :meth:`next` and :meth:`skip`:

        - ``answerable``: labels the row answerable, slice ``answerable``, gold
          the ticked pages (none ticked is allowed: see :meth:`label`);
        - ``not answerable``: labels it with the slice of the dropdown;
        - ``back``, ``next``, ``skip``.

        A label that cannot be given or saved is explained in the status line,
        and nothing changes. Every element carries a ``ragcal-*`` CSS class
        (``ragcal-labeler``, ``ragcal-position``, ``ragcal-query``,
        ``ragcal-decision``, ``ragcal-current-label``, ``ragcal-passages``,
        ``ragcal-slice``, ``ragcal-gold``, ``ragcal-answerable``,
        ``ragcal-not-answerable``, ``ragcal-back``, ``ragcal-next``,
        ``ragcal-skip``, ``ragcal-status``) for tests and styling.
        """
        import ipywidgets as widgets

        def classed(element, name):
            element.add_class(name)
            return element

        position = classed(widgets.HTML(), "ragcal-position")
        query = classed(widgets.HTML(), "ragcal-query")
        decision = classed(widgets.HTML(), "ragcal-decision")
        current_label = classed(widgets.HTML(), "ragcal-current-label")
        passages = classed(widgets.HTML(), "ragcal-passages")
        slice_picker = classed(widgets.Dropdown(options=self.slices, value=None, description="slice"), "ragcal-slice")
        gold_box = classed(widgets.VBox(), "ragcal-gold-pages")
        buttons = {
            name: classed(widgets.Button(description=name), "ragcal-" + name.replace(" ", "-"))
            for name in ("answerable", "not answerable", "back", "next", "skip")
        }
        status = classed(widgets.HTML(), "ragcal-status")
        gold_boxes: dict[str, object] = {}

        def render(message=""):
            done = self.position >= len(self)
            done_progress = self.progress()
            status.value = message
            for name in ("answerable", "not answerable", "next"):
                buttons[name].disabled = done
            buttons["back"].disabled = self.position == 0
            buttons["skip"].disabled = done_progress.labeled == done_progress.total
            if done:
                unlabeled = done_progress.total - done_progress.labeled
                position.value = (
                    f"<b>done</b> · labeled {done_progress}"
                    if not unlabeled
                    else f"<b>end of the file</b> · labeled {done_progress}; skip goes to the {unlabeled} unlabeled"
                )
                query.value = decision.value = current_label.value = passages.value = ""
                slice_picker.value = None
                gold_boxes.clear()
                gold_box.children = ()
                return
            row = self.position
            cells = self._table.iloc[row]
            position.value = f"<b>{row + 1} / {len(self)}</b> · id {html.escape(cells['id'])} · labeled {done_progress}"
            query.value = f"<h3>{html.escape(cells['query'])}</h3>"
            decision.value = f"gate: <b>{html.escape(cells['decision'])}</b> (score {_score_text(cells['score'])})"
            labeled = parse_answerable(cells["answerable"])
            if labeled is None:
                current_label.value = "<i>not labeled yet</i>"
            else:
                given = "answerable" if labeled else "not answerable"
                current_label.value = html.escape(
                    f"labeled: {given}, slice {cells['slice'] or '(none)'}, gold {cells['gold'] or '(none)'}"
                )
            passages.value = "".join(
                f"<div class='ragcal-passage'><b>{number}. {html.escape(passage['page'])}</b>"
                f" — <i>{html.escape(passage['heading'])}</i>"
                f"<div style='white-space: pre-wrap'>{html.escape(passage['text'])}</div></div>"
                for number, passage in enumerate(self.passages(row), start=1)
            )
            given_slice = cells["slice"].strip()
            slice_picker.value = given_slice if given_slice in self.slices else None
            gold = set(filter(None, (page.strip() for page in cells["gold"].split(";"))))
            gold_boxes.clear()
            for page in self.retrieved_pages(row):
                gold_boxes[page] = classed(
                    widgets.Checkbox(value=page in gold, description=page, indent=False), "ragcal-gold"
                )
            gold_box.children = (widgets.HTML("gold page(s):"), *gold_boxes.values()) if gold_boxes else ()

        def ticked():
            return [page for page, box in gold_boxes.items() if box.value]

        def give(answerable):
            row = self.position
            try:
                if answerable:
                    self.label(row, answerable=True, slice="answerable", gold=ticked())
                else:
                    self.label(row, answerable=False, slice=slice_picker.value, gold=ticked())
            except (ValueError, OSError) as error:
                render(f"<span style='color: #b00'>not saved: {html.escape(str(error))}</span>")
                return
            render(f"saved row {row + 1}: {'answerable' if answerable else 'not answerable'}")

        def move(step):
            step()
            render()

        buttons["answerable"].on_click(lambda _: give(True))
        buttons["not answerable"].on_click(lambda _: give(False))
        buttons["back"].on_click(lambda _: move(self.back))
        buttons["next"].on_click(lambda _: move(self.next))
        buttons["skip"].on_click(lambda _: move(self.skip))
        render()
        return classed(
            widgets.VBox(
                [
                    position,
                    query,
                    decision,
                    current_label,
                    passages,
                    gold_box,
                    slice_picker,
                    widgets.HBox([buttons["answerable"], buttons["not answerable"]]),
                    widgets.HBox([buttons["back"], buttons["next"], buttons["skip"]]),
                    status,
                ]
            ),
            "ragcal-labeler",
        )

    def _check_row(self, row) -> int:
        if isinstance(row, bool) or not isinstance(row, int) or not 0 <= row < len(self):
            raise ValueError(f"{self.path}: row must be an int from 0 to {len(self) - 1}, got {row!r}")
        return int(row)

    def _next_unlabeled(self, after: int) -> int:
        """The first unlabeled row after ``after``, wrapping round; ``len(self)`` when there is none."""
        total = len(self)
        if after >= total:  # past the last row: start again from the first
            after = -1
        for offset in range(1, total + 1):
            row = (after + offset) % total
            if not self.is_labeled(row):
                return row
        return total

    def _save(self, labeled: pd.DataFrame) -> None:
        if _file_stamp(self.path) != self._stamp:
            raise ValueError(
                f"{self.path} changed on disk since this labeler read it (another labeler or an editor?); "
                "nothing saved: open it again with Labeler(path)"
            )
        atomic_write_text(self.path, labeled.to_csv(index=False, lineterminator="\n"))
        self._table = labeled
        self._stamp = _file_stamp(self.path)


def _file_stamp(path: Path):
    status = os.stat(path)
    return status.st_mtime_ns, status.st_size, status.st_ino


def _score_text(score: str) -> str:
    try:
        return f"{float(score):.3f}"
    except ValueError:
        return html.escape(score) or "n/a"
