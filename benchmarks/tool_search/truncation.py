"""What cutting texts to fewer MiniLM tokens costs in recall (BFCL single, both halves).

Run: `nice -n 10 .venv/bin/python benchmarks/tool_search/truncation.py`. Writes
`benchmarks/results/tool_search_truncation.json`.

Two knobs of `minilm_embedder(max_length=...)`, each varied alone: the tokens a query
keeps (the definitions keep 256), and the tokens a definition keeps (queries whole).
For each value: recall@5 of the embedding index alone and of the default hybrid
(`HybridIndex(KeywordIndex(), EmbeddingIndex(...))`), on the pooled BFCL catalog,
separately on the tuning half (even positions) and the evaluation half (odd), as
`quality.py` splits them. A value is chosen on the tuning half; the evaluation half
is reported. Vectors are kept in `benchmarks/data/truncation.sqlite3` (by model,
length and text), so a second run embeds nothing; a text no longer than the cut is
embedded once for every length.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import bfcl

from advisorchain.advisors.tool_search import (
    EmbeddingCache,
    EmbeddingIndex,
    HybridIndex,
    KeywordIndex,
    ToolIndex,
    minilm_embedder,
)
from advisorchain.advisors.tool_search.embedding import MINILM, EmbeddingFunction
from advisorchain.advisors.tool_search.index import document_text

RESULTS = Path(__file__).resolve().parent.parent / "results" / "tool_search_truncation.json"
CACHE = bfcl.DATA / "truncation.sqlite3"
QUERY_TOKENS = (16, 24, 32, 48, 64, 96, 128, 256)
DEFINITION_TOKENS = (64, 96, 128, 192, 256)
CACHES: dict[int, EmbeddingCache] = {}


def token_counter() -> Any:
    from tokenizers import Tokenizer

    from advisorchain.advisors.tool_search.embedding import _packaged_tokenizer

    tokenizer = Tokenizer.from_file(str(_packaged_tokenizer()))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return lambda text: len(tokenizer.encode(text).ids)


class Cut:
    """`minilm_embedder(max_length=length)`, remembering vectors in the cache file; a
    text that fits in `length` tokens shares its vector with every longer cut."""

    def __init__(self, length: int, tokens: Any) -> None:
        self.length = length
        self.tokens = tokens
        self.embed = minilm_embedder(max_length=length)
        self.memory: dict[str, list[float]] = {}

    async def __call__(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        todo = [t for t in dict.fromkeys(texts) if t not in self.memory]
        keyed = {t: (256 if self.tokens(t) <= self.length else self.length) for t in todo}
        out = self.memory
        for length in set(keyed.values()):
            group = [t for t, n in keyed.items() if n == length]
            cache = CACHES.setdefault(length, EmbeddingCache(CACHE, model=f"{MINILM}/raw/{length}"))
            found = cache.get_many(group)
            missing = [t for t in group if t not in found]
            if missing:
                embed = self.embed if length == self.length else minilm_embedder(max_length=256)
                fresh = {
                    t: [float(x) for x in v]
                    for t, v in zip(missing, await embed(missing), strict=True)
                }
                cache.put_many(fresh)
                found.update(fresh)
            out.update(found)
        return [out[t] for t in texts]


async def recall(index: ToolIndex, queries: Sequence[Any]) -> float:
    total = 0.0
    for q in queries:
        found = set(await index.search(q.text, 5))
        total += len(q.expected & found) / len(q.expected)
    return round(total / max(1, len(queries)), 4)


async def rows(
    pool: Sequence[Any],
    halves: dict[str, Sequence[Any]],
    definitions: EmbeddingFunction,
    queries: EmbeddingFunction,
    keyword: ToolIndex,
) -> dict[str, float]:
    await queries([q.text for half in halves.values() for q in half])  # batched, once
    built = await EmbeddingIndex(definitions, batch_size=256).build(pool)
    assert isinstance(built, EmbeddingIndex)
    built.embed = queries  # the definitions' vectors stay, queries go through `queries`
    hybrid = HybridIndex(keyword, built)
    out: dict[str, float] = {}
    for label, half in halves.items():
        out[f"embedding_{label}"] = await recall(built, half)
        out[f"hybrid_{label}"] = await recall(hybrid, half)
    return out


async def main() -> dict[str, Any]:
    start = time.perf_counter()
    pool, queries = bfcl.load()
    halves = {"tuning": queries[0::2], "evaluation": queries[1::2]}
    tokens = token_counter()
    keyword = await KeywordIndex().build(pool)
    counts = sorted(tokens(q.text) for q in queries)
    out: dict[str, Any] = {
        "load_average_at_start": os.getloadavg()[0],
        "query_tokens_p50_p90_p99_max": [
            counts[len(counts) // 2],
            counts[int(len(counts) * 0.9)],
            counts[int(len(counts) * 0.99)],
            counts[-1],
        ],
        "definition_tokens_mean": round(sum(tokens(document_text(d)) for d in pool) / len(pool), 1),
    }
    full = Cut(256, tokens)
    out["query_cut"] = {}
    for length in QUERY_TOKENS:
        row = await rows(pool, halves, full, Cut(length, tokens), keyword)
        row["queries_cut_share"] = round(sum(c > length for c in counts) / len(counts), 3)
        out["query_cut"][str(length)] = row
        print("query tokens", length, row, flush=True)
    out["definition_cut"] = {}
    for length in DEFINITION_TOKENS:
        row = await rows(pool, halves, Cut(length, tokens), full, keyword)
        out["definition_cut"][str(length)] = row
        print("definition tokens", length, row, flush=True)
    out["seconds"] = round(time.perf_counter() - start, 1)
    out["load_average_at_end"] = os.getloadavg()[0]
    return out


if __name__ == "__main__":
    outcome = anyio.run(main)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(outcome, indent=2) + "\n")
    print(json.dumps(outcome, indent=2))
