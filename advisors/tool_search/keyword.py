"""`KeywordIndex`: BM25 over tool names, descriptions and parameters."""

from __future__ import annotations

import gc
import math
import re
import threading
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import chain

import anyio.to_thread

from ...core.tools import ToolDefinition
from ._bm25 import Impacts
from ._fts5_terms import Fts5Terms, shared_terms
from .examples import Examples, check_examples, cleaned_examples, examples_for
from .index import ASCII_SEPARATORS, ToolIndex, document_parts, joined_words, words

_MAX_TERMS = 64
EXAMPLES_WEIGHT = 0.5
"""The default weight of the examples field (name 2, description 1, parameters 0.5),
chosen on half of the BFCL queries (`benchmarks/tool_search/doc2query.py`)."""
# Weights whose ratios need more units than this are summed one occurrence at a time.
_MAX_UNITS = 8
# Chunks that can also be query words (lowercase, no separators): their terms are kept
# with the index, so most query words need no tokenizing at search time.
_QUERY_WORD = re.compile(r"[^\W_A-Z]+")
# ASCII text to `unicode61`'s tokens (`_ascii_tokens`): `unicode61` reads runs of ASCII
# letters and digits as tokens (`[a-z0-9]+` once folded to lowercase) and every other
# ASCII character as a separator; this table is the identifier splitter's with the
# letters folded (`bytes.translate` takes half the time of `str.translate`).
_FOLD = ASCII_SEPARATORS.lower()


