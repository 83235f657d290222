#!/usr/bin/env bash
# One command on a fresh machine: create .venv-bench, install advisorchain with the
# `bench` extra (LangChain, LangGraph, PydanticAI, OpenAI Agents SDK), run the benchmarks.
# Arguments go to `python -m benchmarks.run` (e.g. --quick, --only overhead).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv-bench/bin/python ]; then
    python3 -m venv .venv-bench
    .venv-bench/bin/python -m pip install -q --upgrade pip
fi
.venv-bench/bin/pip install -q -e '.[bench]'
exec .venv-bench/bin/python -m benchmarks.run "$@"
