"""Values that travel beside the conversation but are never sent to a model."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ._activity import report


class ToolContext(Mapping[str, Any]):
    """Values a tool receives from the application, never from (or shown to) the model.

    A tool declares a parameter annotated `ToolContext` to receive it. Besides the
    request's values (tenant, user, conversation id, ...) it carries the id of the call
    being executed, which also serves as a stable idempotency key, and the tool's name.
    Its repr names the keys only, so values do not leak into logs or tracebacks.

    When a resumed turn settles a call that waited (`ToolResult.defer`), `decision` is
    the decision it was given and `state` the JSON state it deferred with; both are
    `None` otherwise. A tool that defers to external work can read them, though
    `Result(value)` answers its call without running it.
    """

    __slots__ = ("_values", "call_id", "conversation_id", "decision", "state", "tool_name")

    def __init__(
        self,
        values: Mapping[str, Any] | None = None,
        *,
        call_id: str = "",
        tool_name: str = "",
        conversation_id: str | None = None,
        decision: Any = None,
        state: Any = None,
    ) -> None:
        self._values: Mapping[str, Any] = values if values is not None else {}
        self.call_id = call_id
        self.tool_name = tool_name
        self.conversation_id = conversation_id
        self.decision = decision
        self.state = state

    @property
    def idempotency_key(self) -> str:
        """A key that identifies this tool call across retries and resumes (the call id)."""
        return self.call_id

    def report_progress(
        self,
        progress: float | None = None,
        total: float | None = None,
        message: str | None = None,
    ) -> None:
        """Report how far this call is, for a UI: a `ToolProgress` event with this call's id.

        While the chain streams and the tool declares `reports_progress=True`, the event
        reaches the stream between the call's `ToolCallStarted` and `ToolCallFinished`;
        otherwise (`call`, or a tool that did not declare it) nothing is sent and nothing
        fails. For a tool with an `idle_timeout`, every report restarts that clock, on
        both paths. Never blocks on the consumer: when a slow consumer lets 256 events
        pile up, further ones are dropped; `message` is cut at 1000 characters. Call it
        from the tool, a task it starts, or the worker thread a sync tool runs in (not
        from threads of your own). `progress` and `total` are finite numbers (or `None`),
        `message` a string: anything else raises `TypeError` or `ValueError`.
        """
        report(self.call_id, progress, total, message)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        keys = ", ".join(sorted(map(str, self._values)))
        return f"ToolContext(tool_name={self.tool_name!r}, call_id={self.call_id!r}, keys=[{keys}])"

    __str__ = __repr__


__all__ = ["ToolContext"]
