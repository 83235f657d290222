"""The public API: the exact export sets, and every public name's `__module__` is its path."""

from __future__ import annotations

import importlib
import inspect
import pickle

import pytest

ROOT = {
    "Advisor",
    "AdvisorChainError",
    "AnswerDiscarded",
    "ApprovalAdvisor",
    "Approve",
    "AssistantMessage",
    "CallNext",
    "Chain",
    "ChainConfigurationError",
    "ChatModel",
    "ChatOptions",
    "ChatRequest",
    "ChatResponse",
    "DeferredCall",
    "DocumentPart",
    "ImagePart",
    "InvalidDecisions",
    "InvalidPromptError",
    "LoggingAdvisor",
    "MemoryAdvisor",
    "Message",
    "Placement",
    "ProviderError",
    "ReasoningDelta",
    "ReasoningPart",
    "Reject",
    "ResponseCompleted",
    "Result",
    "StreamEvent",
    "StreamInterruptedError",
    "StreamNext",
    "SyncInAsyncError",
    "SystemMessage",
    "TextDelta",
    "TextPart",
    "Tool",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallLimitExceeded",
    "ToolCallStarted",
    "ToolCallingAdvisor",
    "chain_tool",
    "ToolCallingManager",
    "ToolContext",
    "ToolDefinition",
    "ToolExecutionError",
    "ToolIdleTimeoutError",
    "ToolInvocation",
    "ToolMessage",
    "ToolNext",
    "ToolProgress",
    "ToolResult",
    "ToolSearchAdvisor",
    "TracingAdvisor",
    "Usage",
    "UserMessage",
    "__version__",
    "advisor",
    "dump_messages",
    "from_openai_messages",
    "load_messages",
    "tool",
    "tools_from",
}
"""What `from advisorchain import ...` offers: the names an application writes."""

ADVISORS = {
    "ApprovalAdvisor",
    "ApprovalAlreadyResolved",
    "ApprovalCall",
    "ApprovalNotFound",
    "ApprovalRequest",
    "ApprovalStore",
    "Approve",
    "Approver",
    "AuditRecord",
    "BudgetAdvisor",
    "BudgetExceeded",
    "BudgetStore",
    "CallbackApprover",
    "ChatMemoryStore",
    "ChatMemoryStoreError",
    "ClearToolResults",
    "CompactionAdvisor",
    "CompactionBoundary",
    "CompactionBoundaryStore",
    "CompactionError",
    "ConsoleApprover",
    "ConversationIdError",
    "ConversationSpend",
    "Defer",
    "DeferredApprover",
    "EmbeddingIndex",
    "ExponentialBackoff",
    "GuardrailAdvisor",
    "GuardrailTripped",
    "HybridIndex",
    "InMemoryApprovalStore",
    "InMemoryBudgetStore",
    "InMemoryChatMemoryStore",
    "InvalidApprovalRecord",
    "KeywordIndex",
    "LoggingAdvisor",
    "MemoryAdvisor",
    "ModelPrice",
    "NativeCompaction",
    "PostgresApprovalStore",
    "PostgresChatMemoryStore",
    "ProactiveSearch",
    "Proceed",
    "RedactionAdvisor",
    "RedactionBlocked",
    "RedactionRule",
    "RegexIndex",
    "Reject",
    "SQLiteApprovalStore",
    "SQLiteChatMemoryStore",
    "SmallModelAdvisor",
    "SubchainError",
    "chain_tool",
    "Span",
    "StandingRule",
    "StreamProceed",
    "StructuredOutputAdvisor",
    "StructuredOutputError",
    "TextRewriter",
    "TextTransformAdvisor",
    "ToolCallingAdvisor",
    "ToolIndex",
    "ToolResultCacheAdvisor",
    "ToolRetryAdvisor",
    "ToolSearchAdvisor",
    "TracingAdvisor",
    "TurnAdvisor",
    "TurnReplayError",
    "model_judge",
    "trim_history",
}

