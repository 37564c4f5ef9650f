"""Every executed notebook ends with a conclusion, and every number the conclusion states is one the notebook printed.

A conclusion written by hand can drift from the outputs above it when the study changes; this check ties the two:
each number token of the "## Conclusion" cell (``0.986``, ``79%``, ``1,000``) must occur in the text of the
notebook's own outputs (plain text, Markdown, HTML tables and streams), not only in its prose.
"""

import json
import re

import pytest

from ragcal.study.notebooks import NOTEBOOKS_DIR

NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
NUMBER = re.compile(r"\d[\d,.]*%?")


def cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def outputs_text(path) -> str:
    parts = []
    for cell in cells(path):
        for output in cell.get("outputs", []):
            if "text" in output:
                parts.append(text(output["text"]))
            for kind in ("text/plain", "text/markdown", "text/html"):
                if kind in output.get("data", {}):
                    parts.append(text(output["data"][kind]))
    return "\n".join(parts)


def conclusion(path) -> tuple[int, str]:
    """(position from the end, text) of the markdown cell that opens with '## Conclusion'."""
    found = [
        (len(cells(path)) - position, text(cell["source"]))
        for position, cell in enumerate(cells(path))
        if cell["cell_type"] == "markdown" and text(cell["source"]).lstrip().startswith("## Conclusion")
    ]
    assert found, f"{path.name} has no '## Conclusion' cell"
    return found[-1]


def numbers(prose: str) -> list[str]:
    prose = re.sub(r"`[^`]*`", "", prose)  # code (`keep@0.95`, `dense_top1`) names things; it states no result
    return [token.rstrip(".,") for token in NUMBER.findall(prose)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_the_notebook_ends_with_a_conclusion_whose_numbers_it_printed(path):
    from_end, prose = conclusion(path)
    assert from_end <= 4, f"{path.name}: the conclusion is not among the last cells"
    printed = outputs_text(path)
    missing = [token for token in numbers(prose) if token not in printed]
    assert missing == [], f"{path.name}: the conclusion states numbers no output shows"


def test_the_check_catches_a_number_no_output_shows():
    assert numbers("AUC 0.986 [0.973, 0.996]; 79% of `keep@0.95`; 1,000 splits.") == [
        "0.986", "0.973", "0.996", "79%", "1,000"
    ]
