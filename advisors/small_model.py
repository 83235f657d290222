"""`SmallModelAdvisor`: what makes a small local model (0.5B-3B) usable for tool calling."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from dataclasses import replace

from ..core._arguments import ArgumentsError, parse_arguments
from ..core._streams import closing_stream
from ..core.advisor import Advisor, CallNext, StreamNext
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
from ..providers.text_tool_calls import apply_text_tool_calls, parse_text_tool_call_stream

QWEN_SYSTEM_PREFIX = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
"""Qwen2.5's own default system sentence: measurably helps its small models call tools."""

RESULTS_HEADING = "Results of your tool calls:"
"""The first line of the user message that shows a tool round as text."""

NOT_DONE = "FAILED, NOT DONE"
"""How a failed or rejected call reads in that message."""

ANSWER_INSTRUCTION = "Answer my question in one or two plain sentences, using only these results."
NOT_DONE_INSTRUCTION = "Say plainly what was not done and why; never say that it was done."
SEARCH_INSTRUCTION = (
    "Now call the tool that does what I asked: one of these, or one of your other tools."
)


class SmallModelAdvisor(Advisor):
    """Adapts each model call for a small model; place it anywhere in a chain with a tool loop.

    Three measured adaptations (see benchmarks/README.md, "Demo quality"):

    - **Tool results as text.** Every tool round of the transcript the model sees becomes one
      user message: `name(arguments) returned: ...`, a failed or rejected call as
      `name(arguments) FAILED, NOT DONE: reason`, then an instruction to answer (and, after
      a failure, to say it was not done). A 0.5B model shown its own `<tool_call>` and a
      `<tool_response>` tends to call the tool again instead of answering.
    - **A bounded number of tool rounds.** Once the turn has had `max_rounds` rounds, the
      model call gets `tool_choice="none"`, so the model must answer. Rounds that only call
      `uncounted_tools` (tool search's `search_tools`) are not counted: finding a tool and
      calling it is one round.
    - **A system prefix.** `system_prefix` goes first in the leading system message (by
      default Qwen's own sentence; `None` for other models).
    - **Search first** (`search_first`, the name of tool search's tool; off by default).
      The turn's first step is a call of that tool with the user's words, made without
      asking the model (a 0.5B model rarely thinks of searching), so the tools found are
      attached when the model is first asked. Searches are not counted as rounds.

    Only the copy sent to the model changes: the turn's messages, what the caller stores and
    the tool loop's own transcript keep the real tool calls and results. Everything added is
    stable text (no ids, no times), so a local model's KV cache stays valid across calls.

    Control flow: it hooks only `call_model`/`stream_model` (folded around the model below
    every advisor), so it sees every model call of every round wherever it is placed. Each
    call is passed on once, rewritten. A call with tools off but their definitions still
    attached (a local model keeps them, see `LlamaCppChatModel`) may still get a tool call
    written as text: it is dropped (on `stream`, such text is held back, never shown), and
    if no text remains, the call is passed on once more with no tools attached. With
    `search_first`, the turn's first call is answered with the search call instead, without
    calling the model (the only short-circuit). It never loops otherwise or executes tools.
    """

    def __init__(
        self,
        *,
        max_rounds: int = 1,
        system_prefix: str | None = QWEN_SYSTEM_PREFIX,
        results_as_text: bool = True,
        uncounted_tools: Iterable[str] = ("search_tools",),
        search_first: str | None = None,
    ) -> None:
        if max_rounds < 1:
            raise ValueError("max_rounds must be at least 1")
        self.max_rounds = max_rounds
        self.system_prefix = system_prefix
        self.results_as_text = results_as_text
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
            messages = self._results_as_text(messages)
        if self.system_prefix:
            messages = _with_prefix(messages, self.system_prefix)
        return request if messages is request.messages else request.with_messages(messages)

    def rounds(self, request: ChatRequest) -> int:
        """The counted tool rounds of the current turn (since the last user message)."""
        return sum(
            1
            for m in request.messages[request.last_user_index + 1 :]
            if isinstance(m, AssistantMessage)
            and m.tool_calls
            and any(c.name not in self.uncounted_tools for c in m.tool_calls)
        )

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
        async with closing_stream(parse_text_tool_call_stream(next(adapted), names)) as events:
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

    def _results_as_text(self, messages: tuple[Message, ...]) -> tuple[Message, ...]:
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
                out.append(self._results_message(results, calls))
                results = []
            out.append(message)
        if results:
            out.append(self._results_message(results, calls))
        return tuple(out)

    def _results_message(
        self, results: list[ToolMessage], calls: dict[str, ToolCall]
    ) -> UserMessage:
        lines = [RESULTS_HEADING]
        for result in results:
            call = calls.get(result.tool_call_id)
            shown = format_call(call) if call is not None else result.name
            if result.is_error:
                lines.append(f"- {shown} {NOT_DONE}: {not_done_reason(result.text)}")
            else:
                lines.append(f"- {shown} returned: {result.text}")
        if all(r.name in self.uncounted_tools and not r.is_error for r in results):
            lines.append(SEARCH_INSTRUCTION)
        elif any(r.is_error for r in results):
            lines.append(f"{ANSWER_INSTRUCTION} {NOT_DONE_INSTRUCTION}")
        else:
            lines.append(ANSWER_INSTRUCTION)
        return UserMessage(content="\n".join(lines))


def not_done_reason(content: str) -> str:
    """The reason in an error result, without the loop's `Error: not executed, ` lead-in."""
    reason = content.strip()
    for lead in ("Error:", "not executed,"):
        if reason.startswith(lead):
            reason = reason[len(lead) :].strip()
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
    parsed = apply_text_tool_calls(response, (t.name for t in request.tools))
    if not parsed.tool_calls:
        return response
    answer = parsed.with_message(AssistantMessage(content=parsed.text.strip() or None))
    return replace(answer, finish_reason="stop")


__all__ = [
    "QWEN_SYSTEM_PREFIX",
    "SmallModelAdvisor",
    "not_done_reason",
]