PROVIDERS = {
    "AnthropicChatModel",
    "AnthropicWire",
    "AuthenticationError",
    "BadRequestError",
    "Connection",
    "ConnectionOptions",
    "FallbackAfterEffectsError",
    "FallbackModel",
    "GeminiChatModel",
    "GeminiWire",
    "HTTPChatModel",
    "InvalidAPIKeyError",
    "InvalidResponseError",
    "OutputSchemaRefusedError",
    "LlamaCppChatModel",
    "NativeToolSearch",
    "OfficialAPI",
    "OpenAIChatModel",
    "OpenAIChatWire",
    "OpenAIResponsesChatModel",
    "OpenAIResponsesWire",
    "OutputSchema",
    "ProviderError",
    "ProviderRequestError",
    "ProviderStreamError",
    "ProviderTimeoutError",
    "ProviderUnavailableError",
    "RateLimitError",
    "Reply",
    "RetryPolicy",
    "ScriptExhaustedError",
    "ScriptedChatModel",
    "StreamAssembler",
    "StreamReader",
    "TextToolCallModel",
    "WireCall",
    "WireFormat",
    "model_from_name",
    "register_provider",
}

TOOLSETS = {
    "ApprovalPolicy",
    "ConsoleElicitor",
    "ContentLimits",
    "DeferredElicitation",
    "ElicitationAnswer",
    "ElicitationHandler",
    "ElicitationNotWaiting",
    "ElicitationRequest",
    "InvalidElicitationAnswer",
    "McpCallResult",
    "McpConnectionError",
    "McpError",
    "McpOptions",
    "McpPrompt",
    "McpPromptArgument",
    "McpProtocolError",
    "McpResource",
    "McpTaskRequiredError",
    "McpTimeoutError",
    "McpToolError",
    "McpToolset",
    "SamplingPolicy",
    "SamplingRequest",
    "ToolFilter",
    "ToolHints",
    "result_text",
}
"""What `from advisorchain.toolsets import ...` offers: MCP servers' tools and their handlers."""

# Names other work of this release adds; counted only once they exist.
ADDED_ELSEWHERE: dict[str, set[str]] = {
    "advisorchain": set(),
    "advisorchain.advisors": set(),
    "advisorchain.toolsets": set(),
    "advisorchain.providers": {
        "GeminiChatModel",
        "GeminiWire",
        "OpenAIResponsesChatModel",
        "OpenAIResponsesWire",
    },
}

EXPECTED = {
    "advisorchain": ROOT,
    "advisorchain.advisors": ADVISORS,
    "advisorchain.providers": PROVIDERS,
    "advisorchain.toolsets": TOOLSETS,
}


@pytest.mark.parametrize("module_name", sorted(EXPECTED))
def test_the_export_set_is_exactly_the_curated_one(module_name: str) -> None:
    module = importlib.import_module(module_name)
    exported = list(module.__all__)
    assert exported == sorted(exported)
    assert len(set(exported)) == len(exported)
    present = {n for n in ADDED_ELSEWHERE[module_name] if hasattr(module, n)}
    assert set(exported) == EXPECTED[module_name] | present
    for name in exported:
        assert hasattr(module, name), name


def test_the_root_stays_small() -> None:
    assert len(ROOT) <= 64  # the core types, rich content, every stream event, deferral


@pytest.mark.parametrize("module_name", sorted(EXPECTED))
def test_public_names_say_the_path_users_import_them_from(module_name: str) -> None:
    module = importlib.import_module(module_name)
    root = importlib.import_module("advisorchain")
    for name in module.__all__:
        value = getattr(module, name)
        if not (inspect.isclass(value) or inspect.isfunction(value)):
            continue
        expected = "advisorchain" if name in root.__all__ else module_name
        assert value.__module__ == expected, name
        assert getattr(importlib.import_module(value.__module__), name) is value


def test_no_other_public_class_or_function_is_left_in_the_packages() -> None:
    for module_name in EXPECTED:
        module = importlib.import_module(module_name)
        public = {
            name
            for name, value in vars(module).items()
            if not name.startswith("_")
            and (inspect.isclass(value) or inspect.isfunction(value))
            and getattr(value, "__module__", "").startswith("advisorchain")
        }
        assert public <= set(module.__all__), public - set(module.__all__)


def test_public_values_pickle_through_their_public_path() -> None:
    from advisorchain import AssistantMessage, ChatResponse, ToolCall, Usage

    response = ChatResponse(
        message=AssistantMessage(content="hi", tool_calls=(ToolCall(id="c", name="f"),)),
        usage=Usage(input_tokens=1),
    )
    assert pickle.loads(pickle.dumps(response)) == response


def test_errors_share_one_base() -> None:
    import advisorchain
    import advisorchain.advisors
    import advisorchain.providers
    import advisorchain.toolsets

    for module in (
        advisorchain,
        advisorchain.advisors,
        advisorchain.providers,
        advisorchain.toolsets,
    ):
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value) and issubclass(value, Exception):
                assert issubclass(value, advisorchain.AdvisorChainError), name
