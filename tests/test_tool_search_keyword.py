"""The keyword index scores like FTS5's bm25(), and its pruned top-k is exact."""

from __future__ import annotations

import gc
import math
import random
import re
import sqlite3
import threading
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisorchain import ToolDefinition
from advisorchain.advisors import KeywordIndex
from advisorchain.advisors.tool_search import _fts5_terms, keyword
from advisorchain.advisors.tool_search._bm25 import Impacts, LazyPostings, Postings
from advisorchain.advisors.tool_search._fts5_terms import TOKENIZE, Fts5Terms
from advisorchain.advisors.tool_search.index import (
    document,
    document_parts,
    joined_words,
    split_identifier,
)
from advisorchain.advisors.tool_search.keyword import query_words

VOCABULARY = (
    "weather forecast forecasts city send email emails message file files delete list "
    "customer record lookup zip code stock price convert currency image resize translate "
    "text user id name value get set update create"
).split()


def catalog(size: int, seed: int) -> list[ToolDefinition]:
    rng = random.Random(seed)

    def text(n: int) -> str:
        return " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(0, n)))

    tools = []
    for i in range(size):
        name = "_".join(rng.sample(VOCABULARY, rng.randint(1, 3))) + f"_{i}"
        params = {
            "type": "object",
            "properties": {
                rng.choice(VOCABULARY): {"type": "string", "description": text(6)}
                for _ in range(rng.randint(0, 3))
            },
        }
        tools.append(ToolDefinition(name, f"{text(12)}, {text(4)}. Café-près!", params))
    return tools


class Fts5Reference:
    """The reference: an FTS5 table over the same fields, ordered by bm25()."""

    def __init__(self, definitions: list[ToolDefinition]) -> None:
        self.names = [d.name for d in definitions]
        self.db = sqlite3.connect(":memory:")
        self.db.execute(
            f"CREATE VIRTUAL TABLE t USING fts5(name, description, params, tokenize='{TOKENIZE}')"
        )
        self.db.executemany(
            "INSERT INTO t (rowid, name, description, params) VALUES (?, ?, ?, ?)",
            ((i, *document(d)) for i, d in enumerate(definitions)),
        )

    def search(self, query: str, k: int, weights: tuple[float, float, float]) -> list[str]:
        expression = " OR ".join('"' + w.replace('"', '""') + '"' for w in query_words(query))
        if not expression:
            return []
        rows = self.db.execute(
            "SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t, ?, ?, ?) LIMIT ?",
            (expression, *weights, k),
        ).fetchall()
        return [self.names[r[0]] for r in rows]


@pytest.mark.parametrize(
    "weights", [(2.0, 1.0, 0.5), (1.0, 1.0, 1.0), (3.0, 0.5, 2.0), (0.3, 1.7, 0.45)]
)
def test_keyword_ranking_is_fts5_bm25_with_ties_in_catalog_order(
    weights: tuple[float, float, float],
) -> None:
    tools = catalog(300, seed=7)
    reference = Fts5Reference(tools)
    built = KeywordIndex(weights=weights).build_sync(tools)
    rng = random.Random(11)
    queries = [
        " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(1, 25))) for _ in range(60)
    ]
    queries += ["forecasts and emails", "the of", "CAFE pres", "zip-code!", "nothing matches here"]
    for query in queries:
        for k in (1, 5, 50):
            assert built.search_sync(query, k) == reference.search(query, k, weights), query


def test_pruned_top_k_equals_scoring_every_tool() -> None:
    rng = random.Random(3)
    terms = [f"t{i}" for i in range(40)]
    frequencies = []
    for _ in range(500):
        # Few distinct frequencies: many exact ties, which must keep catalog order.
        chosen = rng.sample(terms, rng.randint(1, 12))
        frequencies.append({t: float(rng.choice((1, 1, 2, 3))) for t in chosen})
    impacts = Impacts.build(frequencies, [int(sum(f.values())) for f in frequencies])
    for _ in range(80):
        query = [rng.choice([*terms, "unknown"]) for _ in range(rng.randint(1, 30))]
        every = sorted(
            (-impacts.score(query, tool), tool)
            for tool in range(500)
            if any(t in frequencies[tool] for t in query)
        )
        for k in (1, 3, 10, 100, 600):
            assert impacts.top(query, k) == [tool for _, tool in every[:k]]
    assert impacts.top([], 5) == [] and impacts.top(["t1"], 0) == []


