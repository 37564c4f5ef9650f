"""A calibrated ragcal gate inside the frameworks RAG systems are built with, on their own stores.

One module per framework, each an optional extra whose import error names it:

- :mod:`ragcal.integrations.langchain` (``pip install 'ragcal[langchain]'``);
- :mod:`ragcal.integrations.llamaindex` (``pip install 'ragcal[llamaindex]'``);
- :mod:`ragcal.integrations.haystack` (``pip install 'ragcal[haystack]'``).

:mod:`ragcal.integrations.common` holds what they share and imports no
framework: importing this package (or ``ragcal``) loads none of them.
"""

__all__ = ["common", "langchain", "llamaindex", "haystack"]
