"""`Chain`: an ordered list of advisors around a chat model."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from .advisor import (
    Advisor,
    AfterFunction,
    BeforeFunction,
    CallNext,
    FunctionAdvisor,
    Placement,
    StreamNext,
    one_sided,
    overrides,
)
from .call_ids import StreamCallIds, unique_response
from .checks import require_chat_model, require_mapping
from .deferred import Decision
from .errors import ChainConfigurationError, InvalidDecisions, StreamInterruptedError
from .events import ResponseCompleted, StreamEvent, ToolCallDelta
from .invocation import ToolHook
from .manager import ToolCallingManager
from .model import ChatModel, model_name, provider_name
from .options import ChatOptions
from .prompt import Prompt, to_messages
from .request import ChatRequest
from .response import ChatResponse
from .streams import closing_stream
from .sync import iterate_sync, refuse_in_loop, run_sync
from .tools import Tool, merge_tools
from .watchers import model_call_watchers, notify_after, notify_before

_log = logging.getLogger("advisorchain")


class Chain:
    """Advisors around a model. The first advisor is the outermost link.

    The chain is built once, as a fold over the list; advisors that do not override a
    hook cost nothing on that path. Building it binds each advisor to its `Placement`
    (`Advisor.bind`, which may refuse the place or return a per-chain copy) and refuses,
    with a `ChainConfigurationError`, an advisor that overrides `call` but not `stream`
    (or `call_model` but not `stream_model`, or the other way round) unless it declares
    `single_path`. The advisors' `call_model`/`stream_model` hooks are folded first,
    directly around the model, in list order; each link's `before`/`after` wrap its own
    `call`/`stream`. A `Chain` is itself a `ChatModel`, so chains nest: a chain used as
    another's model receives the tool context (a provider never does).

    Default `tools` and `tool_context` given here are merged with those of each call:
    per-call tools are added (a name used twice is an error), per-call context values
    win. Tools that advisors contribute are attached to every request.

    `tool_hooks` are the links' `call_tool` hooks in chain order: the path every tool
    execution of this chain's tool loop takes (a bound `ToolCallingAdvisor` reads it).
    """

    def __init__(
        self,
        advisors: Iterable[Advisor] = (),
        *,
        model: ChatModel,
        tools: Iterable[Tool] = (),
        tool_context: Mapping[str, Any] | None = None,
        options: ChatOptions | None = None,
    ) -> None:
        require_chat_model(model)
        if tool_context is not None:
            require_mapping(tool_context, "tool_context", "a dict of values for the tools")
        if options is not None and not isinstance(options, ChatOptions):
            raise TypeError(f"options must be a ChatOptions, not {type(options).__name__}")
        self.advisors: tuple[Advisor, ...] = tuple(advisors)
        self.model = model
        self.tool_hooks: tuple[ToolHook, ...] = ()
        self._links: tuple[Advisor, ...] = self._bind_links()
        self._advisor_tools = merge_tools(*(a.tools for a in self._links))
        self.tools: tuple[Tool, ...] = merge_tools(tools, self._advisor_tools)
        self._merged_tools = self.tools  # (`request` re-merges a `tools` set afterwards)
        self.tool_context: Mapping[str, Any] = dict(tool_context or {})
        self.options = options or ChatOptions()
        self.tool_hooks = tuple(a.call_tool for a in self._links if overrides(a, "call_tool"))
        loops = [a.tool_loop for a in self._links if a.tool_loop is not None]
        self._tool_loop: ToolCallingManager | None = loops[0] if loops else None
        call_next: CallNext
        stream_next: StreamNext
        if isinstance(model, Chain):  # a chain is not a provider: its tools need the context
            call_next = partial(_call_nested, model)
            stream_next = _tracked(partial(_stream_nested, model))
        else:
            call_next = partial(_call_without_tool_context, model)
            stream_next = _tracked(partial(_stream_without_tool_context, model))
        for link in reversed(self._links):
            if overrides(link, "call_model"):
                call_next = partial(link.call_model, next=call_next)
            if overrides(link, "stream_model"):
                stream_next = _tracked(partial(link.stream_model, next=stream_next))
        for link in reversed(self._links):
            if overrides(link, "call"):
                call_next = partial(link.call, next=call_next)
            if overrides(link, "stream"):
                stream_next = _tracked(partial(link.stream, next=stream_next))
            before = link.before if overrides(link, "before") else None
            after = link.after if overrides(link, "after") else None
            if before is not None or after is not None:
                call_next = partial(_around_call, before, after, call_next)
                stream_next = _tracked(partial(_around_stream, before, after, stream_next))
        self._call_next = call_next
        self._stream_next = stream_next

    def _bind_links(self) -> tuple[Advisor, ...]:
        """Bind every advisor to its place in this chain; refuse one-sided advisors."""
        links: list[Advisor] = []
        inside = False
        for index, given in enumerate(self.advisors):
            if not isinstance(given, Advisor):
                raise TypeError(f"chain link {index} is not an Advisor: {given!r}")
            link = given.bind(Placement(self, index, inside))
            if not isinstance(link, Advisor):
                raise TypeError(f"{given.name}.bind() returned {link!r}, not an Advisor")
            _check_paths(link)
            links.append(link)
            inside = inside or link.tool_loop is not None
        return tuple(links)

    @property
    def model_name(self) -> str | None:
        """The wrapped model's name, if it has one."""
        return model_name(self.model)

    @property
    def provider_name(self) -> str | None:
        """The wrapped model's provider name, if it has one."""
        return provider_name(self.model)

    def __repr__(self) -> str:
        links = ", ".join(a.name for a in self.advisors)
        return f"Chain([{links}], model={self.model!r})"

    def request(
        self,
        prompt: Prompt = (),
        *,
        tools: Iterable[Tool] = (),
        tool_context: Mapping[str, Any] | None = None,
        options: ChatOptions | None = None,
        conversation_id: str | None = None,
        decisions: Mapping[str, Decision] | None = None,
        **option_values: Any,
    ) -> ChatRequest:
        """The `ChatRequest` that `call`/`stream` would send for these arguments.

        Checks them first: a prompt that is not one (`core/prompt.py`) is an
        `InvalidPromptError`; OpenAI-style message dicts are converted strictly.
        """
        if decisions is not None:
            if not isinstance(decisions, Mapping):
                raise InvalidDecisions(
                    f"decisions must map call ids to decisions, not {type(decisions).__name__}"
                )
            if self._tool_loop is None:
                raise ChainConfigurationError(
                    "decisions resume a deferred turn, which needs the chain's tool loop "
                    "(add a ToolCallingAdvisor)"
                )
        if isinstance(prompt, ChatRequest):
            base = prompt
            messages = prompt.messages
        else:
            base = None
            messages = to_messages(prompt)
        if tool_context is not None:
            require_mapping(tool_context, "tool_context", "a dict of values for the tools")
        if options is not None and not isinstance(options, ChatOptions):
            raise TypeError(f"options must be a ChatOptions, not {type(options).__name__}")
        if base is None and tools == () and self.tools is self._merged_tools:
            request_tools = self.tools  # the chain's own tools, as merged when it was built
        else:
            request_tools = merge_tools(self.tools, base.tools if base else (), tools)
        values = dict(self.tool_context)
        if base is not None:
            values.update(base.tool_context)
        values.update(tool_context or {})
        chat_options = self.options.merged(base.options if base else None).merged(
            options, **option_values
        )
        if base is not None:
            return replace(
                base,
                messages=messages,
                tools=request_tools,
                tool_context=values,
                options=chat_options,
                conversation_id=conversation_id or base.conversation_id,
                decisions=decisions if decisions is not None else base.decisions,
            )
        return ChatRequest(
            messages=messages,
            options=chat_options,
            tools=request_tools,
            tool_context=values,
            conversation_id=conversation_id,
            decisions=decisions,
        )

    async def call(
        self,
        prompt: Prompt = (),
        *,
        tools: Iterable[Tool] = (),
        tool_context: Mapping[str, Any] | None = None,
        options: ChatOptions | None = None,
        conversation_id: str | None = None,
        decisions: Mapping[str, Decision] | None = None,
        **option_values: Any,
    ) -> ChatResponse:
        """Run one turn and return the final response.

        `option_values` are `ChatOptions` fields (`temperature=0`, `max_tokens=200`, ...).

        A turn that ends with `finish_reason="deferred"` is resumed by another turn:
        `call([*transcript, *response.messages], decisions={call_id: decision})` (with a
        `MemoryAdvisor`, `call(decisions=..., conversation_id=...)`: memory supplies the
        transcript). The tool loop checks the decisions against the calls that wait
        (`InvalidDecisions` before anything runs), settles the decided calls through the
        chain's `call_tool` hooks, then goes on like any turn; the response's `messages`
        start with the settled calls' results. See `core/deferred.py`.
        """
        request = self.request(
            prompt,
            tools=tools,
            tool_context=tool_context,
            options=options,
            conversation_id=conversation_id,
            decisions=decisions,
            **option_values,
        )
        return await self._call_next(request)

    async def stream(
        self,
        prompt: Prompt = (),
        *,
        tools: Iterable[Tool] = (),
        tool_context: Mapping[str, Any] | None = None,
        options: ChatOptions | None = None,
        conversation_id: str | None = None,
        decisions: Mapping[str, Decision] | None = None,
        **option_values: Any,
    ) -> AsyncIterator[StreamEvent]:
        """Run one turn as a stream of events ending with exactly one `ResponseCompleted`.

        With `decisions`, the turn resumes a deferred one (see `call`): the stream first
        reports the calls it settles (`ToolCallStarted`, `ToolCallFinished`)."""
        request = self.request(
            prompt,
            tools=tools,
            tool_context=tool_context,
            options=options,
            conversation_id=conversation_id,
            decisions=decisions,
            **option_values,
        )
        completed = False
        opened = request.context.get(_OPEN_STREAMS)
        owner = opened is None
        if owner:
            opened = request.context[_OPEN_STREAMS] = []
        try:
            async with closing_stream(self._stream_next(request)) as events:
                async for event in events:
                    if completed:
                        raise StreamInterruptedError(
                            f"a link yielded {type(event).__name__} after ResponseCompleted"
                        )
                    if isinstance(event, ResponseCompleted):
                        completed = True
                    yield event
        finally:
            if owner:
                del request.context[_OPEN_STREAMS]
                await _close_all(opened or [])
        if not completed:
            raise StreamInterruptedError("the stream ended without a ResponseCompleted event")

    def call_sync(
        self,
        prompt: Prompt,
        *,
        tools: Iterable[Tool] = (),
        tool_context: Mapping[str, Any] | None = None,
        options: ChatOptions | None = None,
        conversation_id: str | None = None,
        decisions: Mapping[str, Decision] | None = None,
        **option_values: Any,
    ) -> ChatResponse:
        """`call` for synchronous code (scripts, notebooks without a running loop).

        Runs the turn to completion on a fresh asyncio event loop in this thread. Inside a
        running event loop it raises `SyncInAsyncError` at once (it would block the loop):
        await `call` there.
        """
        refuse_in_loop("Chain.call_sync", "await chain.call(...)")
        return run_sync(
            partial(
                self.call,
                prompt,
                tools=tools,
                tool_context=tool_context,
                options=options,
                conversation_id=conversation_id,
                decisions=decisions,
                **option_values,
            )
        )

    def stream_sync(
        self,
        prompt: Prompt,
        *,
        tools: Iterable[Tool] = (),
        tool_context: Mapping[str, Any] | None = None,
        options: ChatOptions | None = None,
        conversation_id: str | None = None,
        decisions: Mapping[str, Decision] | None = None,
        **option_values: Any,
    ) -> Iterator[StreamEvent]:
        """`stream` for synchronous code: an iterator of the turn's events.

        The turn runs on an event loop in a helper thread, one event ahead at most; leaving
        the loop early (`break`) cancels the turn and closes its streams. Raises
        `SyncInAsyncError` at once inside a running event loop: use `stream` there.
        """
        refuse_in_loop("Chain.stream_sync", "async for event in chain.stream(...)")
        return iterate_sync(
            partial(
                self.stream,
                prompt,
                tools=tools,
                tool_context=tool_context,
                options=options,
                conversation_id=conversation_id,
                decisions=decisions,
                **option_values,
            )
        )


