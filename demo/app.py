"""The demo itself: a session of the order assistant, question by question."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Literal, TextIO

import anyio.to_thread

from ..core.errors import ToolCallLimitExceeded
from ..core.messages import Message, SystemMessage, UserMessage
from ..core.model import ChatModel
from ..core.options import ChatOptions
from .approval import make_approver
from .catalog import business_catalog
from .chain import LOGGER_NAME, SMALL_MODEL_SYSTEM_PROMPT, SYSTEM_PROMPT, build_chain
from .models import ModelOptionError, ModelSpec, create_model, parse_model_option
from .orders import OrderService
from .render import TerminalRenderer, TurnStats
from .tools import OrderTools

DEFAULT_QUESTIONS = (
    "Where is my order A-1001?",
    "Which orders do I have?",
    "What email address do you have on file for me?",
    "Please cancel my order A-1002.",
    "Where is order B-2001?",
)
"""What the demo asks when given no `--ask` and no `-i` (B-2001 is another tenant's)."""

_QUIT = ("", "quit", "exit", "q")


@dataclass(frozen=True, kw_only=True)
class DemoOptions:
    """The demo's settings (the command line's options)."""

    model: str = "local"
    questions: tuple[str, ...] = DEFAULT_QUESTIONS
    interactive: bool = False
    approval: Literal["ask", "yes", "no"] = "ask"
    may_cancel: bool = True
    max_tokens: int = 200
    log: bool = False
    tenant_id: str = "tenant-acme-7f3a"
    user_id: str = "user-ada-91c2"


async def run_demo(
    options: DemoOptions,
    *,
    out: TextIO,
    err: TextIO | None = None,
    read: Callable[[str], str] = input,
    service: OrderService | None = None,
    model: ChatModel | None = None,
) -> list[TurnStats]:
    """Run the demo session; returns the cost of each turn.

    `read` reads a line from the user (questions in interactive mode, approvals);
    `service` and `model` replace the sample shop and the `--model` choice (tests).
    With `options.log`, the chain's log records go to `err` (default: `out`), each on a
    line of its own. On a terminal a status line shows what the turn is doing.
    """
    renderer = TerminalRenderer(out, err=err)
    tools = OrderTools(service or OrderService.sample())
    if model is None:
        model = await _prepare_model(parse_model_option(options.model), renderer)
    approver = make_approver(options.approval, say=renderer.line, read=read, out=renderer.writer())
    # A 0.5B model answers far better with its tool results shown as text and one tool
    # round per turn (see SmallModelAdvisor); larger models get the plain chain.
    small_model = getattr(model, "provider_name", None) == "llama.cpp"
    system = SystemMessage(content=SMALL_MODEL_SYSTEM_PROMPT if small_model else SYSTEM_PROMPT)
    catalog = business_catalog(tools.check_order)
    chain = build_chain(
        model,
        tools=tools,
        approver=approver,
        catalog=catalog,
        max_rounds=1 if small_model else 3,
        small_model=small_model,
        options=ChatOptions(temperature=0, max_tokens=options.max_tokens),
    )
    session_tools = tools.cancellation_tools if options.may_cancel else []
    shown = [t.name for t in (*tools.read_tools, *session_tools)]
    renderer.line(f"model: {getattr(model, 'model_name', None) or type(model).__name__}")
    renderer.line(f"tools: {', '.join(shown)}, and {len(catalog)} more through search_tools")
    renderer.line()
    context = {"tenant_id": options.tenant_id, "user_id": options.user_id}
    history: list[Message] = []
    turns: list[TurnStats] = []

    async def ask(question: str) -> None:
        messages = [system, *history, UserMessage(content=question)]
        events = chain.stream(messages, tools=session_tools, tool_context=context)
        try:
            # In interactive mode the question is on the screen already, typed at `you> `.
            response, stats = await renderer.turn(question, events, echo=not options.interactive)
        except ToolCallLimitExceeded as exc:
            renderer.line(f"(turn stopped: {exc})")
            return
        turns.append(stats)
        if options.interactive:
            history.extend([UserMessage(content=question), *response.messages])

    handler = _log_through(renderer) if options.log else None
    try:
        if options.interactive:
            renderer.line("Ask about orders A-1001 to A-1003; an empty line ends the session.")
            while True:
                try:
                    question = await anyio.to_thread.run_sync(read, "you> ")
                except EOFError:
                    break
                if question.strip().lower() in _QUIT:
                    break
                await ask(question.strip())
        else:
            for question in options.questions:
                await ask(question)
    finally:
        if handler is not None:
            logging.getLogger(LOGGER_NAME).removeHandler(handler)
    renderer.line()
    renderer.summary(turns)
    rss = _peak_rss_mb()
    if rss is not None:
        renderer.line(f"peak memory (RSS): {rss:.0f} MB")
    return turns


async def prepare_model(options: DemoOptions, *, out: TextIO) -> ChatModel:
    """The model `options.model` names, loaded (the local one is assembled and loaded,
    with a line on `out` saying so)."""
    return await _prepare_model(parse_model_option(options.model), TerminalRenderer(out))


async def _prepare_model(spec: ModelSpec, renderer: TerminalRenderer) -> ChatModel:
    if spec.kind != "local":
        return create_model(spec)
    from ..providers.llamacpp import LlamaCppChatModel
    from ..providers.local.weights import ensure_local_model

    started = time.perf_counter()
    try:
        path = await anyio.to_thread.run_sync(partial(ensure_local_model, name=spec.name or "0.5b"))
        model = create_model(spec, local_model_path=path)
        assert isinstance(model, LlamaCppChatModel)
        await model.load()
    except ImportError as exc:
        raise ModelOptionError(
            f"{exc}\n(`make demo` sets everything up; `--model scripted` needs nothing)"
        ) from None
    renderer.line(
        f"local model ready in {time.perf_counter() - started:.1f} s "
        f"(load {model.load_seconds or 0:.1f} s): {path}"
    )
    return model


class _RendererLogHandler(logging.Handler):
    """Log records of the demo's chain, written by the renderer on lines of their own."""

    def __init__(self, renderer: TerminalRenderer) -> None:
        super().__init__(logging.INFO)
        self.renderer = renderer
        self.setFormatter(logging.Formatter("  [log] %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.renderer.log_line(self.format(record))
        except Exception:
            self.handleError(record)


def _log_through(renderer: TerminalRenderer) -> logging.Handler:
    logger = logging.getLogger(LOGGER_NAME)
    handler = _RendererLogHandler(renderer)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return handler


def _peak_rss_mb() -> float | None:
    try:
        import resource
    except ImportError:  # not on Windows
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


__all__ = ["DEFAULT_QUESTIONS", "DemoOptions", "prepare_model", "run_demo"]
