"""`SmallModelAdvisor`: what makes a small local model (0.5B-3B) usable for tool calling."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterable
from dataclasses import replace
from typing import Literal

from ..core.advisor import Advisor, CallNext, StreamNext
from ..core.arguments import ArgumentsError, parse_arguments
from ..core.events import ResponseCompleted, StreamEvent, ToolCallDelta
from ..core.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from ..core.request import ChatRequest
from ..core.response import ChatResponse
from ..core.streams import closing_stream
from ..core.text_tool_calls import apply_text_tool_calls, parse_text_tool_call_stream

QWEN_SYSTEM_PREFIX = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
"""Qwen2.5's own default system sentence: measurably helps its small models call tools."""

RESULTS_HEADING = "Results of your tool calls:"
"""The first line of the user message that shows a tool round as text."""

NOT_DONE = "FAILED, NOT DONE"
"""How a failed or rejected call reads in that message."""

DONE = "DONE, approved by the customer"
"""How a call that needed approval and succeeded reads in that message."""

ANSWER_INSTRUCTION = "Answer my question in one or two plain sentences, using only these results."
DONE_INSTRUCTION = "Say plainly what was done."
NOT_DONE_INSTRUCTION = "Say plainly what was not done and why; never say that it was done."
CONTINUE_INSTRUCTION = (
    "If one of your tools does exactly what I asked, call it; otherwise answer my question."
)
"""After a round that only looked (tool search, a check before an action): neutral, it names
no tool and pushes toward no action the user did not ask for."""
LOOKUP_FAILED_INSTRUCTION = (
    "If another of your tools can answer my question, call it; otherwise say plainly what "
    "could not be looked up."
)
"""After a round of look-ups that all failed, while the model may still call a tool."""
UNKNOWN_TOOL_INSTRUCTION = (
    "That tool does not exist. Call one of your tools, or say that you cannot help with that."
)

_EXCEPTION_NAME = re.compile(
    r"^(?:[A-Za-z_][\w.]*\.)?(?:[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+|[A-Z]\w*(?:Error|Exception))"
    r"\s*:\s*"
)
"""A leading exception class name, `OrderNotFound: ` or `builtins.ValueError: `."""


