"""Tool search latency and build time: keyword and hybrid, 1,287 and 10,000 tools.

Run: `nice -n 10 .venv/bin/python benchmarks/tool_search/latency.py [--queries N]
[--baseline TREE] [--keyword-only] [--fresh N] [--large]`. Writes
`benchmarks/results/tool_search_latency.json`.

`--baseline TREE` also times the indexes of another checkout of the package (e.g.
`git worktree add /tmp/base <commit>`), loaded as `advisorchain_base`, in the same run:
keyword builds alternate between the two, each query is searched by both in turn (keyword
and hybrid), so both see the same load, and each tree's embedding build runs once.
`--keyword-only` skips the embedding rows (minutes of MiniLM).

- Query latency: `await index.search(query, 5)` for N BFCL queries (p50/p99), on the
  pooled BFCL catalog (1,287 tools) and on 10,000 tools (the pool renamed `name__2`, ...);
  keyword rows once on a new index and again (`_repeat`, the terms' impacts computed).
  Hybrid is warm, each tree's default (`hybrid_index` where it has one): the catalog is
  embedded and the model loaded; each query is embedded (MiniLM, `--query-threads`
  onnxruntime threads, default 2) as that tree's `minilm_index()` would: from its first
  `QUERY_TOKENS` tokens, here by the integer graph where the tree has one (`float_`
  rows: this tree with the packaged float graph). The 10,000-tool
  embedding matrix reuses each original tool's vector for its renamed copies (embedding
  8,713 more texts only to time a matrix product would take minutes here); the query path
  is the real one.
- Wall-clock and CPU time (`time.process_time`, all threads) are both given: on a
  shared machine the wall clock mostly measures the other processes.
- Build: keyword over 10,000 distinct tools, the OpenAPI directory's operations
  (`openapi_catalog.load(10_000)`: a seeded sample of 79,706 real, distinct definitions;
  fetched with npm on first use, the rows skipped with the reason when it cannot be),
  median of 3 in this process (warm), and with `--large` once over 50,000 of them; also
  `build_10000_replicated`, the BFCL pool renamed to 10,000 (each description and schema
  7.8 times: not a real catalog, kept for comparison with earlier runs). With `--fresh N`,
  also the first build of the 10,000 OpenAPI tools in N new processes per tree
  (alternating), each timing its imports, the catalog's load and its first build, then a
  second build (medians); embedding
  of the pooled catalog's first 1,300 definitions cold (no cache, a fresh model
  session) and warm (a new `EmbeddingCache` object over the file the cold build wrote,
  as after a restart).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import bfcl
from run import percentile, renamed

from advisorchain import ToolDefinition
from advisorchain.advisors.tool_search import (
    KeywordIndex,
)
from advisorchain.advisors.tool_search.embedding import MINILM
from advisorchain.advisors.tool_search.index import document_text

if TYPE_CHECKING:  # a sibling module when this script runs; typed through the package
    from advisorchain.benchmarks.tool_search import openapi_catalog
else:
    import openapi_catalog

RESULTS = Path(__file__).resolve().parent.parent / "results" / "tool_search_latency.json"


def load_tree(tree: Path) -> Any:
    """The package of another checkout, imported as `advisorchain_base`."""
    spec = importlib.util.spec_from_file_location(
        "advisorchain_base", tree / "__init__.py", submodule_search_locations=[str(tree)]
    )
    if spec is None or spec.loader is None:
        raise SystemExit(f"no package at {tree}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["advisorchain_base"] = module
    spec.loader.exec_module(module)
    return importlib.import_module("advisorchain_base.advisors.tool_search")


def stats(latencies: list[float], cpu: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(latencies, 50) * 1000, 2),
        "p99_ms": round(percentile(latencies, 99) * 1000, 2),
        "cpu_p50_ms": round(percentile(cpu, 50) * 1000, 2),
        "cpu_p99_ms": round(percentile(cpu, 99) * 1000, 2),
    }


async def interleaved(built: dict[str, Any], queries: Sequence[str]) -> dict[str, dict[str, float]]:
    """`stats` of `search(query, 5)` per index, each query searched by every index in turn."""
    times: dict[str, tuple[list[float], list[float]]] = {label: ([], []) for label in built}
    for q in queries:
        for label, index in built.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            await index.search(q, 5)
            times[label][0].append(time.perf_counter() - start)
            times[label][1].append(time.process_time() - start_cpu)
    return {label: stats(wall, cpu) for label, (wall, cpu) in times.items()}


def build_catalogs(pool: list[ToolDefinition], large: bool) -> dict[str, list[ToolDefinition]]:
    """The catalogs keyword builds are timed on: distinct OpenAPI operations (10,000, and
    50,000 with `large`) and the BFCL pool renamed to 10,000 (each definition 7.8 times)."""
    catalogs: dict[str, list[ToolDefinition]] = {}
    try:
        catalogs["10000"] = openapi_catalog.load(10_000)
        if large:
            catalogs["50000"] = openapi_catalog.load(50_000)
    except openapi_catalog.CatalogMissing as exc:
        print(f"openapi build rows skipped: {exc}", file=sys.stderr)
    catalogs["10000_replicated"] = renamed(pool, 10_000)
    return catalogs


async def keyword_rows(
    kinds: dict[str, Any], pool: list[ToolDefinition], queries: Sequence[str], large: bool
) -> dict[str, Any]:
    """Build and query times of each kind of keyword index, interleaved."""
    big = renamed(pool, 10_000)
    out: dict[str, Any] = {}
    for size, definitions in build_catalogs(pool, large).items():
        walls: dict[str, list[float]] = {label: [] for label in kinds}
        cpus: dict[str, list[float]] = {label: [] for label in kinds}
        for _ in range(3 if size != "50000" else 1):
            for label, kind in kinds.items():
                start, start_cpu = time.perf_counter(), time.process_time()
                await kind().build(definitions)
                walls[label].append(time.perf_counter() - start)
                cpus[label].append(time.process_time() - start_cpu)
        for label in kinds:
            out[f"{label}_build_{size}_s"] = round(statistics.median(walls[label]), 3)
            out[f"{label}_build_{size}_cpu_s"] = round(statistics.median(cpus[label]), 3)
        print({k: v for k, v in out.items() if f"_build_{size}_" in k}, flush=True)
    for size, catalog in (("1287", pool), ("10000", big)):
        built = {label: await kind().build(catalog) for label, kind in kinds.items()}
        # First pass: each query on a new index (its terms' first lookups); then again.
        for suffix in ("", "_repeat"):
            for label, row in (await interleaved(built, queries)).items():
                out[f"{label}_{size}{suffix}"] = row
    return out


FRESH = """
import json, sys, time
start, cpu = time.perf_counter(), time.process_time()
sys.path.insert(0, {here!r})
import openapi_catalog
tree = {tree!r}
if tree:  # as load_tree does, without importing this checkout's package
    import importlib, importlib.util
    spec = importlib.util.spec_from_file_location(
        "advisorchain_base", tree + "/__init__.py", submodule_search_locations=[tree]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["advisorchain_base"] = module
    spec.loader.exec_module(module)
    KeywordIndex = importlib.import_module("advisorchain_base.advisors.tool_search").KeywordIndex
else:
    from advisorchain.advisors.tool_search import KeywordIndex
imported, imported_cpu = time.perf_counter(), time.process_time()
big = openapi_catalog.load(10_000)
out = {{"import_s": imported - start, "import_cpu_s": imported_cpu - cpu}}
for label in ("first", "second"):
    start, cpu = time.perf_counter(), time.process_time()
    KeywordIndex().build_sync(big)
    out[label + "_s"] = time.perf_counter() - start
    out[label + "_cpu_s"] = time.process_time() - cpu
print(json.dumps(out))
"""


def fresh_builds(trees: dict[str, str], runs: int) -> dict[str, Any]:
    """Keyword builds of 10,000 tools in new processes, the trees alternating."""
    here = str(Path(__file__).resolve().parent)
    samples: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
    for _ in range(runs):
        for label, tree in trees.items():
            code = FRESH.format(here=here, tree=tree)
            done = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            )
            samples[label].append(json.loads(done.stdout.strip().splitlines()[-1]))
    out: dict[str, Any] = {}
    for label, rows in samples.items():
        for key in rows[0]:
            out[f"{label}_fresh_{key}"] = round(statistics.median(r[key] for r in rows), 3)
    return out


async def main(args: argparse.Namespace) -> dict[str, Any]:
    pool, all_queries = bfcl.load()
    queries = [q.text for q in random.Random(3).sample(all_queries, args.queries)]
    big = renamed(pool, 10_000)
    out: dict[str, Any] = {"queries": len(queries), "load_average_at_start": os.getloadavg()[0]}

    kinds: dict[str, Any] = {"keyword": KeywordIndex}
    if args.baseline:
        kinds["baseline_keyword"] = args.baseline.KeywordIndex
    out.update(await keyword_rows(kinds, pool, queries, args.large))
    if args.fresh and "keyword_build_10000_s" in out:
        trees = {"keyword": ""}
        if args.baseline:
            trees["baseline_keyword"] = str(args.baseline_tree)
        out.update(fresh_builds(trees, args.fresh))
    print(json.dumps(out, indent=2))
    if args.keyword_only:
        out["load_average_at_end"] = os.getloadavg()[0]
        return out

    packages: dict[str, Any] = {"": sys.modules["advisorchain.advisors.tool_search"]}
    if args.baseline:
        packages["baseline_"] = args.baseline
    sample = pool[:1300]
    vectors: dict[str, dict[str, list[float]]] = {}
    embedders: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        for prefix, tree in packages.items():
            embed = embedders[prefix] = tree.minilm_embedder(threads=2)
            path = Path(folder) / f"{prefix}e.sqlite3"
            if args.warm_only:  # the benchmarks' own cache stands in for the cold build
                path = bfcl.DATA / "embeddings.sqlite3"
            start, cpu = time.perf_counter(), time.process_time()
            calls = {"batch_size": 256} if prefix == "" else {}  # as minilm_index()
            cold = await tree.EmbeddingIndex(
                embed, cache=tree.EmbeddingCache(path, model=MINILM), **calls
            ).build(sample)
            cold_row = f"{prefix}embedding_build_1287_cold"
            out[f"{cold_row}_s"] = round(time.perf_counter() - start, 2)
            out[f"{cold_row}_cpu_s"] = round(time.process_time() - cpu, 2)
            if args.warm_only:
                out[f"{cold_row}_s"] = out[f"{cold_row}_cpu_s"] = "skipped (--warm-only)"
            start = time.perf_counter()
            await tree.EmbeddingIndex(embed, cache=tree.EmbeddingCache(path, model=MINILM)).build(
                sample
            )
            out[f"{prefix}embedding_build_1287_warm_s"] = round(time.perf_counter() - start, 3)
            print(prefix, "embedding build cold", out[f"{cold_row}_s"], flush=True)
            vectors[prefix] = dict(
                zip((document_text(d) for d in sample), cold._vectors, strict=True)
            )

    base: dict[str, ToolDefinition] = {d.name: d for d in pool}

    def original(d: ToolDefinition) -> ToolDefinition:
        return base[d.name.split("__")[0]]

    text_of_copy = {document_text(d): document_text(original(d)) for d in big}

    def reusing(prefix: str) -> Any:
        async def reuse(texts: Sequence[str]) -> Sequence[Sequence[float]]:
            if all(t in text_of_copy for t in texts) and len(texts) > 1:
                return [vectors[prefix][text_of_copy[t]] for t in texts]
            vectors_of: Sequence[Sequence[float]] = await embedders[prefix](texts)
            return vectors_of  # a query, in the older tree

        return reuse

    def hybrid_of(prefix: str, tree: Any) -> Any:
        """Each tree's default: its fusion, its query cut, and here the integer graph
        (`float_`: this tree with the packaged float graph for queries)."""
        module = importlib.import_module(f"{tree.__name__}.embedding")
        options: dict[str, Any] = {"threads": args.query_threads}
        if getattr(module, "QUERY_TOKENS", None):
            options["max_length"] = module.QUERY_TOKENS
        if prefix != "float_" and "integer" in inspect.signature(tree.minilm_embedder).parameters:
            options["integer"] = True  # as minilm_index() does (in a tree that has it)
        index = tree.EmbeddingIndex(
            reusing(prefix.replace("float_", "")),
            batch_size=512,
            query_cache=0,
            query_embed=tree.minilm_embedder(**options),
        )
        if hasattr(tree, "hybrid_index"):
            return tree.hybrid_index(index)
        return tree.HybridIndex(tree.KeywordIndex(), index)

    packages = {"": packages[""], "float_": packages[""], **packages}
    for size, catalog in (("1287", pool), ("10000", big)):
        built = {p: await hybrid_of(p, t).build(catalog) for p, t in packages.items()}
        for index in built.values():
            await index.search("warm up", 5)
        for prefix, row in (await interleaved(built, queries)).items():
            out[f"{prefix}hybrid_{size}"] = row
            print(prefix, "hybrid", size, row, flush=True)
    out["load_average_at_end"] = os.getloadavg()[0]
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument(
        "--warm-only", action="store_true", help="read embeddings from benchmarks/data's cache"
    )
    parser.add_argument("--baseline", help="another checkout whose keyword index to time too")
    parser.add_argument("--keyword-only", action="store_true", help="skip the embedding rows")
    parser.add_argument(
        "--fresh", type=int, default=0, help="also time first builds in N new processes per tree"
    )
    parser.add_argument(
        "--query-threads", type=int, default=2, help="onnxruntime threads embedding a query"
    )
    parser.add_argument("--large", action="store_true", help="also build 50,000 OpenAPI tools")
    arguments = parser.parse_args()
    if arguments.baseline:
        arguments.baseline_tree = Path(arguments.baseline).resolve()
        arguments.baseline = load_tree(Path(arguments.baseline).resolve())
    outcome = anyio.run(main, arguments)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(outcome, indent=2) + "\n")
    print(json.dumps(outcome, indent=2))
