"""Durable turns side by side: CPU and wall time per turn of one scripted three-round turn
(the model asks for a look-up, then another, then answers: three model calls, two tool
calls) in process, on Temporal through advisorchain, and on a hand-written Temporal
workflow doing the same rounds as activities (the floor); then turns per second with N
concurrent conversations on one worker.

Each runner lives in this process: client, worker and workflow code, so "CPU" is this
process's CPU time (`time.process_time`, every thread) per turn; the Temporal dev server
(`temporal server start-dev`, from the `temporal` extra) runs in its own process and is
not counted there (its own CPU per turn is the last column, read from /proc). Each durable
turn starts a workflow and ends it: advisorchain's is a conversation started, one turn (an
update), closed; the floor's a workflow run to its result. Another row measures a turn (an
update) of one running conversation, whose transcript grows by six messages a turn. The
chain's factory runs in every workflow; its tool is made once, as a module-level `@tool`
is.

Every runner's worker runs from the start, and the rows are measured interleaved: medians
over `--rounds` rounds, each a block of `--turns` turns of every row in turn (round `r`
starting at the `r`-th row), then turns/s at each `--concurrency`, the median of
`--repeats` tries interleaved alike, so all rows see the same machine load.

The peers, when installed, in the same run: PydanticAI (pydantic-ai-slim, its
`TemporalDurability` capability and `PydanticAIPlugin`) and the OpenAI Agents SDK
(`temporalio-openai-agents`, which wants openai-agents 0.22.x, and its `OpenAIAgentsPlugin`),
each with a scripted model giving the same three rounds and the same `lookup` tool, a
workflow per turn run to its result like the floor; a missing one prints "not installed".
Each durable row also counts the activities one turn's workflow history scheduled.

`--before DIR` adds advisorchain's rows again from an earlier tree of this package,
extracted into `DIR/advisorchain_prev` and imported under that name (its own client, data
converter and worker, on the same dev server), marked "(before)":

    mkdir -p /tmp/before/advisorchain_prev
    git archive <commit> | tar -x -C /tmp/before/advisorchain_prev
    python -m benchmarks.durable [--turns 20] [--rounds 3] [--concurrency 1,10,50]
                                 [--repeats 3] [--before /tmp/before]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import shutil
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow

import advisorchain
from advisorchain import Chain, ToolCall

PREVIOUS = "advisorchain_prev"
"""The name an earlier tree of the package is imported under (`--before`)."""


def script(tool_call: Any = ToolCall) -> Callable[[Any], Any]:
    """The scripted model: look up A1, then B2, then answer (a function of the request, so
    every turn and every worker answers alike); `tool_call` is the `ToolCall` class of the
    package whose model answers."""

    def reply(request: Any) -> Any:
        last_user = max(i for i, m in enumerate(request.messages) if m.role == "user")
        results = [m for m in request.messages[last_user:] if m.role == "tool"]
        if len(results) == 0:
            return tool_call.from_arguments("lookup", {"sku": "A1"})
        if len(results) == 1:
            return tool_call.from_arguments("lookup", {"sku": "B2"})
        return "A1 and B2 cost 3 each."

    return reply


reply = script()


def lookup(sku: str) -> str:
    """Price of a sku."""
    return f"{sku}: 3"


def chain_factory(package: Any) -> Callable[[], Any]:
    """The factory of the chain every advisorchain runner runs, from `package` (this
    advisorchain, or the earlier tree of `--before`): its tool made once, as a module-level
    `@tool` is (docs/durable.md's example), the factory running again in every workflow."""
    providers = importlib.import_module(f"{package.__name__}.providers")
    tool = package.tool(read_only=True)(lookup)
    reply = script(package.ToolCall)

    def factory() -> Any:
        return package.Chain(
            [package.ToolCallingAdvisor()], model=providers.ScriptedChatModel(reply), tools=[tool]
        )

    return factory


_bench_chain = chain_factory(advisorchain)


def bench_chain() -> Chain:
    """The chain every advisorchain runner runs."""
    chain: Chain = _bench_chain()
    return chain


@dataclass
class Measured:
    cpu_ms: float
    wall_ms: float
    activities: list[str] | None = None
    """The activities one turn's workflow history scheduled, in order (durable rows)."""
    server_cpu_ms: float | None = None
    """The dev server's CPU per turn (its process, a child of this one; Linux only)."""


def server_cpu() -> float:
    """CPU seconds of this process's child processes so far (the dev server), from /proc;
    0 where there is none."""
    total = 0
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == os.getpid():  # fields[1]: the parent's pid
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


@dataclass
class Row:
    """A runner's turn, as `measure_all` and `throughput_all` run it: `client` and `last`
    (the last turn's workflow id) count its activities; `rated` rows have a turns/s row."""

    turn: Callable[[], Awaitable[Any]]
    client: Any = None
    last: list[str] = field(default_factory=lambda: [""])
    rated: bool = True


def _rotated(names: list[str], by: int) -> list[str]:
    by %= len(names)
    return names[by:] + names[:by]


async def measure_all(rows: dict[str, Row], turns: int, rounds: int) -> dict[str, Measured]:
    """Median CPU and wall milliseconds per turn of each row over `rounds` blocks of
    `turns` turns (after one warm-up turn each), the rows' blocks interleaved (round `r`
    starts at the `r`-th row), so that every row sees the same machine load."""
    for row in rows.values():
        await row.turn()
    names = list(rows)
    cpus: dict[str, list[float]] = {name: [] for name in names}
    walls: dict[str, list[float]] = {name: [] for name in names}
    servers: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):
        for name in _rotated(names, round_):
            cpu, wall, server = time.process_time(), time.perf_counter(), server_cpu()
            for _ in range(turns):
                await rows[name].turn()
            cpus[name].append((time.process_time() - cpu) * 1000 / turns)
            walls[name].append((time.perf_counter() - wall) * 1000 / turns)
            servers[name].append((server_cpu() - server) * 1000 / turns)
    return {
        name: Measured(
            statistics.median(cpus[name]),
            statistics.median(walls[name]),
            server_cpu_ms=statistics.median(servers[name]) if name != "in process" else None,
        )
        for name in names
    }


