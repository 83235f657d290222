"""`SmallModelAdvisor`: what makes a small local model (0.5B-3B) usable for tool calling."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import replace
from typing import Literal

from ..core.advisor import Advisor, CallNext, StreamNext
from ..core.arguments import ArgumentsError, parse_arguments
from ..core.events import (
    AnswerDiscarded,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
)
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

REASK_INSTRUCTION = (
    "Answer me in plain sentences of your own: do not repeat these results or write tool calls."
)
"""Added to the last user message when an answer was nothing but an echo of the results."""
NO_ANSWER = "Sorry, I could not answer that. Please ask again."
"""The answer when even the re-asked answer was nothing but an echo."""
NOTHING_DONE = "Nothing was changed: I did not do that."
"""What replaces a sentence claiming an action that no tool call of the turn did."""

CALL_PROBLEMS = ("invalid arguments", "unknown tool")
"""How the tool loop's errors about a call itself begin (written for the model, to correct
the call): an answer of only such a line reads `NOTHING_DONE`."""

ANSWER_HOLD_LIMIT = 400
"""At most this many characters of a streamed answer are held back to judge a sentence."""

_ACTION_VERBS = (
    r"cancell?ed|refunded|changed|updated|modified|redeemed|removed|deleted|split|issued|"
    r"purchased|bought|replaced|rescheduled|reset"
)
_CLAIM = re.compile(
    r"\b(?:has|have|had|was|were|is|are)\s+(?:(?:now|already|successfully|just)\s+)*"
    rf"(?:been\s+)?(?:(?:now|already|successfully|just)\s+)*(?P<verb>{_ACTION_VERBS})\b"
    r"|\bI(?:'ve|\s+have)?\s+(?:(?:now|already|successfully|just)\s+)*"
    rf"(?P<verb2>{_ACTION_VERBS})\b",
    re.IGNORECASE,
)
"""A sentence saying an action happened: `has been cancelled`, `I've updated`, `is now
refunded`. A negated one (`has not been cancelled`, `cannot be changed`) does not match."""
_NEGATION = re.compile(r"\b(?:nothing|no|not|never|none|neither|nor|nobody)\b|n't", re.I)
_SEGMENT_END = re.compile(r"\n|[.!?]\s")
_CALL_LINE = re.compile(r"[A-Za-z_][\w.]*_[\w.]*\s*\(")
"""A snake_case call at the start of a line (`get_order_status(`): never prose."""
_LINE_LEAD = " \t-*\u2022>`"
_JSON_CALL = re.compile(
    r'(?:json\s*)?(?:<tool_call>\s*)?\{\s*\{?\s*"(?:name|function|tool)"\s*:\s*"[A-Za-z_][\w.-]*"'
)
"""A call written as JSON (`{"name": "get_x"...`, `{{"name": ...`, after a ```json fence or
the tag), even one that is not valid JSON: never prose. The name must read as a tool's (no
spaces), so data that has a `name` (`{"name": "Ada Lovelace", ...}`) is not taken for one."""
_WRAPPER_LINE = re.compile(r"```[A-Za-z]*|</?tool_call>")
"""A line that opens or closes a written call: a code fence or Qwen's tag."""
_PROSE_LINE = re.compile(r"\s*[A-Z][a-z']*\s+\w")
"""A line that starts as a sentence does (`Your order ...`): not inside a JSON call."""
MAX_JSON_DEPTH = 64
"""Braces deeper than this in a dropped JSON call are not counted further."""

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

    - **Look first** (`look_first`, a function of the request giving tool calls; off by
      default). When the turn starts (and `search_first` made no call), the calls it gives
      (to attached tools only) are the turn's first step, made without asking the model,
      and that round is not counted. The demo looks up every order id a question names
      (`demo.lookups.named_orders`): shown earlier turns, a 0.5B model answers a later
      question about another order from them instead of calling a tool.
    - **Only an answer reaches the user** (`clean_answers`, on by default; see
      `AnswerCleaner`). A sentence of the model's text that starts as the results
      rendering or a tool call (`get_order_status(...) returned: ...`, which the model
      copies from what it read) is dropped with the rest of its line; an answer that was
      nothing else is asked again once without tools (`REASK_INSTRUCTION` added to the last
      user message), and `NO_ANSWER` if that too was only an echo. A sentence claiming an
      action ("has been cancelled", "I've updated") is replaced by `NOTHING_DONE` unless a
      tool that is not `read_only` succeeded in the turn or a successful result of the turn
      states the same (`claim_backer`). On `stream` at most the sentence being written
      (`ANSWER_HOLD_LIMIT` characters) is held back; call and stream give the same text.

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
    instead, without calling the model, and with `look_first` its look-ups (the only
    short-circuits). An answer that was only an echo is asked once more (see above). It
    never loops otherwise or executes tools.
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
        look_first: Callable[[ChatRequest], Sequence[ToolCall]] | None = None,
        clean_answers: bool = True,
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
        self.look_first = look_first
        self.clean_answers = clean_answers

    def __repr__(self) -> str:
        return (
            f"SmallModelAdvisor(max_rounds={self.max_rounds}, "
            f"results_as_text={self.results_as_text})"
        )

    def adapt(self, request: ChatRequest) -> ChatRequest:
        """The request the model should see instead of `request`."""
        looked = self._looked_first_round(request)
        if (
            self._rounds(request, looked) >= self.max_rounds
            and request.options.tool_choice != "none"
        ):
            request = request.with_options(tool_choice="none")
        messages = _without_calls(request.messages, _failed_lookups(request, looked))
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
        the answer). Calls that change something are never repeated this way. A round
        that only calls `uncounted_tools` is not counted unless it repeats a call of the
        turn (same tool, same arguments): a model that checks the same thing again is
        looping, and answering ends the loop.
        """
        return self._rounds(request, self._looked_first_round(request))

    def _rounds(self, request: ChatRequest, looked: AssistantMessage | None) -> int:
        attached = {t.name: t for t in request.tools}
        turn = request.messages[request.last_user_index + 1 :]
        failed = {m.tool_call_id for m in turn if isinstance(m, ToolMessage) and m.is_error}
        free = True
        count = 0
        made: set[tuple[str, str]] = set()
        for m in turn:
            if not isinstance(m, AssistantMessage) or not m.tool_calls:
                continue
            calls = [(c.name, c.arguments) for c in m.tool_calls]
            repeated = any(call in made for call in calls)
            made.update(calls)
            if m is looked:
                continue
            if free and all(
                c.name not in attached or (c.id in failed and attached[c.name].read_only)
                for c in m.tool_calls
            ):
                free = False
                continue
            if repeated or any(c.name not in self.uncounted_tools for c in m.tool_calls):
                count += 1
        return count

    def first_lookup(self, request: ChatRequest) -> ChatResponse | None:
        """With `look_first`: the turn's first step, the look-ups it names for the user's
        message (only calls to attached tools), made without asking the model."""
        last = request.messages[-1] if request.messages else None
        if not isinstance(last, UserMessage) or request.options.tool_choice == "none":
            return None
        calls = self._look_first_calls(request)
        if not calls:
            return None
        return ChatResponse(message=AssistantMessage(tool_calls=calls), finish_reason="tool_calls")

    def _look_first_calls(self, request: ChatRequest) -> tuple[ToolCall, ...]:
        if self.look_first is None:
            return ()
        attached = {t.name for t in request.tools}
        return tuple(c for c in self.look_first(request) if c.name in attached)

    def _looked_first_round(self, request: ChatRequest) -> AssistantMessage | None:
        """The turn's first round of tool calls if it was the look-first calls, derived
        again from the turn's user message (nothing is stored); else `None`."""
        if self.look_first is None or request.last_user_index < 0:
            return None
        turn = request.messages[request.last_user_index + 1 :]
        first = next((m for m in turn if isinstance(m, AssistantMessage) and m.tool_calls), None)
        if first is None:
            return None
        at_start = request.with_messages(request.messages[: request.last_user_index + 1])
        looked = {(c.name, c.arguments) for c in self._look_first_calls(at_start)}
        return first if {(c.name, c.arguments) for c in first.tool_calls} == looked else None

    def failed_lookups(self, request: ChatRequest) -> frozenset[str]:
        """The ids of the turn's look-first calls that failed, when another of them
        succeeded: they are not shown to the model. It never asked for them, and a small
        model that reads a failure answers that nothing could be done. When every
        look-up failed (an order that is not the customer's), the failures are shown."""
        return _failed_lookups(request, self._looked_first_round(request))

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
        """Pass on the adapted request; once more without tools if it answered nothing;
        then only the answer: see `AnswerCleaner` (re-asked once if nothing else was left)."""
        first = self.first_search(request) or self.first_lookup(request)
        if first is not None:
            return first
        adapted = self.adapt(request)
        response = await self._call(adapted, next)
        if not self.clean_answers:
            return response
        text, kind = _answer_text(request, response)
        if kind != "reask":
            return _with_text(response, text)
        again = await next(_reask(adapted))
        text = _answer_cleaner(request).clean(again.text)
        answer = _with_text(again, text if text.strip() else NO_ANSWER)
        return replace(answer, usage=response.usage + again.usage, finish_reason="stop")

    async def _call(self, adapted: ChatRequest, next: CallNext) -> ChatResponse:
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
        """The streaming twin of `call_model`: the text `AnswerCleaner` holds back (at
        most the sentence being written) is released once judged; an answer that was only
        an echo was shown as nothing, and the re-asked answer streams in its place."""
        first = self.first_search(request) or self.first_lookup(request)
        if first is not None:
            yield ResponseCompleted(first)
            return
        adapted = self.adapt(request)
        if not self.clean_answers:
            async with closing_stream(self._stream(adapted, next)) as events:
                async for event in events:
                    yield event
            return
        completed: ChatResponse | None = None
        only_echo = [False]
        async with closing_stream(
            self._cleaned(request, self._stream(adapted, next), only_echo)
        ) as events:
            async for event in events:
                if isinstance(event, ResponseCompleted):
                    completed = event.response
                else:
                    yield event
        if completed is None:
            return
        if not only_echo[0]:
            yield ResponseCompleted(completed)
            return
        again: ChatResponse | None = None
        async with closing_stream(self._cleaned(request, next(_reask(adapted)), [False])) as events:
            async for event in events:
                if isinstance(event, ResponseCompleted):
                    again = event.response
                else:
                    yield event
        if again is None:
            return
        if not again.text.strip():
            yield TextDelta(NO_ANSWER)
            again = _with_text(again, NO_ANSWER)
        yield ResponseCompleted(
            replace(again, usage=completed.usage + again.usage, finish_reason="stop")
        )

    async def _cleaned(
        self, request: ChatRequest, events: AsyncIterator[StreamEvent], only_echo: list[bool]
    ) -> AsyncIterator[StreamEvent]:
        """`events` with their text cleaned; `only_echo[0]` set when the response's text
        was nothing but an echo (and it has no tool calls)."""
        cleaner = _answer_cleaner(request)
        async with closing_stream(events) as inner:
            async for event in inner:
                if isinstance(event, TextDelta):
                    shown = cleaner.feed(event.text)
                    if shown:
                        yield TextDelta(shown)
                elif isinstance(event, ResponseCompleted):
                    rest = cleaner.finish()
                    if rest:
                        yield TextDelta(rest)
                    response = event.response
                    text, kind = _answer_text(request, response)
                    only_echo[0] = kind == "reask"
                    if kind == "results":  # nothing was shown: the results answer
                        yield TextDelta(text)
                    yield ResponseCompleted(_with_text(response, text))
                elif isinstance(event, AnswerDiscarded):
                    cleaner = _answer_cleaner(request)
                    yield event
                else:
                    yield event

    async def _stream(self, adapted: ChatRequest, next: StreamNext) -> AsyncIterator[StreamEvent]:
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


