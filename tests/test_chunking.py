import re

import pytest
from conftest import write

from ragcal.chunking import HEADING_SEPARATOR, chunk_by_headings, chunk_fixed_size, chunk_size_summary, count_tokens
from ragcal.corpus import load_corpus
from ragcal.datasets import FASTAPI_CORPUS, RUST_BOOK_CORPUS, RUST_BOOK_EXCLUDE


@pytest.fixture(scope="module")
def fastapi_documents():
    return load_corpus(FASTAPI_CORPUS)


@pytest.fixture(scope="module")
def fastapi_chunks(fastapi_documents):
    return chunk_by_headings(fastapi_documents)


def _fenced_blocks(text):
    return [match.group(0) for match in re.finditer(r"^(`{3,})[^\n]*\n.*?^\1[ \t]*$", text, flags=re.M | re.S)]


def _admonitions(text):
    return [match.group(0) for match in re.finditer(r"^(/{3,}) ?\S[^\n]*\n.*?^\1[ \t]*$", text, flags=re.M | re.S)]


def _tables(text):
    return [match.group(0) for match in re.finditer(r"(?:^\|[^\n]*\n?)+", text, flags=re.M)]


@pytest.mark.parametrize(
    "page",
    [
        "advanced/response-cookies.md",
        "tutorial/security/get-current-user.md",
        "tutorial/query-params-str-validations.md",
        "deployment/concepts.md",
        "advanced/additional-responses.md",
        "tutorial/path-params.md",
    ],
)
def test_real_pages_keep_fences_admonitions_and_tables_whole(fastapi_documents, fastapi_chunks, page):
    document = next(document for document in fastapi_documents if document.path == page)
    bodies = [chunk.body for chunk in fastapi_chunks if chunk.doc_path == page]
    assert bodies
    blocks = _fenced_blocks(document.text) + _admonitions(document.text) + _tables(document.text)
    assert blocks, "the page should contain structure to test"
    for block in blocks:
        block = block.strip("\n")
        assert any(block in body for body in bodies), f"{page}: block split across chunks: {block[:80]!r}"


def test_every_chunk_has_balanced_fences(fastapi_chunks):
    for chunk in fastapi_chunks:
        openings = re.findall(r"^[ \t]*(`{3,}|~{3,})", chunk.body, flags=re.M)
        assert len(openings) % 2 == 0, chunk.chunk_id


def test_heading_path_of_a_nested_page(fastapi_chunks):
    chunks = [chunk for chunk in fastapi_chunks if chunk.doc_path == "tutorial/security/get-current-user.md"]
    assert chunks[0].heading_path == ("Tutorial - User Guide", "Security", "Get Current User")
    assert chunks[0].text.startswith("Tutorial - User Guide › Security › Get Current User\n\n")
    sub = next(chunk for chunk in chunks if chunk.heading_path[-1] == "Create a user model")
    assert sub.heading_path[:3] == ("Tutorial - User Guide", "Security", "Get Current User")


def test_anchors_are_stripped_and_ids_are_stable(fastapi_documents, fastapi_chunks):
    assert not any("{ #" in part for chunk in fastapi_chunks for part in chunk.heading_path)
    again = chunk_by_headings(fastapi_documents)
    assert [chunk.chunk_id for chunk in again] == [chunk.chunk_id for chunk in fastapi_chunks]
    ids = [chunk.chunk_id for chunk in fastapi_chunks]
    assert len(set(ids)) == len(ids)
    cookies = [chunk.chunk_id for chunk in fastapi_chunks if chunk.doc_path == "advanced/response-cookies.md"]
    assert cookies == [f"advanced/response-cookies.md#{n}" for n in range(len(cookies))]


def test_includes_are_searchable_code(fastapi_chunks):
    cookies = [chunk for chunk in fastapi_chunks if chunk.doc_path == "advanced/response-cookies.md"]
    assert any("```python" in chunk.body and "set_cookie(" in chunk.body for chunk in cookies)
    assert not any("{*" in chunk.body for chunk in cookies)


