"""Tool search quality on two catalogs, knobs chosen on one half, reported on the rest.

Run: `nice -n 10 .venv/bin/python benchmarks/tool_search/quality.py [--sample N]`.
Prints tables and writes `benchmarks/results/tool_search_quality.json`.

Data (see `bfcl.py`, `multistep.py`):
- BFCL single: the pooled BFCL v4 catalog (1,287 tools) and its 2,351 queries, split by
  position into a tuning half (even) and an evaluation half (odd).
- BFCL parallel-multiple: its requests needing 2+ tools, over the same pool; the even
  half tunes the query-splitting knob, the odd half is reported.
- BFCL multi-turn (held out): each user turn needing 2+ tools, over the pool plus the
  multi-turn API functions (1,408 tools), and over the turn's own ~28-tool catalog.
- NESTFUL (held out, another origin: RapidAPI, SGD, Glaive specs): requests needing 2+
  tools over its 133 tools, and pooled with BFCL (1,407 tools).

Every number of one table comes from one run. Knobs are chosen by recall@5 on the
tuning halves only; the chosen values and the grid are printed. `bm25` is a plain Okapi
BM25 (k1 1.2, b 0.75, lowercased words, no stemming, no field weights) as a baseline.
Metrics: recall@k (share of a request's tools among the first k names, averaged) and
all@10 (share of requests whose tools are all among the first 10). `queries` is the
advisor's several-queries path simulated with the heuristic split (`split_intents`)
standing in for the model's own split: each part searched for 5 names, the union
listed (its mean size is printed).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import re
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import bfcl
import multistep

from advisorchain import ToolDefinition
from advisorchain.advisors.tool_search import (
    EmbeddingCache,
    EmbeddingIndex,
    HybridIndex,
    KeywordIndex,
    SplitQueryIndex,
    ToolIndex,
    hybrid_index,
    split_intents,
)
from advisorchain.advisors.tool_search.embedding import MINILM, EmbeddingFunction
from advisorchain.advisors.tool_search.index import document_text

RESULTS = Path(__file__).resolve().parent.parent / "results" / "tool_search_quality.json"
CACHE = bfcl.DATA / "embeddings.sqlite3"
_TOKEN = re.compile(r"\w+")


class PlainBM25:
    """Okapi BM25 over each definition's text: the baseline, nothing tuned."""

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.names: list[str] = []
        self.docs: list[Counter[str]] = []
        self.idf: dict[str, float] = {}
        self.avg = 1.0

    async def build(self, definitions: Sequence[ToolDefinition]) -> ToolIndex:
        built = PlainBM25(self.k1, self.b)
        built.names = [d.name for d in definitions]
        built.docs = [Counter(_TOKEN.findall(document_text(d).lower())) for d in definitions]
        df: Counter[str] = Counter()
        for doc in built.docs:
            df.update(doc.keys())
        n = len(built.docs)
        built.idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
        built.avg = statistics.fmean(sum(d.values()) for d in built.docs) if n else 1.0
        return built

    async def search(self, query: str, k: int) -> list[str]:
        terms = [t for t in set(_TOKEN.findall(query.lower())) if t in self.idf]
        scores = []
        for i, doc in enumerate(self.docs):
            length = sum(doc.values())
            s = 0.0
            for t in terms:
                f = doc.get(t, 0)
                if f:
                    s += (
                        self.idf[t]
                        * f
                        * (self.k1 + 1)
                        / (f + self.k1 * (1 - self.b + self.b * length / self.avg))
                    )
            if s > 0:
                scores.append((s, i))
        scores.sort(key=lambda x: (-x[0], x[1]))
        return [self.names[i] for _, i in scores[:k]]


