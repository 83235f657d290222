"""`Chain`: an ordered list of advisors around a chat model."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Protocol, TypeAlias, runtime_checkable

from ._call_ids import StreamCallIds, unique_response
from ._streams import closing_stream
from .advisor import (
    Advisor,
    AfterFunction,
    BeforeFunction,
    CallNext,
    FunctionAdvisor,
    Placement,
    StreamNext,
    ToolHook,
    one_sided,
    overrides,
)
from .errors import ApprovalNotFound, ChainConfigurationError, StreamInterruptedError
from .events import ResponseCompleted, StreamEvent, ToolCallDelta
from .messages import Message, UserMessage
from .model import ChatModel
from .options import ChatOptions
from .request import ChatRequest
from .response import ChatResponse
from .suspension import ResumedTurn, start_resumed, take_resumed
from .tools import Tool, merge_tools

_log = logging.getLogger("advisorchain")

Prompt: TypeAlias = str | Sequence[Message] | ChatRequest
"""What `Chain.call` accepts: a user message's text, a transcript, or a whole request."""


@runtime_checkable
class TurnResumer(Protocol):
    """An advisor that can continue a turn it suspended (`ApprovalAdvisor` does).

    `resume_turn` receives a request carrying the resumer's tools and tool context but no
    messages, and returns the `ResumedTurn`: the request that continues the turn through
    the whole chain (saved transcript, completed by whatever the decisions produced) and
    the messages and events the resume produced; or `None` when `pending_id` is not one of
    its own.
    """

    async def resume_turn(
        self,
        pending_id: str,
        decisions: Mapping[str, Any],
        request: ChatRequest,
        advisors: Sequence[Advisor],
    ) -> ResumedTurn | None:
        """Claim the suspended turn `pending_id`; how it continues, or `None`."""
        ...


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
        self.advisors: tuple[Advisor, ...] = tuple(advisors)
        self.model = model
        self._links: tuple[Advisor, ...] = self._bind_links()
        self._advisor_tools = merge_tools(*(a.tools for a in self._links))
        self.tools: tuple[Tool, ...] = merge_tools(tools, self._advisor_tools)
        self.tool_context: Mapping[str, Any] = dict(tool_context or {})
        self.options = options or ChatOptions()
        self._tool_hooks: tuple[ToolHook, ...] = tuple(
            a.call_tool for a in self._links if overrides(a, "call_tool")
        )
        call_next: CallNext
        stream_next: StreamNext
        if isinstance(model, Chain):  # a chain is not a provider: its tools need the context
            call_next = model.call
            stream_next = _tracked(model.stream)
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
        return getattr(self.model, "model_name", None)

    @property
    def provider_name(self) -> str | None:
        """The wrapped model's provider name, if it has one."""
        return getattr(self.model, "provider_name", None)

    def __repr__(self) -> str:
        links = ", ".join(a.name for a in self.advisors)
        return f"Chain([{links}], model={self.model!r})"

    def as_tool(
        self,
        name: str,
        description: str,
        *,
        parameters: Mapping[str, Any] | None = None,
        context_keys: Collection[str] = (),
        requires_approval: bool = False,
        timeout: float | None = None,
        max_depth: int = 3,
    ) -> Tool:
        """This chain as a `Tool` another chain's model can call (a sub-agent).

        Each call runs one turn of this chain: its input is a `task` text (or, with
        `parameters`, arguments of that JSON schema, sent as JSON), its result the
        answer's text (or structured output). Only the parent's tool-context values
        named in `context_keys` are passed down. The turn's usage is added to the
        parent turn's; while the parent streams, each event of this turn reaches the
        parent's stream as `ToolProgress(call_id, event=...)`. The parent's tool
        `timeout` and cancellation bound the call; `max_depth` bounds nesting. A turn
        that ends waiting for a deferred approval is an error result
        (`SubchainSuspendedError`). See `core/subchain.py`.
        """
        from .subchain import chain_tool

        return chain_tool(
            self,
            name,
            description,
            parameters=parameters,
            context_keys=context_keys,
            requires_approval=requires_approval,
            timeout=timeout,
            max_depth=max_depth,
        )

    def request(
        self,
        prompt: Prompt,
        *,
        tools: Iterable[Tool] = (),
        tool_context: Mapping[str, Any] | None = None,
        options: ChatOptions | None = None,
        conversation_id: str | None = None,
        **option_values: Any,
    ) -> ChatRequest:
        """The `ChatRequest` that `call`/`stream` would send for these arguments."""
        if isinstance(prompt, ChatRequest):
            base = prompt
            messages = prompt.messages
        else:
            base = None
            if isinstance(prompt, str):
                messages = (UserMessage(content=prompt),)
            else:
                messages = tuple(prompt)
        request_tools = merge_tools(self.tools, base.tools if base else (), tools)
        values = dict(self.tool_context)
        if base is not None:
            values.update(base.tool_context)
        values.update(tool_context or {})
        chat_options = self.options.merged(base.options if base else None).merged(
            options, **option_values
        )
        hooks = self._tool_hooks
        if base is not None:
            return replace(
                base,
                messages=messages,
                tools=request_tools,
                tool_context=values,
                options=chat_options,
                conversation_id=conversation_id or base.conversation_id,
                tool_hooks=base.tool_hooks + tuple(h for h in hooks if h not in base.tool_hooks),
            )
        return ChatRequest(
            messages=messages,
            options=chat_options,
            tools=request_tools,
            tool_context=values,
            conversation_id=conversation_id,
            tool_hooks=hooks,
        )

    async def call(
        self,
        prompt: Prompt,
        *,
        tools: Iterable[Tool] = (),
        tool_context: Mapping[str, Any] | None = None,
        options: ChatOptions | None = None,
        conversation_id: str | None = None,
        **option_values: Any,
    ) -> ChatResponse:
        """Run one turn and return the final response.

        `option_values` are `ChatOptions` fields (`temperature=0`, `max_tokens=200`, ...).
        """
        request = self.request(
            prompt,
            tools=tools,
            tool_context=tool_context,
            options=options,
            conversation_id=conversation_id,
            **option_values,
        )
        return await self._call_next(request)

    async def stream(
        self,
        prompt: Prompt,
        *,
        tools: Iterable[Tool] = (),
        tool_context: Mapping[str, Any] | None = None,
        options: ChatOptions | None = None,
        conversation_id: str | None = None,
        **option_values: Any,
    ) -> AsyncIterator[StreamEvent]:
        """Run one turn as a stream of events ending with exactly one `ResponseCompleted`."""
        request = self.request(
            prompt,
            tools=tools,
            tool_context=tool_context,
            options=options,
            conversation_id=conversation_id,
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

    async def resume(
        self,
        pending_id: str,
        decisions: Mapping[str, Any],
        *,
        tools: Iterable[Tool] = (),
        tool_context: Mapping[str, Any] | None = None,
    ) -> ChatResponse:
        """Continue a turn that ended with `finish_reason="approval_pending"`.

        `decisions` maps each pending call's id to its decision (`Approve()`,
        `Approve(arguments=...)`, `Reject(reason)`). Possibly in another process: pass the
        tools again (by name, as the suspended turn had them) and the tool context (never
        persisted). The advisor that suspended the turn executes the approved calls, then
        the turn goes on through the whole chain like a `call`, with the saved transcript
        completed by the new results. The response's `messages` start with those results
        (the tool loop puts them there, so every link outside the loop sees them).

        The continued turn's `request.context["advisorchain.resumed"]` (`core.suspension.
        RESUMED`) holds `pending_id`: its transcript is the suspended turn's, whose user
        message and history the links outside the loop already saw once. A memory advisor
        reads it to neither prepend its history again nor store that user message twice.
        """
        resumed = await self._resume(pending_id, decisions, tools, tool_context)
        response = await self._call_next(resumed.request)
        unclaimed = take_resumed(resumed.request.context)  # a chain without a tool loop
        if unclaimed is not None:
            response = replace(response, messages=unclaimed.messages + response.messages)
        return response

    async def resume_stream(
        self,
        pending_id: str,
        decisions: Mapping[str, Any],
        *,
        tools: Iterable[Tool] = (),
        tool_context: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """`resume` as a stream of events, like `stream`; it first reports the calls the
        resume ran (`ToolCallStarted`, `ToolCallFinished`)."""
        resumed = await self._resume(pending_id, decisions, tools, tool_context)
        context = resumed.request.context
        unclaimed: ResumedTurn | None = None
        first = True
        async with closing_stream(self.stream(resumed.request)) as events:
            async for event in events:
                if first:  # a tool loop took the resumed results when it started
                    first = False
                    unclaimed = take_resumed(context)
                    for reported in unclaimed.events if unclaimed else ():
                        yield reported
                if unclaimed is not None and isinstance(event, ResponseCompleted):
                    response = event.response
                    event = ResponseCompleted(
                        replace(response, messages=unclaimed.messages + response.messages)
                    )
                yield event

    async def _resume(
        self,
        pending_id: str,
        decisions: Mapping[str, Any],
        tools: Iterable[Tool],
        tool_context: Mapping[str, Any] | None,
    ) -> ResumedTurn:
        resumers = [a for a in self._links if isinstance(a, TurnResumer)]
        if not resumers:
            raise ChainConfigurationError(
                "no advisor of this chain can resume a suspended turn (add the ApprovalAdvisor)"
            )
        base = self.request((), tools=tools, tool_context=tool_context)
        for resumer in resumers:
            resumed = await resumer.resume_turn(pending_id, decisions, base, self._links)
            if resumed is not None:
                start_resumed(resumed, pending_id)
                return resumed
        raise ApprovalNotFound(f"no pending approval with id {pending_id!r}")


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
    if not request.tool_context:
        return request
    return replace(request, tool_context={})


async def _call_without_tool_context(model: ChatModel, request: ChatRequest) -> ChatResponse:
    """The innermost step: the model never receives the tool context, so cannot leak it;
    the ids of the tool calls it answers are made unique and valid before any link sees
    them (`core._call_ids`)."""
    response = await model.call(_without_tool_context(request))
    return unique_response(response, request.messages)


async def _stream_without_tool_context(
    model: ChatModel, request: ChatRequest
) -> AsyncIterator[StreamEvent]:
    """`_call_without_tool_context` for streams: deltas and response get the same ids."""
    ids = StreamCallIds(request.messages)
    async with closing_stream(model.stream(_without_tool_context(request))) as events:
        async for event in events:
            if isinstance(event, ToolCallDelta):
                event = ids.delta(event)
            elif isinstance(event, ResponseCompleted):
                response = ids.response(event.response)
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