def test_long_section_splits_only_between_blocks_and_flags_oversized(tmp_path):
    paragraph = "word " * 40
    code = "```python\n" + "x = 1\n" * 200 + "```"
    write(
        tmp_path / "docs" / "page.md",
        f"# Page\n\n## Part\n\n{paragraph}\n\n{paragraph}\n\n{paragraph}\n\n{code}\n\n{paragraph}\n",
    )
    chunks = chunk_by_headings(load_corpus(tmp_path / "docs"), max_tokens=100)
    bodies = [chunk.body for chunk in chunks]
    assert bodies[0] == f"{paragraph.strip()}\n\n{paragraph.strip()}"
    assert bodies[1] == paragraph.strip()
    assert bodies[2] == code and chunks[2].oversized
    assert bodies[3] == paragraph.strip() and not chunks[3].oversized
    assert all(chunk.heading_path == ("Page", "Part") for chunk in chunks)


def test_lists_and_nested_admonitions_stay_whole(tmp_path):
    text = (
        "# Page\n\n"
        "* first item\n  continued line\n\n* second item\n\n    indented paragraph of item two\n\n"
        "//// tab | Outer\n\n/// tip\n\nInner tip.\n\n///\n\nAfter inner.\n\n////\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n"
    )
    write(tmp_path / "docs" / "page.md", text)
    chunks = chunk_by_headings(load_corpus(tmp_path / "docs"), max_tokens=5)
    bodies = [chunk.body for chunk in chunks]
    assert bodies[0] == "* first item\n  continued line\n\n* second item\n\n    indented paragraph of item two"
    assert bodies[1] == "//// tab | Outer\n\n/// tip\n\nInner tip.\n\n///\n\nAfter inner.\n\n////"
    assert bodies[2] == "| a | b |\n|---|---|\n| 1 | 2 |"
    assert all(chunk.oversized for chunk in chunks)


def test_heading_inside_code_is_not_a_heading(tmp_path):
    write(tmp_path / "docs" / "page.md", "# Page\n\n```bash\n# install\npip install x\n```\n\n## Next\n\nText.\n")
    chunks = chunk_by_headings(load_corpus(tmp_path / "docs"))
    assert [chunk.heading_path for chunk in chunks] == [("Page",), ("Page", "Next")]


def test_folder_titles_come_from_index_pages(tmp_path):
    write(tmp_path / "docs" / "guide" / "index.md", "# The Guide\n\nIntro.\n")
    write(tmp_path / "docs" / "guide" / "step.md", "# Step One\n\nDo it.\n")
    write(tmp_path / "docs" / "other" / "page.md", "# Page\n\nText.\n")
    chunks = {chunk.doc_path: chunk for chunk in chunk_by_headings(load_corpus(tmp_path / "docs"))}
    assert chunks["guide/index.md"].heading_path == ("The Guide",)
    assert chunks["guide/step.md"].heading_path == ("The Guide", "Step One")
    assert chunks["other/page.md"].heading_path == ("Other", "Page")


def test_fixed_size_windows(tmp_path):
    write(tmp_path / "docs" / "page.md", " ".join(f"w{n}" for n in range(25)))
    documents = load_corpus(tmp_path / "docs")
    chunks = chunk_fixed_size(documents, size=10)
    assert [chunk.n_tokens for chunk in chunks] == [10, 10, 5]
    assert chunks[1].body.split() == [f"w{n}" for n in range(10, 20)]
    assert chunks[0].heading_path == () and chunks[0].text == chunks[0].body
    overlapping = chunk_fixed_size(documents, size=10, overlap=5)
    assert [chunk.body.split()[0] for chunk in overlapping] == ["w0", "w5", "w10", "w15"]
    with pytest.raises(ValueError, match="'overlap' parameter"):
        chunk_fixed_size(documents, size=10, overlap=10)


def test_count_tokens_counts_words_and_punctuation():
    assert count_tokens("Hello, world!") == 4
    assert count_tokens("") == 0


def test_size_summary_of_bundled_corpus(fastapi_chunks):
    summary = chunk_size_summary(fastapi_chunks).iloc[0]
    assert summary["documents"] == 155
    assert summary["chunks"] == len(fastapi_chunks)
    assert summary["oversized"] == sum(chunk.oversized for chunk in fastapi_chunks)
    assert HEADING_SEPARATOR == " › "


