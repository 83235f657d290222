"""`KeywordIndex`: BM25 over tool names, descriptions and parameters."""

from __future__ import annotations

import math
import re
from array import array
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import chain

import anyio.to_thread

from ...core.tools import ToolDefinition
from ._bm25 import Impacts, Postings
from ._fts5_terms import Fts5Terms, shared_terms
from .index import ToolIndex, document, words

_MAX_TERMS = 64
# Weights whose ratios need more units than this are summed one occurrence at a time.
_MAX_UNITS = 8
# Chunks that can also be query words (lowercase, no separators): their terms are kept
# with the index, so most query words need no tokenizing at search time.
_QUERY_WORD = re.compile(r"[^\W_A-Z]+")

STOP_WORDS = frozenset(
    """a an and are as at be been but by can could do does for from had has have how i if in
    into is it its me my of on or our please so than that the their them then there these
    they this to us was we were what when where which while who will with would you your""".split()
)


class KeywordIndex:
    """Ranks tools by BM25 over their name words, description and parameters.

    Text is tokenized as SQLite's FTS5 does (`unicode61`, diacritics removed, then the
    porter stemmer; the tokenizer of the standard library's sqlite3), so `forecasts`
    finds `forecast`. Names are split on `_`, `-`, `.` and camelCase before indexing;
    parameters are indexed with their descriptions and allowed (`enum`) values.

    Scores are those of FTS5's `bm25()` with `weights` as the column weights of the
    name, description and parameter fields (the ranking of the FTS5 table this index
    used up to 0.2, ties in catalog order). They are computed once per (term, tool)
    when the index is built and kept in posting lists; a search adds up the lists of
    the query's words, visiting the most telling words first and skipping the tools
    that can no longer reach the first `k` (see `_bm25.Impacts.top`). A tool scoring 0
    (matching only in fields of weight 0, which FTS5 would list last) is not listed:
    `weights=(1.0, 0.0, 0.0)` ranks by name words alone, with FTS5's lengths and idf.

    A query is reduced to its words (`index.words`): operators, quotes and punctuation
    typed by a model are never syntax. English function words are left out unless the
    query has nothing else; at most 64 distinct words are read. A query with no words
    finds nothing. A built index is immutable: one may be shared by conversations on
    any thread.
    """

    def __init__(self, *, weights: tuple[float, float, float] = (2.0, 1.0, 0.5)) -> None:
        if len(weights) != 3 or not all(math.isfinite(w) and w >= 0 for w in weights):
            raise ValueError("weights are three non-negative numbers: name, description, params")
        self.weights = weights
        self._names: tuple[str, ...] = ()
        self._impacts: Impacts | None = None
        self._words: dict[str, tuple[str, ...]] = {}
        self._terms: Fts5Terms | None = None

    def __repr__(self) -> str:
        return f"KeywordIndex(tools={len(self._names)})"

    async def build(self, definitions: Sequence[ToolDefinition]) -> ToolIndex:
        """A new keyword index over `definitions` (built in a worker thread)."""
        built = KeywordIndex(weights=self.weights)
        await anyio.to_thread.run_sync(built._fill, tuple(definitions))
        return built

    def build_sync(self, definitions: Sequence[ToolDefinition]) -> KeywordIndex:
        """The same as `build`, on the calling thread (for benchmarks and scripts)."""
        built = KeywordIndex(weights=self.weights)
        built._fill(tuple(definitions))
        return built

    def _fill(self, definitions: tuple[ToolDefinition, ...]) -> None:
        terms = shared_terms()
        docs = [document(d) for d in definitions]
        # Whitespace never falls inside an FTS5 token, so a field's terms are those of
        # its whitespace-separated chunks; each distinct chunk is tokenized once.
        distinct: set[str] = set()
        for doc in docs:
            for text in doc:
                distinct.update(text.split())
        ordered = list(distinct)
        tokenized = terms.terms(ordered)
        terms_of = dict(zip(ordered, tokenized, strict=True))
        frequencies: list[Mapping[str, float]] = []
        lengths: list[int] = []
        units = _units(self.weights)
        scale = 1.0
        get_terms = terms_of.__getitem__
        if units is not None:
            # Each field's chunks repeated its weight's number of units, counted at once:
            # a count times the unit is the sum FTS5 makes, to the last bit. Most chunks
            # are one term; the others (`(e.g.,`, `--`) are added or taken out after.
            (name_units, description_units, parameter_units), scale = units
            first = dict(zip(ordered, (t[0] if t else "" for t in tokenized), strict=True))
            irregular = {c for c, t in terms_of.items() if len(t) != 1}
            for name, description, parameters in docs:
                n, d, p = name.split(), description.split(), parameters.split()
                chunks = n * name_units + d * description_units + p * parameter_units
                counts = Counter(map(first.__getitem__, chunks))
                length = len(n) + len(d) + len(p)
                if not irregular.isdisjoint(chunks):
                    for chunk in irregular.intersection(chunks):
                        times = chunks.count(chunk)
                        for term in terms_of[chunk][1:]:
                            counts[term] += times
                        length += (len(terms_of[chunk]) - 1) * (
                            n.count(chunk) + d.count(chunk) + p.count(chunk)
                        )
                    counts.pop("", None)
                frequencies.append(dict(counts.items()))  # untracked by the GC
                lengths.append(length)
        else:
            for doc in docs:
                frequency: dict[str, float] = {}
                get = frequency.get
                length = 0
                for weight, text in zip(self.weights, doc, strict=True):
                    # One addition per occurrence, in order, as FTS5 sums column weights.
                    for term in chain.from_iterable(map(get_terms, text.split())):
                        frequency[term] = get(term, 0.0) + weight
                        length += 1
                frequencies.append(frequency)
                lengths.append(length)
        impacts = Impacts.build(frequencies, lengths, scale)
        if 0.0 in self.weights:
            impacts = _positive_only(impacts)
        self._impacts = impacts
        self._words = {c: t for c, t in terms_of.items() if _QUERY_WORD.fullmatch(c)}
        self._terms = terms
        self._names = tuple(d.name for d in definitions)

    async def search(self, query: str, k: int) -> list[str]:
        """Up to `k` tool names for `query`, best BM25 score first."""
        return self.search_sync(query, k)

    def search_sync(self, query: str, k: int) -> list[str]:
        """The same as `search`, synchronously (a query takes about a millisecond)."""
        chosen = query_words(query)
        if self._impacts is None or self._terms is None or not chosen or k < 1:
            return []
        known = self._words
        unknown = [w for w in chosen if w not in known]
        extra = self._terms.cached(unknown) if unknown else {}
        terms = [t for w in chosen for t in (known[w] if w in known else extra[w])]
        return [self._names[i] for i in self._impacts.top(terms, k)]


