"""`ToolSearchAdvisor`: progressive disclosure of a large tool catalog."""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

from ...core.advisor import Advisor, Placement, ToolNext
from ...core.errors import ChainConfigurationError
from ...core.invocation import ToolInvocation, ToolResult
from ...core.messages import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage
from ...core.model import supports_native_tool_search
from ...core.options import NativeSearchVariant, NativeToolSearch
from ...core.request import ChatRequest
from ...core.scrub import describe_exception
from ...core.tools import Tool
from .catalog import CatalogIndexes
from .defaults import default_index
from .index import QueryRejected, ToolIndex, one_line
from .proactive import ProactiveSearch, choose, fused_ranking

__all__ = ["Keep", "ToolSearchAdvisor", "format_grouped", "format_results", "parse_results"]

_log = logging.getLogger(__name__)

_RESULT_LINE = re.compile(r"^([A-Za-z0-9_.\-]+): ", re.MULTILINE)
_NO_MATCH = "No tool matches. Try other or fewer words."
_FOOTER = "Call any of these tools directly by name."

Keep: TypeAlias = Literal["turn", "conversation"]
"""How long a found tool stays shown: until the next user message, or for the whole
conversation (capped by `max_found`, least recently used out first)."""


class ToolSearchAdvisor(Advisor):
    """Shows the model a search tool instead of every definition of a large catalog.

    Place it after `ToolCallingAdvisor` (inside the loop); a chain with no tool loop
    before it is a `ChainConfigurationError`. It contributes one tool,
    `search_tool_name`, to every request of its chain.

    Control flow, in `before`, for each model call (each round of the loop), on both
    paths: with fewer than `min_tools` attached tools (its own search tool not
    counted) it passes the request on with exactly those tools and nothing added.
    Otherwise it passes on a copy whose tools are the search tool, the `pinned` tools
    (in catalog order) and the tools found (in the order they were first found, so each
    call's list extends the last and the request prefix stays byte-identical for a
    provider's prompt cache or a local model's KV cache), with one short system note on how
    to find the others (on a call with `tool_choice="none"`, only the pinned and found tools,
    without the search tool or the note). It never short-circuits, loops or stops the
    turn. The caller's request is not changed, and the loop keeps executing with its own
    request, so every attached tool stays callable.

    With `native="bm25"` or `"regex"` the provider searches instead (Anthropic's tool
    search tool; see `native.py`): from `min_tools` tools on, each request carries the
    whole catalog, without this advisor's search tool or note, marked so that the
    provider defers every tool but the pinned ones (and one named by `tool_choice`). The
    local index is then never used.

    The tools found are read from the transcript, never kept in the advisor: they survive
    rounds, stored conversations, deferred approvals and resumes, and conversations never
    share them. With `keep="conversation"` (the default) every search result of the
    transcript counts; with `keep="turn"`, only those since the last user message. At most
    `max_found` found tools are shown (`None`: no cap): when a search lists one more, the
    least recently used one (listed by a search or called by the model longest ago) is
    dropped, and the others keep their places.

    With `proactive=ProactiveSearch(...)` the advisor also searches before the model
    asks: in `before`, when it narrows, it searches the catalog with the text of each
    user message (only the latest with `keep="turn"`) and shows the best `top_k` tools
    it allows (read-only first; a mutating one only when the request asks for its
    action, see `ProactiveSearch`) as if a search at that message had listed them: they
    take their place in the found order there and count against `max_found`. They are
    derived from the transcript on every call (searches remembered per catalog and
    text), never stored. A search that fails attaches nothing for that message this
    time (logged at warning level); the model can still search. Not with `native`.

    Its `call_tool` hook answers calls of the search tool from the round's whole
    catalog. The tool takes `queries`, one per step of the task (a lone `query` string
    is accepted too); at most `max_queries` are searched, each for at most `max_results`
    tools. The answer is one line per match, `name: one-line description`, under a
    `Results for "...":` line per query when there are several (a tool is listed once). A
    query the index refuses (`QueryRejected`) is answered with an error result that tells
    the model why.
    The index over a catalog is built once (by `index`, default `default_index()`) and
    cached by the catalog's fingerprint; a changed catalog is indexed again.
    """

    def __init__(
        self,
        index: ToolIndex | None = None,
        *,
        max_results: int = 5,
        min_tools: int = 10,
        pinned: Iterable[str | Tool] = (),
        search_tool_name: str = "search_tools",
        cache_size: int = 8,
        keep: Keep = "conversation",
        max_found: int | None = 32,
        max_queries: int = 5,
        native: NativeSearchVariant | None = None,
        proactive: ProactiveSearch | None = None,
    ) -> None:
        if max_results < 1:
            raise ValueError("max_results must be at least 1")
        if min_tools < 0:
            raise ValueError("min_tools must not be negative")
        if native is not None and native not in ("bm25", "regex"):
            raise ValueError('native must be "bm25", "regex" or None')
        self.native: NativeSearchVariant | None = native
        if proactive is not None and not isinstance(proactive, ProactiveSearch):
            raise TypeError("proactive must be a ProactiveSearch or None")
        if proactive is not None and native is not None:
            raise ValueError("proactive search has no effect with native search: give one")
        self.proactive = proactive
        self._rankings: OrderedDict[tuple[str, str], tuple[str, ...]] = OrderedDict()
        if max_queries < 1:
            raise ValueError("max_queries must be at least 1")
        if keep not in ("turn", "conversation"):
            raise ValueError('keep must be "turn" or "conversation"')
        if max_found is not None and max_found < 1:
            raise ValueError("max_found must be at least 1 (or None for no cap)")
        self.keep: Keep = keep
        self.max_found = max_found
        self.max_results = max_results
        self.min_tools = min_tools
        self.pinned: tuple[str, ...] = tuple(p.name if isinstance(p, Tool) else p for p in pinned)
        self.indexes = CatalogIndexes(
            index if index is not None else default_index(), size=cache_size
        )
        self.max_queries = max_queries
        self.search_tool = Tool(
            search_tool_name,
            "Search the available tools by what they do. Give one short query per step of "
            "the task. Returns matching tool names with a short description; their full "
            "definitions are available from your next step.",
            {
                "type": "object",
                "properties": {
                    "queries": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": (
                            "One query per step of the task, a few keywords each, e.g. "
                            '["weather forecast", "send email"].'
                        ),
                    },
                    "query": {
                        "type": "string",
                        "description": "A single query (when the task has one step).",
                    },
                },
            },
            _outside_chain,
        )
        self.note = (
            f"Only some of your tools are shown. To find others, call `{search_tool_name}` "
            "with one short query per step of the task (a few keywords each); the tools it "
            "lists can be called from your next step."
        )

    def __repr__(self) -> str:
        return (
            f"ToolSearchAdvisor(index={self.indexes.template!r}, max_results={self.max_results}, "
            f"min_tools={self.min_tools})"
        )

    @property
    def tools(self) -> Sequence[Tool]:
        """The search tool."""
        return (self.search_tool,)

    def bind(self, placement: Placement) -> ToolSearchAdvisor:
        """Require a place after a `ToolCallingAdvisor` (inside the tool loop)."""
        if not placement.inside_tool_loop:
            raise ChainConfigurationError(
                "ToolSearchAdvisor must come after a ToolCallingAdvisor in the chain "
                "(inside the tool loop), so that every round sees the tools it found"
            )
        model = placement.chain.model
        if self.native is not None and not supports_native_tool_search(model, self.native):
            raise ChainConfigurationError(
                f"ToolSearchAdvisor(native={self.native!r}) needs a model whose provider "
                f"searches tools itself (AnthropicChatModel); {type(model).__name__} does "
                "not declare supports_native_tool_search: use native=None (local search)"
            )
        return self

    async def before(self, request: ChatRequest) -> ChatRequest:
        """The request with the catalog narrowed (see the class docstring), both paths;
        with `proactive`, the tools its searches pick are shown too."""
        if self.proactive is None:
            return self.narrow(request)
        catalog = [t for t in request.tools if t is not self.search_tool]
        if len(catalog) == len(request.tools) or len(catalog) < self.min_tools:
            return self.narrow(request)
        picks = await self.proactive_picks(request.messages, catalog)
        return self._narrow(request, picks)

    async def proactive_picks(
        self, messages: Sequence[Message], catalog: Sequence[Tool]
    ) -> dict[int, list[str]]:
        """The tools `proactive` attaches, by the index of the user message that asked.

        Each user message's text (the latest only with `keep="turn"`) is searched over
        `catalog` (the ranking remembered by catalog fingerprint and text) and its picks
        chosen by `proactive.choose` rules, pinned tools skipped. Empty without
        `proactive`. A failing search gives no picks for its message (logged).
        """
        option = self.proactive
        if option is None or not catalog:
            return {}
        asked = [
            (i, m.text) for i, m in enumerate(messages) if isinstance(m, UserMessage) and m.text
        ]
        if self.keep == "turn":
            asked = asked[-1:]
        if not asked:
            return {}
        definitions = [t.definition for t in catalog]
        fingerprint = await self.indexes.fingerprint(definitions)
        by_name = {t.name: t for t in catalog}
        skip = set(self.pinned)
        picks: dict[int, list[str]] = {}
        for i, text in asked:
            key = (fingerprint, text)
            ranking = self._rankings.get(key)
            if ranking is None:
                try:
                    index = await self.indexes.get(definitions)
                    found = [await index.search(q, option.depth) for q in option.queries(text)]
                except Exception as exc:  # the model can still search; try again next call
                    _log.warning("proactive tool search failed: %s", describe_exception(exc))
                    continue
                ranking = tuple(fused_ranking(found))
                self._rankings[key] = ranking
                if len(self._rankings) > option.cache_size:
                    self._rankings.popitem(last=False)
            else:
                self._rankings.move_to_end(key)
            chosen = choose(ranking, by_name, text, option, skip)
            if chosen:
                picks[i] = chosen
        return picks

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        """Answer calls of the search tool; pass every other call on."""
        if invocation.tool is not self.search_tool:
            return await next(invocation)
        queries = search_queries(invocation.arguments)
        catalog = [t for t in invocation.request.tools if t is not self.search_tool]
        if not queries or not catalog:
            return ToolResult(content=_NO_MATCH)
        dropped = len(queries) - self.max_queries
        queries = queries[: self.max_queries]
        try:
            index = await self.indexes.get([t.definition for t in catalog])
            ranked = [await index.search(q, self.max_results) for q in queries]
        except QueryRejected as exc:  # the model wrote a query the index will not run
            return ToolResult(content=f"Error: {exc}", outcome="error", error=exc)
        except Exception as exc:  # an embedding service may fail: the model reads why
            return ToolResult(
                content=f"Error: tool search failed: {describe_exception(exc)}",
                outcome="error",
                error=exc,
            )
        by_name = {t.name: t for t in catalog}
        found = [
            [by_name[n] for n in names if n in by_name][: self.max_results] for names in ranked
        ]
        if len(queries) == 1:
            return ToolResult(content=format_results(found[0]))
        content = format_grouped(list(zip(queries, found, strict=True)))
        if dropped > 0:
            content += f"\n(Only the first {self.max_queries} queries were searched.)"
        return ToolResult(content=content)

    async def prepare(self, tools: Iterable[Tool]) -> None:
        """Build and cache the index for this catalog now, before the first search needs it.

        Give the tools in the order requests carry them (e.g. `chain.tools`); the search
        tool itself is skipped. Useful with a slow index (embeddings of a large catalog).
        """
        catalog = [t.definition for t in tools if t is not self.search_tool]
        if catalog:
            await self.indexes.get(catalog)

    def narrow(self, request: ChatRequest) -> ChatRequest:
        """The request one model call should see (the caller's request is not changed),
        without proactive picks."""
        return self._narrow(request, None)

    def _narrow(
        self, request: ChatRequest, picks: Mapping[int, Sequence[str]] | None
    ) -> ChatRequest:
        catalog = [t for t in request.tools if t is not self.search_tool]
        if len(catalog) == len(request.tools):
            return request
        if len(catalog) < self.min_tools:
            return request.with_tools(tuple(catalog))
        fixed = set(self.pinned)
        choice = request.options.tool_choice
        if choice not in (None, "auto", "none", "required"):
            fixed.add(str(choice))
        if self.native is not None:
            # The provider searches: every tool goes, the unpinned ones deferred.
            deferred = [t.name for t in catalog if t.name not in fixed]
            return request.with_tools(tuple(catalog)).with_options(
                native_tool_search=NativeToolSearch(variant=self.native, deferred=tuple(deferred))
            )
        # Pinned tools in catalog order, then found tools in the order they were found:
        # each model call's tool list extends the previous one's (a local model's KV-cache
        # prefix stays valid).
        by_name = {t.name: t for t in catalog}
        found = self._found_in_order(request.messages, by_name.keys(), fixed, picks)
        shown = (
            *(t for t in catalog if t.name in fixed),
            *(by_name[n] for n in found),
        )
        if choice == "none":
            # No tool may be called on this call: searching is moot, and the note would
            # only invite the model to talk about tools instead of answering.
            return request.with_tools(shown)
        tools = (self.search_tool, *shown)
        return request.with_tools(tools).with_messages(self._with_note(request.messages))

    def discovered(self, messages: Sequence[Message]) -> set[str]:
        """Names this advisor's search results in `messages` keep shown (see `keep`,
        `max_found`), pinned tools and tools no longer attached included."""
        return set(self._found_in_order(messages, None, frozenset()))

    def _found_in_order(
        self,
        messages: Sequence[Message],
        catalog: Iterable[str] | None,
        fixed: Iterable[str],
        picks: Mapping[int, Sequence[str]] | None = None,
    ) -> list[str]:
        """Found names in the order first found, after least-recently-used eviction.

        A replay of the transcript: a search result lists names (new ones are appended,
        known ones refreshed), and so do the proactive `picks` of a user message (by its
        index in `messages`); a model's call of a shown tool refreshes it. Names that are
        pinned or not in `catalog` take no place.
        """
        start = 0
        if self.keep == "turn":
            for i in range(len(messages) - 1, -1, -1):
                if messages[i].role == "user":
                    start = i  # the message itself: its proactive picks
                    break
        known = None if catalog is None else set(catalog)
        skip = set(fixed)
        used: dict[str, int] = {}  # insertion order = place; value = last use
        clock = 0
        listed: Sequence[str]
        for at in range(start, len(messages)):
            message = messages[at]
            if isinstance(message, AssistantMessage):
                for call in message.tool_calls:
                    if call.name in used:
                        clock += 1
                        used[call.name] = clock
                continue
            if picks is not None and at in picks:
                listed = picks[at]
            elif (
                not isinstance(message, ToolMessage)
                or message.name != self.search_tool.name
                or message.is_error
            ):
                continue
            else:
                listed = parse_results(message.text)
            for name in listed:
                if name in skip or (known is not None and name not in known):
                    continue
                clock += 1
                used[name] = clock
                if self.max_found is not None and len(used) > self.max_found:
                    del used[min(used, key=used.__getitem__)]
        return list(used)

    def _with_note(self, messages: tuple[Message, ...]) -> tuple[Message, ...]:
        """The note at the end of the leading system message (one message, as every
        provider and chat template accepts), or as the system message if there is none."""
        if any(isinstance(m, SystemMessage) and self.note in m.content for m in messages):
            return messages
        at = 0
        while at < len(messages) and isinstance(messages[at], SystemMessage):
            at += 1
        if at == 0:
            return (SystemMessage(content=self.note), *messages)
        last = messages[at - 1]
        merged = SystemMessage(content=f"{last.content}\n\n{self.note}")
        return (*messages[: at - 1], merged, *messages[at:])