async def scheduled(client: Any, workflow_id: str) -> list[str]:
    """The names of the activities a workflow's history scheduled, in order."""
    names = []
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            names.append(event.activity_task_scheduled_event_attributes.activity_type.name)
    return names


async def throughput(turn: Callable[[], Awaitable[Any]], n: int) -> float:
    """Turns per second with `n` conversations at once."""
    await asyncio.gather(*(turn() for _ in range(min(n, 4))))
    start = time.perf_counter()
    await asyncio.gather(*(turn() for _ in range(n)))
    return n / (time.perf_counter() - start)


async def throughput_all(
    rows: dict[str, Row], concurrency: list[int], repeats: int
) -> dict[str, dict[int, float]]:
    """Each row's median turns/s at each concurrency over `repeats` tries, interleaved as
    `measure_all` does."""
    names = list(rows)
    rates: dict[str, dict[int, list[float]]] = {
        name: {n: [] for n in concurrency} for name in names
    }
    for n in concurrency:
        for repeat in range(repeats):
            for name in _rotated(names, repeat):
                rates[name][n].append(await throughput(rows[name].turn, n))
    return {name: {n: statistics.median(r) for n, r in rates[name].items()} for name in names}


# -- the hand-written floor --------------------------------------------------------------------


@activity.defn(name="floor.model")
async def floor_model(step: int) -> str:
    """The floor's model: the same three answers."""
    return ["lookup:A1", "lookup:B2", "A1 and B2 cost 3 each."][step]


@activity.defn(name="floor.lookup")
async def floor_lookup(sku: str) -> str:
    """The floor's tool."""
    return f"{sku}: 3"


@workflow.defn(name="floor.Turn", sandboxed=False)
class FloorTurn:
    """The same rounds as activities, by hand: model, tool, model, tool, model."""

    @workflow.run
    async def run(self, prompt: str) -> str:
        answer = ""
        for step in range(3):
            answer = await workflow.execute_activity(
                floor_model, step, start_to_close_timeout=timedelta(minutes=1)
            )
            if answer.startswith("lookup:"):
                await workflow.execute_activity(
                    floor_lookup,
                    answer.removeprefix("lookup:"),
                    start_to_close_timeout=timedelta(minutes=1),
                )
        return answer


# -- the peers: PydanticAI and the OpenAI Agents SDK on Temporal (optional) -------------------

ANSWER = "A1 and B2 cost 3 each."


@dataclass
class Peer:
    """A peer framework's turn as a Temporal workflow: what its worker and client need."""

    workflow: type[Any]
    activities: list[Any]
    client_plugins: list[Any]
    worker_plugins: list[Any]


PEER_TURNS: dict[str, Callable[[str], Awaitable[str]]] = {}
"""A peer's turn, by its workflow's name: set when the peer is built (Temporal wants workflow
classes at module level, the peers' imports are optional)."""