# --------------------------------------------------------------------------- blockquote headings

QUOTED = """# Page

## Outer

Before the aside.

> ### Aside
>
> First paragraph of the aside.
>
> ```rust
> # fn main() {
> let x = 1;
> # }
> ```
>
> #### Deeper
>
> Deeper text.

After the aside.

> A plain quote
> on two lines.
"""


def test_blockquote_heading_starts_a_section_that_ends_with_the_quote(tmp_path):
    write(tmp_path / "docs" / "page.md", QUOTED)
    chunks = chunk_by_headings(load_corpus(tmp_path / "docs"))
    assert [(chunk.heading_path, chunk.body) for chunk in chunks] == [
        (("Page", "Outer"), "Before the aside."),
        (
            ("Page", "Outer", "Aside"),
            "> First paragraph of the aside.\n\n> ```rust\n> # fn main() {\n> let x = 1;\n> # }\n> ```",
        ),
        (("Page", "Outer", "Aside", "Deeper"), "> Deeper text."),
        (("Page", "Outer"), "After the aside.\n\n> A plain quote\n> on two lines."),
    ]


def test_quote_without_heading_stays_one_block(tmp_path):
    text = "# Page\n\n> line one\n>\n> line two\n> ```\n> # hidden\n> ```\n"
    write(tmp_path / "docs" / "page.md", text)
    chunks = chunk_by_headings(load_corpus(tmp_path / "docs"), max_tokens=3)
    assert [chunk.body for chunk in chunks] == ["> line one\n>\n> line two\n> ```\n> # hidden\n> ```"]
    assert chunks[0].heading_path == ("Page",)


# --------------------------------------------------------------------------- the bundled Rust book


@pytest.fixture(scope="module")
def rust_book_chunks():
    return chunk_by_headings(load_corpus(RUST_BOOK_CORPUS, exclude=RUST_BOOK_EXCLUDE))


def test_rust_book_stack_and_heap_aside(rust_book_chunks):
    page = [chunk for chunk in rust_book_chunks if chunk.doc_path == "ch04-01-what-is-ownership.md"]
    aside = [chunk for chunk in page if chunk.heading_path[-1] == "The Stack and the Heap"]
    assert aside and aside[0].heading_path[-2:] == ("What Is Ownership?", "The Stack and the Heap")
    assert "Many programming languages don’t require you to think about the stack" in aside[0].body
    assert any("last in, first out" in chunk.body for chunk in aside)
    assert not any(chunk.oversized for chunk in aside)  # the aside is split between its paragraphs
    after = page[page.index(aside[-1]) + 1]
    assert after.heading_path[-1] == "Ownership Rules"


def test_rust_book_text_after_an_aside_returns_to_its_section(rust_book_chunks):
    page_path = "ch12-03-improving-error-handling-and-modularity.md"
    page = [chunk for chunk in rust_book_chunks if chunk.doc_path == page_path]
    after = next(chunk for chunk in page if chunk.body.startswith("We’ve updated `main` so that it places"))
    assert after.heading_path[-1] == "Grouping Configuration Values"


def test_rust_book_hidden_rustdoc_lines_in_a_quoted_fence_are_not_headings(rust_book_chunks):
    titles = {title for chunk in rust_book_chunks for title in chunk.heading_path}
    assert "Where’s the `->` Operator?" in titles
    assert not any(title.startswith(("#[derive", "struct Point", "let p1")) for title in titles)
    for chunk in rust_book_chunks:
        openings = re.findall(r"^[ \t]*(`{3,}|~{3,})", chunk.body, flags=re.M)
        assert len(openings) % 2 == 0, chunk.chunk_id


def test_rust_book_listing_captions_are_indexed(rust_book_chunks):
    assert not any("<Listing" in chunk.text or "ANCHOR" in chunk.text for chunk in rust_book_chunks)
    captions = [chunk for chunk in rust_book_chunks if "Listing 2-1: Code that gets a guess" in chunk.text]
    assert len(captions) == 1 and "use std::io;" in captions[0].body  # the caption travels with its code
