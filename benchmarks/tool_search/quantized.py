"""What embedding queries with another MiniLM graph (e.g. the integer one) costs in recall.

Run: `nice -n 10 .venv/bin/python benchmarks/tool_search/quantized.py [LABEL=MODEL.onnx ...]`.
Writes `benchmarks/results/tool_search_quantized.json`.

The shipped default (`hybrid_index(EmbeddingIndex(...))`, queries cut to `QUERY_TOKENS`)
over the same definition vectors (the packaged model's, from the benchmarks' cache
`benchmarks/data/embeddings.sqlite3`), its queries embedded by each graph in turn: the
packaged one (`packaged`), the integer one `minilm_index()` uses (`integer`, converted
here as on first use) and any `LABEL=PATH` given. Also, per graph, the definitions
embedded by that graph too (`..., definitions too`). Recall@5/@10 on BFCL single (tuning
and evaluation halves, as `quality.py` splits them) and NESTFUL (its 133 tools, and
pooled with BFCL), all in one run. Query vectors are kept in
`benchmarks/data/quantized.sqlite3` by graph and text.
"""

from __future__ import annotations

import json
import os
import sys
import time
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
    hybrid_index,
    minilm_embedder,
)
from advisorchain.advisors.tool_search.embedding import (
    MINILM,
    QUERY_TOKENS,
    EmbeddingFunction,
    _packaged_model,
)

RESULTS = Path(__file__).resolve().parent.parent / "results" / "tool_search_quantized.json"
CACHE = bfcl.DATA / "quantized.sqlite3"


class Kept:
    """An embedding function whose vectors are kept in `CACHE` under `model`."""

    def __init__(self, model: str, embed: EmbeddingFunction) -> None:
        self.cache = EmbeddingCache(CACHE, model=model)
        self.embed = embed

    async def __call__(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        found = self.cache.get_many(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in found))
        for start in range(0, len(missing), 256):
            batch = missing[start : start + 256]
            fresh = {
                t: [float(x) for x in v]
                for t, v in zip(batch, await self.embed(batch), strict=True)
            }
            self.cache.put_many(fresh)
            found.update(fresh)
        return [found[t] for t in texts]


async def recall(index: Any, requests: Sequence[Any]) -> tuple[float, float]:
    r5 = r10 = 0.0
    for q in requests:
        found = await index.search(q.text, 10)
        r5 += len(q.expected & set(found[:5])) / len(q.expected)
        r10 += len(q.expected & set(found)) / len(q.expected)
    n = max(1, len(requests))
    return round(r5 / n, 4), round(r10 / n, 4)


async def main(graphs: dict[str, Path]) -> dict[str, Any]:
    start = time.perf_counter()
    pool, queries = bfcl.load()
    nf_tools, nf_requests = multistep.nestful()
    nf_pool = list({d.name: d for d in [*nf_tools, *pool]}.values())
    sets: dict[str, tuple[list[ToolDefinition], Sequence[Any]]] = {
        "BFCL single, tuning": (pool, queries[0::2]),
        "BFCL single, evaluation": (pool, queries[1::2]),
        "NESTFUL, 133 tools": (nf_tools, nf_requests),
        f"NESTFUL, pooled {len(nf_pool)} tools": (nf_pool, nf_requests),
    }
    out: dict[str, Any] = {"load_average_at_start": os.getloadavg()[0], "rows": {}}
    packaged_definitions = Kept(MINILM, minilm_embedder())
    packaged_definitions.cache = EmbeddingCache(bfcl.DATA / "embeddings.sqlite3", model=MINILM)
    for label, path in graphs.items():
        model = f"{label}:{path.name}"  # the converted file's name holds its version
        queries_of = Kept(
            f"{model}/q{QUERY_TOKENS}", minilm_embedder(path, max_length=QUERY_TOKENS)
        )
        definitions_of = (
            packaged_definitions
            if label == "packaged"
            else Kept(f"{model}/definitions", minilm_embedder(path, batch_size=1))
        )
        variants = {label: packaged_definitions}
        if label != "packaged":
            variants[f"{label}, definitions too"] = definitions_of
        for row, definitions in variants.items():
            cells: dict[str, Any] = {}
            for name, (catalog, requests) in sets.items():
                index = EmbeddingIndex(definitions, batch_size=256, query_embed=queries_of)
                cells[name] = await recall(await hybrid_index(index).build(catalog), requests)
            out["rows"][row] = cells
            print(row, cells, flush=True)
    out["seconds"] = round(time.perf_counter() - start, 1)
    out["load_average_at_end"] = os.getloadavg()[0]
    return out


if __name__ == "__main__":
    from advisorchain.advisors.tool_search.integer_model import integer_model

    chosen: dict[str, Path] = {
        "packaged": _packaged_model(),
        "integer": integer_model(_packaged_model()),
    }
    for argument in sys.argv[1:]:
        label, _, path = argument.partition("=")
        chosen[label] = Path(path)
    outcome = anyio.run(main, chosen)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(outcome, indent=2) + "\n")
    print(json.dumps(outcome, indent=2))
