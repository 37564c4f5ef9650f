import re
import warnings

import pytest
from conftest import write

from ragcal.corpus import CorpusError, IncludeWarning, load_corpus
from ragcal.datasets import FASTAPI_CORPUS, FASTAPI_EXCLUDE, RUST_BOOK_CORPUS, RUST_BOOK_EXCLUDE, default_exclude


def test_loads_relative_paths_titles_and_front_matter(tmp_path):
    write(tmp_path / "docs" / "index.md", "# Home { #home }\n\nWelcome.\n")
    write(
        tmp_path / "docs" / "policies" / "refunds.md",
        "---\ndoc_type: policy\nowner: finance\neffective_date: 2025-01-01\nregion: EU\naccess_level: internal\n---\n"
        "# Refunds\n\nText.\n",
    )
    documents = load_corpus(tmp_path / "docs")
    assert [document.path for document in documents] == ["index.md", "policies/refunds.md"]
    assert documents[0].title == "Home"
    refunds = documents[1]
    assert refunds.metadata["owner"] == "finance"
    assert refunds.metadata["access_level"] == "internal"
    assert refunds.metadata["region"] == "EU"
    assert str(refunds.metadata["effective_date"]) == "2025-01-01"
    assert refunds.text.startswith("# Refunds")  # front matter removed


def test_title_ignores_comment_lines_in_code(tmp_path):
    write(tmp_path / "docs" / "page.md", "```python\n# not a title\n```\n\n# Real title\n")
    assert load_corpus(tmp_path / "docs")[0].title == "Real title"


def test_missing_folder_is_named(tmp_path):
    with pytest.raises(CorpusError, match="does not exist"):
        load_corpus(tmp_path / "nope")


def test_empty_folder_is_named(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match=r"empty.*no Markdown"):
        load_corpus(tmp_path / "empty")


def test_folder_without_markdown_is_named(tmp_path):
    write(tmp_path / "docs" / "notes.txt", "plain text")
    with pytest.raises(CorpusError, match=r"docs: no Markdown"):
        load_corpus(tmp_path / "docs")


def test_undecodable_file_is_named(tmp_path):
    write(tmp_path / "docs" / "good.md", "# Good\n")
    (tmp_path / "docs" / "bad.md").write_bytes(b"# Bad \xff\xfe\x00 latin-1 \xe9\n")
    with pytest.raises(CorpusError, match=r"bad\.md: not UTF-8"):
        load_corpus(tmp_path / "docs")


def test_malformed_front_matter_is_named(tmp_path):
    write(tmp_path / "docs" / "page.md", "---\nowner: [unclosed\n---\n# Page\n")
    with pytest.raises(CorpusError, match=r"page\.md: invalid YAML front matter"):
        load_corpus(tmp_path / "docs")


def test_include_expansion_and_line_ranges(tmp_path):
    write(tmp_path / "src" / "app.py", "line1\nline2\nline3\nline4\n")
    write(
        tmp_path / "docs" / "deep" / "page.md",
        "# Page\n\n{* ../../src/app.py hl[1] *}\n\n{* ../../src/app.py ln[2:3] hl[2] *}\n\n{* ../../src/missing.py *}\n",
    )
    document = load_corpus(tmp_path / "docs")[0]
    assert "```python\nline1\nline2\nline3\nline4\n```" in document.text
    assert "```python\nline2\nline3\n```" in document.text
    assert "{* ../../src/missing.py *}" in document.text
    assert document.missing_includes == ("../../src/missing.py",)
    raw = load_corpus(tmp_path / "docs", expand_includes=False)[0]
    assert "{* ../../src/app.py hl[1] *}" in raw.text and "line1" not in raw.text


def test_bundled_corpus_includes_resolve():
    documents = load_corpus(FASTAPI_CORPUS)
    assert len(documents) == 155
    missing = {target for document in documents for target in document.missing_includes}
    # The one library file that the snapshot does not carry (see SOURCE.md).
    assert missing == {"../../fastapi/openapi/docs.py"}
    cookies = next(document for document in documents if document.path == "advanced/response-cookies.md")
    assert "response.set_cookie(" in cookies.text


