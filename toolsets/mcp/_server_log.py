"""A server's log messages (`notifications/message`), sent on to a Python logger."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, TypeAlias

if TYPE_CHECKING:
    from mcp_types import LoggingMessageNotificationParams

ServerLogLevel: TypeAlias = Literal[
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"
]
"""An MCP (syslog) log level."""

server_logger = logging.getLogger("advisorchain.mcp.server")
"""Where the servers' log messages go (`notifications/message`), at the mapped level."""

_LOG_LEVELS: Mapping[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}
_MAX_LOG_CHARS = 2000


def log_server_message(server: str, params: LoggingMessageNotificationParams) -> None:
    """Log `server`'s message to `server_logger` at the mapped level, bounded."""
    level = _LOG_LEVELS.get(str(params.level), logging.INFO)
    if not server_logger.isEnabledFor(level):
        return
    data = params.data if isinstance(params.data, str) else json.dumps(params.data, default=str)
    if len(data) > _MAX_LOG_CHARS:
        data = data[:_MAX_LOG_CHARS] + "..."
    source = f" ({str(params.logger)[:100]})" if params.logger else ""
    server_logger.log(level, "MCP server %r%s: %s", server, source, data)


__all__ = ["ServerLogLevel", "log_server_message", "server_logger"]
