"""SQuAD 2.0: the official JSON, imported as one Markdown page per paragraph and a labeled query file.

The file (Rajpurkar, Jia & Liang, 2018)::

    {"version": "v2.0",
     "data": [{"title": "Normans",
               "paragraphs": [{"context": "The Normans ...",
                               "qas": [{"id": "...", "question": "...", "is_impossible": false,
                                        "answers": [...], "plausible_answers": [...]}]}]}]}

What :func:`write_squad2` makes of it:

- one page per paragraph, ``<article>/pNN.md`` (``NN`` the paragraph's
  position in its article, two digits, more when the article has 100
  paragraphs or more), headed ``# <article title with underscores as spaces>``,
  then the paragraph text. The article folder is the title itself when it is
  made of letters, digits, ``.``, ``_`` and ``-`` (every title of the dev
  set); any other character becomes ``_`` (see
  :func:`~ragcal.importers.passage_pages`);
- an answerable question (``is_impossible`` false): slice ``answerable``,
  gold = its paragraph's page;
- an unanswerable one: slice ``near-domain``, gold empty. Crowd workers
  wrote these against the very paragraph they sit under, to look answerable
  from it: they are about the corpus's topics, so near-domain;
- ``group`` = the article title: questions on one article (often on one
  paragraph) are not independent, so every split keeps an article whole.

Question and paragraph texts are stripped of surrounding whitespace; SQuAD's
question ids are kept, so the query file joins back to the answer spans.
"""

from __future__ import annotations

import json
from pathlib import Path

from .candidates import passage_pages
from .writing import BenchmarkFileError, text_field

__all__ = ["write_squad2", "SQUAD2_OPTIONS", "UNANSWERABLE_SLICE"]

#: The options :func:`write_squad2` takes besides the source and the writer.
SQUAD2_OPTIONS = ("articles",)
#: The slice of SQuAD's unanswerable questions.
UNANSWERABLE_SLICE = "near-domain"


def write_squad2(source, writer, *, articles=None) -> tuple[str, ...]:
    """Import a SQuAD 2.0 JSON file into ``writer`` (see the module docstring).

    Parameters
    ----------
    source : str or Path
        The official JSON (``train-v2.0.json``, ``dev-v2.0.json`` or a part of one).
    writer : BenchmarkWriter
    articles : str or iterable of str, default=None
        Titles of the articles to import (all when None), as in the file
        (``1973_oil_crisis``) or with spaces (``1973 oil crisis``). A string
        is split on commas unless it is itself a title; so is each item of an
        iterable (a repeated ``--articles``). Articles keep the file's order.

    Returns
    -------
    tuple of str
        Notes for the summary (which articles were selected).

    Raises
    ------
    BenchmarkFileError
        A file that is not JSON (with line and column) or lacks a field, or a
        field of the wrong type, named by its JSON path
        (``data[3].paragraphs[0].qas[2]: missing field 'question'``); a
        duplicate article title or question id; an unknown article title
        (the message lists the known ones).
    """
    source = Path(source)
    document = read_json(source)
    data = document.get("data")
    if not isinstance(data, list):
        found = "missing" if data is None else f"got {json.dumps(data)[:60]}"
        raise BenchmarkFileError(f"{source}: field 'data': expected a list of articles, {found}")
    titles = article_titles(source, data)
    selected = select_articles(source, titles, articles)
    folders = passage_pages(titles)
    question_paths: dict[str, str] = {}
    for position, (article, title) in enumerate(zip(data, titles)):
        if title not in selected:
            continue
        where = f"data[{position}]"
        paragraphs = list_field(source, article, "paragraphs", where)
        digits = max(2, len(str(len(paragraphs) - 1)))
        folder = folders[title][: -len(".md")]
        for index, paragraph in enumerate(paragraphs):
            paragraph_where = f"{where}.paragraphs[{index}]"
            check_object(source, paragraph, paragraph_where)
            page = f"{folder}/p{index:0{digits}d}.md"
            context = text_field(paragraph, "context", f"{source}: {paragraph_where}")
            writer.add_page(page, title.replace("_", " "), context, page_id=title)
            for number, question in enumerate(list_field(source, paragraph, "qas", paragraph_where)):
                question_where = f"{paragraph_where}.qas[{number}]"
                check_object(source, question, question_where)
                question_id = text_field(question, "id", f"{source}: {question_where}")
                if question_id in question_paths:
                    raise BenchmarkFileError(
                        f"{source}: {question_where}, field 'id': duplicate question id {question_id!r} "
                        f"(first at {question_paths[question_id]})"
                    )
                question_paths[question_id] = question_where
                impossible = question.get("is_impossible")
                if impossible is None:
                    raise BenchmarkFileError(f"{source}: {question_where}: missing field 'is_impossible'")
                if not isinstance(impossible, bool):
                    raise BenchmarkFileError(
                        f"{source}: {question_where}, field 'is_impossible': expected true or false, "
                        f"got {json.dumps(impossible)[:60]}"
                    )
                writer.add_question(
                    question_id,
                    text_field(question, "question", f"{source}: {question_where}"),
                    answerable=not impossible,
                    slice=UNANSWERABLE_SLICE if impossible else "answerable",
                    gold=() if impossible else (page,),
                    group=title,
                )
    if len(selected) == len(titles):
        return (f"{len(titles)} articles",)
    return (f"{len(selected)} of {len(titles)} articles: {', '.join(title for title in titles if title in selected)}",)


