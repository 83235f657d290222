"""The worker side: activities that run the steps, and the worker that serves a chain."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

import anyio.to_thread
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from ..steps import (
    STEP_EMBED,
    STEP_MCP_CALL,
    STEP_MCP_LIST,
    STEP_MEMORY_LOAD,
    STEP_MEMORY_SAVE,
    STEP_MODEL_CALL,
    STEP_MODEL_STREAM,
    STEP_TOOL_CALL,
    EffectsLedger,
    EmbedInput,
    EmbedOutput,
    McpListInput,
    McpListOutput,
    MemoryLoadInput,
    MemoryLoadOutput,
    MemorySaveInput,
    MemorySaveOutput,
    ModelCallInput,
    ModelCallOutput,
    StepExecutor,
    ToolCallInput,
    ToolCallOutput,
    ToolSource,
)
from ._workflow import (
    LIVE_TOPIC,
    ChainFactory,
    ConversationWorkflow,
    DurableOptions,
    register_chain,
)

T = TypeVar("T")

_original_uuid4 = uuid.uuid4
_original_time = time.time
_original_run_sync = anyio.to_thread.run_sync


def _uuid4() -> uuid.UUID:
    return workflow.uuid4() if workflow.in_workflow() else _original_uuid4()


def _time() -> float:
    return workflow.time() if workflow.in_workflow() else _original_time()


async def _run_sync(function: Callable[..., T], *args: Any, **options: Any) -> T:
    if workflow.in_workflow():
        return function(*args)
    return await _original_run_sync(function, *args, **options)


def deterministic_workflow_code() -> None:
    """Route `uuid.uuid4()` and `time.time()` to the workflow's deterministic ones while
    code runs inside a workflow (links that make ids or read the clock: approval ids, a
    model's missing call ids, audit times), and run `anyio.to_thread.run_sync(f, ...)` as
    `f(...)` on the workflow's thread there (a tool search index's build, a link's sync
    tool: the workflow's event loop cannot take a worker thread's result back, and would
    wait forever); unchanged elsewhere. Idempotent; the worker calls it."""
    uuid.uuid4 = _uuid4
    time.time = _time
    anyio.to_thread.run_sync = _run_sync  # type: ignore[assignment]


async def _heartbeating(work: Awaitable[T], every: float) -> T:
    """`work`, heartbeating every `every` seconds while it runs (a dead worker's activity
    is then retried after the heartbeat timeout, not the whole start-to-close one)."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every)
            if done:
                return task.result()
            activity.heartbeat()
    finally:
        if not task.done():
            task.cancel()