def test_query_words_are_stemmed_by_fts5_and_remembered_within_a_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    terms = Fts5Terms()
    assert terms.terms(["Forecasts,", "café-Près", "--", ""]) == [
        ("forecast",),
        ("cafe", "pre"),
        (),
        (),
    ]
    monkeypatch.setattr(_fts5_terms, "_MAX_REMEMBERED", 3)
    assert terms.cached(["emails", "running"]) == {"emails": ("email",), "running": ("run",)}
    terms.cached(["a1", "b1", "c1"])
    assert list(terms._remembered) == ["a1", "b1", "c1"]
    # A word not in the catalog is stemmed at search time: `forecasting` finds `forecast`.
    built = KeywordIndex().build_sync([ToolDefinition("weather", "A forecast.", {})])
    assert built.search_sync("forecasting", 1) == ["weather"]


def test_weights_must_be_three_non_negative_numbers() -> None:
    for bad in [(1.0, 1.0), (1.0, -1.0, 1.0), (1.0, float("nan"), 1.0)]:
        with pytest.raises(ValueError, match="non-negative"):
            KeywordIndex(weights=bad)  # type: ignore[arg-type]


def test_a_field_of_weight_zero_counts_toward_length_but_finds_nothing() -> None:
    tools = catalog(300, seed=5)
    reference = Fts5Reference(tools)
    built = KeywordIndex(weights=(1.0, 0.0, 0.0)).build_sync(tools)
    rng = random.Random(13)
    for _ in range(40):
        query = " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(1, 8)))
        expression = " OR ".join(f'"{w}"' for w in query_words(query))
        rows = reference.db.execute(
            "SELECT rowid FROM t WHERE t MATCH ? AND bm25(t, 1.0, 0.0, 0.0) < 0"
            " ORDER BY bm25(t, 1.0, 0.0, 0.0) LIMIT 50",
            (expression,),
        ).fetchall()
        # FTS5 would also list the tools matching only in a zero-weight field, scored 0.
        assert built.search_sync(query, 50) == [reference.names[r[0]] for r in rows], query
    only_description = [ToolDefinition("lookup", "weather", {}), ToolDefinition("weather", "", {})]
    found = KeywordIndex(weights=(1.0, 0.0, 0.0)).build_sync(only_description)
    assert found.search_sync("weather", 5) == ["weather"]


def _postings(index: KeywordIndex) -> dict[str, tuple[list[int], list[float]]]:
    assert index._impacts is not None
    return {term: (list(p.tools), list(p.impacts)) for term, p in index._impacts.postings.items()}


