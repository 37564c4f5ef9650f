"""Progress in a log: at most one line per 10% or per 30 s, no carriage returns; silenced on request."""

import io

import pytest

from ragcal.progress import LINE_EVERY_SECONDS, LineProgress, progress, progress_bar


@pytest.fixture(autouse=True)
def _shown(monkeypatch):
    monkeypatch.delenv("RAGCAL_PROGRESS", raising=False)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)


def test_a_thousand_steps_in_a_log_print_ten_lines_and_no_carriage_return():
    log = io.StringIO()
    items = list(progress(range(1000), desc="splits", unit="split", file=log))
    assert items == list(range(1000))  # unchanged, in order
    text = log.getvalue()
    lines = text.splitlines()
    assert "\r" not in text and len(lines) == 10  # 10%, ..., 90%, and the last line at 100%
    assert lines[0].startswith("splits: 100/1,000 (10%) split") and lines[-1].startswith("splits: 1,000/1,000 (100%)")


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_an_unknown_total_prints_once_per_30_seconds_and_at_the_end():
    log, clock = io.StringIO(), Clock()
    bar = LineProgress(None, desc="questions", file=log, clock=clock)
    for _ in range(100):  # 100 steps of 1 s: lines at 30, 60 and 90 s
        clock.now += 1.0
        bar.update()
    bar.close()
    bar.close()  # once only
    lines = log.getvalue().splitlines()
    assert [line.split(", ")[-1] for line in lines] == ["30 s", "60 s", "90 s", "100 s"]
    assert LINE_EVERY_SECONDS == 30.0


def test_slow_steps_of_a_known_total_print_every_30_seconds_between_the_tenths():
    log, clock = io.StringIO(), Clock()
    bar = LineProgress(1000, file=log, clock=clock)
    for _ in range(50):  # 5% of the work in 100 s
        clock.now += 2.0
        bar.update()
    assert len(log.getvalue().splitlines()) == 3  # at 30, 60 and 90 s


def test_silenced_by_the_environment_or_disable(monkeypatch):
    log = io.StringIO()
    assert list(progress(range(50), file=log, disable=True)) == list(range(50))
    monkeypatch.setenv("RAGCAL_PROGRESS", "0")
    assert list(progress(range(50), file=log)) == list(range(50))
    monkeypatch.setenv("RAGCAL_PROGRESS", "1")
    monkeypatch.setenv("TQDM_DISABLE", "1")
    with progress_bar(total=50, file=log) as bar:
        bar.update(50)
    assert log.getvalue() == ""


def test_an_empty_iterable_prints_nothing():
    log = io.StringIO()
    assert list(progress([], desc="nothing", file=log)) == []
    assert log.getvalue() == ""


def test_a_postfix_is_shown_on_the_next_line():
    log = io.StringIO()
    with LineProgress(2, desc="train-judge", unit="step", file=log) as bar:
        bar.set_postfix(loss="0.693")
        bar.update(2)
    assert log.getvalue().rstrip().endswith("s, loss=0.693")
