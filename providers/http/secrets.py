"""API keys and other credentials: held as `Secret`s, cleaned at the door, masked in every
error text (`redact_error`), and never chained to an error that would show them."""

from __future__ import annotations

import os
from typing import Literal, TypeAlias, TypeVar, overload

from ..errors import AuthenticationError, InvalidAPIKeyError

__all__ = [
    "MIN_REDACTED_KEY",
    "MIN_SECRET_CHARS",
    "Secret",
    "Secrets",
    "api_key_from_env",
    "clean_api_key",
    "mentions",
    "redact",
    "redact_error",
    "safe_cause",
]


class Secret:
    """A value that never shows in a repr or a string (API keys); `reveal()` returns it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret value itself."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


MIN_SECRET_CHARS = 8
"""Shorter secrets (test placeholders such as `"k"`; no real API key) are not searched
for: they cannot be told from ordinary text."""


Secrets: TypeAlias = str | tuple[str, ...] | None
"""What error texts must not show: the API key, or it and the other credentials a model
was given (a password in its base URL, header values)."""


def _each(secret: Secrets) -> tuple[str, ...]:
    values = (secret,) if isinstance(secret, str) else secret or ()
    return tuple(s for s in values if s and len(s) >= MIN_SECRET_CHARS)


def redact(text: str, secret: Secrets) -> str:
    """`text` with every occurrence of `secret` (each of them) masked."""
    for value in _each(secret):
        text = text.replace(value, "***")
    return text


def mentions(exc: BaseException, secret: Secrets) -> bool:
    """Whether `secret` (any of them) shows in the message, repr or arguments of `exc`
    or of any exception it chains (`__cause__`, `__context__`)."""
    values = _each(secret)
    if not values:
        return False
    stack, seen = [exc], set()
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        try:
            texts = [str(e), repr(e), *map(repr, e.args)]
        except Exception:
            return True  # cannot be inspected: assume the worst
        if any(value in t for t in texts for value in values):
            return True
        stack.extend(x for x in (e.__cause__, e.__context__) if x is not None)
    return False


def safe_cause(exc: BaseException, secret: Secrets) -> BaseException | None:
    """`exc`, to chain to a provider error; `None` if it would show `secret`."""
    return None if mentions(exc, secret) else exc


def clean_api_key(key: str | None, *, provider: str, source: str = "api_key") -> Secret | None:
    """`key` without surrounding whitespace (a key read from a file ends with a newline);
    `None` if nothing is left.

    Raises `InvalidAPIKeyError`, which does not quote the key, when a control or
    non-ASCII character remains inside: it cannot be sent in a header, and the HTTP
    client's error would quote the whole key.
    """
    if key is None:
        return None
    if not isinstance(key, str):
        raise InvalidAPIKeyError(
            f"{provider}: the API key from {source} must be a string, not {type(key).__name__}",
            provider=provider,
        )
    key = key.strip()
    for position, char in enumerate(key):
        if not " " <= char <= "~":
            kind = "a control" if char < " " or char == "\x7f" else "a non-ASCII"
            raise InvalidAPIKeyError(
                f"{provider}: the API key from {source} holds {kind} character (at position "
                f"{position} of {len(key)}, after stripping); it cannot be sent in a header",
                provider=provider,
            )
    return Secret(key) if key else None


MIN_REDACTED_KEY = MIN_SECRET_CHARS
"""Keys at least this long are masked in error messages (real API keys are far longer)."""

_Error = TypeVar("_Error", bound=BaseException)


def redact_error(error: _Error, secret: Secrets) -> _Error:
    """`error` (changed in place) with `secret` (each of them) masked in its arguments,
    `message` and `body`; a cause or context that quotes one is dropped from it. Keys
    shorter than `MIN_REDACTED_KEY` characters are left alone: masking them would garble
    the message."""
    values = _each(secret)
    if not values:
        return error
    error.args = tuple(redact(a, values) if isinstance(a, str) else a for a in error.args)
    for name in ("message", "body"):
        value = getattr(error, name, None)
        if isinstance(value, str):
            text = redact(value, values)
            for each in values:
                text = _redact_cut(text, each)
            setattr(error, name, text)
    if error.__cause__ is not None and _quotes(error.__cause__, values):
        error.__cause__ = None
        error.__suppress_context__ = True
    if error.__context__ is not None and _quotes(error.__context__, values):
        error.__context__ = None
    return error


def _quotes(exc: BaseException, values: tuple[str, ...]) -> bool:
    text = repr(exc) + str(exc)
    return any(value in text for value in values)


def _redact_cut(text: str, secret: str) -> str:
    """`text` with a prefix of `secret` at its very end masked (a body excerpt that cut
    the key off)."""
    for cut in range(len(secret) - 1, MIN_SECRET_CHARS - 1, -1):
        if text.endswith(secret[:cut]):
            return text[:-cut] + "***"
    return text


@overload
def api_key_from_env(env_var: str, *, provider: str, required: Literal[True]) -> Secret: ...
@overload
def api_key_from_env(env_var: str, *, provider: str, required: bool) -> Secret | None: ...
def api_key_from_env(env_var: str, *, provider: str, required: bool) -> Secret | None:
    """The API key in `env_var`, cleaned as `clean_api_key` does; raises
    `AuthenticationError` naming the variable if required and unset."""
    key = clean_api_key(
        os.environ.get(env_var), provider=provider, source=f"the {env_var} environment variable"
    )
    if key is not None:
        return key
    if required:
        raise AuthenticationError(
            f"{provider}: no API key: pass api_key=... or set the {env_var} environment variable",
            provider=provider,
        )
    return None
