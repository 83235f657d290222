# The two README commands, and the checks CI runs.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
TEST_EXTRAS := dev,postgres,mcp

.PHONY: setup test check

setup:
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[$(TEST_EXTRAS)]'

# The whole test suite, with a throwaway PostgreSQL server for the approval store's tests.
test: setup
	bash .ci/with-postgres $(VENV)/bin/pytest tests

check: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	bash .ci/typecheck