class StepActivities:
    """The activities of a worker, one per step name, running on its `StepExecutor`.

    `advisorchain.model.stream` publishes each delta live to the workflow's stream (topic
    `live`, each item `{"step": activity id, "attempt": n, "event": ...}`); a retried
    attempt first publishes `{"type": "attempt_discarded", ...}` so a UI drops the partial
    output of the attempts before it."""

    def __init__(self, executor: StepExecutor, options: DurableOptions) -> None:
        self.executor = executor
        self.options = options
        heartbeat = options.heartbeat_timeout
        self.every = heartbeat.total_seconds() / 3 if heartbeat is not None else 3600.0

    def activities(self) -> list[Callable[..., Any]]:
        """The activity functions to register on a worker."""
        return [
            self.model_call,
            self.model_stream,
            self.tool_call,
            self.mcp_list,
            self.mcp_call,
            self.memory_load,
            self.memory_save,
            self.embed,
        ]

    @activity.defn(name=STEP_MODEL_CALL)
    async def model_call(self, payload: ModelCallInput) -> ModelCallOutput:
        """One model call."""
        return await _heartbeating(self.executor.model_call(payload), self.every)

    @activity.defn(name=STEP_MODEL_STREAM)
    async def model_stream(self, payload: ModelCallInput) -> ModelCallOutput:
        """One streamed model call, its deltas published live."""
        info = activity.info()
        attempt = info.attempt
        if not self.options.live_deltas or info.workflow_id is None:
            return await _heartbeating(
                self.executor.model_stream(payload, attempt=attempt), self.every
            )
        live = WorkflowStreamClient.from_within_activity(batch_interval=timedelta(milliseconds=50))
        topic = live.topic(LIVE_TOPIC)
        step = info.activity_id

        async def publish(values: dict[str, Any]) -> None:
            topic.publish({"step": step, "attempt": attempt, "event": values})

        async with live:
            if attempt > 1:
                topic.publish(
                    {
                        "step": step,
                        "attempt": attempt,
                        "event": {"type": "attempt_discarded", "attempt": attempt - 1},
                    }
                )
            return await _heartbeating(
                self.executor.model_stream(payload, publish, attempt=attempt), self.every
            )

    @activity.defn(name=STEP_TOOL_CALL)
    async def tool_call(self, payload: ToolCallInput) -> ToolCallOutput:
        """One tool execution (claimed in the ledger first when the tool has effects)."""
        return await _heartbeating(self.executor.tool_call(payload), self.every)

    @activity.defn(name=STEP_MCP_LIST)
    async def mcp_list(self, payload: McpListInput) -> McpListOutput:
        """An MCP toolset's tools."""
        return await _heartbeating(self.executor.mcp_list(payload), self.every)

    @activity.defn(name=STEP_MCP_CALL)
    async def mcp_call(self, payload: ToolCallInput) -> ToolCallOutput:
        """One MCP tool call."""
        return await _heartbeating(self.executor.tool_call(payload), self.every)

    @activity.defn(name=STEP_MEMORY_LOAD)
    async def memory_load(self, payload: MemoryLoadInput) -> MemoryLoadOutput:
        """A conversation's stored messages."""
        return await self.executor.memory_load(payload)

    @activity.defn(name=STEP_MEMORY_SAVE)
    async def memory_save(self, payload: MemorySaveInput) -> MemorySaveOutput:
        """Append a turn's messages."""
        return await self.executor.memory_save(payload)

    @activity.defn(name=STEP_EMBED)
    async def embed(self, payload: EmbedInput) -> EmbedOutput:
        """Embeddings for tool search."""
        return await _heartbeating(self.executor.embed(payload), self.every)


def create_worker(
    client: Client,
    task_queue: str,
    factory: ChainFactory,
    *,
    ledger: EffectsLedger | None = None,
    options: DurableOptions | None = None,
    executor: StepExecutor | None = None,
    name: str | None = None,
    toolsets: Sequence[ToolSource] = (),
    **worker_options: Any,
) -> Worker:
    """A Temporal worker serving `factory`'s chain on `task_queue`: the conversation
    workflow (its links run as workflow code) and the step activities (on the chain's real
    model and tools, or `executor`'s registry, with `ledger` for tools with effects).
    `name` is what conversations name the chain by (the task queue by default).
    `toolsets` are connected MCP toolsets (`McpToolset`, by name; or `executor`'s): each
    turn lists their tools through the activity `advisorchain.mcp.list`.

    The client needs `data_converter()`. Workflow code runs unsandboxed with `uuid.uuid4`
    and `time.time` made deterministic inside workflows, and `anyio.to_thread.run_sync`
    run on the workflow's thread (`deterministic_workflow_code`).
    `worker_options` go to `temporalio.worker.Worker`.
    """
    options = options or DurableOptions()
    deterministic_workflow_code()
    if executor is not None and toolsets:
        raise ValueError("give the toolsets to the executor (StepExecutor(toolsets=...))")
    executor = executor or StepExecutor.from_chain(factory(), ledger=ledger, toolsets=toolsets)
    register_chain(name or task_queue, factory, options, tuple(executor.toolsets))
    steps = StepActivities(executor, options)
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[ConversationWorkflow],
        activities=steps.activities(),
        workflow_runner=UnsandboxedWorkflowRunner(),
        **worker_options,
    )


def worker_activities(worker_steps: StepActivities) -> Sequence[Callable[..., Any]]:
    """The activities of `worker_steps` (for a worker built by hand)."""
    return worker_steps.activities()


__all__ = [
    "StepActivities",
    "create_worker",
    "deterministic_workflow_code",
    "worker_activities",
]