@workflow.defn(name="pai.Turn", sandboxed=False)
class PydanticAITurn:
    """PydanticAI's turn: `agent.run` in workflow code."""

    @workflow.run
    async def run(self, prompt: str) -> str:
        return await PEER_TURNS["pai.Turn"](prompt)


@workflow.defn(name="oa.Turn", sandboxed=False)
class OpenAIAgentsTurn:
    """The OpenAI Agents SDK's turn: `Runner.run` in workflow code."""

    @workflow.run
    async def run(self, prompt: str) -> str:
        return await PEER_TURNS["oa.Turn"](prompt)


def pydantic_ai_on_temporal() -> Peer | None:
    """PydanticAI's `Agent` with its `TemporalDurability` capability (the current form of
    `TemporalAgent`, which 2.68 deprecates), a `FunctionModel` giving the same three rounds
    and the same `lookup` tool, run by a workflow per turn; `None` when pydantic-ai-slim is
    not installed. Each model request and each tool call is an activity."""
    try:
        from pydantic_ai import Agent
        from pydantic_ai.durable_exec.temporal import (
            AgentPlugin,
            PydanticAIPlugin,
            TemporalDurability,
        )
        from pydantic_ai.messages import (
            ModelMessage,
            ModelRequest,
            ModelResponse,
            TextPart,
            ToolCallPart,
            ToolReturnPart,
            UserPromptPart,
        )
        from pydantic_ai.models.function import AgentInfo, FunctionModel
    except ImportError:
        return None

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked = max(
            i
            for i, m in enumerate(messages)
            if isinstance(m, ModelRequest) and any(isinstance(p, UserPromptPart) for p in m.parts)
        )
        done = sum(
            isinstance(p, ToolReturnPart)
            for m in messages[asked:]
            if isinstance(m, ModelRequest)
            for p in m.parts
        )
        if done < 2:
            sku = ("A1", "B2")[done]
            return ModelResponse(parts=[ToolCallPart("lookup", {"sku": sku}, f"c{done}")])
        return ModelResponse(parts=[TextPart(ANSWER)])

    async def lookup(sku: str) -> str:
        """Price of a sku."""
        return f"{sku}: 3"

    agent = Agent(
        FunctionModel(script),
        name="bench_pai",
        tools=[lookup],
        capabilities=[TemporalDurability()],
    )

    async def turn(prompt: str) -> str:
        return str((await agent.run(prompt)).output)

    PEER_TURNS["pai.Turn"] = turn
    return Peer(PydanticAITurn, [], [PydanticAIPlugin()], [AgentPlugin(agent)])


@activity.defn(name="oa.lookup")
async def oa_lookup(sku: str) -> str:
    """Price of a sku (the OpenAI Agents SDK's tool, an activity)."""
    return f"{sku}: 3"


def openai_agents_on_temporal() -> Peer | None:
    """The OpenAI Agents SDK's `Agent` on Temporal (`temporalio-openai-agents`, the
    `OpenAIAgentsPlugin`): a scripted `Model` on the worker giving the same three rounds,
    `lookup` an activity made a tool (`activity_as_tool`; a plain `function_tool` would run
    in workflow code), `Runner.run` in a workflow per turn; `None` when not installed. Each
    model call is an activity (the plugin's `invoke_model_activity`), each tool call one."""
    try:
        import temporalio.openai_agents as temporal_agents  # type: ignore[import-not-found, unused-ignore]
        from agents import (  # type: ignore[import-not-found, unused-ignore]
            Agent,
            Model,
            ModelResponse,
            Runner,
            set_tracing_disabled,
        )
    except ImportError:
        return None
    set_tracing_disabled(True)  # no trace export to OpenAI from a benchmark

    class Scripted(Model):  # type: ignore[misc, unused-ignore]
        """The same three rounds, a function of the input (the model activity's argument)."""

        async def get_response(self, system_instructions: Any, input: Any, *args: Any,
                               **kwargs: Any) -> ModelResponse:  # fmt: skip
            items = [input] if isinstance(input, str) else input
            asked = max(i for i, item in enumerate(items) if _role(item) == "user")
            done = sum(_type(item) == "function_call_output" for item in items[asked:])
            if done < 2:
                sku = ("A1", "B2")[done]
                arguments = json.dumps({"sku": sku})
                return temporal_agents.testing.ResponseBuilders.tool_call(
                    arguments, "oa_lookup", call_id=f"c{done}"
                )
            return temporal_agents.testing.ResponseBuilders.output_message(ANSWER)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    class Provider:
        def get_model(self, model_name: str | None) -> Any:
            return Scripted()

    agent = Agent(
        name="bench_oa",
        instructions="Answer prices.",
        tools=[
            temporal_agents.workflow.activity_as_tool(
                oa_lookup, start_to_close_timeout=timedelta(minutes=1)
            )
        ],
    )

    async def turn(prompt: str) -> str:
        return str((await Runner.run(agent, prompt)).final_output)

    PEER_TURNS["oa.Turn"] = turn
    plugin = temporal_agents.OpenAIAgentsPlugin(model_provider=Provider())
    return Peer(OpenAIAgentsTurn, [oa_lookup], [plugin], [])


