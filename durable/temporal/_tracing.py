"""Replay-safe tracing: spans that links open in workflow code are exported once."""

from __future__ import annotations

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from temporalio import workflow


def _replaying() -> bool:
    return workflow.in_workflow() and workflow.unsafe.is_replaying()


class ReplaySafeSpanProcessor(SpanProcessor):
    """Wraps the span processor of a `TracerProvider` (the one a `TracingAdvisor` is given)
    so that a workflow's replay exports nothing twice: a span that ends while the workflow
    replays its history ended (and was exported) when the history was first made, so it
    is dropped; every other span passes to `inner`. Spans outside workflows pass as they
    are."""

    def __init__(self, inner: SpanProcessor) -> None:
        self.inner = inner

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Pass the start on (a span started in replay may end live, and is kept)."""
        self.inner.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        """Drop a span that ends in replay; pass any other on."""
        if not _replaying():
            self.inner.on_end(span)

    def shutdown(self) -> None:
        """Shut the inner processor down."""
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush the inner processor."""
        return self.inner.force_flush(timeout_millis)


__all__ = ["ReplaySafeSpanProcessor"]
