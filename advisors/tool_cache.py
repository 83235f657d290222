"""`ToolResultCacheAdvisor`: answers repeated calls of read-only tools from a cache."""

from __future__ import annotations

import datetime
import decimal
import enum
import hashlib
import json
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeAlias

import pydantic_core
from opentelemetry import trace
from pydantic import BaseModel

from ..core.advisor import Advisor, ToolNext
from ..core.checks import require_callable, require_number
from ..core.invocation import ToolInvocation, ToolResult
from ..core.tools import InvalidToolArguments

logger = logging.getLogger("advisorchain.cache")

CacheKey: TypeAlias = Sequence[str] | Callable[[ToolInvocation], Hashable] | None
"""The tool-context keys whose values are part of every entry's key, a function of the
invocation that returns the extra part of the key, or `None` (the default): a
fingerprint of the whole tool context, for tools that receive it."""

_MAX_FINGERPRINT_DEPTH = 32

HIT_ATTRIBUTE = "advisorchain.tool.cache_hit"

_HIT: Mapping[str, Any] = MappingProxyType({"cache_hit": True})


class ToolResultCacheAdvisor(Advisor):
    """Caches the results of `read_only` tools, per tool, arguments and tenant.

    Control flow (`call_tool` only): a call of a tool that is not `read_only` passes
    through. Otherwise the entry's key is the tool's name, its validated arguments
    canonicalised (defaults filled in, keys sorted, as JSON) and a part that keeps
    contexts apart: with the default `key=None`, a fingerprint (SHA-256) of every
    tool-context value when the tool receives the context (`Tool.takes_context`: a
    function tool with a `ToolContext` parameter, any handler-based tool such as MCP
    tools and sub-agents), nothing for a tool that cannot read it; a context value the
    fingerprint cannot represent (an object that is not data: a client, a connection)
    makes the call uncached. With `key=("tenant", ...)`, the values of those keys only
    (calls that differ in other context values then share entries); with a function,
    what `key(invocation)` returns; `key=()` shares entries across every context. A fresh entry
    answers at once, without `next` (short-circuit): the result is the cached one with
    `metadata["cache_hit"] = True`. Otherwise `next` runs and an `ok` result is stored;
    errors, timeouts, rejections and pending calls are never stored. A call whose
    context lacks one of the `key` names is not cached at all, so calls of different
    tenants, or of none, never share an entry.

    Entries live `ttl` seconds (`None`: until evicted) by `clock` (injectable); at most
    `max_entries` are kept, the least recently used evicted first. Hits are logged
    (logger `advisorchain.cache`, INFO, `event="tool_cache_hit"`: tool, call id; never
    the arguments or context values) and set `advisorchain.tool.cache_hit` on the
    current span (place a `TracingAdvisor` before this advisor for an `execute_tool`
    span per hit). Two identical calls running at the same time both run; `clear()`
    empties the cache.
    """

    def __init__(
        self,
        ttl: float | None = 300.0,
        key: CacheKey = None,
        *,
        max_entries: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        require_number(ttl, "ttl (None: no expiry)", positive=True, optional=True)
        require_number(max_entries, "max_entries", minimum=1, integer=True)
        require_callable(clock, "clock", "clock() -> seconds")
        if isinstance(key, str):
            raise TypeError("key takes a sequence of tool-context keys, not one string")
        self.ttl = ttl
        self.key = key
        self.max_entries = max_entries
        self.clock = clock
        self._entries: OrderedDict[Hashable, tuple[float, ToolResult]] = OrderedDict()

    def __repr__(self) -> str:
        return f"ToolResultCacheAdvisor(ttl={self.ttl}, entries={len(self._entries)})"

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every entry."""
        self._entries.clear()

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        if not invocation.tool.read_only:
            return await next(invocation)
        cache_key = self._key(invocation)
        if cache_key is None:
            return await next(invocation)
        entries = self._entries
        found = entries.get(cache_key)
        if found is not None:
            expires, hit = found
            if self.ttl is None or expires >= self.clock():
                entries.move_to_end(cache_key)
                self._hit(invocation)
                return hit
            del entries[cache_key]
        result = await next(invocation)
        if result.outcome == "ok":
            expires = self.clock() + self.ttl if self.ttl is not None else 0.0
            entries[cache_key] = (expires, _as_hit(result))
            entries.move_to_end(cache_key)
            if len(entries) > self.max_entries:
                entries.popitem(last=False)
        return result

    def _key(self, invocation: ToolInvocation) -> Hashable | None:
        validated = invocation.validated
        if validated is None:
            try:
                validated = invocation.tool.validate_arguments(invocation.arguments)
            except InvalidToolArguments:
                return None  # `next` reports it; nothing to cache
        try:
            arguments = _canonical(validated)
        except (TypeError, ValueError):
            return None
        key = self.key
        if key is None:
            if not invocation.tool.takes_context:
                extra: Hashable = ()
            else:
                try:
                    extra = _fingerprint(invocation.context)
                except (TypeError, ValueError, RecursionError):
                    return None
        elif callable(key):
            extra = key(invocation)
        elif key:
            context = invocation.context
            values = []
            for name in key:
                if name not in context:
                    return None
                values.append(context[name])
            try:
                extra = _canonical(values)
            except (TypeError, ValueError):
                return None
        else:
            extra = ()
        return (invocation.name, arguments, extra)

    def _hit(self, invocation: ToolInvocation) -> None:
        if logger.isEnabledFor(logging.INFO):
            logger.info(
                "tool %r (call %s) answered from the cache",
                invocation.name,
                invocation.call.id,
                extra={
                    "event": "tool_cache_hit",
                    "tool": invocation.name,
                    "call_id": invocation.call.id,
                },
            )
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attribute(HIT_ATTRIBUTE, True)


def _as_hit(result: ToolResult) -> ToolResult:
    """The result a hit answers with (built once, when the entry is stored); its
    metadata says only that it is a hit (not how the original call went)."""
    return ToolResult(
        content=result.content,
        outcome=result.outcome,
        return_direct=result.return_direct,
        value=result.value,
        metadata=_HIT,
    )


def _canonical(value: Any) -> Hashable:
    """`value` as a hashable key: equal arguments give equal keys. A validated model's
    fields come in declaration order (defaults filled in), a mapping's keys are sorted;
    each value is paired with its type (so `1` and `True` differ). Values that cannot be
    hashed are written as JSON instead."""
    if isinstance(value, BaseModel):
        items: Any = value.__dict__.items()
    elif isinstance(value, dict):
        items = sorted(value.items())
    else:
        items = enumerate(value)
    try:
        key = tuple([(k, v.__class__, v) for k, v in items])
        hash(key)
        return key
    except TypeError:
        pass
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(pydantic_core.to_jsonable_python(value), sort_keys=True)


def _fingerprint(context: Mapping[str, Any]) -> str:
    """A digest of every value of `context`: equal data gives equal digests, and values
    of different types differ (`b"a"` and `"a"`, `1` and `True`, a set and a list).
    `TypeError` for a value that is not data (its identity is not what it means)."""
    text = json.dumps(_tagged(dict(context), 0), separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _tagged(value: Any, depth: int) -> Any:
    if depth > _MAX_FINGERPRINT_DEPTH:
        raise ValueError("the tool context is nested too deeply to fingerprint")
    kind = type(value).__qualname__
    if value is None or isinstance(value, (bool, int, float, str)):
        return [kind, value]
    if isinstance(value, (bytes, bytearray)):
        return [kind, bytes(value).hex()]
    if isinstance(value, Mapping):
        items = [[_tagged(k, depth + 1), _tagged(v, depth + 1)] for k, v in value.items()]
        return [kind, sorted(items, key=json.dumps)]
    if isinstance(value, (list, tuple)):
        return [kind, [_tagged(v, depth + 1) for v in value]]
    if isinstance(value, (set, frozenset)):
        return [kind, sorted((_tagged(v, depth + 1) for v in value), key=json.dumps)]
    if isinstance(value, BaseModel):
        return [kind, value.model_dump_json()]
    if isinstance(
        value, (decimal.Decimal, datetime.date, datetime.time, datetime.timedelta, uuid.UUID)
    ):
        return [kind, str(value)]
    if isinstance(value, enum.Enum):
        return [kind, _tagged(value.value, depth + 1)]
    raise TypeError(f"{kind} is not data")


__all__ = ["HIT_ATTRIBUTE", "CacheKey", "ToolResultCacheAdvisor"]
