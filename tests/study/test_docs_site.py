"""The documentation site: `make docs` builds it with warnings as errors, and it opens in a real browser.

The site is built here exactly as `make docs` builds it (into a temporary folder), so `make test`, and therefore CI,
builds it too. Then every page's internal links, anchors and images are resolved on disk, and headless Chromium
opens the landing page, a user-guide page, an API page, an executed notebook and a results page over HTTP and
checks that their figures load.
"""

import functools
import http.server
import re
import subprocess
import sys
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from test_browser import browser, free_port, selenium_webdriver  # noqa: F401  (fixtures)

REPOSITORY = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def make_docs_command() -> list[str]:
    """The sphinx-build line of the Makefile's `docs` target, with this environment's sphinx-build."""
    line = next(line.strip() for line in (REPOSITORY / "Makefile").read_text().splitlines() if "sphinx-build" in line)
    words = line.replace("$(BIN)/", "").split()
    return [str(Path(sys.executable).parent / words[0]), *words[1:-1]]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site") / "html"
    command = [*make_docs_command(), str(out)]
    result = subprocess.run(command, cwd=REPOSITORY, capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    return out


class Links(HTMLParser):
    """The ids a page defines, and the targets of its links and images."""

    def __init__(self):
        super().__init__()
        self.ids, self.links, self.images = set(), [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        if tag == "img" and attrs.get("src"):
            self.images.append(attrs["src"])


@functools.cache
def parsed(path: Path) -> Links:
    links = Links()
    links.feed(path.read_text(encoding="utf-8"))
    return links


def internal(target: str) -> bool:
    parts = urlsplit(target)
    return not parts.scheme and not parts.netloc and not target.startswith(("mailto:", "data:", "javascript:"))


def test_the_site_has_every_section_and_an_api_page_per_package(site):
    pages = {path.relative_to(site).as_posix() for path in site.rglob("*.html")}
    for page in ("index.html", "docs/index.html", "docs/getting-started.html", "docs/user-guide.html",
                 "docs/api/index.html", "docs/api/gates.html", "docs/results.html", "docs/notebooks.html",
                 "notebooks/01_score_distributions.html", "notebooks/11_judge.html",
                 "results/fastapi/summary.html", "results/judge/summary.html"):  # fmt: skip
        assert page in pages, page
    # The API reference is generated from the docstrings: the gates page documents the classes and their methods.
    gates = (site / "docs/api/gates.html").read_text(encoding="utf-8")
    for name in ("ThresholdGate", "FloorGapGate", "load_gate_index", "fit_gate"):
        assert f'id="ragcal.gates.{name}"' in gates, name
    assert "Parameters" in gates and "Returns" in gates


def test_every_public_name_is_documented_in_the_api_reference(site):
    """Each class and function in the ``__all__`` of ``ragcal``, its packages and integrations has an entry."""
    import importlib
    import importlib.util
    import inspect

    import ragcal

    documented = set()
    for page in (site / "docs/api").glob("*.html"):
        documented |= {identifier for identifier in parsed(page).ids if identifier.startswith("ragcal.")}
    assert documented
    names = {name.rsplit(".", 1)[-1] for name in documented}
    packages = ["ragcal", *(f"ragcal.{path.parent.name}" for path in (REPOSITORY / "ragcal").glob("*/__init__.py")
                            if not path.parent.name.startswith("_") and path.parent.name != "study")]  # fmt: skip
    modules = [*packages, *(f"ragcal.integrations.{name}" for name in ("common", "contents", "langchain",
                                                                       "llamaindex", "haystack"))]  # fmt: skip
    missing = []
    for module_name in modules:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            if importlib.util.find_spec(f"{module_name}.{name}") if hasattr(module, "__path__") else False:
                continue  # a package's submodule: its names are checked as its own
            if not (inspect.isclass(getattr(module, name)) or inspect.isfunction(getattr(module, name))):
                continue  # constants are documented where a `#:` comment says what they hold
            if name not in names:
                missing.append(f"{module_name}.{name}")
    assert missing == [], f"public names with no entry in the API reference: {missing}"


def test_every_internal_link_anchor_and_image_resolves(site):
    broken = []
    for page in sorted(site.rglob("*.html")):
        found = parsed(page)
        for target in found.links + found.images:
            if not internal(target):
                continue
            parts = urlsplit(target)
            path = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if path.is_dir():
                path = path / "index.html"
            if not path.is_file():
                broken.append(f"{page.relative_to(site)}: {target} (no file)")
            elif parts.fragment and path.suffix == ".html" and unquote(parts.fragment) not in parsed(path).ids:
                broken.append(f"{page.relative_to(site)}: {target} (no anchor)")
    assert broken == []


def test_every_notebook_page_shows_its_figures(site):
    for notebook in sorted((REPOSITORY / "notebooks").glob("*.ipynb")):
        saved = len(re.findall(r'"image/png"', notebook.read_text(encoding="utf-8")))
        page = site / "notebooks" / f"{notebook.stem}.html"
        assert len(parsed(page).images) >= saved > 0 or saved == 0, notebook.name


@pytest.fixture
def served(site):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def loaded_images(driver) -> tuple[int, int]:
    """(images on the page, images the browser decoded: complete with a width)."""
    return driver.execute_script(
        "const images = Array.from(document.images);"
        "return [images.length, images.filter(image => image.complete && image.naturalWidth > 0).length];"
    )


def arrived(driver, path: str, timeout: float = 30) -> None:
    """Wait until the browser shows ``path``, fully loaded (a redirect or a click navigates after returning)."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout).until(
        lambda current: current.current_url.endswith(path)
        and current.execute_script("return document.readyState") == "complete",
        message=f"never arrived at {path} (at {driver.current_url})",
    )


def test_the_site_opens_in_a_browser_with_its_figures(selenium_webdriver, browser, served):  # noqa: F811
    from selenium.webdriver.common.by import By

    browser.get(served + "/")  # the root sends the browser to docs/index.html (a meta refresh: it navigates again)
    arrived(browser, "/docs/index.html")
    assert "ragcal" in browser.title
    total, decoded = loaded_images(browser)
    assert total >= 1 and decoded == total
    # Follow the landing page's own link to Getting started, as a reader would.
    browser.find_element(By.LINK_TEXT, "Getting started").click()
    arrived(browser, "/docs/getting-started.html")
    assert "make reproduce" in browser.find_element(By.TAG_NAME, "main").text
    for path, text, min_images in (
        ("/docs/api/gates.html", "ThresholdGate", 0),
        ("/notebooks/01_score_distributions.html", "score", 2),
        ("/notebooks/11_judge.html", "judge", 3),
        ("/results/fastapi/summary.html", "dense_top1", 0),
    ):
        browser.get(served + path)
        arrived(browser, path)
        main = browser.find_element(By.TAG_NAME, "main").text
        assert text in main, path
        total, decoded = loaded_images(browser)
        assert total >= min_images and decoded == total, (path, total, decoded)
