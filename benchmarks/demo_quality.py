"""`make bench-demo`: the demo's answers on the embedded model, checked, timed, compared.

    python -m benchmarks.demo_quality [--variant after,before,baseline] [--half all|tune|held]
                                      [--model local|local:1.5b|scripted|local:<file.gguf>]
                                      [--before DIR] [--json out.json]
                                      [--evals [--concurrency N]]

Every question of `benchmarks/demo/questions.py` is asked as its own turn of the demo's
chain (streamed, as the demo does), once per variant, the variants interleaved question by
question (alternating which goes first) so that all see the same machine load. Questions
of one `session` are turns of one conversation (the earlier turns as history, the same
shop), as the demo's `-i` runs them. Each variant has its own loaded model, so each keeps
its own KV cache across its turns, as one demo session would.

`after` is today's demo chain (`demo/chain.py`). `before` is the demo chain of an earlier
tree of this package, extracted into `DIR/advisorchain_prev` (`git archive <commit> | tar
-x -C DIR/advisorchain_prev`) and imported under that name: its code, its model class, its
catalog (given today's sample answers, so both see the same data), run in the same
process on the same questions. `baseline` is the original code path
(`benchmarks/demo/baseline.py`).

Reported per variant and half: accuracy, seconds per question, the floor (per model call,
prompt tokens evaluated / prompt speed + tokens generated / generation speed: the seconds
llama.cpp's own counters say it spent), prompt tokens per model call and how many of them
llama.cpp actually evaluated (the rest came from its KV cache). `uptime` is printed before
and after: the machine is shared, so compare the variants of one run, not runs.

Each answer is judged by `advisorchain.evals.judge` against its question's `EvalCase`
(`questions.eval_case`). `--evals` instead runs today's chain through `run_evals`, at most
`--concurrency` turns at once, and prints each variant's `EvalReport.table()` (see
`run_as_evals`).
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import anyio

from advisorchain.core.chain import Chain
from advisorchain.core.events import StreamEvent
from advisorchain.core.messages import SystemMessage, UserMessage
from advisorchain.core.model import ChatModel
from advisorchain.core.options import ChatOptions
from advisorchain.core.request import ChatRequest
from advisorchain.core.response import ChatResponse
from advisorchain.demo.catalog import SAMPLE_ANSWERS, business_catalog
from advisorchain.demo.tools import OrderTools
from advisorchain.evals import CaseResult, EvalCase, EvalReport, run_evals

from .demo import baseline
from .demo.questions import QUESTIONS, Outcome, Question, check, eval_case, select

Variant = Literal["baseline", "before", "after"]
VARIANTS: tuple[Variant, ...] = ("baseline", "before", "after")
PREVIOUS = "advisorchain_prev"
"""The package name the `before` tree is imported under."""
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


def package(variant: Variant) -> ModuleType:
    """The package a variant's demo comes from (`before`: the earlier tree)."""
    return importlib.import_module(PREVIOUS if variant == "before" else "advisorchain")


def _module(variant: Variant, name: str) -> Any:
    return importlib.import_module(f"{package(variant).__name__}.{name}")


def use_before(tree: Path) -> None:
    """Make the earlier tree importable as `advisorchain_prev`, with today's sample data."""
    if not (tree / PREVIOUS / "__init__.py").is_file():
        raise SystemExit(f"--before {tree}: no {PREVIOUS}/__init__.py there (see --help)")
    sys.path.insert(0, str(tree))
    catalog: Any = importlib.import_module(f"{PREVIOUS}.demo.catalog")
    catalog.SAMPLE_ANSWERS = {**catalog.SAMPLE_ANSWERS, **SAMPLE_ANSWERS}


@dataclass
class Session:
    """One variant's conversation: its shop and the messages so far."""

    service: Any
    history: list[Any] = field(default_factory=list)


def new_session(variant: Variant) -> Session:
    return Session(_module(variant, "demo.orders").OrderService.sample())