def read_json(source: Path) -> dict:
    """The JSON object in ``source``, with errors that name the file (and the line and column of a syntax error)."""
    if not source.is_file():
        raise BenchmarkFileError(f"{source}: SQuAD JSON file not found")
    try:
        with open(source, encoding="utf-8-sig") as stream:
            document = json.load(stream)
    except json.JSONDecodeError as error:
        raise BenchmarkFileError(
            f"{source}, line {error.lineno}, column {error.colno}: not valid JSON ({error.msg})"
        ) from error
    except UnicodeDecodeError as error:
        raise BenchmarkFileError(f"{source}: not UTF-8 text ({error.reason})") from error
    if not isinstance(document, dict):
        raise BenchmarkFileError(f"{source}: expected a JSON object with 'data', found {type(document).__name__}")
    return document


def check_object(source: Path, value, where: str) -> None:
    if not isinstance(value, dict):
        raise BenchmarkFileError(f"{source}: {where}: expected a JSON object, got {json.dumps(value)[:60]}")


def list_field(source: Path, record: dict, name: str, where: str) -> list:
    value = record.get(name)
    if not isinstance(value, list):
        found = (
            f"missing field {name!r}"
            if value is None
            else f"field {name!r}: expected a list, got {json.dumps(value)[:60]}"
        )
        raise BenchmarkFileError(f"{source}: {where}: {found}")
    return value


def article_titles(source: Path, data: list) -> list[str]:
    """Every article's title, in file order; titles must be unique."""
    titles, positions = [], {}
    for position, article in enumerate(data):
        where = f"data[{position}]"
        check_object(source, article, where)
        title = text_field(article, "title", f"{source}: {where}")
        if title in positions:
            raise BenchmarkFileError(
                f"{source}: {where}, field 'title': duplicate article title {title!r} "
                f"(first at data[{positions[title]}])"
            )
        positions[title] = position
        titles.append(title)
    return titles


def select_articles(source: Path, titles: list[str], articles) -> set[str]:
    """The titles ``articles`` names (all when None); unknown names are an error listing the known titles."""
    if articles is None:
        return set(titles)
    requested = [articles] if isinstance(articles, str) else list(articles)
    by_name = {title: title for title in titles}
    by_name.update({title.replace("_", " "): title for title in titles})
    selected, unknown = set(), []
    for item in requested:
        if not isinstance(item, str):
            raise BenchmarkFileError(f"articles: expected titles as strings, got {item!r}")
        names = [item] if item.strip() in by_name else item.split(",")
        for name in (name.strip() for name in names):
            if name in by_name:
                selected.add(by_name[name])
            elif name:
                unknown.append(name)
    if unknown:
        raise BenchmarkFileError(
            f"{source}: unknown article(s) {', '.join(repr(name) for name in unknown)}; "
            f"the file's articles are {', '.join(titles)}"
        )
    if not selected:
        raise BenchmarkFileError(f"{source}: no article selected; the file's articles are {', '.join(titles)}")
    return selected
