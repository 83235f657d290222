"""The caller's side: a durable conversation, turn by turn, on call or stream."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.client import (
    Client,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateStage,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter, PydanticPayloadConverter
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    ExternalStorage,
    JSONPlainPayloadConverter,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)
from temporalio.exceptions import WorkflowAlreadyStartedError

from ...core.deferred import Decision
from ...core.events import StreamEvent
from ...core.messages import Message
from ...core.prompt import Prompt, to_messages
from ...core.response import ChatResponse
from ..steps import (
    decision_to_json,
    event_from_json,
    messages_from_json,
    messages_to_json,
    response_from_json,
)
from ._workflow import (
    CLOSE_SIGNAL,
    DECIDE_UPDATE,
    EVENTS_TOPIC,
    LIVE_TOPIC,
    STATUS_QUERY,
    TRANSCRIPT_QUERY,
    TURN_UPDATE,
    WORKFLOW_NAME,
    ConversationInput,
    DecideInput,
    TurnInput,
    TurnOutput,
)


class FilePayloadStore(StorageDriver):
    """Where payloads over the threshold go instead of the workflow's history: files in
    `folder` (a directory every worker and client can read: a shared volume), one per
    payload, named by the SHA-256 of its bytes (so storing twice is harmless). The
    history keeps the reference. Files are never deleted by advisorchain: expire them
    after the conversations' retention period."""

    def __init__(self, folder: str | Path, *, name: str = "advisorchain-files") -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._name = name

    def name(self) -> str:
        """The driver's name, recorded in each reference."""
        return self._name

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        """Write each payload to its file; its claim names the file's digest."""
        claims = []
        for payload in payloads:
            data = payload.SerializeToString()
            digest = hashlib.sha256(data).hexdigest()
            path = self.folder / digest
            if not path.exists():
                partial = path.with_suffix(f".{uuid.uuid4().hex}.tmp")
                partial.write_bytes(data)
                os.replace(partial, path)
            claims.append(StorageDriverClaim(claim_data={"sha256": digest}))
        return claims

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        """Read each claimed payload back (checking its digest)."""
        payloads = []
        for claim in claims:
            digest = claim.claim_data["sha256"]
            if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
                raise ValueError(f"not a payload digest: {digest[:80]!r}")
            data = (self.folder / digest).read_bytes()
            if hashlib.sha256(data).hexdigest() != digest:
                raise ValueError(f"the payload file {digest} is damaged")
            payload = Payload()
            payload.ParseFromString(data)
            payloads.append(payload)
        return payloads


_SHARED_JSON = PydanticJSONPlainPayloadConverter()
"""The pydantic JSON converter every `SharedPayloadConverter` uses, with its type adapters."""


class SharedPayloadConverter(PydanticPayloadConverter):
    """temporalio's pydantic payload converter, its type adapters shared by every instance.

    The worker makes a payload converter for each workflow it starts, and pydantic's caches
    the `TypeAdapter` of each type it decodes per instance: each conversation built its
    input's adapters again (some milliseconds a workflow: the conversation input's
    dataclass schema is the largest). This one decodes and encodes alike through one
    process-wide converter, whose adapters are built once per type."""

    def __init__(self) -> None:
        CompositePayloadConverter.__init__(
            self,
            *(
                _SHARED_JSON if isinstance(c, JSONPlainPayloadConverter) else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            ),
        )


_CONVERTER = DataConverter(payload_converter_class=SharedPayloadConverter)


def data_converter(
    large_payloads: StorageDriver | None = None, *, threshold: int = 256 * 1024
) -> DataConverter:
    """The data converter clients and workers of durable conversations use (pydantic, its
    type adapters shared across workflows: `SharedPayloadConverter`).

    With `large_payloads` (a `FilePayloadStore`, or any Temporal `StorageDriver`), every
    payload of `threshold` bytes or more (a large tool result or image, a long transcript)
    is stored there and the history keeps a reference: Temporal refuses payloads over
    2 MB. Clients and workers must use the same store."""
    if large_payloads is None:
        return _CONVERTER
    return dataclasses.replace(
        _CONVERTER,
        external_storage=ExternalStorage(
            drivers=[large_payloads], payload_size_threshold=threshold
        ),
    )


@dataclass(frozen=True, slots=True)
class StreamedEvent:
    """An event of a durable turn's stream and its offset: reconnect with
    `conversation.events(from_offset=offset + 1)`."""

    offset: int
    turn: int
    event: StreamEvent


@dataclass(frozen=True, slots=True)
class LiveDelta:
    """A delta published live by a model activity: `step` and `attempt` tell which
    attempt of which model call made it; `discarded` marks the signal that the attempts
    before `attempt` of that step failed, so a UI drops what they showed."""

    offset: int
    step: str
    attempt: int
    event: StreamEvent | None
    discarded: bool = False