def _failed_lookups(request: ChatRequest, looked: AssistantMessage | None) -> frozenset[str]:
    """`SmallModelAdvisor.failed_lookups`, given the turn's look-first round."""
    if looked is None:
        return frozenset()
    ids = {c.id for c in looked.tool_calls}
    turn = request.messages[request.last_user_index + 1 :]
    results = [m for m in turn if isinstance(m, ToolMessage) and m.tool_call_id in ids]
    failed = frozenset(m.tool_call_id for m in results if m.is_error)
    return failed if any(not m.is_error for m in results) else frozenset()


def _without_calls(messages: tuple[Message, ...], ids: frozenset[str]) -> tuple[Message, ...]:
    """`messages` without the tool calls `ids`, their results, and an assistant message
    left with nothing."""
    if not ids:
        return messages
    kept: list[Message] = []
    for m in messages:
        if isinstance(m, ToolMessage) and m.tool_call_id in ids:
            continue
        if isinstance(m, AssistantMessage) and any(c.id in ids for c in m.tool_calls):
            calls = tuple(c for c in m.tool_calls if c.id not in ids)
            if not calls and not m.content:
                continue
            m = m.model_copy(update={"tool_calls": calls})
        kept.append(m)
    return tuple(kept)


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


class AnswerCleaner:
    """Lets only an answer through, fed the answer's text piece by piece (a stream) or whole.

    The text is cut into segments: up to and including a line break, or a sentence's end
    (`.`, `!` or `?` followed by a space), or, with neither in `ANSWER_HOLD_LIMIT`
    characters, that many characters; where the cuts fall depends only on the text, so the
    output is the same for every chunking. Each segment is judged once it is complete
    (`feed` holds back at most the segment being written):

    - a sentence that begins with the results rendering (`RESULTS_HEADING`, one of the
      instructions) or with a tool call (`name(` of a tool in `names`, or any snake_case
      `name(`), after an optional bullet, is dropped with the rest of its line: the model
      echoed what it read;
    - a sentence that begins a call written as JSON (`{"name": ...`, the double-brace
      form, after a ```json fence or the `<tool_call>` tag), valid or not, is dropped up to
      the line where its braces close (or, when they never close, up to a line that starts
      as a sentence), with the fence or tag lines around it: the text tool-call parser takes
      only valid calls to attached tools, and what it left is still not an answer (a fence or
      tag line is held back until the next line shows whether a call follows);
    - a sentence claiming an action (`has been cancelled`, `I've updated`) that `backed`
      does not allow is replaced by `NOTHING_DONE` (once per answer; later ones are dropped).

    `echoed` and `claimed` say whether either happened. Call `finish` once at the end.
    """

    def __init__(self, names: Iterable[str] = (), backed: Callable[[str], bool] | None = None):
        known = sorted({n for n in names if n}, key=len, reverse=True)
        self._names = (
            re.compile("(?:" + "|".join(re.escape(n) for n in known) + r")\s*\(") if known else None
        )
        self._backed = backed
        self._buffer = ""
        self._line_start = True
        self._sentence_start = True
        self._dropping = False
        self._json_depth = 0
        self._after_call = False
        self._pending: str | None = None
        self._started = False
        self._echo_line: list[str] | None = None
        self.results: list[str] = []
        self.echoed = False
        self.claimed = False

    def feed(self, text: str) -> str:
        """What of the text so far may be shown now."""
        self._buffer += text
        out: list[str] = []
        while True:
            match = _SEGMENT_END.search(self._buffer, 0, ANSWER_HOLD_LIMIT + 1)
            if match is not None and match.end() <= ANSWER_HOLD_LIMIT:
                cut = match.end()
            elif len(self._buffer) >= ANSWER_HOLD_LIMIT:
                cut = ANSWER_HOLD_LIMIT
            else:
                break
            segment, self._buffer = self._buffer[:cut], self._buffer[cut:]
            out.append(self._judge(segment))
            self._sentence_start = match is not None and match.end() == cut
        return "".join(out)

    def finish(self) -> str:
        """The rest, once the text is complete."""
        segment, self._buffer = self._buffer, ""
        judged = self._judge(segment) if segment else ""
        held, self._pending = self._pending or "", None
        self._dropping = False
        self._capture("")
        return judged + held

    def clean(self, text: str) -> str:
        """A whole text at once: `feed` then `finish`."""
        return self.feed(text) + self.finish()

    def _judge(self, segment: str) -> str:
        at_line_start = self._line_start
        self._line_start = segment.endswith("\n")
        if self._json_depth:
            if not (at_line_start and _PROSE_LINE.match(segment)):
                self._json_depth = _depth_after(self._json_depth, segment)
                self._dropping = not self._json_depth and not self._line_start
                self._after_call = not self._json_depth
                return ""
            self._json_depth = 0  # a line of prose: the call was cut off before it
        if self._after_call and at_line_start:
            self._after_call = False
            if _WRAPPER_LINE.fullmatch(segment.strip()):
                return ""  # the fence or tag that closed a dropped call
        if self._dropping:
            self._dropping = not self._line_start
            self._capture(segment)
            return ""
        if at_line_start and self._line_start and _WRAPPER_LINE.fullmatch(segment.strip()):
            if self._pending is None:
                self._pending = segment  # held: a call may follow
                return ""
        pending, self._pending = self._pending or "", None
        if self._sentence_start and _JSON_CALL.match(segment.lstrip(_LINE_LEAD)):
            self.echoed = True
            self._json_depth = _depth_after(0, segment)
            self._dropping = not self._json_depth and not self._line_start
            self._after_call = not self._json_depth
            return ""
        shown = pending + self._judge_prose(segment)
        if not self._started:  # blank lines before the answer (a dropped call's) are not shown
            shown = shown.lstrip()
            self._started = bool(shown)
        return shown

    def _judge_prose(self, segment: str) -> str:
        if self._sentence_start and self._is_echo(segment):
            self.echoed = True
            self._dropping = not self._line_start
            self._echo_line = []
            self._capture(segment)
            return ""
        if _claims(segment) and (self._backed is None or not self._backed(segment)):
            first = not self.claimed
            self.claimed = True
            trailing = segment[len(segment.rstrip()) :]
            return f"{NOTHING_DONE}{trailing or ' '}" if first else ""
        return segment

    def _capture(self, segment: str) -> None:
        """Collect an echoed line; once it ends, keep what a results line says (`results`)."""
        if self._echo_line is None:
            return
        self._echo_line.append(segment)
        if self._dropping:
            return
        line = "".join(self._echo_line).strip()
        self._echo_line = None
        said = _echoed_result(line.lstrip(_LINE_LEAD))
        if said and len(self.results) < MAX_ECHOED_RESULTS:
            self.results.append(said)

    def _is_echo(self, segment: str) -> bool:
        text = segment.lstrip(_LINE_LEAD)
        if not text.strip():
            return False
        if any(text.startswith(s) for s in _RENDERED):
            return True
        if _CALL_LINE.match(text):
            return True
        return self._names is not None and self._names.match(text) is not None


