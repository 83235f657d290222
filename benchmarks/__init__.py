"""Benchmarks for advisorchain: overhead against peer frameworks, parallel tools, streaming,
concurrency. Run them with `python -m benchmarks.run` (see benchmarks/README.md)."""
