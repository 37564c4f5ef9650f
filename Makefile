# Two entry points; each creates .venv on first use.
#   make reproduce   rebuild the index and results/ for the bundled FastAPI docs
#   make test        run the test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: reproduce test benchmark clean-venv

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# CPU build of torch first, so nothing below pulls in a multi-GB CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

reproduce: $(STAMP)
	$(BIN)/ragcal reproduce

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder

benchmark: $(STAMP)
	$(BIN)/python benchmarks/bench_index.py

clean-venv:
	rm -rf $(VENV)
