"""What every HTTP provider shares, one module per concept: `connection` (base URL, key
and its source, timeouts, retries, client, headers: `Connection`), `retry` (the retry
policy and `Retry-After`), `secrets` (API keys and masking them in errors),
`json_values` (encoding bodies, reading payloads), `error_mapping` (statuses and in-band
codes to typed `ProviderError`s) and `client` (the `httpx` client that sends with
retries). `HTTPChatModel` (`providers/http_model.py`) puts them together around a
`WireFormat`.
"""

__all__: list[str] = []
