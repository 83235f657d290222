"""Give the public names of a package's `__all__` that package as their `__module__`."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any


def publish(namespace: Mapping[str, Any]) -> None:
    """Set `__module__` of each class and function in `namespace["__all__"]` to the
    package's name, so reprs, tracebacks and pickles name the path users import from."""
    module = namespace["__name__"]
    for name in namespace["__all__"]:
        value = namespace[name]
        if inspect.isclass(value) or inspect.isfunction(value):
            value.__module__ = module


__all__ = ["publish"]