MAX_ECHOED_RESULTS = 8
"""At most this many echoed results lines answer an answer that was nothing else."""


def _echoed_result(line: str) -> str:
    """What an echoed results line says, for the customer: the result of
    `name(args) returned: result` or `name(args) DONE, ...: result`, `Not done: reason` for
    `name(args) FAILED, NOT DONE: reason` (`NOTHING_DONE` when the reason is about the call
    itself, `CALL_PROBLEMS`, which names tools and schemas); "" for any other line."""
    for marker, lead in ((f" {NOT_DONE}: ", "Not done: "), (f" {DONE}: ", ""), (" returned: ", "")):
        head, found, said = line.partition(marker)
        if found and "(" in head and head.rstrip().endswith(")"):
            said = said.strip()
            if lead and said.lower().startswith(CALL_PROBLEMS):
                return NOTHING_DONE
            return f"{lead}{said}" if said else ""
    return ""


def _depth_after(depth: int, text: str) -> int:
    """The brace depth of a JSON text after `text`, from `depth` (braces inside strings
    count too: a dropped call's strings are the model's, and a wrong count only ends the
    drop at a line's end), between 0 and `MAX_JSON_DEPTH`."""
    return max(0, min(MAX_JSON_DEPTH, depth + text.count("{") - text.count("}")))