def _role(item: Any) -> Any:
    return item.get("role") if isinstance(item, dict) else getattr(item, "role", None)


def _type(item: Any) -> Any:
    return item.get("type") if isinstance(item, dict) else getattr(item, "type", None)


PEERS: dict[str, Callable[[], Peer | None]] = {
    "Temporal, PydanticAI": pydantic_ai_on_temporal,
    "Temporal, OpenAI Agents SDK": openai_agents_on_temporal,
}


async def peer_row(stack: AsyncExitStack, target: str, name: str, peer: Peer) -> Row:
    """A peer's turn, a workflow run to its result, on its own client (its plugins set the
    data converter) and worker, on the same dev server."""
    from temporalio.client import Client
    from temporalio.worker import Worker

    client = await Client.connect(target, plugins=peer.client_plugins)
    queue = f"bench-{peer.workflow.__name__}"
    await stack.enter_async_context(Worker(
        client, task_queue=queue, workflows=[peer.workflow], activities=peer.activities,
        plugins=peer.worker_plugins,
    ))  # fmt: skip
    last = [""]

    async def turn() -> Any:
        last[0] = f"peer-{uuid.uuid4().hex}"
        answer = await client.execute_workflow(
            peer.workflow.run, "prices of A1 and B2?", id=last[0], task_queue=queue
        )
        assert answer == ANSWER, (name, answer)
        return answer

    return Row(turn, client, last)


async def advisorchain_rows(
    stack: AsyncExitStack, target: str, package: Any, suffix: str
) -> dict[str, Row]:
    """advisorchain's rows from `package` (this one, or `--before`'s tree with `suffix`),
    on its own client (its data converter) and worker: a conversation a turn (started, one
    turn, closed) and a turn (an update) of one running conversation."""
    from temporalio.client import Client

    temporal = importlib.import_module(f"{package.__name__}.durable.temporal")
    client = await Client.connect(target, data_converter=temporal.data_converter())
    queue = "bench-advisorchain" + suffix.replace(" ", "").replace("(", "-").rstrip(")")
    await stack.enter_async_context(temporal.create_worker(client, queue, chain_factory(package)))
    last = [""]

    async def durable() -> Any:
        last[0] = f"bench-{uuid.uuid4().hex}"
        conversation = temporal.TemporalConversation(client, last[0], task_queue=queue)
        await conversation.start()
        response = await conversation.call("prices of A1 and B2?")
        await conversation.close()
        assert response.text == ANSWER, response.messages
        return response

    running = temporal.TemporalConversation(client, f"bench-{uuid.uuid4().hex}", task_queue=queue)
    await running.start()
    stack.push_async_callback(running.close)

    async def next_turn() -> Any:
        response = await running.call("prices of A1 and B2?")
        assert response.text == ANSWER, response.messages
        return response

    return {
        f"Temporal, advisorchain{suffix}": Row(durable, client, last),
        f"Temporal, advisorchain, a turn of a running conversation{suffix}": Row(
            next_turn, rated=False
        ),
    }


async def floor_row(stack: AsyncExitStack, client: Any) -> Row:
    """The hand-written floor: a workflow run to its result."""
    from temporalio.worker import Worker

    await stack.enter_async_context(Worker(
        client, task_queue="bench-floor", workflows=[FloorTurn],
        activities=[floor_model, floor_lookup],
    ))  # fmt: skip
    last = [""]

    async def floor() -> Any:
        last[0] = f"floor-{uuid.uuid4().hex}"
        return await client.execute_workflow(
            "floor.Turn", "prices?", id=last[0], task_queue="bench-floor", result_type=str
        )

    return Row(floor, client, last)


