# mypy: ignore-errors
"""Doc2query for tool search (issue 17 item 2): example requests per tool, then ranking.

`nice -n 10 .venv/bin/python benchmarks/tool_search/doc2query.py --generate [--limit N]
[--shard I/N]` writes, for every tool of the catalogs `rank_variants.evaluation_sets()`
uses (NESTFUL's first, then the BFCL pool in a fixed shuffled order, then the multi-turn
tools), K short requests a user might type, made by the local Qwen2.5-Coder-0.5B GGUF
(greedy, one thread) from the library's prompt (`examples.example_prompt`: the tool's
name, description and parameter names only; no benchmark query is shown to it). The
model's answers are kept in `benchmarks/data/doc2query.sqlite3`, keyed by the sha256 of
the prompt, so a killed run continues where it stopped; `--shard I/N` takes every N-th
tool from the I-th, for N processes side by side. K is `DOC2QUERY_K` (default 2, as
`ExampleWriter`'s `per_tool`; 3-4 s of one thread per tool here).

`... doc2query.py` (no flag) parses the answers with the library's parser
(`examples.parse_examples`) and scores the variants in the style of `rank_variants.py`
(knobs on the tuning half by recall@5): on the usual six sets once every tool of them
has an answer, else on the sets whose every tool has one (the BFCL sub-catalog generated
so far, NESTFUL, both pooled). The `library` rows run the shipped `KeywordIndex` and
`hybrid_index` with and without `examples=` (the parsed requests as a mapping) at their
default weights. Shipped rows on the usual six sets come first, for reference; writes
`benchmarks/results/tool_search_doc2query.json`.

`... doc2query.py --latency` times what the examples cost the library on the BFCL pool
(`latency()`), into `tool_search_doc2query_latency.json`.
"""
# ruff: noqa

import asyncio
import hashlib
import json
import os
import re
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import anyio.to_thread
import numpy as np

import bfcl
import rank_variants as rv
from advisorchain.advisors.tool_search._bm25 import Impacts
from advisorchain.advisors.tool_search import EmbeddingIndex, KeywordIndex, hybrid_index
from advisorchain.advisors.tool_search.embedding import MINILM
from advisorchain.advisors.tool_search.examples import example_prompt, parse_examples
from advisorchain.advisors.tool_search.index import (
    MAX_QUERY_CHARS,
    document_text,
    parameter_texts,
    split_identifier,
)

MODEL = Path.home() / ".cache" / "advisorchain" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
STORE = bfcl.DATA / "doc2query.sqlite3"
RESULTS = rv.RESULTS.with_name("tool_search_doc2query.json")
K = int(os.environ.get("DOC2QUERY_K", "2"))
MAX_REQUEST_CHARS = 160


def prompt(d):
    """The library's prompt (`ExampleWriter` asks the same)."""
    return example_prompt(d, K)


def key(text):
    return hashlib.sha256(f"{MODEL.name}\n{text}".encode()).hexdigest()


def parse(text):
    """The library's parser (`ExampleWriter` keeps the same)."""
    return list(parse_examples(text, K))


def open_store():
    db = sqlite3.connect(STORE, timeout=60)
    db.execute(
        "CREATE TABLE IF NOT EXISTS requests"
        " (key TEXT PRIMARY KEY, name TEXT, requests TEXT, raw TEXT, seconds REAL)"
    )
    return db


def catalog_union():
    """Every definition the sets use: NESTFUL's, then the BFCL pool's in a fixed shuffled
    order (a prefix of it is a random sub-catalog), then the multi-turn tools."""
    pool, _, sets = rv.evaluation_sets()
    shuffled = [pool[i] for i in np.random.default_rng(0).permutation(len(pool))]
    ordered = [
        *sets["NESTFUL, 133 tools"][0],
        *shuffled,
        *sets["BFCL multi-turn, 1,408 tools"][0],
    ]
    seen, out = set(), []
    for d in ordered:
        k = key(prompt(d))
        if k not in seen:
            seen.add(k)
            out.append(d)
    return out


