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
from .providers.local_weights import ModelWeightsError


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
            from .providers.local_weights import ensure_local_model
            from .providers.preflight import ensure_preflight

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


def _quiet_log() -> None:
    """Keep the demo chain's log records off the screen unless `--log` asks for them (the
    demo then writes them to stderr, each on a line of its own; the terminal shows each
    tool call already)."""
    logger = logging.getLogger("advisorchain.demo")
    logger.propagate = False
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