# --------------------------------------------------------------------------- mdBook includes

LISTING = """// ANCHOR: all
// ANCHOR: head
use std::io;
// ANCHOR_END: head

fn main() {
    // ANCHOR: body
    let x = 1;
    // ANCHOR_END: body
    // ANCHOR: split
    let kept = 0;
    // ANCHOR_END: split
    let skipped = 0;
    // ANCHOR: split
    println!("{x}");
    // ANCHOR_END: split
}
// ANCHOR_END: all
// ANCHOR: open
trailing line
"""


def _mdbook_page(tmp_path, *directives):
    write(tmp_path / "book" / "listings" / "main.rs", LISTING)
    body = "\n\n".join(f"```rust\n{directive}\n```" for directive in directives)
    write(tmp_path / "book" / "src" / "page.md", f"# Page\n\n{body}\n")
    return load_corpus(tmp_path / "book" / "src")[0]


def _listing_lines(first, last=None):
    """Lines first..last (1-based, inclusive) of LISTING, marker lines removed."""
    lines = LISTING.splitlines()[first - 1 : last]
    return [line for line in lines if "ANCHOR" not in line]


@pytest.mark.parametrize(
    "suffix, expected",
    [
        ("", _listing_lines(1)),
        (":head", ["use std::io;"]),
        (":body", ["    let x = 1;"]),
        (":all", _listing_lines(2, 17)),  # nested anchors: their marker lines go too
        (":split", ["    let kept = 0;", '    println!("{x}");']),  # reopened: the lines between are skipped
        (":open", ["trailing line"]),  # never closed: runs to the end of the file
        (":3", ["use std::io;"]),
        (":6:8", _listing_lines(6, 8)),
        (":6:", _listing_lines(6)),
        ("::3", _listing_lines(1, 3)),
    ],
)
@pytest.mark.parametrize("kind", ["include", "rustdoc_include"])
def test_mdbook_include_selectors(tmp_path, kind, suffix, expected):
    document = _mdbook_page(tmp_path, f"{{{{#{kind} ../listings/main.rs{suffix}}}}}")
    assert document.text == "# Page\n\n```rust\n" + "\n".join(expected) + "\n```\n"
    assert document.missing_includes == () and document.rejected_includes == ()


def test_mdbook_unknown_anchor_and_missing_file_are_kept_as_text(tmp_path):
    document = _mdbook_page(
        tmp_path,
        "{{#include ../listings/main.rs:nope}}",
        "{{#rustdoc_include ../listings/gone.rs}}",
        "\\{{#include ../listings/main.rs}}",  # escaped: shown as written by mdBook, not expanded
    )
    assert "{{#include ../listings/main.rs:nope}}" in document.text
    assert "{{#rustdoc_include ../listings/gone.rs}}" in document.text
    assert "\\{{#include ../listings/main.rs}}" in document.text
    assert document.missing_includes == ("../listings/main.rs:nope", "../listings/gone.rs")
    raw = load_corpus(tmp_path / "book" / "src", expand_includes=False)[0]
    assert "use std::io" not in raw.text and raw.missing_includes == ()


def test_included_text_is_not_scanned_for_directives(tmp_path):
    write(tmp_path / "book" / "listings" / "doc.md", "{{#include secret.txt}}\n{* secret.txt *}\n")
    write(tmp_path / "book" / "listings" / "secret.txt", "SECRET\n")
    write(tmp_path / "book" / "src" / "page.md", "```md\n{{#include ../listings/doc.md}}\n```\n")
    document = load_corpus(tmp_path / "book" / "src")[0]
    assert "{{#include secret.txt}}\n{* secret.txt *}" in document.text and "SECRET" not in document.text


# --------------------------------------------------------------------------- <Listing> wrappers