class SmallModelAdvisor(Advisor):
    """Adapts each model call for a small model; place it anywhere in a chain with a tool loop.

    The measured adaptations (see benchmarks/README.md, "Demo quality"):

    - **Tool results as text.** Every tool round of the current turn (since the last user
      message) becomes one user message: `name(arguments) returned: ...`, a call that
      needed approval and succeeded as `name(arguments) DONE, approved by the customer:
      ...`, a failed or rejected call as `name(arguments) FAILED, NOT DONE: reason` (an
      exception class name in the reason is dropped), then an instruction to answer, to
      say what was done, or what was not. A 0.5B model shown its own `<tool_call>` and a
      `<tool_response>` in the current turn tends to call the tool again instead of answering.
    - **Earlier turns as the chat template shows them** (`history="native"`, the default):
      the tool rounds of earlier turns keep their tool calls and tool results, which the
      model's chat template renders in its own tool format. Shown as a user message
      followed by an answer (`history="text"`, the former rendering) they teach the model
      to answer later questions from the conversation instead of calling a tool.
    - **A bounded number of tool rounds.** Once the turn has had `max_rounds` rounds, the
      model call gets `tool_choice="none"`, so the model must answer. Rounds that only call
      `uncounted_tools` (tool search's `search_tools`) are not counted: finding a tool and
      calling it is one round; nor is the turn's first round that only calls tools that are
      not attached (the model reads "unknown tool; available: ..." and may call a real one)
      or only look-ups (`read_only` tools) that all failed.
    - **A system prefix.** `system_prefix` goes first in the leading system message (by
      default Qwen's own sentence; `None` for other models).
    - **Search first** (`search_first`, the name of tool search's tool; off by default).
      The turn's first step is a call of that tool with the user's words, made without
      asking the model (a 0.5B model rarely thinks of searching), so the tools found are
      attached when the model is first asked. Searches are not counted as rounds.

    Nothing it adds names a tool to call or urges an action: after a round that only
    looked, the model reads "if one of your tools does exactly what I asked, call it;
    otherwise answer".

    Only the copy sent to the model changes: the turn's messages, what the caller stores and
    the tool loop's own transcript keep the real tool calls and results. Everything added is
    stable text (no ids, no times), so a local model's KV cache stays valid across calls.

    Control flow: it hooks only `call_model`/`stream_model` (folded around the model below
    every advisor), so it sees every model call of every round wherever it is placed. Each
    call is passed on once, rewritten. A call with tools off but their definitions still
    attached (a local model keeps them, see `LlamaCppChatModel`) may still get a tool call
    written as text (to any name): it is dropped (on `stream`, such text is held back,
    never shown), and if no text remains, the call is passed on once more with no tools
    attached. With `search_first`, the turn's first call is answered with the search call
    instead, without calling the model (the only short-circuit). It never loops otherwise
    or executes tools.
    """

    def __init__(
        self,
        *,
        max_rounds: int = 1,
        system_prefix: str | None = QWEN_SYSTEM_PREFIX,
        results_as_text: bool = True,
        history: Literal["native", "text"] = "native",
        uncounted_tools: Iterable[str] = ("search_tools",),
        search_first: str | None = None,
    ) -> None:
        if max_rounds < 1:
            raise ValueError("max_rounds must be at least 1")
        if history not in ("native", "text"):
            raise ValueError("history must be 'native' or 'text'")
        self.max_rounds = max_rounds
        self.system_prefix = system_prefix
        self.results_as_text = results_as_text
        self.history = history
        self.uncounted_tools = frozenset(uncounted_tools)
        self.search_first = search_first

    def __repr__(self) -> str:
        return (
            f"SmallModelAdvisor(max_rounds={self.max_rounds}, "
            f"results_as_text={self.results_as_text})"
        )

    def adapt(self, request: ChatRequest) -> ChatRequest:
        """The request the model should see instead of `request`."""
        if self.rounds(request) >= self.max_rounds and request.options.tool_choice != "none":
            request = request.with_options(tool_choice="none")
        messages = request.messages
        if self.results_as_text:
            start = request.last_user_index + 1 if self.history == "native" else 0
            approved = frozenset(t.name for t in request.tools if t.requires_approval)
            lookups = (
                frozenset(t.name for t in request.tools if t.read_only)
                if request.options.tool_choice != "none"
                else frozenset()
            )
            rewritten = self._results_as_text(messages[start:], approved, lookups)
            messages = (*messages[:start], *rewritten)
        if self.system_prefix:
            messages = _with_prefix(messages, self.system_prefix)
        if messages == request.messages:
            return request
        return request.with_messages(messages)

    def rounds(self, request: ChatRequest) -> int:
        """The counted tool rounds of the current turn (since the last user message).

        One round per turn is free: the first whose calls all went to tools that are not
        attached, or all failed and were look-ups (`read_only` tools): the model reads why
        and may call another tool (a wrong guess among the tools shown costs a round, not
        the answer). Calls that change something are never repeated this way.
        """
        attached = {t.name: t for t in request.tools}
        turn = request.messages[request.last_user_index + 1 :]
        failed = {m.tool_call_id for m in turn if isinstance(m, ToolMessage) and m.is_error}
        free = True
        count = 0
        for m in turn:
            if not isinstance(m, AssistantMessage) or not m.tool_calls:
                continue
            if free and all(
                c.name not in attached or (c.id in failed and attached[c.name].read_only)
                for c in m.tool_calls
            ):
                free = False
                continue
            if any(c.name not in self.uncounted_tools for c in m.tool_calls):
                count += 1
        return count

    def first_search(self, request: ChatRequest) -> ChatResponse | None:
        """With `search_first`: the turn's first step, a search with the user's words."""
        name = self.search_first
        if name is None or request.find_tool(name) is None:
            return None
        last = request.messages[-1] if request.messages else None
        if not isinstance(last, UserMessage) or request.options.tool_choice == "none":
            return None
        call = ToolCall.from_arguments(name, {"query": last.text})
        return ChatResponse(
            message=AssistantMessage(tool_calls=(call,)), finish_reason="tool_calls"
        )

    async def call_model(self, request: ChatRequest, next: CallNext) -> ChatResponse:
        """Pass on the adapted request; once more without tools if it answered nothing."""
        searched = self.first_search(request)
        if searched is not None:
            return searched
        adapted = self.adapt(request)
        response = await next(adapted)
        if not _tools_off_but_shown(adapted):
            return response
        response = _without_written_calls(adapted, response)
        if not response.text.strip():
            again = await next(adapted.with_tools(()))
            response = replace(again, usage=response.usage + again.usage)
        return response

    async def stream_model(
        self, request: ChatRequest, next: StreamNext
    ) -> AsyncIterator[StreamEvent]:
        """The streaming twin of `call_model`."""
        searched = self.first_search(request)
        if searched is not None:
            yield ResponseCompleted(searched)
            return
        adapted = self.adapt(request)
        if not _tools_off_but_shown(adapted):
            async with closing_stream(next(adapted)) as events:
                async for event in events:
                    yield event
            return
        # Text that may be a tool call written anyway is held back by the parser.
        names = frozenset(t.name for t in adapted.tools)
        completed: ChatResponse | None = None
        written = parse_text_tool_call_stream(next(adapted), names, any_name=True)
        async with closing_stream(written) as events:
            async for event in events:
                if isinstance(event, ResponseCompleted):
                    completed = _without_written_calls(adapted, event.response)
                elif not isinstance(event, ToolCallDelta):
                    yield event
        if completed is None:
            return
        if completed.text.strip():
            yield ResponseCompleted(completed)
            return
        async with closing_stream(next(adapted.with_tools(()))) as events:
            async for event in events:
                if isinstance(event, ResponseCompleted):
                    again = event.response
                    event = ResponseCompleted(replace(again, usage=completed.usage + again.usage))
                yield event

    def _results_as_text(
        self, messages: tuple[Message, ...], approved: frozenset[str], lookups: frozenset[str]
    ) -> tuple[Message, ...]:
        if not any(isinstance(m, ToolMessage) for m in messages):
            return messages
        calls: dict[str, ToolCall] = {}
        out: list[Message] = []
        results: list[ToolMessage] = []
        for message in messages:
            if isinstance(message, AssistantMessage) and message.tool_calls:
                calls.update((c.id, c) for c in message.tool_calls)
                if message.text.strip():
                    out.append(AssistantMessage(content=message.content))
                continue
            if isinstance(message, ToolMessage):
                results.append(message)
                continue
            if results:
                out.append(self._results_message(results, calls, approved, lookups))
                results = []
            out.append(message)
        if results:
            out.append(self._results_message(results, calls, approved, lookups))
        return tuple(out)

    def _results_message(
        self,
        results: list[ToolMessage],
        calls: dict[str, ToolCall],
        approved: frozenset[str],
        lookups: frozenset[str],
    ) -> UserMessage:
        lines = [RESULTS_HEADING]
        unknown = False
        done = False
        for result in results:
            call = calls.get(result.tool_call_id)
            shown = format_call(call) if call is not None else result.name
            if result.is_error:
                reason = not_done_reason(result.text)
                unknown = unknown or reason.startswith("unknown tool")
                lines.append(f"- {shown} {NOT_DONE}: {reason}")
            elif result.name in approved:
                done = True
                lines.append(f"- {shown} {DONE}: {result.text}")
            else:
                lines.append(f"- {shown} returned: {result.text}")
        if all(r.name in self.uncounted_tools and not r.is_error for r in results):
            lines.append(CONTINUE_INSTRUCTION)
        elif unknown and all(r.is_error for r in results):
            lines.append(UNKNOWN_TOOL_INSTRUCTION)
        elif all(r.is_error and r.name in lookups for r in results):
            lines.append(LOOKUP_FAILED_INSTRUCTION)
        elif any(r.is_error for r in results):
            lines.append(f"{ANSWER_INSTRUCTION} {NOT_DONE_INSTRUCTION}")
        elif done:
            lines.append(f"{ANSWER_INSTRUCTION} {DONE_INSTRUCTION}")
        else:
            lines.append(ANSWER_INSTRUCTION)
        return UserMessage(content="\n".join(lines))