_RENDERED = (
    RESULTS_HEADING,
    ANSWER_INSTRUCTION,
    DONE_INSTRUCTION,
    NOT_DONE_INSTRUCTION,
    CONTINUE_INSTRUCTION,
    LOOKUP_FAILED_INSTRUCTION,
    UNKNOWN_TOOL_INSTRUCTION,
    REASK_INSTRUCTION,
)


def claim_backer(request: ChatRequest) -> Callable[[str], bool]:
    """Whether a sentence claiming an action is backed by the current turn: a call to a
    tool that is not `read_only` succeeded in it, or a successful result of it states the
    same (`Order A-2 is cancelled.` backs `A-2 has been cancelled`)."""
    read_only = frozenset(t.name for t in request.tools if t.read_only)
    turn = request.messages[request.last_user_index + 1 :]
    results = [m for m in turn if isinstance(m, ToolMessage) and not m.is_error]
    if any(r.name not in read_only for r in results):
        return lambda sentence: True
    stated = {verb for r in results for verb in _claims(r.text)}

    def backed(sentence: str) -> bool:
        return _claims(sentence) <= stated

    return backed


def _claims(text: str) -> set[str]:
    """The action verbs `text` claims happened (`cancelled` of "A-2 has been cancelled"),
    leaving out those after a negation in the same sentence ("nothing was changed")."""
    verbs: set[str] = set()
    for match in _CLAIM.finditer(text):
        start = max(text.rfind(end, 0, match.start()) for end in (". ", "! ", "? ", "\n"))
        if _NEGATION.search(text, start + 1, match.end()):
            continue
        verb = (match.group("verb") or match.group("verb2") or "").lower()
        verbs.add(verb.replace("canceled", "cancelled"))
    return verbs