def format_results(tools: Sequence[Tool]) -> str:
    """A search result: one line `name: one-line description` per tool, then a hint."""
    if not tools:
        return _NO_MATCH
    lines = [f"{t.name}: {one_line(t.description) or '(no description)'}" for t in tools]
    return "\n".join([*lines, _FOOTER])


def format_grouped(groups: Sequence[tuple[str, Sequence[Tool]]]) -> str:
    """A result for several queries: a `Results for "query":` line before each query's
    lines (a tool already listed is not repeated), then the hint once."""
    listed: set[str] = set()
    lines: list[str] = []
    for query, tools in groups:
        lines.append(f'Results for "{one_line(query, 80)}":')
        new = [t for t in tools if t.name not in listed]
        listed.update(t.name for t in new)
        if not tools:
            lines.append("(no tool matches)")
        elif not new:
            lines.append("(only tools listed above)")
        lines.extend(f"{t.name}: {one_line(t.description) or '(no description)'}" for t in new)
    if not listed:
        return _NO_MATCH
    return "\n".join([*lines, _FOOTER])


def search_queries(arguments: Mapping[str, Any]) -> list[str]:
    """The non-empty queries of a search call: `queries` (a list, or one string) and a
    `query` string (what older transcripts and some models send), in that order."""
    given: list[Any] = []
    queries = arguments.get("queries")
    given.extend(queries if isinstance(queries, list) else [queries])
    given.append(arguments.get("query"))
    texts = [q.strip() for q in given if isinstance(q, str) and q.strip()]
    return list(dict.fromkeys(texts))


def parse_results(content: str) -> list[str]:
    """The tool names of a result written by `format_results`.

    Names are `[A-Za-z0-9_.-]+`, so the first `": "` of a line ends the name, and a
    description is always one line, so it cannot forge another entry.
    """
    return _RESULT_LINE.findall(content)


def _outside_chain(arguments: dict[str, Any], context: Any) -> str:
    return "Error: tool search is only available inside a chain with its ToolSearchAdvisor."