_OPEN_STREAMS = "advisorchain.open_streams"


def _tracked(step: StreamNext) -> StreamNext:
    """Record every stream a link opens, so the chain can close them all when it ends.

    A link that iterates `next(request)` without closing it would otherwise leave the
    upstream (an HTTP response, a span) open until garbage collection when the caller
    abandons the stream.
    """

    def open_stream(request: ChatRequest) -> AsyncIterator[StreamEvent]:
        stream = step(request)
        opened = request.context.get(_OPEN_STREAMS)
        if opened is not None:
            opened.append(stream)
        return stream

    return open_stream


async def _close_all(streams: list[AsyncIterator[StreamEvent]]) -> None:
    for stream in streams:
        aclose = getattr(stream, "aclose", None)
        if aclose is None:
            continue
        try:
            await aclose()
        except Exception:
            _log.debug("closing an abandoned stream failed", exc_info=True)


def _without_tool_context(request: ChatRequest) -> ChatRequest:
    if not request.tool_context and request.decisions is None:
        return request
    return replace(request, tool_context={}, decisions=None)


def _without_decisions(request: ChatRequest) -> ChatRequest:
    """A nested chain's turn is its own: decisions are for this chain's loop alone."""
    return request if request.decisions is None else replace(request, decisions=None)


async def _call_nested(chain: Chain, request: ChatRequest) -> ChatResponse:
    return await chain.call(_without_decisions(request))