def _answer_cleaner(request: ChatRequest) -> AnswerCleaner:
    names = {t.name for t in request.tools}
    names.update(
        c.name for m in request.messages if isinstance(m, AssistantMessage) for c in m.tool_calls
    )
    return AnswerCleaner(names, claim_backer(request))


def _answer_text(
    request: ChatRequest, response: ChatResponse
) -> tuple[str, Literal["answer", "results", "reask"]]:
    """The text of `response` for the user, and where it came from: `answer` (its text
    cleaned, or a response with tool calls or no text at all), `results` (its text was
    nothing but echoed results lines: what they say) or `reask` (nothing but an echo that
    holds no result: the model is asked again)."""
    cleaner = _answer_cleaner(request)
    text = cleaner.clean(response.text)
    if text.strip() or not response.text.strip() or response.tool_calls:
        return text, "answer"
    if cleaner.results:  # only echoed results: they answer, in the tools' own words
        return "\n".join(cleaner.results), "results"
    return text, "reask"


def _with_text(response: ChatResponse, text: str) -> ChatResponse:
    if text == response.text:
        return response
    message = response.message.model_copy(update={"content": text or None})
    return response.with_message(message)


def _reask(request: ChatRequest) -> ChatRequest:
    """`request` without tools, `REASK_INSTRUCTION` added to its last user message."""
    messages = list(request.messages)
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, UserMessage):
            messages[i] = UserMessage(content=f"{message.text}\n{REASK_INSTRUCTION}")
            break
    return request.with_messages(tuple(messages)).with_tools(())


__all__ = [
    "ANSWER_HOLD_LIMIT",
    "CALL_PROBLEMS",
    "CONTINUE_INSTRUCTION",
    "NOTHING_DONE",
    "NO_ANSWER",
    "REASK_INSTRUCTION",
    "AnswerCleaner",
    "claim_backer",
    "DONE",
    "LOOKUP_FAILED_INSTRUCTION",
    "NOT_DONE",
    "QWEN_SYSTEM_PREFIX",
    "RESULTS_HEADING",
    "SmallModelAdvisor",
    "format_call",
    "not_done_reason",
]
