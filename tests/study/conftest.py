import pytest

from ragcal.chunking import chunk_by_headings
from ragcal.corpus import load_corpus
from ragcal.datasets import FASTAPI_CORPUS, FASTAPI_EXCLUDE


@pytest.fixture(scope="module")
def documents():
    """The bundled FastAPI pages, as the labeled sets' checks read them."""
    return load_corpus(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE)


@pytest.fixture(scope="module")
def chunks(documents):
    return chunk_by_headings(documents)
