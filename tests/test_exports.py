"""The public API: curated `__all__` lists that match what the modules export."""

from __future__ import annotations

import importlib
import inspect

import pytest

REQUIRED = {
    "advisorchain": [
        "Chain",
        "Advisor",
        "ChatModel",
        "ChatRequest",
        "ChatOptions",
        "ChatResponse",
        "Usage",
        "SystemMessage",
        "UserMessage",
        "AssistantMessage",
        "ToolMessage",
        "ToolCall",
        "tool",
        "Tool",
        "tools_from",
        "ToolContext",
        "ToolDefinition",
        "TextDelta",
        "ToolCallStarted",
        "ToolCallFinished",
        "ResponseCompleted",
        "AdvisorChainError",
        "ToolCallLimitExceeded",
        "ToolExecutionError",
        "ToolCallingManager",
    ],
    "advisorchain.advisors": ["ToolCallingAdvisor"],
    "advisorchain.providers": ["ScriptedChatModel"],
}


@pytest.mark.parametrize("module_name", sorted(REQUIRED))
def test_all_is_sorted_complete_and_resolvable(module_name: str) -> None:
    module = importlib.import_module(module_name)
    exported = list(module.__all__)
    assert exported == sorted(exported)
    for name in exported:
        assert hasattr(module, name), name
    for name in REQUIRED[module_name]:
        assert name in exported, name
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and getattr(value, "__module__", "").startswith("advisorchain")
    }
    assert public <= set(exported), public - set(exported)


def test_errors_share_one_base() -> None:
    import advisorchain

    for name in advisorchain.__all__:
        value = getattr(advisorchain, name)
        if inspect.isclass(value) and issubclass(value, Exception):
            assert issubclass(value, advisorchain.AdvisorChainError), name