def make_chain(variant: Variant, model: ChatModel, service: Any, approval: str) -> Chain:
    approval_module = _module(variant, "demo.approval")
    approver = approval_module.make_approver(
        "yes" if approval == "yes" else "no", say=lambda _: None, read=input, out=io.StringIO()
    )
    if variant == "baseline":
        options = ChatOptions(temperature=0, max_tokens=MAX_TOKENS)
        return baseline.build_chain(
            model,
            tools=OrderTools(service),
            approver=approver,
            catalog=business_catalog(),
            options=options,
        )
    tools = _module(variant, "demo.tools").OrderTools(service)
    # Today's catalog checks that an order id is the customer's, as the demo builds it.
    checks = (tools.check_order,) if hasattr(tools, "check_order") else ()
    chain: Chain = _module(variant, "demo.chain").build_chain(
        model,
        tools=tools,
        approver=approver,
        catalog=_module(variant, "demo.catalog").business_catalog(*checks),
        max_rounds=1,
        small_model=True,
        options=_module(variant, "core.options").ChatOptions(temperature=0, max_tokens=MAX_TOKENS),
    )
    return chain


def system_prompt(variant: Variant) -> str:
    if variant == "baseline":
        return baseline.SYSTEM_PROMPT
    prompt: str = _module(variant, "demo.chain").SMALL_MODEL_SYSTEM_PROMPT
    return prompt


async def ask(
    variant: Variant, model: RecordingModel, question: Question, session: Session | None = None
) -> Row:
    """One turn, as the demo streams it; the answer checked. With `session`, the turn
    continues that conversation (its shop, its history) and is added to it."""
    session = session or new_session(variant)
    service = session.service
    chain = make_chain(variant, model, service, question.approval)
    messages_module = _module(variant, "core.messages")
    tools = _module(variant, "demo.tools").OrderTools(service)
    session_tools = (
        baseline.cancellation_tools(tools) if variant == "baseline" else tools.cancellation_tools
    )
    user = messages_module.UserMessage(content=question.text)
    messages = [
        messages_module.SystemMessage(content=system_prompt(variant)),
        *session.history,
        user,
    ]
    context = {"tenant_id": TENANT, "user_id": USER}
    first_record = len(model.records)
    text: list[str] = []
    called: list[str] = []
    error: str | None = None
    response: Any = None
    started = time.perf_counter()
    try:
        # The session may cancel: the cancellation tools are passed per request, as in the demo.
        async for streamed in chain.stream(messages, tools=session_tools, tool_context=context):
            event: Any = streamed
            kind = type(event).__name__  # the `before` tree has event classes of its own
            if kind == "TextDelta":
                text.append(event.text)
            elif kind == "ToolCallFinished":
                called.append(event.call.name)
            elif kind == "ResponseCompleted":
                response = event.response
                text = [response.text]
    except Exception as exc:  # a turn stopped by a limit counts as a wrong answer
        error = f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - started
    if response is not None:
        session.history.extend([user, *response.messages])
    statuses: dict[str, str] = {o.id: o.status for o in service.orders(TENANT, USER)}
    outcome = Outcome("".join(text).strip(), tuple(called), statuses, error)
    problems = await check(question, outcome)
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


async def recheck(row: Row) -> Row:
    """`row` checked again by today's checks (a saved run keeps answers, tools and errors;
    an order's status afterwards is read back from the saved problems)."""
    question = next(q for q in QUESTIONS if q.id == row.question)
    statuses: dict[str, str] = {}
    if question.status_after is not None:
        order_id, status = question.status_after
        wrong = re.search(rf"\b{re.escape(order_id)} is (\w+), not ", "; ".join(row.problems))
        statuses[order_id] = wrong[1] if wrong else status
    failed = [p for p in row.problems if p.startswith("turn failed: ")]
    error = failed[0].removeprefix("turn failed: ") if failed else None
    problems = await check(question, Outcome(row.answer, tuple(row.called), statuses, error))
    return replace(row, ok=not problems, problems=problems)