def packages(before: Path | None) -> list[tuple[Any, str]]:
    """This advisorchain, and with `before` the earlier tree extracted into
    `before/advisorchain_prev` (its rows suffixed " (before)")."""
    found: list[tuple[Any, str]] = [(advisorchain, "")]
    if before is not None:
        if not (before / PREVIOUS / "__init__.py").is_file():
            raise SystemExit(f"--before {before}: no {PREVIOUS}/__init__.py there (see --help)")
        sys.path.insert(0, str(before))
        found.append((importlib.import_module(PREVIOUS), " (before)"))
    return found


async def run(
    turns: int,
    rounds: int,
    concurrency: list[int],
    repeats: int = 3,
    before: Path | None = None,
) -> dict[str, Any]:
    """Every row in one process on one dev server, their workers all running, measured
    interleaved: CPU and wall time per turn, then turns/s at each concurrency."""
    from temporalio.testing import WorkflowEnvironment

    from advisorchain.durable.temporal import data_converter

    chain = bench_chain()

    async def in_process() -> Any:
        return await chain.call("prices of A1 and B2?")

    rows: dict[str, Row] = {"in process": Row(in_process, rated=False)}
    missing = []
    cli = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=cli, data_converter=data_converter()
    )
    async with AsyncExitStack() as stack:
        stack.push_async_callback(env.shutdown)
        target = env.client.service_client.config.target_host
        for package, suffix in packages(before):
            rows.update(await advisorchain_rows(stack, target, package, suffix))
        rows["Temporal, hand-written floor"] = await floor_row(stack, env.client)
        for name, build in PEERS.items():
            peer = build()
            if peer is None:
                missing.append(name)
            else:
                rows[name] = await peer_row(stack, target, name, peer)
        return await measure_rows(rows, missing, turns, rounds, concurrency, repeats)


async def measure_rows(
    rows: dict[str, Row], missing: list[str], turns: int, rounds: int,
    concurrency: list[int], repeats: int,
) -> dict[str, Any]:  # fmt: skip
    """The rows measured (`measure_all`), their activities counted, their turns/s."""
    results: dict[str, Any] = dict(await measure_all(rows, turns, rounds))
    for name, row in rows.items():
        if row.client is not None:
            results[name].activities = await scheduled(row.client, row.last[0])
    results.update({name: "not installed" for name in missing})
    rated = {name: row for name, row in rows.items() if row.rated}
    rates = await throughput_all(rated, concurrency, repeats)
    results.update({f"{name}: turns/s": rate for name, rate in rates.items()})
    return results


def table(results: dict[str, Any]) -> str:
    """The results as markdown tables, then the activities one turn of each runner ran."""
    floor = results["Temporal, hand-written floor"]
    lines = [
        "| runner | CPU ms / turn | wall ms / turn | CPU vs floor | activities / turn "
        "| server CPU ms / turn |",
        "|---|---|---|---|---|---|",
    ]
    for name, value in results.items():
        if isinstance(value, Measured):
            ratio = value.cpu_ms / floor.cpu_ms
            count = "" if value.activities is None else str(len(value.activities))
            server = "" if value.server_cpu_ms is None else f"{value.server_cpu_ms:.2f}"
            lines.append(
                f"| {name} | {value.cpu_ms:.2f} | {value.wall_ms:.2f} | {ratio:.2f}x | {count} "
                f"| {server} |"
            )
        elif value == "not installed":
            lines.append(f"| {name} | not installed | | | | |")
    rated = [name for name in results if name.endswith(": turns/s")]
    counts = list(results[rated[0]])
    lines += ["", "| runner (turns/s) | " + " | ".join(f"{n} at once" for n in counts) + " |"]
    lines.append("|---|" + "---|" * len(counts))
    for name in rated:
        rates = " | ".join(f"{rate:.1f}" for rate in results[name].values())
        lines.append(f"| {name.removesuffix(': turns/s')} | {rates} |")
    lines.append("")
    for name, value in results.items():
        if isinstance(value, Measured) and value.activities is not None:
            lines.append(f"- {name}: {', '.join(value.activities)}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", default="1,10,50")
    parser.add_argument("--repeats", type=int, default=3, help="turns/s tries, median")
    parser.add_argument(
        "--before", type=Path, help=f"a directory holding an earlier tree as {PREVIOUS}"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    concurrency = [int(n) for n in args.concurrency.split(",")]
    results = asyncio.run(run(args.turns, args.rounds, concurrency, args.repeats, args.before))
    if args.json:
        print(json.dumps({k: getattr(v, "__dict__", v) for k, v in results.items()}, indent=1))
    else:
        print(table(results))


if __name__ == "__main__":
    main()
