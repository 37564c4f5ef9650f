"""A calibrated ragcal gate inside the frameworks RAG systems are built with, on their own stores.

One module per framework, each an optional extra whose import error names it:

- :mod:`ragcal.integrations.langchain` (``pip install 'ragcal[langchain]'``);
- :mod:`ragcal.integrations.llamaindex` (``pip install 'ragcal[llamaindex]'``);
- :mod:`ragcal.integrations.haystack` (``pip install 'ragcal[haystack]'``).

:mod:`ragcal.integrations.common` holds what they share and imports no
framework: importing this package (or ``ragcal``) loads none of them.
:mod:`ragcal.integrations.contents` is how a gate recognises its store's
contents, and what a refusal may name of the documents a store returned.
"""

__all__ = ["common", "contents", "langchain", "llamaindex", "haystack"]