class TemporalConversation:
    """A conversation on Temporal: `call`/`stream` run a turn (the update
    `advisorchain.turn`), with `decisions=` a resume (`advisorchain.decide`), as
    `Chain.call`/`Chain.stream` do in process; the transcript lives in the workflow.

    `start()` starts the workflow (or attaches to the running one) on `task_queue`, with
    the chain the workers registered as `chain` (the task queue's name by default). Each
    turn carries an id
    (a fresh one unless given: give the same id when retrying, and a turn that was applied
    is refused as a duplicate) and the turn count this handle last saw (a turn another
    caller ran since is refused as stale, `expected_turn=None` skips that check). A resume
    carries the arguments fingerprints of the waiting calls as this handle was shown them.
    """

    def __init__(
        self, client: Client, conversation_id: str, *, task_queue: str, chain: str | None = None
    ) -> None:
        self.client = client
        self.id = conversation_id
        self.task_queue = task_queue
        self.chain = chain or task_queue
        self.handle: WorkflowHandle[Any, Any] = client.get_workflow_handle(conversation_id)
        self.turns: int | None = None
        self.fingerprints: dict[str, str] = {}

    async def start(self, history: Prompt = ()) -> TemporalConversation:
        """Start the conversation's workflow with `history`, or attach to it if it runs.

        A workflow this call started is at turn 0 with no call waiting, which this handle
        knows without asking; attached to a running one, it reads its state (a query)."""
        try:
            self.handle = await self.client.start_workflow(
                WORKFLOW_NAME,
                ConversationInput(
                    chain=self.chain, messages=messages_to_json(to_messages(history))
                ),
                id=self.id,
                task_queue=self.task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            )
        except WorkflowAlreadyStartedError:
            self.handle = self.client.get_workflow_handle(self.id)
            await self.refresh()
        else:
            self.turns = 0
            self.fingerprints = {}
        return self

    async def refresh(self) -> None:
        """Read the turn count and the waiting calls' fingerprints from the workflow."""
        status = await self.handle.query(STATUS_QUERY, result_type=dict)
        self.turns = int(status["turns"])
        self.fingerprints = dict(status["waiting"])

    async def transcript(self) -> tuple[Message, ...]:
        """The conversation's transcript."""
        return messages_from_json(await self.handle.query(TRANSCRIPT_QUERY, result_type=str))

    async def close(self) -> None:
        """End the conversation (its workflow completes once running turns finished)."""
        await self.handle.signal(CLOSE_SIGNAL)

    def _turn(self, prompt: Prompt, decisions: Mapping[str, Decision] | None,
              turn_id: str | None, stream: bool) -> tuple[str, Any]:  # fmt: skip
        turn_id = turn_id or uuid.uuid4().hex
        if decisions is not None:
            return DECIDE_UPDATE, DecideInput(
                turn_id=turn_id,
                decisions={k: decision_to_json(v) for k, v in decisions.items()},
                fingerprints={k: v for k, v in self.fingerprints.items() if k in decisions},
                stream=stream,
            )
        return TURN_UPDATE, TurnInput(
            turn_id=turn_id,
            messages=messages_to_json(to_messages(prompt)),
            expected_turn=self.turns,
            stream=stream,
        )

    def _done(self, output: TurnOutput) -> ChatResponse:
        self.turns = output.turn if self.turns is None else self.turns + 1
        self.fingerprints = dict(output.fingerprints)
        return response_from_json(output.response)

    async def call(
        self,
        prompt: Prompt = (),
        *,
        decisions: Mapping[str, Decision] | None = None,
        turn_id: str | None = None,
    ) -> ChatResponse:
        """Run one turn on `prompt` (new messages), or resume with `decisions`; the turn's
        response. A refused or failed turn raises `temporalio.client.WorkflowUpdateFailedError`
        (its `cause` says why), after this handle read the conversation's state again."""
        name, payload = self._turn(prompt, decisions, turn_id, False)
        try:
            output: TurnOutput = await self.handle.execute_update(
                name, payload, result_type=TurnOutput
            )
        except WorkflowUpdateFailedError:
            await self.refresh()  # a refused or failed turn: read where the conversation is
            raise
        return self._done(output)

    async def stream(
        self,
        prompt: Prompt = (),
        *,
        decisions: Mapping[str, Decision] | None = None,
        turn_id: str | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Run one turn as a stream: the events the workflow publishes for it, ending with
        its `ResponseCompleted` (the same events `Chain.stream` yields in process)."""
        name, payload = self._turn(prompt, decisions, turn_id, True)
        start = await self.offset()
        update = await self.handle.start_update(
            name,
            payload,
            wait_for_stage=WorkflowUpdateStage.ACCEPTED,
            result_type=TurnOutput,
        )
        async for item in self.events(from_offset=start):
            yield item.event
            if item.event.__class__.__name__ == "ResponseCompleted":
                break
        self._done(await update.result())

    async def offset(self) -> int:
        """The stream's next offset (where a new subscriber starts to see only new items)."""
        return await WorkflowStreamClient.create(self.client, self.id).get_offset()

    async def events(
        self, *, from_offset: int = 0, poll: timedelta = timedelta(milliseconds=20)
    ) -> AsyncIterator[StreamedEvent]:
        """The conversation's turn events from `from_offset` on (a reconnecting client
        passes the offset after the last one it read); endless: stop when done."""
        stream = WorkflowStreamClient.create(self.client, self.id)
        async for item in stream.subscribe([EVENTS_TOPIC], from_offset, poll_cooldown=poll):
            values = item.data
            event = values["event"]
            if event.get("type") == "turn_failed":
                raise RuntimeError(f"the turn failed ({event.get('error')})")
            yield StreamedEvent(item.offset, int(values["turn"]), event_from_json(event))

    async def live(
        self, *, from_offset: int = 0, poll: timedelta = timedelta(milliseconds=20)
    ) -> AsyncIterator[LiveDelta]:
        """Model deltas as model activities publish them (endless: stop when done)."""
        stream = WorkflowStreamClient.create(self.client, self.id)
        async for item in stream.subscribe([LIVE_TOPIC], from_offset, poll_cooldown=poll):
            values = item.data
            event = values["event"]
            if event.get("type") == "attempt_discarded":
                yield LiveDelta(item.offset, values["step"], values["attempt"], None, True)
            else:
                yield LiveDelta(
                    item.offset, values["step"], values["attempt"], event_from_json(event)
                )


__all__ = [
    "FilePayloadStore",
    "LiveDelta",
    "SharedPayloadConverter",
    "StreamedEvent",
    "TemporalConversation",
    "data_converter",
]