@pytest.mark.parametrize("weights", [(2.0, 1.0, 0.5), (1.0, 1.0, 1.0), (3.0, 0.5, 2.0)])
def test_counting_weight_units_at_once_gives_the_bits_of_one_addition_per_term(
    weights: tuple[float, float, float], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Chunks of several terms (`(e.g.,`, `Café-près!`), of none (`--`), repeated
    # within a field and across fields: every case the counting path corrects for.
    rng = random.Random(5)
    tools = catalog(200, seed=3)
    odd = ["(e.g.,", "--", "Café-près!", "zip-code", "forecasts,", "!!", "x^n,"]
    for i, tool in enumerate(tools):
        extra = " ".join(rng.choice([*odd, *VOCABULARY]) for _ in range(rng.randint(0, 12)))
        tools[i] = ToolDefinition(
            f"{tool.name}_zip-code", f"{tool.description} {extra} {extra}", tool.parameters
        )
    assert keyword._units(weights) is not None
    counted = _postings(KeywordIndex(weights=weights).build_sync(tools))
    monkeypatch.setattr(keyword, "_MAX_UNITS", 0)  # one addition per occurrence
    assert keyword._units(weights) is None
    added = _postings(KeywordIndex(weights=weights).build_sync(tools))
    assert counted == added


def test_weight_units_are_used_only_where_they_are_exact() -> None:
    assert keyword._units((2.0, 1.0, 0.5)) == ((4, 2, 1), 0.5)
    assert keyword._units((3.0, 0.5, 2.0)) == ((6, 1, 4), 0.5)
    assert keyword._units((1.0, 1.0, 1.0)) == ((1, 1, 1), 1.0)
    assert keyword._units((0.3, 1.7, 0.45)) is None  # not multiples of 1/1024
    assert keyword._units((0.0, 1.0, 1.0)) is None  # a zero weight still counts a term
    assert keyword._units((16.0, 1.0, 0.5)) is None  # 32 units: too many repeats


def test_split_identifier_without_capitals_splits_as_the_general_path() -> None:
    word = re.compile(r"\w+")
    camel = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")

    def general(identifier: str) -> list[str]:
        found: list[str] = []
        for part in word.findall(identifier):
            for piece in part.split("_"):
                found.extend(w.lower() for w in camel.split(piece) if w)
        return found

    rng = random.Random(1)
    alphabet = "abcXYZ019_-. é€ǅßİΣ/\t$@\x00\x7f"
    samples = ["get_weather", "zip-code.v2", "__x__", "é_ß", "getHTTPResponse", ""]
    samples += [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(5000)
    ]
    for identifier in samples:
        assert split_identifier(identifier) == general(identifier), identifier


# Text of every kind the ASCII fast path reads or hands to FTS5: letters of both cases,
# digits, ASCII punctuation and controls, and a few letters outside ASCII.
_TEXT = st.text(
    alphabet=st.sampled_from(
        list("aAbBzZ09_-.,;:!?()[]{}'\"/\\@#$%^&*+=<>|~` \t\n\x00\x7f") + list("éÉßİﬁ€ǅ")
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_TEXT, _TEXT, _TEXT), min_size=1, max_size=8))
def test_ascii_fields_are_split_as_fts5_splits_them(
    fields: list[tuple[str, str, str]],
) -> None:
    tools = [
        ToolDefinition(
            f"{name}_{i}", description, {"properties": {"p": {"type": "string", "description": p}}}
        )
        for i, (name, description, p) in enumerate(fields)
    ]
    counted = _postings(KeywordIndex().build_sync(tools))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(keyword, "_MAX_UNITS", 0)  # FTS5 tokenizes every chunk
        added = _postings(KeywordIndex().build_sync(tools))
    assert counted == added


def test_stems_are_fts5_terms_of_one_token_each() -> None:
    terms = Fts5Terms()
    assert terms.stems(["forecasts", "running", "a1", "x"]) == ["forecast", "run", "a1", "x"]
    assert terms.stems([]) == []
    assert terms.stems(["two words"]) is None
    assert terms.stems(["--"]) is None


