# mypy: ignore-errors
"""Issue 39 item 3: recall of the tools `ProactiveSearch` attaches, against searching.

Run: `nice -n 10 .venv/bin/python benchmarks/tool_search/proactive_recall.py [--hybrid]`.
On the held halves (odd-numbered requests) of `fusion.py`'s sets, each request is one
user message; the attached set is what `ToolSearchAdvisor(index,
proactive=ProactiveSearch(top_k=..., split=...)).proactive_picks` returns for it (the
real code path). It is compared with what a model gets from `search_tools`: one search
with the user's words (5 results, what `prefix.py`'s scripted model sends), and the
several-queries call with each clause of the request as a query (`split_intents`, the
heuristic standing in for the model's own split; 5 results each). Cells: recall of the
set / share of requests with every needed tool in it / tools in the set, mean. The
benchmark tools declare no effects, so every tool counts as undeclared (attached on
rank). Also: the demo's catalog questions (`benchmarks/demo/questions.py`, kind
"catalog tool via search") over its catalog (`demo/catalog.py`) with the demo's
keyword index: is the expected tool attached?
"""
# ruff: noqa

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fusion

from advisorchain import Tool, UserMessage
from advisorchain.advisors.tool_search import (
    EmbeddingCache,
    KeywordIndex,
    ProactiveSearch,
    ToolSearchAdvisor,
    hybrid_index,
    minilm_index,
    split_intents,
)

RESULTS = Path(__file__).resolve().parent.parent / "results" / "tool_search_proactive.json"


def tools_of(definitions):
    return [Tool(d.name, d.description, d.parameters, lambda a, c: "ok") for d in definitions]


async def searched(advisor, catalog, queries):
    """The names `search_tools` lists for `queries` (one call): as its `call_tool`, each
    of the first `max_queries` queries searched for `max_results`, a tool listed once."""
    index = await advisor.indexes.get([t.definition for t in catalog])
    listed = {}
    for query in queries[: advisor.max_queries]:
        for name in await index.search(query, advisor.max_results):
            listed.setdefault(name, None)
    return list(listed)


def cell(found, expected):
    r = statistics.fmean(len(set(f) & set(e)) / len(e) for f, e in zip(found, expected))
    every = statistics.fmean(set(e) <= set(f) for f, e in zip(found, expected))
    size = statistics.fmean(len(f) for f in found)
    return f"{r:.3f} / {every:.3f} / {size:.1f}"


async def measure(index_factory, sets, names):
    rows = {}
    for set_name in names:
        catalogs, requests = sets[set_name]
        held = requests[1::2]
        expected = [e for _, e, _ in held]
        tools = {key: tools_of(defs) for key, defs in catalogs.items()}
        variants = {
            "proactive top_k=3": ProactiveSearch(top_k=3),
            "proactive top_k=5": ProactiveSearch(top_k=5),
            "proactive top_k=3, split": ProactiveSearch(top_k=3, split=True),
            "proactive top_k=5, split": ProactiveSearch(top_k=5, split=True),
        }
        index = index_factory()
        for label, option in variants.items():
            advisor = ToolSearchAdvisor(index, proactive=option, max_results=5)
            found = []
            for text, _, key in held:
                picks = await advisor.proactive_picks((UserMessage(content=text),), tools[key])
                found.append(picks.get(0, []))
            rows.setdefault(label, {})[set_name] = cell(found, expected)
        advisor = ToolSearchAdvisor(index, max_results=5)
        one, several = [], []
        for text, _, key in held:
            one.append(await searched(advisor, tools[key], [text]))
            several.append(await searched(advisor, tools[key], split_intents(text)))
        rows.setdefault("search_tools, the request as one query", {})[set_name] = cell(
            one, expected
        )
        rows.setdefault("search_tools, one query per clause", {})[set_name] = cell(
            several, expected
        )
        print(set_name, "done", file=sys.stderr, flush=True)
    return rows


async def demo_questions():
    from advisorchain.benchmarks.demo.questions import QUESTIONS
    from advisorchain.demo.catalog import business_catalog

    catalog = business_catalog()
    out = {}
    for option in (ProactiveSearch(top_k=3), ProactiveSearch(top_k=3, split=True)):
        advisor = ToolSearchAdvisor(KeywordIndex(), proactive=option)
        hits = []
        for q in QUESTIONS:
            if q.kind != "catalog tool via search" or q.tool is None:
                continue
            picks = await advisor.proactive_picks((UserMessage(content=q.text),), catalog)
            hits.append((q.id, q.tool, picks.get(0, [])))
        out[f"top_k=3{', split' if option.split else ''}"] = hits
    return out


def table(rows, names):
    lines = [
        "| attached set or search | " + " | ".join(names) + " |",
        "|" + " --- |" * (len(names) + 1),
    ]
    for label, cells in rows.items():
        lines.append(f"| {label} | " + " | ".join(cells.get(n, "") for n in names) + " |")
    return "\n".join(lines)


async def main(args):
    sets = fusion.load_sets()
    out = {"demo": await demo_questions()}
    print(json.dumps(out["demo"], indent=1))
    names = list(sets)
    out["keyword"] = await measure(KeywordIndex, sets, names)
    print("KeywordIndex()\n" + table(out["keyword"], names))
    if args.hybrid:
        cache = EmbeddingCache(fusion.CACHE, model=fusion.MINILM)
        small = [n for n in names if len(sets[n][1]) < 1000]
        out["hybrid"] = await measure(lambda: hybrid_index(minilm_index(cache)), sets, small)
        print("default hybrid (MiniLM)\n" + table(out["hybrid"], small))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--hybrid", action="store_true", help="also the default hybrid (slow)")
    asyncio.run(main(parser.parse_args()))
