"""`make bench-demo`: the demo's answers on the embedded model, checked, timed, compared.

    python -m benchmarks.demo_quality [--variant both|baseline|improved] [--half all|tune|held]
                                      [--model local|scripted|local:<file.gguf>] [--json out.json]

Every question of `benchmarks/demo/questions.py` is asked as its own turn of the demo's
chain (streamed, as the demo does), once per variant, the variants interleaved question by
question (alternating which goes first) so that both see the same machine load. Each
variant has its own loaded model, so each keeps its own KV cache across its turns, as one
demo session would. `baseline` is the original code path (`benchmarks/demo/baseline.py`);
`improved` is today's demo chain (`demo/chain.py`, `SmallModelAdvisor`).

Reported per variant and half: accuracy, seconds per question, the floor (per model call,
prompt tokens evaluated / prompt speed + tokens generated / generation speed: the seconds
llama.cpp's own counters say it spent), prompt tokens per model call and how many of them
llama.cpp actually evaluated (the rest came from its KV cache). `uptime` is printed before
and after: the machine is shared, so compare the variants of one run, not runs.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import anyio

from advisorchain.core.chain import Chain
from advisorchain.core.events import ResponseCompleted, StreamEvent, TextDelta, ToolCallFinished
from advisorchain.core.messages import Message, SystemMessage, UserMessage
from advisorchain.core.model import ChatModel
from advisorchain.core.options import ChatOptions
from advisorchain.core.request import ChatRequest
from advisorchain.core.response import ChatResponse
from advisorchain.demo.approval import make_approver
from advisorchain.demo.catalog import business_catalog
from advisorchain.demo.chain import SMALL_MODEL_SYSTEM_PROMPT, build_chain
from advisorchain.demo.orders import OrderService
from advisorchain.demo.scripted import scripted_order_model
from advisorchain.demo.tools import OrderTools

from .demo import baseline
from .demo.questions import QUESTIONS, Outcome, Question, check, select

Variant = Literal["baseline", "improved"]
VARIANTS: tuple[Variant, ...] = ("baseline", "improved")
TENANT, USER = "tenant-acme-7f3a", "user-ada-91c2"
MAX_TOKENS = 200  # the demo's default


@dataclass
class CallRecord:
    """One model call: llama.cpp's counters (zeros on a model without them)."""

    prompt_tokens: int = 0
    evaluated: int = 0
    prompt_seconds: float = 0.0
    generated: int = 0
    generation_seconds: float = 0.0


@dataclass
class Row:
    """One question on one variant."""

    variant: str
    question: str
    half: str
    ok: bool
    problems: list[str]
    answer: str
    called: list[str]
    seconds: float
    calls: list[CallRecord] = field(default_factory=list)


class RecordingModel:
    """Passes calls to `model` and records its `last_timings` after each one."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.records: list[CallRecord] = []
        self.provider_name = getattr(model, "provider_name", None)
        self.model_name = getattr(model, "model_name", None)

    def _record(self) -> None:
        t = getattr(self.model, "last_timings", None)
        if t is None:
            self.records.append(CallRecord())
            return
        self.records.append(
            CallRecord(
                t.prompt_tokens,
                t.prompt_tokens_evaluated,
                t.prompt_seconds,
                t.generated_tokens,
                t.generation_seconds,
            )
        )

    async def call(self, request: ChatRequest) -> ChatResponse:
        response = await self.model.call(request)
        self._record()
        return response

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        try:
            async for event in self.model.stream(request):
                yield event
        finally:
            self._record()


def make_chain(variant: Variant, model: ChatModel, service: OrderService, approval: str) -> Chain:
    tools = OrderTools(service)
    approver = make_approver(
        "yes" if approval == "yes" else "no", say=lambda _: None, read=input, out=io.StringIO()
    )
    options = ChatOptions(temperature=0, max_tokens=MAX_TOKENS)
    if variant == "baseline":
        return baseline.build_chain(
            model, tools=tools, approver=approver, catalog=business_catalog(), options=options
        )
    return build_chain(
        model,
        tools=tools,
        approver=approver,
        catalog=business_catalog(),
        max_rounds=1,
        small_model=True,
        options=options,
    )


SYSTEM = {"baseline": baseline.SYSTEM_PROMPT, "improved": SMALL_MODEL_SYSTEM_PROMPT}


async def ask(variant: Variant, model: RecordingModel, question: Question) -> Row:
    """One turn, as the demo streams it; the answer checked."""
    service = OrderService.sample()
    chain = make_chain(variant, model, service, question.approval)
    tools = OrderTools(service)
    session_tools = (
        baseline.cancellation_tools(tools) if variant == "baseline" else tools.cancellation_tools
    )
    messages: list[Message] = [
        SystemMessage(content=SYSTEM[variant]),
        UserMessage(content=question.text),
    ]
    context = {"tenant_id": TENANT, "user_id": USER}
    first_record = len(model.records)
    text: list[str] = []
    called: list[str] = []
    error: str | None = None
    started = time.perf_counter()
    try:
        # The session may cancel: the cancellation tools are passed per request, as in the demo.
        async for event in chain.stream(messages, tools=session_tools, tool_context=context):
            if isinstance(event, TextDelta):
                text.append(event.text)
            elif isinstance(event, ToolCallFinished):
                called.append(event.call.name)
            elif isinstance(event, ResponseCompleted):
                text = [event.response.text]
    except Exception as exc:  # a turn stopped by a limit counts as a wrong answer
        error = f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - started
    statuses: dict[str, str] = {o.id: o.status for o in service.orders(TENANT, USER)}
    outcome = Outcome("".join(text).strip(), tuple(called), statuses, error)
    problems = check(question, outcome)
    return Row(
        variant=variant,
        question=question.id,
        half=question.half,
        ok=not problems,
        problems=problems,
        answer=outcome.answer,
        called=called,
        seconds=seconds,
        calls=model.records[first_record:],
    )


def recheck(row: Row) -> Row:
    """`row` checked again by today's checks (a saved run keeps answers, tools and errors;
    an order's status afterwards is read back from the saved problems)."""
    question = next(q for q in QUESTIONS if q.id == row.question)
    statuses: dict[str, str] = {}
    if question.status_after is not None:
        order_id, status = question.status_after
        wrong = [p for p in row.problems if p.startswith(f"{order_id} is ")]
        statuses[order_id] = wrong[0].split()[2].rstrip(",") if wrong else status
    failed = [p for p in row.problems if p.startswith("turn failed: ")]
    error = failed[0].removeprefix("turn failed: ") if failed else None
    problems = check(question, Outcome(row.answer, tuple(row.called), statuses, error))
    return replace(row, ok=not problems, problems=problems)


def load_models(spec: str, variants: Sequence[Variant]) -> dict[Variant, RecordingModel]:
    """One model per variant, each with its own KV cache."""
    models: dict[Variant, RecordingModel] = {}
    for variant in variants:
        if spec == "scripted":
            models[variant] = RecordingModel(scripted_order_model())
            continue
        from advisorchain.providers.llamacpp import LlamaCppChatModel
        from advisorchain.providers.local_weights import ensure_local_model

        path = Path(spec.removeprefix("local:")) if spec.startswith("local:") else None
        model = LlamaCppChatModel(
            path or ensure_local_model(),
            tools_when_none="drop" if variant == "baseline" else "keep",
        )
        models[variant] = RecordingModel(model)
    return models


async def run(
    questions: Sequence[Question],
    variants: Sequence[Variant],
    models: dict[Variant, RecordingModel],
    partial: Path | None = None,
) -> list[Row]:
    """Every question on every variant, interleaved; with `partial`, the rows so far are
    written there (JSON) after each one, so a stopped run keeps what it measured."""
    for recording in models.values():
        load = getattr(recording.model, "load", None)
        if load is not None:
            await load()
    rows: list[Row] = []
    for number, question in enumerate(questions):
        order = list(variants) if number % 2 == 0 else list(reversed(variants))
        for variant in order:
            row = await ask(variant, models[variant], question)
            rows.append(row)
            if partial is not None:
                _write(partial, {"rows": [asdict(r) for r in rows]})
            mark = "ok  " if row.ok else "FAIL"
            print(
                f"{mark} {variant:<8} {question.id:<18} {row.seconds:6.1f} s  "
                f"{len(row.calls)} calls  {'; '.join(row.problems)}",
                file=sys.stderr,
                flush=True,
            )
    return rows


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


# -- reporting -------------------------------------------------------------------------------


def speeds(rows: Sequence[Row]) -> tuple[float, float]:
    """Prompt and generation speed (tokens/s) over every call of `rows`."""
    calls = [c for r in rows for c in r.calls]
    p_seconds = sum(c.prompt_seconds for c in calls)
    g_seconds = sum(c.generation_seconds for c in calls)
    prompt = sum(c.evaluated for c in calls) / p_seconds if p_seconds else 0.0
    generation = sum(c.generated for c in calls) / g_seconds if g_seconds else 0.0
    return prompt, generation


