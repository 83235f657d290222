"""What every peer module shares: the error for "cannot run here", the benchmark logger."""

import logging


class Unavailable(Exception):
    """This framework (or this variant of it) cannot run: the message says why."""


def bench_logger(framework: str) -> logging.Logger:
    """A logger at INFO whose records are built and handed to a `NullHandler`.

    Every framework's logging link logs through one of these, so records are really
    created (not skipped by the level check) and none is written anywhere.
    """
    logger = logging.getLogger(f"benchmarks.{framework}")
    logger.setLevel(logging.INFO)
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger
