"""The named advisors: links of a chain that each own one concern."""

from .logging import LoggingAdvisor
from .tool_calling import ToolCallingAdvisor
from .tracing import TracingAdvisor

__all__ = ["LoggingAdvisor", "ToolCallingAdvisor", "TracingAdvisor"]