def _positive_only(impacts: Impacts) -> Impacts:
    """The impacts without their zeros (a term's occurrences in fields of weight 0):
    a tool matching only there is never scored, and the lists stay as short as the
    weighted fields make them. Idf and lengths stay those of all fields."""
    kept: dict[str, Postings] = {}
    for term, postings in impacts.postings.items():
        pairs = [(t, v) for t, v in zip(postings.tools, postings.impacts, strict=True) if v > 0.0]
        if pairs:
            kept[term] = Postings(
                array("i", [t for t, _ in pairs]), array("d", [v for _, v in pairs]), postings.bound
            )
    return Impacts(kept, impacts.size)


def _units(weights: tuple[float, float, float]) -> tuple[tuple[int, int, int], float] | None:
    """`((a, b, c), unit)` with each weight `a * unit`, ... when the weights are positive
    multiples of 1/1024 below 2**20 with small ratios (2, 1, 0.5: 4, 2, 1 halves), else
    None. Then `count * unit` equals `unit` added `count` times, in any order: the sums
    of up to 2**23 occurrences are all exact in a double."""
    if not all(0 < w < 2**20 and w * 1024 == int(w * 1024) for w in weights):
        return None
    scaled = [int(w * 1024) for w in weights]
    common = math.gcd(*scaled)
    a, b, c = (s // common for s in scaled)
    if max(a, b, c) > _MAX_UNITS:
        return None
    return (a, b, c), common / 1024


def query_words(query: str) -> list[str]:
    """The words of `query` a keyword search reads: distinct, in order, at most 64.

    English function words are left out (they match nearly every tool and cost time,
    not ranking), unless the query has nothing else.
    """
    unique = list(dict.fromkeys(words(query)))
    content = [w for w in unique if w not in STOP_WORDS]
    return (content or unique)[:_MAX_TERMS]