def test_listing_wrappers_become_caption_text(tmp_path):
    write(
        tmp_path / "book" / "src" / "page.md",
        '''# Page

<Listing number="2-1" file-name="src/main.rs" caption="Code that gets a guess">

```rust
fn main() {}
```

</Listing>

<Listing file-name="src/lib.rs" number="3-2" caption=\'Sending `"hi"` through `Box<dyn Fn>`\'>

```rust
fn f() {}
```

</Listing>

<Listing file-name="Cargo.toml">

```toml
[package]
```

</Listing>

> <Listing file-name="src/main.rs">
>
> ```rust
> struct User;
> ```
>
> </Listing>
''',
    )
    text = load_corpus(tmp_path / "book" / "src")[0].text
    assert "Listing 2-1: Code that gets a guess\nFilename: src/main.rs\n\n```rust\nfn main() {}\n```" in text
    assert 'Listing 3-2: Sending `"hi"` through `Box<dyn Fn>`\nFilename: src/lib.rs\n' in text
    assert "\nFilename: Cargo.toml\n\n```toml" in text
    assert "> Filename: src/main.rs\n>\n> ```rust\n> struct User;\n> ```\n>\n" in text
    assert "Listing" not in text.replace("Listing 2-1:", "").replace("Listing 3-2:", "")


# --------------------------------------------------------------------------- include confinement

def _directive(syntax, target):
    """An include directive and the target as it is written in it.

    FastAPI paths are relative to the include root once their leading ``../``
    are dropped, mdBook paths to the page's folder (here ``root/docs``).
    """
    if syntax == "fastapi":
        written = target if target.startswith("/") else f"../../{target}"
        return f"{{* {written} *}}", written
    written = target if target.startswith("/") else f"../{target}"
    return f"```\n{{{{#include {written}}}}}\n```", written


def _confined_corpus(tmp_path, syntax, target):
    """root/docs/page.md includes ``target``; root/code/ok.txt is inside the root, tmp_path/outside.txt is not."""
    root = tmp_path / "root"
    write(root / "code" / "ok.txt", "INSIDE\n")
    write(tmp_path / "outside.txt", "OUTSIDE\n")
    (root / "code" / "link.txt").symlink_to(tmp_path / "outside.txt")
    directive, written = _directive(syntax, target)
    write(root / "docs" / "page.md", f"# Page\n\n{directive}\n")
    return root, directive, written


@pytest.mark.parametrize("syntax", ["fastapi", "mdbook"])
def test_include_inside_the_root_is_expanded(tmp_path, syntax):
    root, _, _ = _confined_corpus(tmp_path, syntax, "code/ok.txt")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        document = load_corpus(root / "docs")[0]
    assert "INSIDE" in document.text
    assert document.rejected_includes == () and document.missing_includes == ()


@pytest.mark.parametrize(
    "case, target, reason",
    [
        ("absolute", None, "absolute paths are not allowed"),
        ("climbing", "code/../../outside.txt", "outside the include root"),
        ("symlink", "code/link.txt", "outside the include root"),
        ("directory", "code", "is not a regular file"),
    ],
)
@pytest.mark.parametrize("syntax", ["fastapi", "mdbook"])
def test_include_outside_the_root_is_rejected_and_never_read(tmp_path, syntax, case, target, reason):
    target = target or str(tmp_path / "outside.txt")
    root, directive, written = _confined_corpus(tmp_path, syntax, target)
    with pytest.warns(IncludeWarning) as caught:
        document = load_corpus(root / "docs")[0]
    assert "OUTSIDE" not in document.text
    assert directive in document.text  # the directive stays as written
    assert document.rejected_includes == (written,) and document.missing_includes == ()
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "page.md" in message and repr(written) in message and reason in message


def test_fastapi_leading_dotdots_stay_under_the_root(tmp_path):
    """FastAPI drops leading ../ whatever their number, so ../../../outside.txt is looked for inside the root."""
    root, _, _ = _confined_corpus(tmp_path, "fastapi", "../outside.txt")
    document = load_corpus(root / "docs")[0]
    assert "OUTSIDE" not in document.text
    assert document.missing_includes == ("../../../outside.txt",) and document.rejected_includes == ()


def test_include_root_is_configurable(tmp_path):
    root, _, _ = _confined_corpus(tmp_path, "mdbook", "code/ok.txt")
    with pytest.warns(IncludeWarning, match="outside the include root"):
        document = load_corpus(root / "docs", include_root=root / "docs")[0]
    assert document.rejected_includes == ("../code/ok.txt",)


