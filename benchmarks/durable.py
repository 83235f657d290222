"""Durable turns side by side: CPU and wall time per turn of one scripted three-round turn
(the model asks for a look-up, then another, then answers: three model calls, two tool
calls) in process, on Temporal through advisorchain, and on a hand-written Temporal
workflow doing the same rounds as activities (the floor); then turns per second with N
concurrent conversations on one worker.

Each runner lives in this process: client, worker and workflow code, so "CPU" is this
process's CPU time (`time.process_time`, every thread) per turn; the Temporal dev server
(`temporal server start-dev`, from the `temporal` extra) runs in its own process and is
not counted. Each durable turn starts a workflow and ends it: advisorchain's is a
conversation started, one turn (an update), closed; the floor's a workflow run to its
result. Another row measures a turn (an update) of one running conversation, whose
transcript grows by six messages a turn. Medians over `--rounds` blocks of `--turns` turns.

    python -m benchmarks.durable [--turns 20] [--rounds 3] [--concurrency 1,10,50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow

from advisorchain import Chain, ToolCall, ToolCallingAdvisor, tool
from advisorchain.providers import ScriptedChatModel


def reply(request: Any) -> Any:
    """The scripted model: look up A1, then B2, then answer (a function of the request, so
    every turn and every worker answers alike)."""
    last_user = max(i for i, m in enumerate(request.messages) if m.role == "user")
    results = [m for m in request.messages[last_user:] if m.role == "tool"]
    if len(results) == 0:
        return ToolCall.from_arguments("lookup", {"sku": "A1"})
    if len(results) == 1:
        return ToolCall.from_arguments("lookup", {"sku": "B2"})
    return "A1 and B2 cost 3 each."


def bench_chain() -> Chain:
    """The chain every advisorchain runner runs."""

    @tool(read_only=True)
    def lookup(sku: str) -> str:
        """Price of a sku."""
        return f"{sku}: 3"

    return Chain([ToolCallingAdvisor()], model=ScriptedChatModel(reply), tools=[lookup])


@dataclass
class Measured:
    cpu_ms: float
    wall_ms: float


async def measure(turn: Callable[[], Awaitable[Any]], turns: int, rounds: int) -> Measured:
    """Median CPU and wall milliseconds per turn over `rounds` blocks (after one warm-up)."""
    await turn()
    cpus, walls = [], []
    for _ in range(rounds):
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(turns):
            await turn()
        cpus.append((time.process_time() - cpu) * 1000 / turns)
        walls.append((time.perf_counter() - wall) * 1000 / turns)
    return Measured(statistics.median(cpus), statistics.median(walls))


async def throughput(turn: Callable[[], Awaitable[Any]], n: int) -> float:
    """Turns per second with `n` conversations at once."""
    await asyncio.gather(*(turn() for _ in range(min(n, 4))))
    start = time.perf_counter()
    await asyncio.gather(*(turn() for _ in range(n)))
    return n / (time.perf_counter() - start)


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


async def run(turns: int, rounds: int, concurrency: list[int]) -> dict[str, Any]:
    from temporalio.testing import WorkflowEnvironment
    from temporalio.worker import Worker

    from advisorchain.durable.temporal import TemporalConversation, create_worker, data_converter

    results: dict[str, Any] = {}
    chain = bench_chain()

    async def in_process() -> Any:
        return await chain.call("prices of A1 and B2?")

    results["in process"] = await measure(in_process, turns, rounds)

    cli = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=cli, data_converter=data_converter()
    )
    try:
        client = env.client
        async with create_worker(client, "bench-advisorchain", bench_chain):

            async def durable() -> Any:
                conversation = TemporalConversation(
                    client, f"bench-{uuid.uuid4().hex}", task_queue="bench-advisorchain"
                )
                await conversation.start()
                response = await conversation.call("prices of A1 and B2?")
                await conversation.close()
                return response

            results["Temporal, advisorchain"] = await measure(durable, turns, rounds)
            running = TemporalConversation(
                client, f"bench-{uuid.uuid4().hex}", task_queue="bench-advisorchain"
            )
            await running.start()

            async def next_turn() -> Any:
                return await running.call("prices of A1 and B2?")

            results["Temporal, advisorchain, a turn of a running conversation"] = await measure(
                next_turn, turns, rounds
            )
            await running.close()
            results["Temporal, advisorchain: turns/s"] = {
                n: await throughput(durable, n) for n in concurrency
            }

        async with Worker(
            client,
            task_queue="bench-floor",
            workflows=[FloorTurn],
            activities=[floor_model, floor_lookup],
        ):

            async def floor() -> Any:
                return await client.execute_workflow(
                    "floor.Turn", "prices?", id=f"floor-{uuid.uuid4().hex}",
                    task_queue="bench-floor", result_type=str,
                )  # fmt: skip

            results["Temporal, hand-written floor"] = await measure(floor, turns, rounds)
            results["Temporal, hand-written floor: turns/s"] = {
                n: await throughput(floor, n) for n in concurrency
            }
    finally:
        await env.shutdown()
    return results


def table(results: dict[str, Any]) -> str:
    """The results as a markdown table."""
    floor = results["Temporal, hand-written floor"]
    lines = ["| runner | CPU ms / turn | wall ms / turn | CPU vs floor |", "|---|---|---|---|"]
    for name, value in results.items():
        if isinstance(value, Measured):
            ratio = value.cpu_ms / floor.cpu_ms
            lines.append(f"| {name} | {value.cpu_ms:.2f} | {value.wall_ms:.2f} | {ratio:.2f}x |")
    lines += ["", "| runner | " + " | ".join(
        f"{n} at once" for n in results["Temporal, advisorchain: turns/s"]) + " |"]  # fmt: skip
    lines.append("|---|" + "---|" * len(results["Temporal, advisorchain: turns/s"]))
    for name in ("Temporal, advisorchain: turns/s", "Temporal, hand-written floor: turns/s"):
        rates = " | ".join(f"{rate:.1f}" for rate in results[name].values())
        lines.append(f"| {name.removesuffix(': turns/s')} (turns/s) | {rates} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", default="1,10,50")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    results = asyncio.run(
        run(args.turns, args.rounds, [int(n) for n in args.concurrency.split(",")])
    )
    if args.json:
        print(json.dumps({k: getattr(v, "__dict__", v) for k, v in results.items()}, indent=1))
    else:
        print(table(results))


if __name__ == "__main__":
    main()
