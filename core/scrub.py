"""Error text a model may read: one scrub for a local tool's exception and an MCP server's.

`scrub_error_text` removes what an error message must not carry to a model (or a log):
tracebacks; the values of this process's secret-looking environment variables, and
other values the caller names (an MCP server's `env` and headers); `key=value` pairs
whose key names a secret (`password=hunter2`, `"api_key": "..."`, `Authorization:
Bearer ...`); API key shapes (`sk-...`, `AKIA...`, GitHub, Slack, Google); the user and
password of URLs (`postgres://u:p@db:5432/app` keeps its scheme, host, port and path);
and, unless told to keep them, this machine's file paths (never a URL's path).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from .errors import ServerReportedError
from .path_redaction import URL_PATTERN, redact_paths

SECRET_NAME_PARTS = ("KEY", "TOKEN", "SECRET", "PASS", "AUTH", "CREDENTIAL", "COOKIE", "SESSION")
"""Environment variables whose names hold one of these hold secrets."""
MIN_SECRET_CHARS = 6
"""Shorter values are not replaced wherever they occur (too many false hits)."""
REDACTED = "<redacted>"

API_KEY_PATTERN = (
    r"(?<![\w-])(?:sk-[A-Za-z0-9_-]{20,}"  # OpenAI sk-, sk-proj-; Anthropic sk-ant-
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}"  # AWS access key ids
    r"|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}"  # GitHub
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
    r"|AIza[A-Za-z0-9_-]{35})(?![\w-])"  # Google
)
"""API keys by their shape (linear: bounded classes, a look-behind at the start)."""

_API_KEY = re.compile(API_KEY_PATTERN)
_TRACEBACK = "Traceback (most recent call last)"

# `key = value` where the key names a secret; the key may be quoted (JSON, repr).
_SECRET_KEY = re.compile(
    r"(?:^|[_.-])(?:pass(?:word|wd|phrase)?|pwd|secret|token|api[_-]?key|apikey|"
    r"access[_-]?key|private[_-]?key|auth(?:orization)?|credentials?|cookie|session[_-]?id)"
    r"(?:$|[_.-])",
    re.IGNORECASE,
)
_KEY_VALUE = re.compile(
    r"(?P<key>(?<![\w.-])(?P<kq>[\"']?)[A-Za-z][\w.-]{0,63}(?P=kq))"
    r"(?P<sep>[ \t]{0,3}(?:=|:(?!//))[ \t]{0,3})"
    r"(?P<scheme>(?:Bearer|Basic|Token|Digest)[ \t]+)?"
    r"(?P<value>\"(?:[^\"\\\n]|\\.){0,512}\"|'(?:[^'\\\n]|\\.){0,512}'|[^\s,;&'\"<>)\]}]{1,512})"
)
_BEARER = re.compile(r"(?<![\w-])(?P<scheme>Bearer|Basic)[ \t]+[A-Za-z0-9._~+/=-]{8,}")
_URL = URL_PATTERN


def secret_environment() -> list[str]:
    """The values of this process's environment variables whose names look secret."""
    return [
        value
        for name, value in os.environ.items()
        if len(value) >= MIN_SECRET_CHARS and any(s in name.upper() for s in SECRET_NAME_PARTS)
    ]


def long_values(values: Iterable[str]) -> tuple[str, ...]:
    """The values (and their words: `Bearer <token>`) long enough to be worth scrubbing."""
    found: list[str] = []
    for value in values:
        found.extend(w for w in (str(value), *str(value).split()) if len(w) >= MIN_SECRET_CHARS)
    return tuple(found)


def scrub_error_text(text: str, *, secrets: Iterable[str] = (), keep_paths: bool = False) -> str:
    """`text` as a model may read it (see the module's docstring).

    `secrets` are values to replace wherever they occur, besides the secret-looking
    environment variables' (values shorter than `MIN_SECRET_CHARS` are ignored);
    `keep_paths` keeps file paths (an MCP server's own, which are not this machine's).
    """
    cut = text.find(_TRACEBACK)
    if cut >= 0:
        text = text[:cut].rstrip() + " [traceback removed]"
    values = {v for v in (*secrets, *secret_environment()) if len(v) >= MIN_SECRET_CHARS}
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    text = _URL.sub(_without_userinfo, text)
    text = _without_secret_values(text)
    text = _BEARER.sub(lambda m: f"{m['scheme']} {REDACTED}", text)
    text = _API_KEY.sub(REDACTED, text)
    return text if keep_paths else redact_paths(text)


def _without_userinfo(url: re.Match[str]) -> str:
    if url["userinfo"] is None:
        return url[0]
    return f"{url['scheme']}://{REDACTED}@{url['rest']}"


def _without_secret_values(text: str) -> str:
    """`text` with the value of every `key=value` pair whose key names a secret hidden.

    A pair whose key is not secret is not consumed: its value may be the next pair
    (`failed: password=hunter2`), so the search goes on right after its key."""
    out: list[str] = []
    pos = 0
    while (pair := _KEY_VALUE.search(text, pos)) is not None:
        key = pair["key"]
        value = pair["value"]
        if _SECRET_KEY.search(key.strip("\"'")) is None or value == REDACTED:
            out.append(text[pos : pair.end("key")])
            pos = pair.end("key")
            continue
        quote = value[0] if value[0] in "\"'" else ""
        out.append(text[pos : pair.start()])
        out.append(f"{key}{pair['sep']}{pair['scheme'] or ''}{quote}{REDACTED}{quote}")
        pos = pair.end()
    out.append(text[pos:])
    return "".join(out)


def safe_str(exc: BaseException) -> str:
    """`str(exc)`, or a stand-in naming its type when its `__str__` raises."""
    try:
        text = str(exc)
    except Exception:
        return f"<exception str() failed: {type(exc).__name__}>"
    return text if isinstance(text, str) else ""


_MAX_ERROR_CHARS = 500


def describe_exception(exc: BaseException) -> str:
    """`Type: message`, scrubbed and capped: what a model may see.

    The message (`str(exc)`, or a stand-in when that raises) goes through
    `scrub_error_text`: no traceback, secret values, credentials or file paths. A
    `ServerReportedError` with `server_text` shows that text instead, scrubbed alike but
    with its paths kept (they are the server's); capped alike.
    """
    reported = exc.server_text if isinstance(exc, ServerReportedError) else None
    if reported is not None:
        message = scrub_error_text(reported[: _MAX_ERROR_CHARS * 8], keep_paths=True).strip()
    else:
        message = scrub_error_text(safe_str(exc)[: _MAX_ERROR_CHARS * 8]).strip()
    if len(message) > _MAX_ERROR_CHARS:
        message = message[:_MAX_ERROR_CHARS] + "..."
    name = type(exc).__name__
    return f"{name}: {message}" if message else name


__all__ = [
    "API_KEY_PATTERN",
    "MIN_SECRET_CHARS",
    "REDACTED",
    "SECRET_NAME_PARTS",
    "describe_exception",
    "long_values",
    "safe_str",
    "scrub_error_text",
    "secret_environment",
]