class Memo:
    """An embedding function remembering every text it embedded (queries repeat across
    configurations), persistently in the benchmark's cache file."""

    def __init__(self, embed: EmbeddingFunction) -> None:
        self.embed = embed
        self.cache = EmbeddingCache(CACHE, model=f"{MINILM}/raw")
        self.memory: dict[str, Sequence[float]] = {}
        self.calls = 0

    async def __call__(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        missing = [t for t in texts if t not in self.memory]
        if missing:
            self.memory.update(self.cache.get_many(missing))
        missing = list(dict.fromkeys(t for t in texts if t not in self.memory))
        if missing:
            self.calls += 1
            vectors = await self.embed(missing)
            fresh = {t: [float(x) for x in v] for t, v in zip(missing, vectors, strict=True)}
            self.memory.update(fresh)
            self.cache.put_many(fresh)
        return [self.memory[t] for t in texts]


def halves(items: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    return list(items[0::2]), list(items[1::2])


async def evaluate(
    template: ToolIndex,
    pool: list[ToolDefinition],
    requests: Sequence[Any],
    built_cache: dict[tuple[Any, tuple[str, ...]], ToolIndex],
    own_catalog: bool = False,
) -> dict[str, float]:
    """recall@5, recall@10, all@10 of `template` over `requests`."""
    by_name = {d.name: d for d in pool}
    r5 = r10 = all10 = 0.0
    for req in requests:
        names = tuple(req.catalog) if own_catalog else ()
        key = (template, names or (f"pool {id(pool)}",))
        built = built_cache.get(key)
        if built is None:
            catalog = [by_name[n] for n in names] if own_catalog else pool
            built = await template.build(catalog)
            built_cache[key] = built
        found = await built.search(req.text, 10)
        expected = req.expected
        r5 += len(expected & set(found[:5])) / len(expected)
        r10 += len(expected & set(found[:10])) / len(expected)
        all10 += expected <= set(found[:10])
    n = max(1, len(requests))
    return {"r@5": r5 / n, "r@10": r10 / n, "all@10": all10 / n}


async def evaluate_queries(
    template: ToolIndex,
    pool: list[ToolDefinition],
    requests: Sequence[Any],
    built_cache: dict[tuple[Any, tuple[str, ...]], ToolIndex],
    own_catalog: bool = False,
) -> dict[str, float]:
    """The several-queries path: each split part searched for 5, the union listed."""
    by_name = {d.name: d for d in pool}
    recall = listed = every = 0.0
    for req in requests:
        names = tuple(req.catalog) if own_catalog else ()
        key = (template, names or (f"pool {id(pool)}",))
        built = built_cache.get(key)
        if built is None:
            catalog = [by_name[n] for n in names] if own_catalog else pool
            built = await template.build(catalog)
            built_cache[key] = built
        union: set[str] = set()
        for part in split_intents(req.text)[:5]:
            union.update(await built.search(part, 5))
        recall += len(req.expected & union) / len(req.expected)
        every += req.expected <= union
        listed += len(union)
    n = max(1, len(requests))
    return {"r@5/query": recall / n, "all": every / n, "listed": listed / n}


def fmt(row: dict[str, float]) -> str:
    return " | ".join(f"{v:.3f}" if k != "listed" else f"{v:.1f}" for k, v in row.items())


async def main(args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.perf_counter()
    pool, queries = bfcl.load()
    mt_tools, mt_requests = multistep.bfcl_multi_turn()
    nf_tools, nf_requests = multistep.nestful()
    pm_requests = multistep.bfcl_parallel_multiple(queries)
    rng = random.Random(1)
    if args.sample:
        queries = sorted(rng.sample(queries, min(args.sample, len(queries))), key=lambda q: q.id)
        mt_requests = rng.sample(mt_requests, min(args.sample // 4, len(mt_requests)))
        nf_requests = rng.sample(nf_requests, min(args.sample // 4, len(nf_requests)))
        pm_requests = rng.sample(pm_requests, min(args.sample // 4, len(pm_requests)))
    tune_single, eval_single = halves(queries)
    tune_pm, eval_pm = halves(pm_requests)
    mt_pool = list({d.name: d for d in [*mt_tools, *pool]}.values())
    nf_pool = list({d.name: d for d in [*nf_tools, *pool]}.values())
    print(
        f"BFCL pool {len(pool)} tools, {len(queries)} queries; parallel-multiple "
        f"{len(pm_requests)}; multi-turn {len(mt_requests)} turns over {len(mt_pool)} tools; "
        f"NESTFUL {len(nf_requests)} over {len(nf_tools)} / {len(nf_pool)} tools"
    )
    from advisorchain.advisors.tool_search import minilm_embedder

    memo = Memo(minilm_embedder(batch_size=args.batch))
    cache = EmbeddingCache(CACHE, model=MINILM)
    built: dict[tuple[Any, tuple[str, ...]], ToolIndex] = {}
    chosen: dict[str, Any] = {}

    # 1. Keyword field weights, on the tuning half of BFCL single.
    grid_kw = [(2.0, 1.0, 0.5), (3.0, 1.0, 0.5), (2.0, 1.0, 1.0), (1.0, 1.0, 1.0), (3.0, 1.0, 1.0)]
    kw_scores: dict[tuple[float, float, float], float] = {}
    for w in grid_kw:
        kw_scores[w] = (await evaluate(KeywordIndex(weights=w), pool, tune_single, built))["r@5"]
    best_w = max(grid_kw, key=lambda w: kw_scores[w])
    chosen["keyword_weights"] = {"grid": {str(k): round(v, 4) for k, v in kw_scores.items()}}
    chosen["keyword_weights"]["chosen"] = list(best_w)
    print("keyword weights (tuning r@5):", chosen["keyword_weights"])

    # 2. Hybrid fusion, on the tuning half of BFCL single.
    embedding = EmbeddingIndex(memo, cache=cache)
    grid_h = [(k, w) for k in (2, 5, 10, 30, 60) for w in (0.7, 1.0, 1.5)]
    emb_built = await embedding.build(pool)
    kw_built = await KeywordIndex(weights=best_w).build(pool)
    h_scores: dict[tuple[int, float], float] = {}
    for rrf_k, w_emb in grid_h:
        h = HybridIndex(kw_built, emb_built, weights=[1.0, w_emb], rrf_k=rrf_k)
        r5 = 0.0
        for q in tune_single:
            found = set(await h.search(q.text, 5))
            r5 += len(q.expected & found) / len(q.expected)
        h_scores[(rrf_k, w_emb)] = r5 / len(tune_single)
    best_h = max(grid_h, key=lambda x: h_scores[x])
    chosen["hybrid"] = {
        "grid": {f"rrf_k={k},w_emb={w}": round(v, 4) for (k, w), v in h_scores.items()},
        "chosen": {"rrf_k": best_h[0], "embedding_weight": best_h[1]},
    }
    print("hybrid (tuning r@5):", chosen["hybrid"]["chosen"], round(h_scores[best_h], 4))

    def hybrid() -> HybridIndex:
        return HybridIndex(
            KeywordIndex(weights=best_w),
            EmbeddingIndex(memo, cache=cache),
            weights=[1.0, best_h[1]],
            rrf_k=best_h[0],
        )

    # 3. Query splitting's whole-query weight, on the tuning half of parallel-multiple.
    grid_s = (0.0, 0.5, 1.0, 2.0)
    s_scores = {}
    base_kw = KeywordIndex(weights=best_w)
    for ww in grid_s:
        s_scores[ww] = (
            await evaluate(SplitQueryIndex(base_kw, whole_weight=ww), pool, tune_pm, built)
        )["r@5"]
    best_s = max(grid_s, key=lambda x: s_scores[x])
    chosen["split_whole_weight"] = {"grid": s_scores, "chosen": best_s}
    print("split whole weight (tuning r@5 on parallel-multiple):", s_scores, "->", best_s)

    methods: dict[str, ToolIndex] = {
        "bm25 (plain)": PlainBM25(),
        "keyword (0.2 default)": KeywordIndex(),
        "keyword (tuned weights)": KeywordIndex(weights=best_w),
        "keyword + split": SplitQueryIndex(KeywordIndex(weights=best_w), whole_weight=best_s),
        "embedding (MiniLM)": EmbeddingIndex(memo, cache=cache),
        "hybrid (0.2: rrf_k=5)": HybridIndex(KeywordIndex(), EmbeddingIndex(memo, cache=cache)),
        "hybrid (tuned)": hybrid(),
        "hybrid + name words (default)": hybrid_index(EmbeddingIndex(memo, cache=cache)),
        "hybrid + split": SplitQueryIndex(hybrid(), whole_weight=best_s),
    }
    sets: list[tuple[str, list[ToolDefinition], Sequence[Any], bool]] = [
        ("BFCL single, tuning half", pool, tune_single, False),
        ("BFCL single, evaluation half", pool, eval_single, False),
        ("BFCL parallel-multiple, evaluation half", pool, eval_pm, False),
        (f"BFCL multi-turn (held out), {len(mt_pool)} tools", mt_pool, mt_requests, False),
        ("BFCL multi-turn (held out), own catalog", mt_pool, mt_requests, True),
        (f"NESTFUL (held out), {len(nf_tools)} tools", nf_tools, nf_requests, False),
        (f"NESTFUL (held out), pooled {len(nf_pool)} tools", nf_pool, nf_requests, False),
    ]
    tables: dict[str, dict[str, Any]] = {}
    for label, catalog, requests, own in sets:
        rows: dict[str, Any] = {}
        for name, template in methods.items():
            rows[name] = await evaluate(template, catalog, requests, built, own)
        multi = label.split(",")[0] != "BFCL single"
        if multi:
            for name in ("keyword (tuned weights)", "hybrid (tuned)"):
                rows[f"queries ({name.split(' ')[0]})"] = await evaluate_queries(
                    methods[name], catalog, requests, built, own
                )
        tables[label] = {"requests": len(requests), "rows": rows}
        print(f"\n{label} ({len(requests)} requests)")
        for name, row in rows.items():
            print(f"  {name:28s} {fmt(row)}")
    return {
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_at_start": os.getloadavg()[0],
        },
        "chosen": chosen,
        "tables": tables,
        "embedding_calls": memo.calls,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def markdown(result: dict[str, Any]) -> str:
    lines = []
    for label, table in result["tables"].items():
        rows = table["rows"]
        lines += [f"\n{label} ({table['requests']} requests)\n"]
        lines += ["| index | recall@5 | recall@10 | all@10 |", "| --- | --- | --- | --- |"]
        for name, row in rows.items():
            if "r@5" in row:
                lines.append(
                    f"| {name} | {row['r@5']:.3f} | {row['r@10']:.3f} | {row['all@10']:.3f} |"
                )
            else:
                lines.append(
                    f"| {name}: 5 per part, union of {row['listed']:.1f} "
                    f"| {row['r@5/query']:.3f} | | {row['all']:.3f} |"
                )
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sample", type=int, default=0, help="sample this many BFCL queries")
    parser.add_argument("--batch", type=int, default=32, help="embedding batch size")
    outcome = anyio.run(main, parser.parse_args())
    print(markdown(outcome))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(outcome, indent=2, default=str) + "\n")
    print(f"\nwritten: {RESULTS} in {outcome['seconds']} s")
