"""`Connection`: how an HTTP provider reaches its API, one value for every provider.

A `Connection` holds the base URL, the API key and where else the key may come from
(`api_key_env`, `key_required`), the client or its timeout, the retries and extra
headers. Every HTTP chat model takes one (`connection=`) and, for the same fields, the
keywords `ConnectionOptions` names (`OpenAIChatModel("m", api_key=..., base_url=...)`),
which are applied over it.

A wire format names its provider's official API (`WireFormat.official`, an
`OfficialAPI`); `Connection.for_api` applies the one rule every provider follows:
without a `base_url` the official API is used (or the URL in `OfficialAPI.url_env`, when
that variable is set) and the key defaults to `OfficialAPI.key_env`; the official URL
requires a key; a custom `base_url` reads no default variable (so a provider's key never
goes to another server by accident), unless `key_everywhere` (Anthropic's key is read
for any URL). A variable named explicitly (`api_key_env=`) must be set.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TypedDict

import httpx

from ...core.checks import require_mapping, require_number
from .retry import RetryPolicy

__all__ = ["Connection", "ConnectionOptions", "OfficialAPI"]


@dataclass(frozen=True, slots=True, kw_only=True)
class OfficialAPI:
    """A provider's own API: its base URL (`url`), the variable holding its key
    (`key_env`), optionally a variable that moves the default URL (`url_env`), and
    whether the key is read and required whatever the URL (`key_everywhere`)."""

    url: str
    key_env: str
    url_env: str | None = None
    key_everywhere: bool = False


class ConnectionOptions(TypedDict, total=False):
    """The keywords every HTTP chat model takes for its `Connection` (its fields)."""

    base_url: str | None
    api_key: str | None
    api_key_env: str | None
    key_required: bool | None
    http_client: httpx.AsyncClient | None
    timeout: float | httpx.Timeout | None
    max_retries: int
    retry_policy: RetryPolicy | None
    headers: Mapping[str, str] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Connection:
    """How a chat model reaches its API over HTTP. Every field is optional:

    - `base_url`: the API's root (`None`: the wire format's official API).
    - `api_key`: the key (stripped of surrounding whitespace when used; never in a repr).
      Without it, the variable `api_key_env` names is read at the first call.
    - `key_required`: whether a missing key is an `AuthenticationError` before anything
      is sent. `None` (the default) lets `for_api` decide: required for the official URL
      and for an `api_key_env` named explicitly with a wire format that has an official
      API.
    - `http_client`: an `httpx.AsyncClient` to send with (the caller's to close); else
      one is created with `timeout` and closed by the model's `aclose()`.
    - `max_retries` / `retry_policy`: how failed requests are retried (`RetryPolicy`).
    - `headers`: added to every request (never in a repr or an error).

    Wrong kinds raise `TypeError` (a negative `max_retries` or timeout `ValueError`)
    here, naming what is expected.
    """

    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    api_key_env: str | None = None
    key_required: bool | None = None
    http_client: httpx.AsyncClient | None = None
    timeout: float | httpx.Timeout | None = None
    max_retries: int = 2
    retry_policy: RetryPolicy | None = None
    headers: Mapping[str, str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.base_url is not None and not isinstance(self.base_url, str):
            raise TypeError(f"base_url must be a URL (a string), not {self.base_url!r:.80}")
        if self.api_key_env is not None and not isinstance(self.api_key_env, str):
            raise TypeError(f"api_key_env must be a variable's name, not {self.api_key_env!r:.80}")
        if not isinstance(self.timeout, httpx.Timeout):
            require_number(
                self.timeout, "timeout (seconds, or an httpx.Timeout)", positive=True, optional=True
            )
        require_number(self.max_retries, "max_retries", minimum=0, integer=True)
        if self.retry_policy is not None and not isinstance(self.retry_policy, RetryPolicy):
            raise TypeError(f"retry_policy must be a RetryPolicy, not {self.retry_policy!r:.80}")
        if self.http_client is not None and not isinstance(self.http_client, httpx.AsyncClient):
            raise TypeError(
                f"http_client must be an httpx.AsyncClient, not {self.http_client!r:.80}"
            )
        if self.headers is not None:
            require_mapping(self.headers, "headers", "header name -> value")
            object.__setattr__(self, "headers", MappingProxyType(dict(self.headers)))

    @classmethod
    def of(cls, connection: Connection | None, options: ConnectionOptions) -> Connection:
        """`connection` (or a default one) with the keywords in `options` applied over it."""
        if connection is not None and not isinstance(connection, Connection):
            raise TypeError(f"connection must be a Connection, not {connection!r:.80}")
        if connection is None:
            return cls(**options)
        return replace(connection, **options) if options else connection

    @property
    def retry(self) -> RetryPolicy:
        """The retry policy: `retry_policy`, else one of `max_retries` retries."""
        return self.retry_policy or RetryPolicy(max_retries=self.max_retries)

    def for_api(self, official: OfficialAPI | None) -> Connection:
        """This connection with the official-URL rule applied (module notes): `base_url`,
        `api_key_env` and `key_required` all decided. Without an official API a
        `base_url` is required (`TypeError`). Applying it twice changes nothing."""
        if official is None:
            if self.base_url is None:
                raise TypeError("base_url is required: the wire format names no official API")
            return replace(self, key_required=bool(self.key_required))
        base_url, key_env = self.base_url, self.api_key_env
        required = self.key_required if self.key_required is not None else key_env is not None
        if base_url is None:
            base_url = (official.url_env and os.environ.get(official.url_env)) or official.url
            key_env = key_env or official.key_env
        if official.key_everywhere or base_url.rstrip("/") == official.url:
            key_env = key_env or official.key_env
            required = True
        return replace(self, base_url=base_url, api_key_env=key_env, key_required=required)