def _stream_nested(chain: Chain, request: ChatRequest) -> AsyncIterator[StreamEvent]:
    return chain.stream(_without_decisions(request))


async def _call_without_tool_context(model: ChatModel, request: ChatRequest) -> ChatResponse:
    """The innermost step: the model never receives the tool context, so cannot leak it;
    the ids of the tool calls it answers are made unique and valid before any link sees
    them (`core.call_ids`); the watchers of an enclosing tool call see the call
    (`core/watchers.py`)."""
    watchers = model_call_watchers()
    if watchers:
        await notify_before(watchers, request)
    response = unique_response(await model.call(_without_tool_context(request)), request.messages)
    if watchers:
        await notify_after(watchers, request, response)
    return response


async def _stream_without_tool_context(
    model: ChatModel, request: ChatRequest
) -> AsyncIterator[StreamEvent]:
    """`_call_without_tool_context` for streams: deltas and response get the same ids."""
    ids = StreamCallIds(request.messages)
    watchers = model_call_watchers()
    if watchers:
        await notify_before(watchers, request)
    async with closing_stream(model.stream(_without_tool_context(request))) as events:
        async for event in events:
            if isinstance(event, ToolCallDelta):
                event = ids.delta(event)
            elif isinstance(event, ResponseCompleted):
                response = ids.response(event.response)
                if watchers:
                    await notify_after(watchers, request, response)
                if response is not event.response:
                    event = ResponseCompleted(response)
            yield event