def load_models(spec: str, variants: Sequence[Variant]) -> dict[Variant, RecordingModel]:
    """One model per variant, each with its own KV cache (`before` with its own class)."""
    models: dict[Variant, RecordingModel] = {}
    for variant in variants:
        if spec == "scripted":
            scripted = _module(variant, "demo.scripted").scripted_order_model()
            models[variant] = RecordingModel(scripted)
            continue
        from advisorchain.providers.local.weights import LOCAL_MODELS, ensure_local_model

        name = spec.removeprefix("local").removeprefix(":") or "0.5b"
        if name.lower() in LOCAL_MODELS:
            path = ensure_local_model(name=name.lower())
        else:
            path = Path(name)
        llama_class = _module(variant, "providers.llamacpp").LlamaCppChatModel
        model = llama_class(path, tools_when_none="drop" if variant == "baseline" else "keep")
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
    sessions: dict[tuple[Variant, str], Session] = {}
    for number, question in enumerate(questions):
        order = list(variants) if number % 2 == 0 else list(reversed(variants))
        for variant in order:
            session = None
            if question.session is not None:
                key = (variant, question.session)
                session = sessions.setdefault(key, new_session(variant))
            row = await ask(variant, models[variant], question, session)
            rows.append(row)
            if partial is not None:
                _write(partial, {"rows": [asdict(r) for r in rows]})
            mark = "ok  " if row.ok else "FAIL"
            print(
                f"{mark} {variant:<8} {question.id:<22} {row.seconds:6.1f} s  "
                f"{len(row.calls)} calls  {'; '.join(row.problems)}",
                file=sys.stderr,
                flush=True,
            )
    return rows


async def run_as_evals(
    questions: Sequence[Question],
    variant: Variant,
    model: RecordingModel,
    concurrency: int,
) -> EvalReport:
    """The questions as `advisorchain.evals` cases through `run_evals`, at most
    `concurrency` turns at once, on today's `variant` (`after` or `baseline`) with `call`
    (the demo streams; `run` does as it does). Cases of one `run_evals` share a chain and
    its shop, so: the questions whose approver rejects (nothing changes) share one, each
    question whose approver approves (it may change an order) has a shop of its own, and
    session turns are left out (they need the earlier turns' answers)."""
    if variant == "before":
        raise ValueError("--evals runs today's tree (after, baseline), not before")
    load = getattr(model.model, "load", None)
    if load is not None:
        await load()
    alone = [q for q in questions if q.session is None]
    groups = [[q for q in alone if q.approval == "no"]]
    groups += [[q] for q in alone if q.approval == "yes"]
    started = time.perf_counter()
    results: dict[str, CaseResult] = {}
    for group in filter(None, groups):
        session = new_session(variant)
        chain = make_chain(variant, model, session.service, group[0].approval)
        cases = [_case(variant, question, session) for question in group]
        report = await run_evals(chain, cases, concurrency=concurrency)
        results.update((r.case.name, r) for r in report.results)
    ordered = tuple(results[q.id] for q in alone)
    return EvalReport(ordered, time.perf_counter() - started)


def _case(variant: Variant, question: Question, session: Session) -> EvalCase:
    """`question`'s eval case, asked as the demo asks it: its system prompt, the session's
    cancellation tools, Ada's tenant and user, its statuses read from `session`'s shop."""
    tools = OrderTools(session.service)
    request = ChatRequest(
        messages=(
            SystemMessage(content=system_prompt(variant)),
            UserMessage(content=question.text),
        ),
        tools=tuple(
            baseline.cancellation_tools(tools)
            if variant == "baseline"
            else tools.cancellation_tools
        ),
        tool_context={"tenant_id": TENANT, "user_id": USER},
    )
    case = eval_case(
        question, lambda: {o.id: o.status for o in session.service.orders(TENANT, USER)}
    )
    return replace(case, input=request)