# --------------------------------------------------------------------------- the bundled Rust book


@pytest.fixture(scope="module")
def rust_book():
    with warnings.catch_warnings():
        warnings.simplefilter("error", IncludeWarning)
        return {document.path: document for document in load_corpus(RUST_BOOK_CORPUS)}


def _listing(*parts):
    return (RUST_BOOK_CORPUS.parent / "listings").joinpath(*parts).read_text().splitlines()


def test_rust_book_every_include_resolves(rust_book):
    raw = load_corpus(RUST_BOOK_CORPUS, expand_includes=False)
    directive = re.compile(r"\{\{#(?:rustdoc_)?include ")
    assert len(rust_book) == 112
    assert sum(len(directive.findall(document.text)) for document in raw) == 707
    assert not any(directive.search(document.text) for document in rust_book.values())
    assert all(not document.missing_includes and not document.rejected_includes for document in rust_book.values())


def test_rust_book_anchor_markers_and_listing_tags_are_gone(rust_book):
    for document in rust_book.values():
        assert not re.search(r"ANCHOR(_END)?:", document.text), document.path
        assert "<Listing" not in document.text and "</Listing>" not in document.text, document.path


def test_rust_book_guessing_game_anchors(rust_book):
    text = rust_book["ch02-00-guessing-game-tutorial.md"].text
    source = _listing("ch02-guessing-game-tutorial", "listing-02-01", "src", "main.rs")
    io = source[source.index("// ANCHOR: io") + 1 : source.index("// ANCHOR_END: io")]
    assert io == ["use std::io;"]
    assert "library, known as `std`:\n\n```rust,ignore\nuse std::io;\n```" in text
    # Listing 2-1 shows the whole program under its caption, the :all anchor without any marker line.
    program = "\n".join(line for line in source if "ANCHOR" not in line)
    assert (
        "Listing 2-1: Code that gets a guess from the user and prints it\nFilename: src/main.rs\n\n"
        f"```rust,ignore\n{program}\n```"
    ) in text
    # :8: keeps Cargo.toml from line 8 to the end.
    cargo = _listing("ch02-guessing-game-tutorial", "listing-02-02", "Cargo.toml")
    assert "```toml\n" + "\n".join(cargo[7:]) + "\n```" in text


def test_rust_book_line_ranges(rust_book):
    text = rust_book["ch05-02-example-structs.md"].text
    output = _listing("ch05-using-structs-to-structure-related-data", "listing-05-11", "output.txt")
    assert f"```text\n{output[2]}\n```" in text  # :3, line 3 alone
    debug = _listing("ch05-using-structs-to-structure-related-data", "output-only-01-debug", "output.txt")
    assert "```text\n" + "\n".join(debug[8:10]) + "\n```" in text  # :9:10
    macros = rust_book["ch20-05-macros.md"].text
    cargo = _listing("ch20-advanced-features", "listing-20-40", "hello_macro", "hello_macro_derive", "Cargo.toml")
    assert "\n".join(cargo[5:12]) in macros  # :6:12


def test_rust_book_reopened_anchor_skips_the_lines_between(rust_book):
    text = rust_book["ch15-05-interior-mutability.md"].text
    assert "        // --snip--\n\n        assert_eq!(mock_messenger.sent_messages.borrow().len(), 1);" in text
    assert "limit_tracker.set_value(80);" not in text.split("Listing 15-22")[1].split("Listing 15-23")[0]


def test_default_exclude_of_the_bundled_corpora(tmp_path):
    assert default_exclude(RUST_BOOK_CORPUS) == RUST_BOOK_EXCLUDE == ("SUMMARY.md",)
    assert default_exclude(FASTAPI_CORPUS) == FASTAPI_EXCLUDE
    assert default_exclude(tmp_path) == ()
    paths = [document.path for document in load_corpus(RUST_BOOK_CORPUS, exclude=default_exclude(RUST_BOOK_CORPUS))]
    assert len(paths) == 111 and "SUMMARY.md" not in paths