def _check_paths(link: Advisor) -> None:
    """Refuse a link that one path would silently skip (unless it says it is meant to)."""
    sided = one_sided(link)
    if sided is None:
        return
    given, missing = sided
    path = "stream" if missing.startswith("stream") else "call"
    if link.single_path:
        _log.warning(
            "advisor %s overrides %s but not %s (single_path=True): chain.%s skips it",
            link.name,
            given,
            missing,
            path,
        )
        return
    if isinstance(link, FunctionAdvisor):
        raise ChainConfigurationError(
            f"advisor {link.name} has {given}= but no {missing}=, so chain.{path} would "
            f"silently skip it. Fix it in one of two ways: give before=/after= instead "
            f"(applied on both paths), or give {missing}= too. (An advisor meant for one "
            "path only passes single_path=True.)"
        )
    raise ChainConfigurationError(
        f"advisor {link.name} overrides {given} but not {missing}, so chain.{path} would "
        f"silently skip it. Fix it in one of two ways: move its work into before(request) "
        f"/ after(response), which the chain applies on both paths, or override {missing} "
        "too. (An advisor meant for one path only sets single_path = True.)"
    )


async def _around_call(
    before: BeforeFunction | None,
    after: AfterFunction | None,
    next: CallNext,
    request: ChatRequest,
) -> ChatResponse:
    """A link's `before`, the rest of the chain, then its `after` (call path)."""
    if before is not None:
        request = await before(request)
    response = await next(request)
    if after is not None:
        response = await after(response)
    return response


async def _around_stream(
    before: BeforeFunction | None,
    after: AfterFunction | None,
    next: StreamNext,
    request: ChatRequest,
) -> AsyncIterator[StreamEvent]:
    """A link's `before`, the rest of the chain, then its `after` on the response of
    `ResponseCompleted` (stream path); every other event passes unchanged."""
    if before is not None:
        request = await before(request)
    async with closing_stream(next(request)) as events:
        async for event in events:
            if after is not None and isinstance(event, ResponseCompleted):
                event = ResponseCompleted(await after(event.response))
            yield event


__all__ = ["Chain"]
