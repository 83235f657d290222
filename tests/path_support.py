"""One turn on either path: `chain.call`, or `chain.stream` read to its final response."""

from __future__ import annotations

from typing import Any

from advisorchain import Chain, ChatResponse, ResponseCompleted


async def answer(path: str, chain: Chain, *args: Any, **options: Any) -> ChatResponse:
    """`await chain.call(...)` when `path` is "call"; else the response of the stream's last event.

    On the stream path the last event must be the turn's one `ResponseCompleted`.
    """
    if path == "call":
        return await chain.call(*args, **options)
    events = [event async for event in chain.stream(*args, **options)]
    completed = [event for event in events if isinstance(event, ResponseCompleted)]
    assert len(completed) == 1 and events[-1] is completed[0], events
    return completed[0].response