def generate(limit=None, shard=(0, 1)):
    from llama_cpp import Llama

    llm = Llama(
        model_path=str(MODEL), n_ctx=1024, n_threads=1, n_threads_batch=1, verbose=False, seed=0
    )
    db = open_store()
    done = {row[0] for row in db.execute("SELECT key FROM requests")}
    todo = [d for d in catalog_union() if key(prompt(d)) not in done][shard[0] :: shard[1]]
    print(f"{len(done)} done, {len(todo)} to do, load {os.getloadavg()[0]:.2f}", flush=True)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for i, d in enumerate(todo[:limit]):
        p = prompt(d)
        t0 = time.perf_counter()
        out = llm.create_chat_completion(
            messages=[{"role": "user", "content": p}], temperature=0.0, max_tokens=30 * K
        )
        text = out["choices"][0]["message"]["content"]
        seconds = time.perf_counter() - t0
        db.execute(
            "INSERT OR REPLACE INTO requests VALUES (?, ?, ?, ?, ?)",
            (key(p), d.name, json.dumps(parse(text)), text, seconds),
        )
        db.commit()
        if i < 3 or i % 50 == 0:
            print(f"{i} {d.name} {seconds:.2f}s {parse(text)}", flush=True)
    n = min(len(todo), limit or len(todo))
    if n:
        print(
            f"{n} tools: {(time.perf_counter() - wall0) / n:.2f} s/tool wall, "
            f"CPU {time.process_time() - cpu0:.0f} s",
            flush=True,
        )


def _answers():
    return dict(open_store().execute("SELECT key, raw FROM requests"))


def synthetic(catalog):
    """Each tool's generated requests, parsed from the model's answer by the library's
    parser ([] when none was generated, or none was usable)."""
    known = _answers()
    return [parse(known[k]) if (k := key(prompt(d))) in known else [] for d in catalog]


def generated(catalog):
    """Whether the model has answered for every tool of `catalog`."""
    known = _answers()
    return all(key(prompt(d)) in known for d in catalog)


# ---- scoring -------------------------------------------------------------------------


def fields_with(defs, extra):
    """`rank_variants.fields` plus a 4th field: the tool's synthetic requests."""
    F = rv.fields(defs)
    texts = [" ".join(" ".join(split_identifier(w)) for w in " ".join(r).split()) for r in extra]
    distinct = list({c for t in texts for c in t.split()})
    terms_of = dict(zip(distinct, rv.T.terms(distinct)))
    return [f + [[t for c in text.split() for t in terms_of[c]]] for f, text in zip(F, texts)]


def one_thread(max_length):
    """MiniLM as `rank_variants` runs it (same cache keys), on one thread."""
    import asyncio

    from advisorchain.advisors.tool_search import minilm_embedder

    embed = minilm_embedder(batch_size=32, max_length=max_length, threads=1)
    return lambda texts: asyncio.run(embed(texts))


def covered_sets(sets, queries):
    """Sets whose every tool has generated requests: NESTFUL's 133 tools, the BFCL
    sub-catalog of the tools generated so far (a random share of the pool) with the
    queries of each half whose expected tools all lie in it, and NESTFUL pooled with it."""
    if all(generated(catalog) for catalog, _ in sets.values()):
        return sets  # every tool of every set: the usual sets
    pool = sets["BFCL tuning half"][0]
    sub = [d for d, x in zip(pool, synthetic(pool)) if x]
    names = {d.name for d in sub}
    nf_tools, nf_requests = sets["NESTFUL, 133 tools"]
    half = lambda part: [q for q in part if q.expected <= names]
    tune, evaluation = half(queries[0::2]), half(queries[1::2])
    n = f"{len(sub):,}"
    return {
        f"BFCL sub-catalog ({n} tools), tuning half": (sub, tune),
        f"BFCL sub-catalog ({n} tools), evaluation half": (sub, evaluation),
        "NESTFUL, 133 tools": (nf_tools, nf_requests),
        f"NESTFUL pooled with the sub-catalog, {len(sub) + len(nf_tools):,} tools": (
            list({d.name: d for d in [*nf_tools, *sub]}.values()),
            nf_requests,
        ),
    }


