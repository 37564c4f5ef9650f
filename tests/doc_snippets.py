"""The code blocks of the README and of the documentation pages (docs/*.md), for the tests that run them.

A ```python block either runs as it stands or needs the reader's own things (a name defined elsewhere, a path or
URL of theirs): :func:`needs_the_readers_things` says which, and then only its imports are run; a block marked
:data:`RUNS` runs as written. A ```bash block is a list of commands; one marked :data:`RUNS` runs in an empty
folder, the others have their subcommands and options checked against ``ragcal <command> --help``.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
#: The marker, on the line before a fence, of a block that runs as written in an empty folder (it may write the files
#: it reads, which the path check of :func:`needs_the_readers_things` cannot tell).
RUNS = "<!-- runs as written -->"
#: Every page whose code blocks a reader may paste: the README, then the documentation site's pages.
DOC_PAGES = (REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").glob("*.md")))


@dataclass(frozen=True)
class Snippet:
    """One fenced code block: the page, the line its fence opens on, its language and its text."""

    page: Path
    line: int
    language: str
    code: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPOSITORY)}:{self.line}"

    @property
    def marked_to_run(self) -> bool:
        """True when the line before the fence is :data:`RUNS`: the block runs as written in an empty folder."""
        lines = self.page.read_text(encoding="utf-8").splitlines()
        return self.line >= 2 and lines[self.line - 2].strip() == RUNS


def snippets(language: str, pages=DOC_PAGES) -> list[Snippet]:
    """The ```<language> blocks of ``pages``, in order."""
    found = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(rf"^```{language}\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL):
            found.append(Snippet(page, text.count("\n", 0, match.start()) + 1, language, match.group(1)))
    return found


def needs_the_readers_things(code: str) -> list[str]:
    """Why a Python snippet cannot run as it stands: its free names and path-like string literals (empty: it can)."""
    tree = ast.parse(code)
    bound, loaded = set(dir(builtins)), set()
    literals = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and re.search(r"/|\.(csv|json|md)$", node.value):
            literals.append(node.value)
    return sorted(loaded - bound) + literals


def imports_of(code: str) -> str:
    """Only the import statements of a snippet, as code."""
    tree = ast.parse(code)
    return "\n".join(ast.unparse(node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom)))


def imports_script(blocks) -> str:
    """Python that runs each ``(where, code)`` block on its own, in one process, and prints the failures as JSON.

    For the imports of many snippets (:func:`imports_of`): a fresh interpreter per snippet costs seconds each.
    """
    return (
        "import json, traceback\nfailed = []\n"
        f"for where, block in {list(blocks)!r}:\n"
        "    try:\n        exec(compile(block, where, 'exec'), {})\n"
        "    except Exception:\n        failed.append((where, traceback.format_exc(limit=1)))\n"
        "print(json.dumps(failed))\n"
    )


def imports_a_framework(code: str) -> bool:
    """True when the snippet imports LangChain, LlamaIndex or Haystack (those need the framework extras)."""
    return bool(re.search(r"^\s*(from|import)\s+(langchain\w*|llama_index|haystack|ragcal\.integrations)\b",
                          code, flags=re.MULTILINE))  # fmt: skip


#: The framework of each quick start, as its snippet imports it.
FRAMEWORKS = ("langchain", "llama_index", "haystack")


def quick_start(framework: str) -> Snippet:
    """The documentation's quick start for ``framework``: the block marked to run that imports it, stores the FastAPI
    docs with ragcal's own MiniLM vectors (``Ragcal...Embedd...``) and saves a gate."""
    found = [
        snippet
        for snippet in snippets("python")
        if snippet.marked_to_run
        and f"from {framework}" in snippet.code
        and "save_gate" in snippet.code
        and re.search(r"\bRagcal\w*Embedd", snippet.code)
    ]
    if len(found) != 1:
        raise LookupError(f"{len(found)} quick starts of {framework} marked {RUNS!r}, expected 1: {found}")
    return found[0]


def run_quick_start(framework: str, folder: Path) -> tuple[dict, str]:
    """Run :func:`quick_start` as written in the empty ``folder``: its names afterwards and what it printed.

    In this process, in a namespace of its own (every name it uses must be defined in it, as in a fresh
    interpreter): a test of the integration then checks what the quick start built, so that the docs' example and
    the integration's test on the whole FastAPI docs are one run, not two of a minute each.
    """
    snippet = quick_start(framework)
    namespace = {"__name__": "__main__"}
    printed = io.StringIO()
    with contextlib.chdir(folder), contextlib.redirect_stdout(printed):
        exec(compile(snippet.code, snippet.where, "exec"), namespace)
    return namespace, printed.getvalue()


def shell_commands(code: str) -> list[str]:
    """The commands of a ```bash block: comments dropped, continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", code)
    commands = []
    for line in joined.splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        if line and not line.startswith("#"):
            commands.append(line)
    return commands
