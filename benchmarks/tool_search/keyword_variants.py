# mypy: ignore-errors
"""Keyword ranking variants tried for issue 17 item 2 (neither kept): BM25F, feedback.

Run: `nice -n 10 .venv/bin/python benchmarks/tool_search/keyword_variants.py` (a few
minutes, no embeddings). Same data and halves as `quality.py --sample 1200`: knobs are
chosen by recall@5 on the tuning half of the pooled BFCL queries, then reported on the
evaluation half and on NESTFUL (alone and pooled with BFCL).

- BM25F: each field's term count normalized by that field's own length
  (`tf = sum(w_f * c_f / (1 - b_f + b_f * len_f / avg_f))`, then `tf * (k1 + 1) / (tf + k1)`),
  where the keyword index (FTS5's `bm25()`) normalizes by the whole tool's length. Grid:
  field weights, per-field `b`, `k1`.
- Pseudo-relevance feedback: the name terms of the first `m` tools added to the query with
  weight `alpha`.
"""
# ruff: noqa

import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from array import array
from collections import Counter
import bfcl, multistep
from advisorchain.advisors.tool_search._bm25 import Impacts, Postings
from advisorchain.advisors.tool_search._fts5_terms import shared_terms
from advisorchain.advisors.tool_search.index import document
from advisorchain.advisors.tool_search.keyword import query_words, KeywordIndex

T = shared_terms()


def fields_of(defs):
    docs = [document(d) for d in defs]
    distinct = list({c for doc in docs for text in doc for c in text.split()})
    terms_of = dict(zip(distinct, T.terms(distinct)))
    return [[Counter(t for c in text.split() for t in terms_of[c]) for text in doc] for doc in docs]


def bm25f(fields, w, b, k1):
    N = len(fields)
    avg = [sum(sum(doc[f].values()) for doc in fields) / N or 1.0 for f in range(3)]
    tf = []
    df = Counter()
    for doc in fields:
        acc = {}
        for f in range(3):
            L = sum(doc[f].values())
            norm = 1 - b[f] + b[f] * L / avg[f]
            for t, c in doc[f].items():
                acc[t] = acc.get(t, 0.0) + w[f] * c / norm
        tf.append(acc)
        df.update(acc.keys())
    post = {}
    for i, acc in enumerate(tf):
        for t, x in acc.items():
            n = df[t]
            idf = math.log(1 + (N - n + 0.5) / (n + 0.5))
            post.setdefault(t, ([], []))
            post[t][0].append(i)
            post[t][1].append(idf * x * (k1 + 1) / (x + k1))
    return Impacts(
        {t: Postings(array("i", a), array("d", v), max(v)) for t, (a, v) in post.items()}, N
    )


def recall(imp, names, reqs, k=5):
    r = 0.0
    for text, exp in reqs:
        ws = query_words(text)
        terms = [t for w, ts in T.cached(ws).items() for t in ts]
        found = {names[i] for i in imp.top(terms, k)}
        r += len(exp & found) / len(exp)
    return r / len(reqs)


pool, qs = bfcl.load()
rng = random.Random(1)
qs = sorted(rng.sample(qs, 1200), key=lambda q: q.id)
tune, ev = qs[0::2], qs[1::2]
tune = [(q.text, q.expected) for q in tune]
ev = [(q.text, q.expected) for q in ev]
nf_tools, nf_req = multistep.nestful()
nf = [(r.text, r.expected) for r in nf_req]
nf_pool = list({d.name: d for d in [*nf_tools, *pool]}.values())
F = fields_of(pool)
names = [d.name for d in pool]
Fn = fields_of(nf_tools)
nn = [d.name for d in nf_tools]
Fp = fields_of(nf_pool)
npn = [d.name for d in nf_pool]


# baseline: current keyword
def kw_recall(defs, reqs):
    idx = KeywordIndex().build_sync(defs)
    r = 0
    for text, exp in reqs:
        r += len(exp & set(idx.search_sync(text, 5))) / len(exp)
    return r / len(reqs)


print(
    "keyword now: tune",
    round(kw_recall(pool, tune), 4),
    "eval",
    round(kw_recall(pool, ev), 4),
    "nestful",
    round(kw_recall(nf_tools, nf), 4),
    "nestful pooled",
    round(kw_recall(nf_pool, nf), 4),
)
res = []
for w in [(2, 1, 0.5), (3, 1, 0.5), (2, 1, 1), (4, 1, 0.5)]:
    for b in [
        (0.75, 0.75, 0.75),
        (0.3, 0.75, 0.75),
        (0.5, 0.5, 0.9),
        (0.75, 0.5, 0.5),
        (0.3, 0.6, 0.9),
    ]:
        for k1 in (0.9, 1.2, 2.0):
            res.append((recall(bm25f(F, w, b, k1), names, tune), w, b, k1))
res.sort(reverse=True)
for r in res[:5]:
    print("tune", round(r[0], 4), r[1:])
best = res[0]
imp = bm25f(F, *best[1:])
print(
    "best on tune",
    best,
    "eval",
    round(recall(imp, names, ev), 4),
    "nestful",
    round(recall(bm25f(Fn, *best[1:]), nn, nf), 4),
    "nestful pooled",
    round(recall(bm25f(Fp, *best[1:]), npn, nf), 4),
)


# Pseudo-relevance feedback: the name terms of the first m tools added with weight alpha.
def prf_recall(imp, fields, names, reqs, m, alpha, k=5):
    r = 0.0
    for text, exp in reqs:
        ws = query_words(text)
        terms = [t for w, ts in T.cached(ws).items() for t in ts]
        first = imp.top(terms, m)
        extra = Counter()
        for i in first:
            extra.update(fields[i][0].keys())
        scores = {}
        for t in terms:
            p = imp.postings.get(t)
            if p:
                for d, s in zip(p.tools, p.impacts):
                    scores[d] = scores.get(d, 0.0) + s
        for t in extra:
            p = imp.postings.get(t)
            if p:
                for d, s in zip(p.tools, p.impacts):
                    scores[d] = scores.get(d, 0.0) + alpha * s * extra[t] / m
        top = sorted(scores, key=lambda d: (-scores[d], d))[:k]
        r += len(exp & {names[i] for i in top}) / len(exp)
    return r / len(reqs)


base = bm25f(F, (2, 1, 0.5), (0.75, 0.75, 0.75), 1.2)  # not FTS5's length, close
grid = []
for m in (1, 3, 5):
    for alpha in (0.1, 0.3, 0.6):
        grid.append((prf_recall(base, F, names, tune, m, alpha), m, alpha))
grid.sort(reverse=True)
print(
    "prf tune top",
    [(round(g[0], 4), g[1], g[2]) for g in grid[:4]],
    "no prf tune",
    round(recall(base, names, tune), 4),
)
_, m, alpha = grid[0]
print(
    "prf eval",
    round(prf_recall(base, F, names, ev, m, alpha), 4),
    "vs",
    round(recall(base, names, ev), 4),
)