async def library_rows(sets, raw, q64):
    """The library's own indexes over each set, given the examples as a mapping of the
    parsed requests: what `KeywordIndex(examples=...)` and `hybrid_index(...,
    examples=...)` rank with their default weights (no knob chosen here)."""

    # In a worker thread: a text not yet cached is embedded by a model run with its own
    # event loop (`one_thread`).
    async def embed(texts):
        return (await anyio.to_thread.run_sync(raw, texts)).tolist()

    async def embed_q64(texts):
        return (await anyio.to_thread.run_sync(q64, texts)).tolist()

    def minilm():
        return EmbeddingIndex(embed, query_embed=embed_q64)

    templates = {
        "library KeywordIndex()": lambda ex: KeywordIndex(),
        "library KeywordIndex(examples=...)": lambda ex: KeywordIndex(examples=ex),
        "library hybrid_index(MiniLM), 64-token queries": lambda ex: hybrid_index(minilm()),
        "library hybrid_index(MiniLM, examples=...), 64-token queries": lambda ex: hybrid_index(
            minilm(), examples=ex
        ),
    }
    examples = {s: {d.name: x for d, x in zip(c, synthetic(c)) if x} for s, (c, _) in sets.items()}
    out = {}
    for label, make in templates.items():
        cells = {}
        for s, (catalog, requests) in sets.items():
            built = await make(examples[s]).build(catalog)
            cells[s] = await rv.searched_recall(built, requests)
        out[label] = cells
        print(label, {s: f"{a:.4f}/{b:.4f}" for s, (a, b) in cells.items()}, flush=True)
    return out