def test_a_build_whose_tokens_fts5_would_not_stem_one_to_one_adds_occurrences(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tools = catalog(200, seed=9)
    counted = KeywordIndex().build_sync(tools)
    monkeypatch.setattr(Fts5Terms, "stems", lambda self, tokens: None)
    added = KeywordIndex().build_sync(tools)
    assert _postings(added) == _postings(counted)
    query = "weather forecasts for a zip code"
    assert added.search_sync(query, 5) == counted.search_sync(query, 5) != []


@pytest.mark.parametrize("enabled", [True, False])
def test_a_build_pauses_the_garbage_collector_and_restores_it(
    enabled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []

    def spying(
        definition: ToolDefinition, words: Callable[[str], str]
    ) -> tuple[str, str, list[str]]:
        seen.append(gc.isenabled())
        return document_parts(definition, words)

    monkeypatch.setattr("advisorchain.advisors.tool_search.keyword.document_parts", spying)
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        KeywordIndex().build_sync(catalog(5, seed=1))
        assert seen == [False] * 5
        assert gc.isenabled() is enabled
        monkeypatch.setattr(keyword, "_counted", _raise)
        with pytest.raises(RuntimeError, match="boom"):
            KeywordIndex().build_sync(catalog(5, seed=1))
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def _raise(*args: object) -> None:
    raise RuntimeError("boom")


def test_overlapping_builds_share_one_pause() -> None:
    assert gc.isenabled()
    first_in, second_out = threading.Event(), threading.Event()
    states: list[bool] = []

    def first() -> None:
        with keyword.collector_paused():
            first_in.set()
            second_out.wait(5)
            states.append(gc.isenabled())  # the second ended, this one still runs

    thread = threading.Thread(target=first)
    thread.start()
    first_in.wait(5)
    with keyword.collector_paused():
        states.append(gc.isenabled())
    second_out.set()
    thread.join(5)
    assert states == [False, False]
    assert gc.isenabled()


def test_a_build_splits_each_parameter_name_once(monkeypatch: pytest.MonkeyPatch) -> None:
    split: list[str] = []

    def counting(identifier: str) -> str:
        split.append(identifier)
        return joined_words(identifier)

    monkeypatch.setattr("advisorchain.advisors.tool_search.keyword.joined_words", counting)
    schema = {"properties": {"pageSize": {"type": "integer"}, "user_id": {"type": "string"}}}
    tools = [ToolDefinition(f"list_{i}", "Lists things.", schema) for i in range(50)]
    built = KeywordIndex().build_sync(tools)
    assert sorted(split) == ["pageSize", "user_id"]
    assert built.search_sync("page size", 1) == ["list_0"]
    assert document(tools[0]) == ("list 0", "Lists things.", "page size  user id ")


# What `unicode61` reads as one token in ASCII text folded to lowercase.
UNICODE61_ASCII_TOKEN = re.compile(r"[a-z0-9]+")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=60))
def test_ascii_text_folds_to_the_tokens_of_the_regular_expression(text: str) -> None:
    every = "".join(map(chr, range(128)))
    for sample in (text, every, every[::-1] + text):
        assert keyword._ascii_tokens(sample) == UNICODE61_ASCII_TOKEN.findall(sample.lower())


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(_TEXT, _TEXT, st.lists(st.tuples(_TEXT, _TEXT), max_size=4)),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from([(2.0, 1.0, 0.5), (1.0, 1.0, 1.0), (3.0, 0.5, 2.0)]),
)
def test_texts_split_once_each_give_the_terms_of_their_joined_fields(
    tools_of: list[tuple[str, str, list[tuple[str, str]]]], weights: tuple[float, float, float]
) -> None:
    # Parameters of ASCII and other text in one field, repeated across tools (the
    # same text is split once), empty names and descriptions.
    shared = tools_of[0][2]
    tools = [
        ToolDefinition(
            f"{name}_{i}",
            description,
            {
                "properties": {
                    f"{n}{j}": {"type": "string", "description": text}
                    for j, (n, text) in enumerate([*params, *shared])
                }
            },
        )
        for i, (name, description, params) in enumerate(tools_of)
    ]
    counted = KeywordIndex(weights=weights).build_sync(tools)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(keyword, "_MAX_UNITS", 0)  # FTS5 tokenizes every chunk of the fields
        added = KeywordIndex(weights=weights).build_sync(tools)
    assert _postings(counted) == _postings(added)
    for word, found in added._words.items():
        assert counted._words[word] == found


