"""Bad input is refused at the door, naming what is expected; OpenAI-style dicts are
converted strictly; `call_sync`/`stream_sync` run a turn from synchronous code."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from typing import Any

import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    ChainConfigurationError,
    ChatOptions,
    DocumentPart,
    ImagePart,
    InvalidPromptError,
    ResponseCompleted,
    SyncInAsyncError,
    SystemMessage,
    TextDelta,
    TextPart,
    Tool,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    UserMessage,
    advisor,
    chain_tool,
    from_openai_messages,
    tool,
)
from advisorchain.advisors import (
    ApprovalAdvisor,
    BudgetAdvisor,
    CallbackApprover,
    ConsoleApprover,
    DeferredApprover,
    ExponentialBackoff,
    InMemoryApprovalStore,
    InMemoryChatMemoryStore,
    LoggingAdvisor,
    MemoryAdvisor,
    RedactionAdvisor,
    ToolResultCacheAdvisor,
    ToolRetryAdvisor,
)
from advisorchain.providers import OpenAIChatModel, ScriptedChatModel, model_from_name


@tool
def lookup(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: shipped"


async def _run(chain: Chain, prompt: Any, path: str) -> str:
    if path == "call":
        return (await chain.call(prompt)).text
    text = ""
    async for event in chain.stream(prompt):
        if isinstance(event, ResponseCompleted):
            text = event.response.text
    return text


# -- prompts --------------------------------------------------------------------------------


BAD_PROMPTS = [
    (["hi"], "item 0 of the prompt is a str"),
    (123, "got int 123"),
    (None, "got NoneType"),
    (b"hi", "got bytes"),
    ({"role": "bot", "content": "hi"}, "role must be one of"),
    ({"role": "user"}, "needs 'content'"),
    ({"role": "user", "content": "hi", "temperature": 1}, "no key(s) temperature"),
    ([{"role": "user", "content": "hi"}, 7], "item 1 of the prompt is not a message"),
    ({"role": "tool", "tool_call_id": "c1", "content": "x"}, "no earlier assistant"),
    ({"role": "user", "content": [{"type": "input_audio"}]}, "has type 'input_audio'"),
    ({"role": "assistant", "content": None}, "needs content or tool_calls"),
    (
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": {"a": 1}}}],
        },
        "must be the JSON text",
    ),
]


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
@pytest.mark.parametrize(("prompt", "says"), BAD_PROMPTS)
async def test_a_bad_prompt_is_refused_before_the_model(path: str, prompt: Any, says: str) -> None:
    model = ScriptedChatModel(["never"])
    chain = Chain(model=model)
    with pytest.raises(InvalidPromptError) as caught:
        await _run(chain, prompt, path)
    assert says in str(caught.value)
    assert model.requests == []  # nothing reached the model
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, ValueError)


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_one_openai_dict_is_a_user_message(path: str) -> None:
    model = ScriptedChatModel(["hello"])
    chain = Chain(model=model)
    assert await _run(chain, {"role": "user", "content": "hi"}, path) == "hello"
    assert model.requests[0].messages == (UserMessage(content="hi"),)


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_an_openai_transcript_with_tool_calls_runs(path: str) -> None:
    model = ScriptedChatModel(["It shipped, and the second too."])
    chain = Chain([ToolCallingAdvisor()], model=model, tools=[lookup])
    transcript = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Where is order 7?"}]},
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"order_id": "7"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "order 7: shipped"},
        {"role": "assistant", "content": "It shipped."},
        UserMessage(content="And order 8?"),  # messages and dicts mix
    ]
    assert await _run(chain, transcript, path) == "It shipped, and the second too."
    sent = model.requests[0].messages
    assert sent == (
        SystemMessage(content="Be brief."),
        UserMessage(content=(TextPart(text="Where is order 7?"),)),
        AssistantMessage(
            tool_calls=(ToolCall(id="call_1", name="lookup", arguments='{"order_id": "7"}'),)
        ),
        ToolMessage(tool_call_id="call_1", name="lookup", content="order 7: shipped"),
        AssistantMessage(content="It shipped."),
        UserMessage(content="And order 8?"),
    )


def test_user_parts_images_and_files_convert() -> None:
    pdf = base64.b64encode(b"%PDF-1.4 tiny").decode()
    (message,) = from_openai_messages(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Read these."},
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                    {
                        "type": "file",
                        "file": {
                            "file_data": f"data:application/pdf;base64,{pdf}",
                            "filename": "a",
                        },
                    },
                ],
            }
        ]
    )
    assert isinstance(message, UserMessage)
    assert message.content == (
        TextPart(text="Read these."),
        ImagePart(url="https://example.com/a.png"),
        DocumentPart(data=b"%PDF-1.4 tiny", name="a"),
    )


def test_developer_is_a_system_message_and_errors_name_the_index() -> None:
    assert from_openai_messages([{"role": "developer", "content": "x"}]) == (
        SystemMessage(content="x"),
    )
    with pytest.raises(InvalidPromptError, match=r"^message 1: .*'name'"):
        from_openai_messages(
            [{"role": "user", "content": "a"}, {"role": "user", "content": "b", "name": "bob"}]
        )
    with pytest.raises(InvalidPromptError, match="expected a list"):
        from_openai_messages({"role": "user", "content": "a"})  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_an_iterator_of_messages_is_a_prompt_but_a_set_is_not() -> None:
    model = ScriptedChatModel(["ok"])
    chain = Chain(model=model)
    await chain.call(iter([{"role": "user", "content": "hi"}]))
    assert model.requests[0].messages == (UserMessage(content="hi"),)
    with pytest.raises(InvalidPromptError, match="got set"):
        await chain.call({UserMessage(content="hi")})  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_single_message_object_is_a_prompt() -> None:
    model = ScriptedChatModel(["ok"])
    await Chain(model=model).call(UserMessage(content="hi"))
    assert model.requests[0].messages == (UserMessage(content="hi"),)


# -- constructors ---------------------------------------------------------------------------


def _handler(arguments: dict[str, Any], context: Any) -> str:
    return "x"


BAD_CONSTRUCTORS: list[tuple[Callable[[], object], type[Exception] | None, str]] = [
    (lambda: Chain(model="openai:gpt-4.1"), ChainConfigurationError, "model_from_name"),  # type: ignore[arg-type]
    (lambda: Chain(model=object()), ChainConfigurationError, "must be a ChatModel"),  # type: ignore[arg-type]
    (
        lambda: Chain(model=ScriptedChatModel([]), tool_context="tenant-1"),  # type: ignore[arg-type]
        TypeError,
        "tool_context must be a mapping",
    ),
    (
        lambda: Chain(model=ScriptedChatModel([]), tools=[_handler]),  # type: ignore[list-item]
        TypeError,
        "make it one with @tool",
    ),
    (
        lambda: Chain(model=ScriptedChatModel([]), options={"temperature": 0}),  # type: ignore[arg-type]
        TypeError,
        "options must be a ChatOptions",
    ),
    (lambda: Tool("t", "d", None, "not callable"), TypeError, "handler must be a callable"),  # type: ignore[arg-type]
    (lambda: Tool("t", "d", "schema", _handler), TypeError, "parameters must be a JSON schema"),  # type: ignore[arg-type]
    (lambda: Tool("t", "d", None, _handler, timeout="5"), TypeError, "timeout must be a number"),  # type: ignore[arg-type]
    (lambda: Tool("t", "d", None, _handler, timeout=0), ValueError, "must be positive"),
    (lambda: Tool("t", "d", None, _handler, metadata=["a"]), TypeError, "metadata must be"),  # type: ignore[arg-type]
    (lambda: Tool.from_function("not callable"), TypeError, "not the string"),  # type: ignore[arg-type]
    (lambda: Tool.from_function(42), TypeError, "must be a callable"),  # type: ignore[arg-type]
    (lambda: ToolRetryAdvisor(backoff=0.001), TypeError, "ExponentialBackoff\\(initial=0.001"),  # type: ignore[arg-type]
    (lambda: ToolRetryAdvisor(max_attempts=2.5), TypeError, "must be an integer"),  # type: ignore[arg-type]
    (lambda: ToolRetryAdvisor(retry_on="TimeoutError"), TypeError, "exception class"),  # type: ignore[arg-type]
    (lambda: ExponentialBackoff(initial="1"), TypeError, "must be a number"),  # type: ignore[arg-type]
    (lambda: CallbackApprover("approve all"), TypeError, "must be a callable"),  # type: ignore[arg-type]
    (lambda: advisor(before="x"), TypeError, r"advisor\(before=...\) must be a callable"),  # type: ignore[arg-type]
    (lambda: MemoryAdvisor("memory.db"), TypeError, "must be a ChatMemoryStore"),  # type: ignore[arg-type]
    (
        lambda: MemoryAdvisor(InMemoryChatMemoryStore(), max_messages="3"),  # type: ignore[arg-type]
        TypeError,
        "max_messages must be an integer",
    ),
    (lambda: ApprovalAdvisor(DeferredApprover(), store="approvals.db"), TypeError, "ApprovalStore"),  # type: ignore[arg-type]
    (lambda: ApprovalAdvisor(DeferredApprover(), policy=True), TypeError, "policy must be"),  # type: ignore[arg-type]
    (lambda: ToolResultCacheAdvisor(ttl="5"), TypeError, "ttl .* must be a number"),  # type: ignore[arg-type]
    (lambda: LoggingAdvisor(logger="app"), TypeError, "logging.Logger"),  # type: ignore[arg-type]
    (lambda: LoggingAdvisor(max_content_chars="9"), TypeError, "must be an integer"),  # type: ignore[arg-type]
    (lambda: RedactionAdvisor(hold_back="5"), TypeError, "hold_back must be an integer"),  # type: ignore[arg-type]
    (lambda: ScriptedChatModel("hello"), TypeError, r"ScriptedChatModel\(\['hello'\]\)"),
    (lambda: ChatOptions(temperature="hot"), TypeError, "temperature must be a number"),  # type: ignore[arg-type]
    (lambda: ChatOptions(max_tokens=0), ValueError, "max_tokens must be at least 1"),
    (lambda: ConsoleApprover(input_fn="y"), TypeError, "input_fn must be a callable"),  # type: ignore[arg-type]
    (lambda: ToolCallingAdvisor(max_calls="9"), TypeError, "max_calls must be an integer"),  # type: ignore[arg-type]
    (
        lambda: ToolCallingAdvisor(tool_limits={"refund": "1"}),  # type: ignore[dict-item]
        TypeError,
        r"tool_limits\['refund'\] must be an integer",
    ),
    (lambda: ToolCallingAdvisor(tool_timeout=-1), ValueError, "tool_timeout must be positive"),
    (lambda: BudgetAdvisor(max_total_tokens="5k"), TypeError, "max_total_tokens must be a number"),  # type: ignore[arg-type]
    (
        lambda: chain_tool(Chain(model=ScriptedChatModel([])), "t", "d", max_depth="3"),  # type: ignore[arg-type]
        TypeError,
        "max_depth must be an integer",
    ),
    (
        lambda: chain_tool(Chain(model=ScriptedChatModel([])), "t", "d", parameters="x"),  # type: ignore[arg-type]
        ChainConfigurationError,
        "parameters must be a JSON schema",
    ),
    (
        lambda: OpenAIChatModel("gpt-4.1", api_key="sk-test", timeout="5"),  # type: ignore[arg-type]
        TypeError,
        "timeout .* must be a number",
    ),
    (
        lambda: OpenAIChatModel("gpt-4.1", api_key="sk-test", max_retries=-1),
        ValueError,
        "max_retries must be at least 0",
    ),
    (
        lambda: OpenAIChatModel("gpt-4.1", api_key="sk-test", headers="x"),  # type: ignore[arg-type]
        TypeError,
        "headers must be a mapping",
    ),
    (lambda: OpenAIChatModel("gpt-4.1", base_url=3), TypeError, "base_url must be a URL"),  # type: ignore[arg-type]
    (lambda: model_from_name(3), TypeError, "a model name is a string"),  # type: ignore[arg-type]
    (lambda: InMemoryApprovalStore(), None, ""),  # a valid one, for contrast
]


@pytest.mark.parametrize(("build", "error", "says"), BAD_CONSTRUCTORS)
def test_a_bad_constructor_argument_is_refused_when_given(
    build: Callable[[], object], error: type[Exception] | None, says: str
) -> None:
    if error is None:
        build()
        return
    with pytest.raises(error, match=says):
        build()


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["call", "stream"])
async def test_a_per_call_tool_context_that_is_not_a_mapping_is_refused(path: str) -> None:
    model = ScriptedChatModel(["never"])
    chain = Chain(model=model)
    with pytest.raises(TypeError, match="tool_context must be a mapping"):
        if path == "call":
            await chain.call("hi", tool_context="tenant-1")  # type: ignore[arg-type]
        else:
            async for _ in chain.stream("hi", tool_context="tenant-1"):  # type: ignore[arg-type]
                pass
    assert model.requests == []


# -- sync entry points ----------------------------------------------------------------------


def test_call_sync_runs_a_turn() -> None:
    chain = Chain([ToolCallingAdvisor()], model=_lookup_model(), tools=[lookup])
    response = chain.call_sync({"role": "user", "content": "Where is order 7?"})
    assert response.text == "Order 7 has shipped."
    assert response.messages[1].text == "order 7: shipped"


def test_stream_sync_yields_the_events_then_the_response() -> None:
    chain = Chain([ToolCallingAdvisor()], model=_lookup_model(), tools=[lookup])
    events = list(chain.stream_sync("Where is order 7?"))
    assert isinstance(events[-1], ResponseCompleted)
    assert events[-1].response.text == "Order 7 has shipped."
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Order 7 has shipped."


def test_stream_sync_raises_the_streams_error_after_its_events() -> None:
    chain = Chain(model=ScriptedChatModel(["one"]))
    seen = list(chain.stream_sync("a"))
    assert isinstance(seen[-1], ResponseCompleted)
    with pytest.raises(Exception, match="no scripted reply left"):
        list(chain.stream_sync("b"))  # the script is used up


def test_leaving_stream_sync_early_closes_the_turn() -> None:
    closed: list[str] = []

    class Slow(ScriptedChatModel):
        async def stream(self, request: Any) -> Any:
            try:
                for word in ("a ", "b ", "c"):
                    yield TextDelta(word)
                    await asyncio.sleep(0)
                yield ResponseCompleted(await self.call(request))
            finally:
                closed.append("closed")

    chain = Chain(model=Slow(["a b c"]))
    for event in chain.stream_sync("go"):
        assert isinstance(event, TextDelta)
        break
    assert closed == ["closed"]


@pytest.mark.anyio
async def test_sync_entry_points_refuse_a_running_loop() -> None:
    chain = Chain(model=ScriptedChatModel(["never"]))
    with pytest.raises(SyncInAsyncError, match=r"await chain.call"):
        chain.call_sync("hi")
    with pytest.raises(SyncInAsyncError, match=r"chain.stream"):
        chain.stream_sync("hi")


def test_a_bad_prompt_is_refused_by_call_sync_too() -> None:
    with pytest.raises(InvalidPromptError):
        Chain(model=ScriptedChatModel(["x"])).call_sync(["hi"])  # type: ignore[list-item]


def _lookup_model() -> ScriptedChatModel:
    return ScriptedChatModel(
        [
            ToolCall.from_arguments("lookup", {"order_id": "7"}, id="call_1"),
            "Order 7 has shipped.",
        ]
    )