def eval_rows(variant: Variant, report: EvalReport) -> list[Row]:
    """`report`'s results as the benchmark's rows (no llama.cpp counters)."""
    by_id = {q.id: q for q in QUESTIONS}
    return [
        Row(
            variant=variant,
            question=r.case.name,
            half=by_id[r.case.name].half,
            ok=r.passed,
            problems=list(r.failures),
            answer=r.response.text if r.response is not None else "",
            called=list(r.tool_calls),
            seconds=r.seconds,
        )
        for r in report.results
    ]


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
    parser.add_argument(
        "--variant",
        default="before,after",
        help=f"comma-separated, of {', '.join(VARIANTS)} (default before,after; before needs "
        "--before)",
    )
    parser.add_argument("--before", type=Path, help="the directory holding advisorchain_prev")
    parser.add_argument("--half", choices=("all", "tune", "held"), default="all")
    parser.add_argument("--question", action="append", default=[], help="a question id")
    parser.add_argument(
        "--model", default="local", help="local, local:1.5b, scripted or local:<file.gguf>"
    )
    parser.add_argument("--json", type=Path, help="write the rows and the summary here")
    parser.add_argument("--report", type=Path, help="only print the tables of a saved --json")
    parser.add_argument(
        "--evals",
        action="store_true",
        help="run the questions through advisorchain.evals.run_evals (today's tree, no "
        "sessions) and print each variant's EvalReport table",
    )
    parser.add_argument(
        "--concurrency", type=int, default=4, help="with --evals: turns at once (default 4)"
    )
    args = parser.parse_args(argv)
    if args.report is not None:
        saved = json.loads(args.report.read_text())
        rows = [
            anyio.run(recheck, Row(**{**r, "calls": [CallRecord(**c) for c in r["calls"]]}))
            for r in saved["rows"]
        ]
        print(markdown(rows, saved.get("load", ("(not saved)", "(not saved)"))))
        return rows
    named = [v.strip() for v in args.variant.split(",") if v.strip()]
    variants: tuple[Variant, ...] = tuple(v for v in VARIANTS if v in named)
    variants = tuple(sorted(variants, key=named.index))
    unknown = [v for v in named if v not in VARIANTS]
    if unknown or not variants:
        parser.error(f"unknown --variant {', '.join(unknown) or '(none)'}")
    if args.evals and "before" in variants:
        parser.error("--evals runs today's tree: --variant after and/or baseline")
    if args.evals and args.concurrency < 1:
        parser.error("--concurrency must be at least 1")
    if "before" in variants:
        if args.before is None:
            parser.error("--variant before needs --before DIR (see --help)")
        use_before(args.before)
    questions = select(args.half, args.question)
    if args.evals:
        return _evals(args.model, variants, questions, args.concurrency, args.json)
    models = load_models(args.model, variants)
    before = uptime()
    rows = anyio.run(run, questions, variants, models, args.json)
    print(f"model: {args.model}")
    load = (before, uptime())
    print(markdown(rows, load))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        data = {"load": load, "summary": summary(rows), "rows": [asdict(r) for r in rows]}
        args.json.write_text(json.dumps(data, indent=2))
    return rows


def _evals(
    spec: str,
    variants: Sequence[Variant],
    questions: Sequence[Question],
    concurrency: int,
    out: Path | None,
) -> list[Row]:
    """`--evals`: each variant's questions through `run_evals`, its table printed."""
    models = load_models(spec, variants)
    rows: list[Row] = []
    print(f"model: {spec}, at most {concurrency} turns at once")
    for variant in variants:
        report = anyio.run(run_as_evals, questions, variant, models[variant], concurrency)
        print(f"\n{variant}:\n{report.table()}", end="")
        rows += eval_rows(variant, report)
    if out is not None:
        _write(out, {"summary": summary(rows), "rows": [asdict(r) for r in rows]})
    return rows


if __name__ == "__main__":
    main()