def evaluate():
    t0 = time.perf_counter()
    pool, queries, standard = rv.evaluation_sets()
    sets = covered_sets(standard, queries)
    TUNE = next(iter(sets))
    load = os.getloadavg()[0]
    raw = rv.Cached(f"{MINILM}/raw", one_thread(256))
    q64 = rv.Cached(f"{MINILM}/q64", one_thread(64))

    # The shipped rows on the six standard sets, for reference.
    reference = {}
    for s, (catalog, requests) in standard.items():
        F = rv.fields(catalog)
        K_ = rv.keyword_scores(rv.impacts(F), len(catalog), requests)
        N_ = rv.keyword_scores(rv.impacts(F, w=(1.0, 0.0, 0.0)), len(catalog), requests)
        E_ = (
            q64([r.text.strip()[:MAX_QUERY_CHARS] for r in requests])
            @ raw([document_text(d) for d in catalog]).T
        )
        H_ = rv.rrf([(K_, True), (E_, False), (N_, True)], [1, 1, 0.25], 5)
        for label, S in (("keyword (shipped)", K_), ("hybrid (shipped default)", H_)):
            reference.setdefault(label, {})[s] = (
                rv.recall(S, catalog, requests, 5),
                rv.recall(S, catalog, requests, 10),
            )
    for label, cells in reference.items():
        print(label, {s: f"{a:.4f}/{b:.4f}" for s, (a, b) in cells.items()}, flush=True)

    F, F4, kw, names, E, Emax, Emean, Eonly, cover = {}, {}, {}, {}, {}, {}, {}, {}, {}
    for s, (catalog, requests) in sets.items():
        syn = synthetic(catalog)
        cover[s] = sum(bool(x) for x in syn) / max(1, len(catalog))
        F[s] = rv.fields(catalog)
        F4[s] = fields_with(catalog, syn)
        kw[s] = rv.keyword_scores(rv.impacts(F[s]), len(catalog), requests)
        names[s] = rv.keyword_scores(rv.impacts(F[s], w=(1.0, 0.0, 0.0)), len(catalog), requests)
        D = raw([document_text(d) for d in catalog])
        Q = q64([r.text.strip()[:MAX_QUERY_CHARS] for r in requests])
        E[s] = Q @ D.T
        flat = [t for x in syn for t in x]
        V = raw(flat) if flat else np.zeros((0, D.shape[1]), np.float32)
        SV = Q @ V.T if len(flat) else np.zeros((len(requests), 0))
        mx, mean, j = E[s].copy(), np.zeros_like(E[s]), 0
        only = np.full_like(E[s], -1.0)
        for i, x in enumerate(syn):
            if x:
                block = SV[:, j : j + len(x)]
                only[:, i] = block.max(1)
                mx[:, i] = np.maximum(mx[:, i], only[:, i])
                mean[:, i] = block.mean(1)
                j += len(x)
            else:
                mean[:, i] = E[s][:, i]
        Emax[s], Emean[s], Eonly[s] = mx, mean, only
    print({s: round(c, 3) for s, c in cover.items()}, "share of tools with requests", flush=True)

    table = rv.Variants(sets, TUNE)
    row, rows, chosen = table.row, table.rows, table.chosen

    def hybrid(s, emb=None, key=None, fourth=None):
        """The shipped fusion of set `s`, with a list replaced or a `(scores, positive,
        weight)` 4th list added."""
        lists = [(kw[s] if key is None else key, True), (E[s] if emb is None else emb, False)]
        lists.append((names[s], True))
        weights = [1, 1, 0.25]
        if fourth is not None:
            lists.append(fourth[:2])
            weights.append(fourth[2])
        return rv.rrf(lists, weights, 5)

    kw4 = {}

    def keyword4(s, w):
        if (s, w) not in kw4:
            c, r = sets[s]
            kw4[(s, w)] = rv.keyword_scores(rv.impacts(F4[s], w=(2.0, 1.0, 0.5, w)), len(c), r)
        return kw4[(s, w)]

    def emb_mix(s, g):
        how, a = g
        return Emax[s] if how == "max" else E[s] + a * Emean[s]

    emb_grid = [("max", None)] + [("mean", a) for a in (0.25, 0.5, 1.0)]
    weights = (0.1, 0.25, 0.5, 1.0, 2.0)

    row("d2q keyword (shipped)", lambda s, g: kw[s])
    row("d2q hybrid (shipped default, 64-token queries)", lambda s, g: hybrid(s))
    row("d2q embedding alone (shipped)", lambda s, g: E[s])
    row("d2q keyword, synthetic requests as a 4th BM25 field (weight)", keyword4, weights)
    row("d2q embedding: max over text and request vectors", lambda s, g: Emax[s])
    row(
        "d2q embedding: text + a * mean of request cosines (a)",
        lambda s, g: emb_mix(s, ("mean", g)),
        (0.25, 0.5, 1.0),
    )
    row(
        "d2q hybrid, keyword with the 4th field (weight)",
        lambda s, g: hybrid(s, key=keyword4(s, g)),
        weights,
    )
    row(
        "d2q hybrid, embedding with requests (max / mean a)",
        lambda s, g: hybrid(s, emb=emb_mix(s, g)),
        emb_grid,
    )
    row(
        "d2q hybrid, both (4th-field weight, embedding)",
        lambda s, g: hybrid(s, emb=emb_mix(s, g[1]), key=keyword4(s, g[0])),
        [(w, e) for w in weights for e in emb_grid],
    )
    row("d2q embedding: max over request vectors alone (Re-Invoke)", lambda s, g: Eonly[s])
    row(
        "d2q hybrid + request vectors' max cosine as a 4th list (weight)",
        lambda s, g: hybrid(s, fourth=(Eonly[s], False, g)),
        (0.25, 0.5, 1.0),
    )
    req = {
        s: rv.keyword_scores(rv.impacts(F4[s], w=(0.0, 0.0, 0.0, 1.0)), len(c), r)
        for s, (c, r) in sets.items()
    }
    row(
        "d2q hybrid + BM25 of the requests alone as a 4th list (weight)",
        lambda s, g: hybrid(s, fourth=(req[s], True, g)),
        (0.1, 0.25, 0.5),
    )
    rows.update(asyncio.run(library_rows(sets, raw, q64)))
    return {
        "load_average_at_start": load,
        "k": K,
        "reference": {
            "sizes": {s: len(r) for s, (_, r) in standard.items()},
            "rows": rv.rounded(reference),
        },
        "share_of_tools_with_requests": {s: round(c, 4) for s, c in cover.items()},
        "sizes": {s: len(r) for s, (_, r) in sets.items()},
        "embedded": {"texts": raw.embedded + q64.embedded, "cpu_s": round(raw.seconds, 1)},
        "chosen": chosen,
        "rows": rv.rounded(rows),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def latency(queries=300):
    """The library's cost of examples on the BFCL pool: keyword builds (CPU, median of 5,
    alternating), the embedding of the examples (MiniLM cold, 2 threads, the definitions
    embedded first and cached in memory), and keyword and hybrid queries with and without
    them (`latency.interleaved`: each query searched by every index in turn)."""
    import random
    import statistics

    import latency as lt

    from advisorchain.advisors.tool_search import minilm_embedder

    pool, bfcl_queries, _ = rv.evaluation_sets()
    examples = {d.name: x for d, x in zip(pool, synthetic(pool)) if x}
    out = {"load_average_at_start": os.getloadavg()[0], "tools_with_examples": len(examples)}
    builds = {"keyword": [], "keyword_examples": []}
    for _ in range(5):
        for label, index in (
            ("keyword", KeywordIndex()),
            ("keyword_examples", KeywordIndex(examples=examples)),
        ):
            t = time.process_time()
            index.build_sync(pool)
            builds[label].append(time.process_time() - t)
    out["build_1287_cpu_s"] = {k: round(statistics.median(v), 3) for k, v in builds.items()}

    async def timed():
        known = {}
        embed = minilm_embedder()

        async def remembered(texts):
            missing = [t for t in texts if t not in known]
            if missing:
                t0 = time.process_time()
                known.update(zip(missing, await embed(missing)))
                spent.append((len(missing), time.process_time() - t0))
            return [known[t] for t in texts]

        spent = []
        queries_q64 = minilm_embedder(max_length=64, integer=True)
        # No query cache: every timed query is embedded (both hybrids would share one).
        plain = EmbeddingIndex(remembered, batch_size=256, query_embed=queries_q64, query_cache=0)
        built = {"hybrid": await hybrid_index(plain).build(pool)}
        definitions = spent[:]
        built["hybrid_examples"] = await hybrid_index(plain, examples=examples).build(pool)
        out["embedded_cpu_s"] = {
            "definitions": [
                sum(n for n, _ in definitions),
                round(sum(s for _, s in definitions), 1),
            ],
            "examples": [
                sum(n for n, _ in spent[len(definitions) :]),
                round(sum(s for _, s in spent[len(definitions) :]), 1),
            ],
        }
        built["keyword"] = KeywordIndex().build_sync(pool)
        built["keyword_examples"] = KeywordIndex(examples=examples).build_sync(pool)
        sample = [q.text for q in random.Random(0).sample(bfcl_queries, queries + 20)]
        warm, texts = sample[:20], sample[20:]
        for q in warm:  # the query graph loaded, the first terms scored
            for index in built.values():
                await index.search(q, 5)
        out["queries"] = await lt.interleaved(built, texts)

    asyncio.run(timed())
    out["load_average_at_end"] = os.getloadavg()[0]
    return out


if __name__ == "__main__":
    if "--latency" in sys.argv:
        n = sys.argv[sys.argv.index("--latency") + 1] if sys.argv[-1] != "--latency" else "300"
        outcome = latency(int(n))
        print(json.dumps(outcome, indent=2))
        path = RESULTS.with_name("tool_search_doc2query_latency.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(outcome, indent=2) + "\n")
        sys.exit()
    if "--generate" in sys.argv:
        limit = None
        if "--limit" in sys.argv:
            limit = int(sys.argv[sys.argv.index("--limit") + 1])
        shard = (0, 1)
        if "--shard" in sys.argv:  # i/n: every n-th tool from the i-th, for n processes
            i, n = sys.argv[sys.argv.index("--shard") + 1].split("/")
            shard = (int(i), int(n))
        generate(limit, shard)
        sys.exit()
    outcome = evaluate()
    print(rv.markdown(outcome["reference"]))
    print(rv.markdown(outcome))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(outcome, indent=2) + "\n")
    print(f"written: {RESULTS}")
