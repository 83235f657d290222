"""The named advisors: links of a chain that each own one concern."""

from .tool_calling import ToolCallingAdvisor

__all__ = ["ToolCallingAdvisor"]
