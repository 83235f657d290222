"""RegexIndex: a model-written pattern cannot stall the event loop; normal ones still work."""

from __future__ import annotations

from typing import Any

import pytest

from advisorchain import Chain, Tool, ToolCall, ToolCallingAdvisor, ToolDefinition, ToolMessage
from advisorchain.advisors import HybridIndex, KeywordIndex, RegexIndex, ToolSearchAdvisor
from advisorchain.advisors.tool_search import QueryRejected, regex
from advisorchain.advisors.tool_search.regex import text_limit
from advisorchain.providers import ScriptedChatModel

ALERTS = (
    "Send alerts to the on-call team when the error rate of a service goes above its "
    "threshold; notifies Slack and email, and opens an incident for repeated alerts"
)
CATALOG = [
    ToolDefinition("get_weather", "Current weather and forecast for a city."),
    ToolDefinition("send_email", "Send an email message to a recipient."),
    ToolDefinition("page_oncall", ALERTS + " of the day"),
    ToolDefinition("set_volume", "Set the speaker volume."),
]

CATASTROPHIC = [
    r"(\w+\s?)+alerts",  # the issue's: never returned over one description
    r"(\w+\s?)+$",
    r"(a+)+$",
    r"(a|a)*b",
    r"(.*a){20}",
    r"(x+x+)+y",
    r"(?:a|aa)+$",
    r"(\d|\d\d)+!",
    r"(a?){30}a{30}",
    r".*.*.*x",  # polynomial, but n**4 over a long description
    r".*a.*b.*q",
]
UNSUPPORTED = [
    r"(a)\1",
    r"(?P<w>\w+) (?P=w)",
    r"(?=.*slack)(?=.*mail)",
    r"(?<!x)y",
    r"(a)?(?(1)b|c)",
]


@pytest.mark.parametrize("pattern", CATASTROPHIC + UNSUPPORTED)
def test_costly_patterns_are_refused_before_matching(pattern: str) -> None:
    with pytest.raises(QueryRejected, match="simpler pattern"):
        text_limit(pattern)


@pytest.mark.anyio
@pytest.mark.parametrize("pattern", CATASTROPHIC[:5])
async def test_search_refuses_catastrophic_patterns(pattern: str) -> None:
    built = await RegexIndex().build(CATALOG)
    with pytest.raises(QueryRejected):
        await built.search(pattern, 5)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("pattern", "found"),
    [
        ("get_.*_weather|get_weather", ["get_weather"]),
        ("mail|slack", ["send_email", "page_oncall"]),
        ("(get|set)_", ["get_weather", "set_volume"]),
        (r"\bweather\b", ["get_weather"]),
        ("[a-z]+_weather", ["get_weather"]),
        ("weather.*city", ["get_weather"]),
        ("(?i)SLACK", ["page_oncall"]),
        ("^set", ["set_volume"]),
        (r"al{1,2}erts?", ["page_oncall"]),
        ("(ab){3}|volume", ["set_volume"]),
        ("e?mail", ["send_email", "page_oncall"]),
        (r"alerts (of|for) ", ["page_oncall"]),
    ],
)
async def test_ordinary_patterns_still_work(pattern: str, found: list[str]) -> None:
    built = await RegexIndex().build(CATALOG)
    assert await built.search(pattern, 5) == found


@pytest.mark.anyio
async def test_a_search_past_its_deadline_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = [ToolDefinition(f"tool_{i}", ALERTS) for i in range(100)]
    built = await RegexIndex().build(catalog)
    monkeypatch.setattr(regex, "MAX_SEARCH_SECONDS", -1.0)
    with pytest.raises(QueryRejected, match="took too long"):
        await built.search("nothing here", 5)


@pytest.mark.anyio
async def test_texts_are_read_up_to_a_cap_that_shrinks_with_the_patterns_cost() -> None:
    assert text_limit("needle|pin") == regex.MAX_TEXT_CHARS
    assert text_limit("n.*e") == regex.WIDE_TEXT_CHARS
    far = ToolDefinition("far_tool", "x" * (regex.MAX_TEXT_CHARS + 10) + " needle")
    near = ToolDefinition("near_tool", "x" * (regex.MAX_TEXT_CHARS - 100) + " needle")
    built = await RegexIndex().build([far, near])
    assert await built.search("needle", 5) == ["near_tool"]
    assert await built.search("x{5}", 5) == ["far_tool", "near_tool"]
    assert await built.search("n.*dle", 5) == []  # past WIDE_TEXT_CHARS in both


def catalog_tools() -> list[Tool]:
    def handler(arguments: dict[str, Any], context: Any) -> str:
        return "ran"

    return [Tool(d.name, d.description, None, handler) for d in CATALOG]


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_the_model_reads_why_its_pattern_was_refused(path: str) -> None:
    search = ToolCall.from_arguments("search_tools", {"query": r"(\w+\s?)+alerts"}, id="s1")
    model = ScriptedChatModel([search, "I will try plain words."])
    chain = Chain(
        [ToolCallingAdvisor(), ToolSearchAdvisor(RegexIndex(), min_tools=1)],
        model=model,
        tools=catalog_tools(),
    )
    if path == "call":
        assert (await chain.call("page the on-call team")).text == "I will try plain words."
    else:
        async for _ in chain.stream("page the on-call team"):
            pass
    (result,) = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert result.is_error
    assert "quantifier" in result.content and "simpler pattern" in result.content
    assert "tool search failed" not in result.content


@pytest.mark.anyio
async def test_a_hybrid_index_answers_with_the_indexes_that_accept_the_query() -> None:
    hybrid = await HybridIndex(KeywordIndex(), RegexIndex()).build(CATALOG)
    assert await hybrid.search(r"(\w+\s?)+alerts", 2) == ["page_oncall"]
    only_regex = await HybridIndex(RegexIndex(), RegexIndex()).build(CATALOG)
    with pytest.raises(QueryRejected):
        await only_regex.search(r"(\w+\s?)+alerts", 2)