def not_done_reason(content: str) -> str:
    """The reason in an error result, without the loop's `Error: not executed, ` lead-in
    and without an exception class name (`OrderNotFound: no order` reads `no order`):
    the model repeats what it reads, and a customer should not see class names."""
    reason = content.strip()
    for lead in ("Error:", "not executed,"):
        if reason.startswith(lead):
            reason = reason[len(lead) :].strip()
    reason = _EXCEPTION_NAME.sub("", reason, count=1)
    return reason or "no reason given"


def format_call(call: ToolCall) -> str:
    """`name(key="value", ...)`; the raw text when the arguments are not a JSON object
    (read with the bounded `parse_arguments`: the model wrote them)."""
    try:
        arguments = parse_arguments(call.arguments)
    except ArgumentsError:
        return f"{call.name}({call.arguments})"
    if not isinstance(arguments, dict):
        return f"{call.name}({call.arguments})"
    shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())
    return f"{call.name}({shown})"


def _with_prefix(messages: tuple[Message, ...], prefix: str) -> tuple[Message, ...]:
    if messages and isinstance(messages[0], SystemMessage):
        first = messages[0]
        if first.content.startswith(prefix):
            return messages
        return (SystemMessage(content=f"{prefix} {first.content}"), *messages[1:])
    return (SystemMessage(content=prefix), *messages)


def _tools_off_but_shown(request: ChatRequest) -> bool:
    # tool_choice="none" with definitions in the prompt (a local model keeps them for its
    # KV cache): the model may still write a call as text, or nothing.
    return request.options.tool_choice == "none" and bool(request.tools)


def _without_written_calls(request: ChatRequest, response: ChatResponse) -> ChatResponse:
    """`response` with any tool call it wrote (as text or structured) dropped: no tool may
    be called, so only its text counts as the answer."""
    parsed = apply_text_tool_calls(response, (t.name for t in request.tools), any_name=True)
    if not parsed.tool_calls:
        return response
    answer = parsed.with_message(AssistantMessage(content=parsed.text.strip() or None))
    return replace(answer, finish_reason="stop")


__all__ = [
    "CONTINUE_INSTRUCTION",
    "DONE",
    "LOOKUP_FAILED_INSTRUCTION",
    "NOT_DONE",
    "QWEN_SYSTEM_PREFIX",
    "RESULTS_HEADING",
    "SmallModelAdvisor",
    "format_call",
    "not_done_reason",
]
