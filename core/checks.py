"""Checks of constructor arguments: refuse a wrong value when it is given, naming what is
expected, instead of failing later with an unrelated message."""

from __future__ import annotations

from collections.abc import Mapping

from .errors import ChainConfigurationError


def _kind(value: object) -> str:
    return f"the {type(value).__name__} {value!r}" if value is not None else "None"


def require_callable(value: object, what: str, expected: str) -> None:
    """Raise `TypeError` unless `value` is callable; `expected` says what it is called with."""
    if not callable(value):
        raise TypeError(f"{what} must be a callable ({expected}), not {_kind(value)[:120]}")


def require_mapping(value: object, what: str, expected: str = "a dict of name -> value") -> None:
    """Raise `TypeError` unless `value` is a `Mapping` with string keys."""
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} must be a mapping ({expected}), not {_kind(value)[:120]}")
    for key in value:
        if not isinstance(key, str):
            raise TypeError(f"{what} must have string keys, not {_kind(key)[:80]}")


def require_number(
    value: object,
    what: str,
    *,
    minimum: float | None = None,
    positive: bool = False,
    integer: bool = False,
    optional: bool = False,
) -> None:
    """Raise `TypeError` unless `value` is a real number (an `int` with `integer`; `None`
    with `optional`), `ValueError` unless it is positive / at least `minimum`."""
    if value is None and optional:
        return
    kinds: tuple[type, ...] = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        noun = "an integer" if integer else "a number"
        raise TypeError(f"{what} must be {noun}, not {_kind(value)[:120]}")
    number: float = value  # type: ignore[assignment]
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError(f"{what} must be a finite number, not {value!r}")
    if positive and not number > 0:
        raise ValueError(f"{what} must be positive, not {value!r}")
    if minimum is not None and number < minimum:
        raise ValueError(f"{what} must be at least {minimum}, not {value!r}")


def require_chat_model(value: object, what: str = "model") -> None:
    """Raise `ChainConfigurationError` unless `value` has `async call(request)` and
    `stream(request)`; a model name (a string) is answered with `model_from_name`."""
    if isinstance(value, str):
        raise ChainConfigurationError(
            f"{what} must be a ChatModel, not the string {value!r}: build the model from its "
            f"name with advisorchain.providers.model_from_name({value!r})"
        )
    if not (callable(getattr(value, "call", None)) and callable(getattr(value, "stream", None))):
        raise ChainConfigurationError(
            f"{what} must be a ChatModel (an object with async call(request) and "
            f"stream(request), such as a provider's model or a Chain), not {_kind(value)[:120]}"
        )


__all__ = ["require_callable", "require_chat_model", "require_mapping", "require_number"]
