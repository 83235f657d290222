"""The benchmark harness runs its scenarios correctly (no timings are asserted here).

These check that the benchmarks do what they claim on the frameworks that need no extra
install (advisorchain and the hand-written floor): the scripted scenario really takes
three rounds and three tool calls, results have the reported shape, the test server
speaks the streamed Chat Completions protocol. Peers are exercised by the benchmark run
itself (`python -m benchmarks.run`), which needs the `bench` extra.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The tests import the benchmarks package inside each test, from ROOT put on sys.path by the
# fixture below.


@pytest.fixture(autouse=True)
def _benchmarks_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))


def test_overhead_runs_the_scenario_in_each_framework() -> None:
    from benchmarks import overhead, scenario

    calls_before = scenario.TOOL_CALLS[0]
    report = asyncio.run(
        overhead.run(
            frameworks=("advisorchain", "handwritten"),
            turns=6,
            warmup=2,
            block=2,
            memory_samples=3,
        )
    )
    results = report["results"]
    assert set(results) == {"advisorchain", "handwritten"}
    for entry in results.values():
        assert entry["turns"] == 6
        assert len(entry["rounds"]) == 3
        assert entry["memory"]["peak_kib"] > 0
    assert results["advisorchain"]["ratio_vs_advisorchain"] == 1.0
    # one checked turn + warm-up + measured turns + memory turns, three tools each
    assert scenario.TOOL_CALLS[0] - calls_before == 3 * 2 * (1 + 2 + 6 + 4)
    assert "| advisorchain |" in overhead.render(report)


def test_overhead_check_rejects_a_framework_that_skips_a_round() -> None:
    from benchmarks import overhead, scenario

    async def short_turn() -> str:
        scenario.mark()
        return scenario.ANSWER

    subject = overhead._Subject("broken", "0", short_turn)
    with pytest.raises(AssertionError, match="1 model calls, 0 tool calls"):
        asyncio.run(overhead.check(subject))


def test_handwritten_has_no_links_variant() -> None:
    from benchmarks import overhead

    report = asyncio.run(overhead.run(variant="links", frameworks=("handwritten",), turns=1))
    assert report["results"] == {}
    assert "no middleware" in report["skipped"]["handwritten"]


def test_sync_tools_runs_every_kind_of_tool() -> None:
    from benchmarks import sync_tools

    report = asyncio.run(
        sync_tools.run(calls=5, turns=2, frameworks=("advisorchain", "handwritten"))
    )
    assert set(report["probe_us"]) == {
        "inline",
        "anyio.to_thread.run_sync",
        "dedicated ThreadPoolExecutor",
    }
    for kind in ("async", "inline", "sync"):
        assert set(report["turn_ms"][kind]) == {"advisorchain", "handwritten"}
    assert "| advisorchain |" in sync_tools.render(report)


def test_parallel_runs_every_n_on_both_backends() -> None:
    from benchmarks import parallel

    report = parallel.run(ns=(1, 3), repeat=1, backends=("asyncio", "trio"))
    for rows in report["results"].values():
        assert [(r["tools"], r["n"]) for r in rows] == [
            ("async", 1),
            ("async", 3),
            ("sync (threads)", 1),
            ("sync (threads)", 3),
        ]


def test_streaming_counts_every_chunk_on_both_paths() -> None:
    from benchmarks import streaming

    report = asyncio.run(streaming.run(repeat=2))
    for result in report["results"].values():
        assert result["direct"]["chunks"] == result["chain"]["chunks"] == report["chunks"]
        assert not math.isnan(result["added"]["per_chunk_us"])


def test_provider_overhead_measures_both_paths_of_every_provider() -> None:
    from benchmarks import provider_overhead

    report = asyncio.run(provider_overhead.run(calls=4, block=2))
    assert set(report["providers"]) == {p.name for p in provider_overhead.PROVIDERS}
    for us in report["providers"].values():
        assert set(us) == {"call", "raw call", "stream", "raw stream"}
        assert all(value > 0 for value in us.values())
    rendered = provider_overhead.render(report).split("\n\n")[0]
    assert rendered.count("\n") == 2 + 2 * len(report["providers"]) - 1


def test_provider_overhead_compares_another_tree_in_the_same_run() -> None:
    from benchmarks import provider_overhead

    try:
        report = asyncio.run(provider_overhead.run(calls=2, block=1, base=provider_overhead.ROOT))
        assert sys.modules["advisorchain_base"].__name__ == "advisorchain_base"
    finally:
        for name in [n for n in sys.modules if n.split(".")[0] == "advisorchain_base"]:
            del sys.modules[name]
    for us in report["providers"].values():
        assert set(us) == {"call", "raw call", "stream", "raw stream", "base call", "base stream"}
    assert "| base us | new us |" in provider_overhead.render(report)


def test_test_server_streams_a_tool_call_then_text() -> None:
    import httpx

    from benchmarks import concurrency

    async def converse(base_url: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        async with httpx.AsyncClient() as http:
            body: dict[str, Any] = {
                "model": "bench",
                "stream": True,
                "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": "Weather?"}],
            }
            chunks = []
            async with http.stream("POST", f"{base_url}/chat/completions", json=body) as r:
                assert r.headers["content-type"] == "text/event-stream"
                async for line in r.aiter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        chunks.append(json.loads(line[6:]))
            body["stream"] = False
            body["messages"].append({"role": "tool", "tool_call_id": "c", "content": "sunny"})
            answer = (await http.post(f"{base_url}/chat/completions", json=body)).json()
            return chunks, answer

    with concurrency.server() as base_url:
        chunks, answer = asyncio.run(converse(base_url))
    calls = [
        c
        for ch in chunks
        for choice in ch["choices"]
        for c in choice["delta"].get("tool_calls", [])
    ]
    assert calls[0]["function"]["name"] == "get_weather"
    arguments = "".join(c["function"]["arguments"] for c in calls)
    assert json.loads(arguments) == {"city": "Paris"}
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["usage"]["total_tokens"] > 0
    assert answer["choices"][0]["message"]["content"].startswith("It is sunny")
    assert answer["choices"][0]["finish_reason"] == "stop"


def test_concurrency_clients_send_the_same_requests() -> None:
    """The floor and advisorchain exchange the same bytes with the server: the same JSON
    bodies (usage asked for, `tool_choice`), the same authorization, the same answer."""
    import httpx

    from benchmarks import concurrency, openai_server

    seen: dict[str, list[tuple[str | None, Any]]] = {}

    def transport(name: str) -> httpx.MockTransport:
        def handle(request: httpx.Request) -> httpx.Response:
            body = json.loads(request.content)
            seen.setdefault(name, []).append((request.headers.get("authorization"), body))
            events = [f"data: {json.dumps(e)}\n\n" for e in openai_server._chunks(body)]
            return httpx.Response(
                200,
                content="".join([*events, "data: [DONE]\n\n"]).encode(),
                headers={"content-type": "text/event-stream"},
            )

        return httpx.MockTransport(handle)

    async def converse() -> list[str]:
        answers = []
        for name, client in (
            ("handwritten", concurrency.handwritten_client),
            ("advisorchain", concurrency.advisorchain_client),
        ):
            async with httpx.AsyncClient(transport=transport(name)) as http:
                conversation = client("http://bench/v1", http)
                assert not isinstance(conversation, str)
                answers.append(await conversation())
        return answers

    floor, ours = asyncio.run(converse())
    assert floor == ours
    assert floor.startswith("It is sunny")
    assert len(seen["handwritten"]) == 2
    assert seen["handwritten"] == seen["advisorchain"]
    assert seen["handwritten"][0][1]["stream_options"] == {"include_usage": True}


def test_concurrency_runs_n_conversations_without_failures() -> None:
    from benchmarks import concurrency

    report = concurrency.run(ns=(1, 5), rounds=1, min_conversations=5)
    rows = report["results"]["handwritten"]
    assert [r["n"] for r in rows] == [1, 5]
    assert all(r["failures"] == 0 for r in rows)
    # advisorchain runs through OpenAIChatModel where the providers are installed
    assert (
        "advisorchain" in report["results"]
        or "OpenAIChatModel" in report["skipped"]["advisorchain"]
    )
    for row in report["results"].get("advisorchain", []):
        assert row["failures"] == 0


def test_link_profiles_items_and_ab_run_on_a_tiny_scale() -> None:
    from benchmarks import links_ab, links_items, links_profile

    profiles = asyncio.run(links_profile.run(turns=2, block=1, only="+ TracingAdvisor"))
    assert set(profiles) == {"bare loop", "+ TracingAdvisor"}
    assert "## + TracingAdvisor" in links_profile.render(profiles, top=3)

    items = asyncio.run(links_items.run(turns=2, block=1))
    assert set(items) == set(links_items.configs())
    assert "| logging | with a handler: records" in links_items.render(items)

    report = links_ab.run([str(ROOT)], rounds=1, block=1, warmup=1)
    (tree,) = report["trees"]
    assert list(report["results"][tree]) == links_ab.CONFIGS
    assert "all four / bare" in links_ab.render(report)


def test_link_costs_runs_where_the_links_exist() -> None:
    from benchmarks import links

    report = asyncio.run(links.run(turns=2, warmup=1, block=1))
    if report["skipped"]:  # the links come from other branches
        assert "LoggingAdvisor" in report["skipped"]
        assert "skipped" in links.render(report)
    else:
        assert list(report["results"])[0] == "bare loop"
        assert len(report["results"]) == 11


def test_ui_adapters_benchmark_measures_each_way() -> None:
    from benchmarks import ui_adapters

    results = asyncio.run(ui_adapters.measure(turns=3, warmup=1))
    assert set(results) == {"bare Chain.stream", "AG-UI (AgUiApp)", "Vercel (VercelChatApp)"}
    for row in results.values():
        assert row["first_token_ms"] > 0 and row["cpu_per_turn_ms"] > 0


def test_compaction_benchmark_bounds_the_input_and_measures_the_prefix() -> None:
    from benchmarks import compaction

    without = asyncio.run(compaction.run_scripted(120, compaction=False))
    with_it = asyncio.run(compaction.run_scripted(120, compaction=True))
    assert without["turns"] == with_it["turns"] == 120
    assert with_it["summarizer_calls"] >= 1
    assert with_it["input_tokens_last_turn"] < without["input_tokens_last_turn"]
    assert with_it["logged_messages"] == without["logged_messages"]  # the log is whole
    assert without["prefix"]["prefix_breaks"] == 0  # an append-only transcript
    assert 0 < with_it["prefix"]["mean_cached_share"] <= 1
    report = {"without": without, "with": with_it}
    assert "| with compaction | 120 |" in compaction.render(report)


def test_compaction_recall_benchmark_with_a_scripted_reader() -> None:
    """The recall run's plumbing, the local model replaced by a reader that writes the
    fact sentences it reads as its summary and answers from what it is sent: every fact
    survives compaction, a question never makes a new summary, the held-out set differs."""
    from advisorchain.core.messages import AssistantMessage
    from advisorchain.core.response import ChatResponse
    from advisorchain.core.usage import Usage
    from advisorchain.providers import ScriptedChatModel

    from benchmarks import compaction

    statements = [fact for set_ in compaction.FACT_SETS.values() for fact, _, _ in set_]

    def reader(request: Any) -> ChatResponse:
        text = "\n".join(m.text for m in request.messages)
        if "<conversation>" in text:  # a summary: the fact sentences, one a line
            found = [s for s in statements if s in text]
            answer = "\n".join(found) or "Nothing to note."
        else:
            question = request.messages[-1].text
            asked = [q for set_ in compaction.FACT_SETS.values() for _, q, _ in set_]
            index = [q in question for q in asked].index(True)
            fact = statements[index]
            answer = fact if fact in text else "I do not know."
        return ChatResponse(
            message=AssistantMessage(content=answer),
            usage=Usage(input_tokens=len(text) // 4, output_tokens=5, requests=1),
        )

    model = ScriptedChatModel(reader, model_name="reader")
    assert {s for s, _, _ in compaction.FACT_SETS["A"]}.isdisjoint(
        s for s, _, _ in compaction.FACT_SETS["B"]
    )
    prompts = compaction.recall_prompts(200, "B")
    assert all(s in prompts[:40] for s, _, _ in compaction.FACT_SETS["B"])
    with_it = asyncio.run(compaction.run_recall(200, "B", compaction=True, model=model))
    assert len(with_it["summaries"]) >= 2 and with_it["summarized_messages"] > 0
    assert with_it["right"] == with_it["asked"] == 8
    assert max(with_it["input_tokens_per_turn"]) < 12_000  # two requests at most, each ~5000
    short = asyncio.run(compaction.run_recall(60, "B", compaction=False, model=model))
    assert short["right"] == 8 and not short["summaries"]
    windowed = asyncio.run(
        compaction.run_recall(200, "B", compaction=False, window=20, model=model)
    )
    assert windowed["right"] == 0 and windowed["window"] == 20  # the facts left the window
    report = {"without": {}, "with": {}, "recall_with": with_it, "recall_without": short}
    report["without"] = asyncio.run(compaction.run_scripted(10, compaction=False))
    report["with"] = asyncio.run(compaction.run_scripted(10, compaction=True))
    assert "| set B, with compaction | 200 | 8 of 8 |" in compaction.render(report)
