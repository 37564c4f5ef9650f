import pytest

from ragcal.corpus import CorpusError, load_corpus
from ragcal.datasets import FASTAPI_CORPUS

from conftest import write


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
