# `make demo`: set up everything on a fresh machine and run the order assistant on a
# local model. The first run compiles llama.cpp (about 5-8 minutes on 2 cores).
PYTHON ?= python3
VENV ?= .venv
ARGS ?=
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF
export CMAKE_BUILD_PARALLEL_LEVEL ?= 2

.PHONY: demo test

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip

$(VENV)/.local-installed: pyproject.toml | $(VENV)/bin/python
	$(VENV)/bin/pip install -e '.[local]'
	touch $@

$(VENV)/.dev-installed: pyproject.toml | $(VENV)/bin/python
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $@

demo: $(VENV)/.local-installed
	$(VENV)/bin/advisorchain prepare-model
	$(VENV)/bin/advisorchain demo $(ARGS)

test: $(VENV)/.dev-installed
	$(VENV)/bin/pytest