def _ascii_tokens(text: str) -> list[str]:
    """The tokens `unicode61` reads in `text`, which is ASCII, folded to lowercase."""
    return text.encode().translate(_FOLD).decode().split()


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
    used up to 0.2, ties in catalog order). The build inverts each tool's term counts
    into posting lists; a term's scores, one per tool holding it, are computed the first
    time a search reads the term, and kept (`_bm25.LazyPostings`). A search adds up the
    lists of the query's words, visiting the most telling words first and skipping the tools
    that can no longer reach the first `k` (see `_bm25.Impacts.top`). A tool scoring 0
    (matching only in fields of weight 0, which FTS5 would list last) is not listed:
    `weights=(1.0, 0.0, 0.0)` ranks by name words alone, with FTS5's lengths and idf.

    A query is reduced to its words (`index.words`): operators, quotes and punctuation
    typed by a model are never syntax. English function words are left out unless the
    query has nothing else; at most 64 distinct words are read. A query with no words
    finds nothing. A built index ranks the same for its whole life (only the scores of
    the catalog's terms are added, once each): one may be shared by conversations on
    any thread. A build pauses Python's cyclic garbage collector while it runs
    (`collector_paused`) and restores it after.
    """

    def __init__(
        self,
        *,
        weights: tuple[float, float, float] = (2.0, 1.0, 0.5),
        examples: Examples | None = None,
        examples_weight: float = EXAMPLES_WEIGHT,
    ) -> None:
        if len(weights) != 3 or not all(_weight(w) for w in weights):
            raise ValueError("weights are three non-negative numbers: name, description, params")
        check_examples(examples, examples_weight)
        self.weights = weights
        self.examples = examples
        self.examples_weight = examples_weight
        self._names: tuple[str, ...] = ()
        self._impacts: Impacts | None = None
        self._words: dict[str, tuple[str, ...]] = {}
        self._terms: Fts5Terms | None = None

    def __repr__(self) -> str:
        return f"KeywordIndex(tools={len(self._names)})"

    def with_examples(self, examples: Examples, weight: float = EXAMPLES_WEIGHT) -> KeywordIndex:
        """This index's settings with `examples` read as a fourth field of `weight`."""
        return KeywordIndex(weights=self.weights, examples=examples, examples_weight=weight)

    def _template(self) -> KeywordIndex:
        return KeywordIndex(
            weights=self.weights, examples=self.examples, examples_weight=self.examples_weight
        )

    async def build(self, definitions: Sequence[ToolDefinition]) -> ToolIndex:
        """A new keyword index over `definitions` (built in a worker thread), after
        reading the tools' examples when the index has a source of them."""
        catalog = tuple(definitions)
        examples = None
        if self.examples is not None:
            examples = await examples_for(self.examples, catalog)
        built = self._template()
        await anyio.to_thread.run_sync(built._fill, catalog, examples)
        return built

    def build_sync(self, definitions: Sequence[ToolDefinition]) -> KeywordIndex:
        """The same as `build`, on the calling thread (for benchmarks and scripts);
        examples must then be a mapping (`TypeError` for an `ExampleSource`)."""
        catalog = tuple(definitions)
        examples = None
        if self.examples is not None:
            if not isinstance(self.examples, Mapping):
                raise TypeError("build_sync reads examples from a mapping; use build")
            examples = cleaned_examples(self.examples, catalog)
        built = self._template()
        built._fill(catalog, examples)
        return built

    def _fill(
        self,
        definitions: tuple[ToolDefinition, ...],
        examples: Mapping[str, tuple[str, ...]] | None = None,
    ) -> None:
        terms = shared_terms()
        with collector_paused():
            remembered: dict[str, str] = {}

            def parameter_words(name: str) -> str:
                words = remembered.get(name)
                if words is None:
                    words = remembered[name] = joined_words(name)
                return words

            docs: list[Fields] = []
            for definition in definitions:
                name, description, parts = document_parts(definition, parameter_words)
                docs.append(((name,), (description,), parts))
            weights: tuple[float, ...] = self.weights
            if examples is not None:  # a fourth field: the tool's examples
                weights = (*weights, self.examples_weight)
                docs = [
                    (*f, examples.get(d.name, ())) for f, d in zip(docs, definitions, strict=True)
                ]
            units = _units(weights)
            counted = None if units is None else _counted(terms, docs, *units)
            if counted is None:
                counted = _added(terms, docs, weights)
            impacts, self._words = counted
        self._impacts = impacts
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


Words = dict[str, tuple[str, ...]]
Fields = tuple[Sequence[str], ...]
"""A tool's fields, each the texts it joins: name, description, parameters, examples."""

_PAUSE_LOCK = threading.Lock()
_pausing = 0  # builds running with the collector paused
_was_enabled = False  # whether it ran before the first of them


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block, then as it was.

    A build allocates several containers per tool and makes no reference cycles, so a
    collection during it frees nothing of its own; but the collections its allocations
    trigger visit every object the process holds (a catalog's schemas, other indexes),
    which took a third of a 10,000-tool build in a process holding that catalog. Builds
    overlapping on several threads share one pause: the state seen by the first is
    restored when the last ends (a `gc.enable()` or `gc.disable()` called meanwhile is
    undone). Cycles made by other threads meanwhile are collected after.
    """
    global _pausing, _was_enabled
    with _PAUSE_LOCK:
        if _pausing == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pausing += 1
    try:
        yield
    finally:
        with _PAUSE_LOCK:
            _pausing -= 1
            if _pausing == 0:
                if _was_enabled:
                    gc.enable()
                else:
                    gc.disable()


def _counted(
    terms: Fts5Terms, docs: Sequence[Fields], field_units: tuple[int, ...], scale: float
) -> tuple[Impacts, Words] | None:
    """The impacts of `docs` (each tool's fields, each field its texts: see `_fill`)
    when each field's weight is a number of `scale` units: a term's count in units
    times `scale` is the sum FTS5 makes, to the last bit. None if this SQLite did not
    stem one ASCII token to one term (never seen; `_added` then).

    Each distinct text (a name, a description, a parameter's part: catalogs repeat
    parameters such as `limit` or `api_key` with their descriptions) is split once.
    A text in ASCII is split as `unicode61` splits ASCII: runs of letters and digits,
    folded to lowercase; each distinct token is stemmed once, all in one FTS5 row.
    Other texts are split at whitespace (never inside an FTS5 token) and each distinct
    chunk is tokenized by FTS5. A field's terms are those of its texts in order (the
    texts are joined by spaces, which separate tokens)."""
    tokens_of = _ascii_tokens
    split: dict[str, list[str]] = {}  # each distinct text: its tokens, or its chunks
    chunked: list[str] = []  # the texts not in ASCII
    for fields in docs:
        for text in chain.from_iterable(fields):
            if text not in split:
                if text.isascii():
                    split[text] = tokens_of(text)
                else:
                    split[text] = text.split()
                    chunked.append(text)
    chunks = set(chain.from_iterable(map(split.pop, chunked)))
    tokens = set(chain.from_iterable(split.values()))
    ordered = sorted(tokens)
    stems = terms.stems(ordered)
    if stems is None:
        return None
    ordered_chunks = sorted(chunks)
    terms_of_chunk = dict(zip(ordered_chunks, terms.terms(ordered_chunks), strict=True))
    stem = dict(zip(ordered, stems, strict=True)).__getitem__
    stemmed: dict[str, tuple[str, ...]] = {t: tuple(map(stem, f)) for t, f in split.items()}
    for text in chunked:
        stemmed[text] = tuple(chain.from_iterable(map(terms_of_chunk.__getitem__, text.split())))
    terms_of = stemmed.__getitem__
    frequencies: list[Mapping[str, float]] = []
    lengths: list[int] = []

    def field_terms(texts: Sequence[str]) -> tuple[str, ...]:
        if len(texts) == 1:
            return terms_of(texts[0])
        return tuple(chain.from_iterable(map(terms_of, texts)))

    for fields in docs:
        found = list(map(field_terms, fields))
        lengths.append(sum(map(len, found)))
        frequencies.append(Counter(chain.from_iterable(map(tuple.__mul__, found, field_units))))
    words: Words = {token: (stem,) for token, stem in zip(ordered, stems, strict=True)}
    words.update((c, t) for c, t in terms_of_chunk.items() if _QUERY_WORD.fullmatch(c))
    return Impacts.build(frequencies, lengths, scale), words


def _added(
    terms: Fts5Terms, docs: Sequence[Fields], weights: tuple[float, ...]
) -> tuple[Impacts, Words]:
    """The impacts of `docs` with one addition of its field's weight per occurrence of
    a term, in order, as FTS5 sums column weights (for any weights)."""
    # Whitespace never falls inside an FTS5 token, so a field's terms are those of its
    # whitespace-separated chunks; each distinct chunk is tokenized once.
    joined = [[" ".join(texts) for texts in fields] for fields in docs]
    distinct: set[str] = set()
    for doc in joined:
        for text in doc:
            distinct.update(text.split())
    ordered = list(distinct)
    terms_of = dict(zip(ordered, terms.terms(ordered), strict=True))
    get_terms = terms_of.__getitem__
    frequencies: list[Mapping[str, float]] = []
    lengths: list[int] = []
    for doc in joined:
        frequency: dict[str, float] = {}
        get = frequency.get
        length = 0
        for weight, text in zip(weights, doc, strict=True):
            for term in chain.from_iterable(map(get_terms, text.split())):
                frequency[term] = get(term, 0.0) + weight
                length += 1
        frequencies.append(frequency)
        lengths.append(length)
    words = {c: t for c, t in terms_of.items() if _QUERY_WORD.fullmatch(c)}
    return Impacts.build(frequencies, lengths), words


def _weight(value: float) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value >= 0


def _units(weights: tuple[float, ...]) -> tuple[tuple[int, ...], float] | None:
    """`((a, b, c, ...), unit)` with each weight `a * unit`, ... when the weights are positive
    multiples of 1/1024 below 2**20 with small ratios (2, 1, 0.5: 4, 2, 1 halves), else
    None. Then `count * unit` equals `unit` added `count` times, in any order: the sums
    of up to 2**23 occurrences are all exact in a double."""
    if not all(0 < w < 2**20 and w * 1024 == int(w * 1024) for w in weights):
        return None
    scaled = [int(w * 1024) for w in weights]
    common = math.gcd(*scaled)
    units = tuple(s // common for s in scaled)
    if max(units) > _MAX_UNITS:
        return None
    return units, common / 1024


def query_words(query: str) -> list[str]:
    """The words of `query` a keyword search reads: distinct, in order, at most 64.

    English function words are left out (they match nearly every tool and cost time,
    not ranking), unless the query has nothing else.
    """
    unique = list(dict.fromkeys(words(query)))
    content = [w for w in unique if w not in STOP_WORDS]
    return (content or unique)[:_MAX_TERMS]


__all__ = [
    "EXAMPLES_WEIGHT",
    "STOP_WORDS",
    "Fields",
    "KeywordIndex",
    "Words",
    "collector_paused",
    "query_words",
]