def test_impacts_are_computed_for_the_terms_searched_and_kept_for_catalog_terms() -> None:
    built = KeywordIndex().build_sync(catalog(300, seed=8))
    assert built._impacts is not None
    postings = built._impacts.postings
    assert isinstance(postings, LazyPostings)
    assert postings._ready == {}  # the build computed no impacts
    every = set(postings._tools_of)
    built.search_sync("weather forecast", 5)
    assert set(postings._ready) == {"weather", "forecast"}
    # A scored term's raw lists are let go; the mapping still holds every term.
    assert set(postings._tools_of) == every - {"weather", "forecast"}
    assert postings["weather"] is postings._ready["weather"]
    # Words a model makes up are looked up, never remembered: memory stays the catalog's.
    for i in range(500):
        assert built.search_sync(f"zq{i}x weather", 5)
    assert set(postings._ready) == {"weather", "forecast"}
    assert set(postings) == every  # reading them all scores them all
    assert postings._tools_of == {} and set(postings._ready) == every


def test_impacts_computed_on_lookup_are_those_of_the_bm25_formula() -> None:
    frequencies: list[dict[str, float]] = [{"a": 2.0, "b": 1.0}, {"a": 1.0}, {"c": 4.0, "b": 0.0}]
    lengths = [3, 1, 5]
    impacts = Impacts.build(frequencies, lengths, scale=0.5)
    average = sum(lengths) / 3

    def impact(count: float, n: int, length: int) -> float:
        f = count * 0.5
        idf = max(math.log((3 - n + 0.5) / (n + 0.5)), 1e-6)
        return idf * ((f * 2.2) / (f + 1.2 * (0.25 + 0.75 * length / average)))

    a, b, c = (impacts.postings[t] for t in "abc")
    assert (list(a.tools), list(a.impacts)) == ([0, 1], [impact(2, 2, 3), impact(1, 2, 1)])
    # A count of 0 (a zero-weight field) still counts in `n` but gets no posting.
    assert (list(b.tools), list(b.impacts)) == ([0], [impact(1, 2, 3)])
    assert (list(c.tools), c.bound) == ([2], impact(4, 1, 5))
    only_zero = Impacts.build([{"z": 0.0}, {"y": 1.0}], [1, 1])
    assert "z" not in only_zero.postings and only_zero.postings.get("z") is None
    assert list(only_zero.postings) == ["y"] and len(only_zero.postings) == 1
    with pytest.raises(KeyError):
        only_zero.postings["z"]


def test_threads_searching_a_new_index_at_once_see_the_ranking_of_one_thread() -> None:
    tools = catalog(400, seed=9)
    queries = [" ".join(random.Random(i).sample(VOCABULARY, 4)) for i in range(60)]
    expected = KeywordIndex().build_sync(tools)
    answers = [expected.search_sync(q, 10) for q in queries]
    shared = KeywordIndex().build_sync(tools)
    start = threading.Barrier(4)
    results: list[list[list[str]]] = []

    def search_all() -> None:
        start.wait()
        results.append([shared.search_sync(q, 10) for q in queries])

    threads = [threading.Thread(target=search_all) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [answers] * 4


def test_a_term_scored_by_another_thread_between_reading_its_two_lists_is_found() -> None:
    impacts = Impacts.build([{"a": 1.0}, {"a": 2.0, "b": 1.0}], [1, 3])
    assert isinstance(impacts.postings, LazyPostings)
    postings: LazyPostings = impacts.postings
    scored_meanwhile: list[Postings] = []
    interleaved = threading.Event()

    class OtherThreadFinishes(dict[str, list[int]]):
        """Another thread scores the term right after this one read its tools."""

        def get(self, key: str, default: object = None) -> object:  # type: ignore[override]
            found = super().get(key, default)
            if not interleaved.is_set():
                interleaved.set()
                scored_meanwhile.append(postings[key])
            return found

    postings._tools_of = OtherThreadFinishes(postings._tools_of)
    found: Postings = postings["a"]
    assert found is scored_meanwhile[0] and list(found.tools) == [0, 1]