def floor(row: Row) -> float:
    """The row's floor: each call's evaluated prompt tokens / its prompt speed plus its
    generated tokens / its generation speed, i.e. the seconds llama.cpp itself spent
    evaluating (speeds differ between a long batch and a short one, so per call)."""
    return sum(c.prompt_seconds + c.generation_seconds for c in row.calls)


def summary(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """One line per variant and half (and `all`)."""
    lines: list[dict[str, Any]] = []
    for variant in dict.fromkeys(r.variant for r in rows):
        for half in ("tune", "held", "all"):
            chosen = [r for r in rows if r.variant == variant and half in ("all", r.half)]
            if not chosen:
                continue
            calls = [c for r in chosen for c in r.calls]
            seconds = sum(r.seconds for r in chosen) / len(chosen)
            floor_s = sum(floor(r) for r in chosen) / len(chosen)
            lines.append(
                {
                    "variant": variant,
                    "half": half,
                    "correct": sum(r.ok for r in chosen),
                    "questions": len(chosen),
                    "seconds_per_question": seconds,
                    "floor_per_question": floor_s,
                    "calls_per_question": len(calls) / len(chosen),
                    "prompt_tokens_per_call": _mean([c.prompt_tokens for c in calls]),
                    "evaluated_per_call": _mean([c.evaluated for c in calls]),
                    "generated_per_question": sum(c.generated for c in calls) / len(chosen),
                }
            )
    return lines


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def markdown(rows: Sequence[Row], load: Sequence[str]) -> str:
    prompt_speed, generation_speed = speeds(rows)
    out = [
        f"load before: {load[0]}",
        f"load after:  {load[1]}",
        f"prompt speed {prompt_speed:.0f} tokens/s, generation {generation_speed:.1f} tokens/s "
        "(over every call of the run)",
        "",
        "| variant | half | correct | s/question | floor s/question | ratio | model calls/q "
        "| prompt tokens/call | evaluated/call | generated/q |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summary(rows):
        ratio = (
            s["seconds_per_question"] / s["floor_per_question"] if s["floor_per_question"] else 0
        )
        out.append(
            f"| {s['variant']} | {s['half']} | {s['correct']}/{s['questions']} "
            f"| {s['seconds_per_question']:.1f} | {s['floor_per_question']:.1f} | {ratio:.2f} "
            f"| {s['calls_per_question']:.1f} | {s['prompt_tokens_per_call']:.0f} "
            f"| {s['evaluated_per_call']:.0f} | {s['generated_per_question']:.0f} |"
        )
    out += ["", "| question | variant | ok | s | calls | tools called | answer / problems |"]
    out.append("|---|---|---|---|---|---|---|")
    for r in rows:
        said = r.answer.replace("\n", " ").replace("|", "/")[:110]
        problems = f" **{'; '.join(r.problems)}**" if r.problems else ""
        out.append(
            f"| {r.question} | {r.variant} | {'yes' if r.ok else 'no'} | {r.seconds:.1f} "
            f"| {len(r.calls)} | {', '.join(r.called)} | {said}{problems} |"
        )
    return "\n".join(out)


def uptime() -> str:
    try:
        return subprocess.run(
            ["uptime"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        return "(uptime unavailable)"


def main(argv: Sequence[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(prog="benchmarks.demo_quality", description=__doc__)
    parser.add_argument("--variant", choices=("both", *VARIANTS), default="both")
    parser.add_argument("--half", choices=("all", "tune", "held"), default="all")
    parser.add_argument("--question", action="append", default=[], help="a question id")
    parser.add_argument("--model", default="local", help="local, scripted or local:<file.gguf>")
    parser.add_argument("--json", type=Path, help="write the rows and the summary here")
    parser.add_argument("--report", type=Path, help="only print the tables of a saved --json")
    args = parser.parse_args(argv)
    if args.report is not None:
        saved = json.loads(args.report.read_text())
        rows = [
            recheck(Row(**{**r, "calls": [CallRecord(**c) for c in r["calls"]]}))
            for r in saved["rows"]
        ]
        print(markdown(rows, saved.get("load", ("(not saved)", "(not saved)"))))
        return rows
    variants = VARIANTS if args.variant == "both" else (args.variant,)
    questions = select(args.half, args.question)
    models = load_models(args.model, variants)
    before = uptime()
    rows = anyio.run(run, questions, variants, models, args.json)
    load = (before, uptime())
    print(markdown(rows, load))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        data = {"load": load, "summary": summary(rows), "rows": [asdict(r) for r in rows]}
        args.json.write_text(json.dumps(data, indent=2))
    return rows


if __name__ == "__main__":
    main()
