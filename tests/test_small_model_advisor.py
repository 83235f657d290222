"""`SmallModelAdvisor` on scripted models: what the model sees, on `call` and `stream`."""

from __future__ import annotations

from typing import Literal

import pytest

from advisorchain import (
    AssistantMessage,
    Chain,
    ChatRequest,
    ChatResponse,
    ResponseCompleted,
    SystemMessage,
    TextDelta,
    Tool,
    ToolCall,
    ToolCallingAdvisor,
    ToolMessage,
    UserMessage,
    tool,
)
from advisorchain.advisors import (
    ApprovalAdvisor,
    CallbackApprover,
    Reject,
    SmallModelAdvisor,
    ToolSearchAdvisor,
)
from advisorchain.advisors.small_model import (
    CONTINUE_INSTRUCTION,
    QWEN_SYSTEM_PREFIX,
    not_done_reason,
)
from advisorchain.providers import Reply, ScriptedChatModel

Path = Literal["call", "stream"]
PATHS: list[Path] = ["call", "stream"]


@tool
def get_order_status(order_id: str) -> str:
    """Look up one order."""
    if order_id == "A-9":
        raise LookupError(f"no order {order_id!r}")
    return f"Order {order_id} shipped with DHL."


@tool(requires_approval=True)
def cancel_order(order_id: str) -> str:
    """Cancel an order."""
    return f"Order {order_id} is cancelled."


async def _run(chain: Chain, question: str, path: Path) -> tuple[ChatResponse, str]:
    """The turn's response and the text streamed (empty on `call`)."""
    if path == "call":
        return await chain.call(question), ""
    streamed: list[str] = []
    response: ChatResponse | None = None
    async for event in chain.stream(question):
        if isinstance(event, TextDelta):
            streamed.append(event.text)
        elif isinstance(event, ResponseCompleted):
            response = event.response
    assert response is not None
    return response, "".join(streamed)


def _status_call(order_id: str) -> ToolCall:
    return ToolCall.from_arguments("get_order_status", {"order_id": order_id})


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_results_reach_the_model_as_text_and_the_transcript_keeps_them(path: Path) -> None:
    model = ScriptedChatModel([_status_call("A-1"), "It shipped with DHL."])
    chain = Chain(
        [ToolCallingAdvisor(), SmallModelAdvisor()], model=model, tools=[get_order_status]
    )
    response, streamed = await _run(chain, "Where is A-1?", path)
    assert response.text == "It shipped with DHL."
    if path == "stream":
        assert streamed == "It shipped with DHL."
    # the caller's transcript keeps the real call and result
    assert [m.role for m in response.messages] == ["assistant", "tool", "assistant"]
    first, second = model.requests
    assert first.messages[0].content == QWEN_SYSTEM_PREFIX
    assert [m.role for m in second.messages] == ["system", "user", "user"]
    assert second.messages[2].content == (
        "Results of your tool calls:\n"
        '- get_order_status(order_id="A-1") returned: Order A-1 shipped with DHL.\n'
        "Answer my question in one or two plain sentences, using only these results."
    )
    assert second.options.tool_choice == "none"  # one counted round, then an answer
    assert second.tools == first.tools  # same definitions: the prompt prefix stays valid


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_a_failed_call_reads_as_not_done(path: Path) -> None:
    model = ScriptedChatModel([_status_call("A-9"), "I could not find A-9."])
    chain = Chain(
        [ToolCallingAdvisor(), SmallModelAdvisor()], model=model, tools=[get_order_status]
    )
    response, _ = await _run(chain, "Where is A-9?", path)
    assert isinstance(response.messages[1], ToolMessage) and response.messages[1].is_error
    shown = model.requests[1].messages[-1].text
    assert "\n- get_order_status(order_id=\"A-9\") FAILED, NOT DONE: no order 'A-9'\n" in shown
    assert "LookupError" not in shown  # the model repeats what it reads
    assert shown.endswith("Say plainly what was not done and why; never say that it was done.")


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_a_rejected_call_reads_as_not_done(path: Path) -> None:
    approver = CallbackApprover(lambda request: [Reject("the customer said no")])
    model = ScriptedChatModel(
        [ToolCall.from_arguments("cancel_order", {"order_id": "A-2"}), "It was not cancelled."]
    )
    chain = Chain(
        [ToolCallingAdvisor(), ApprovalAdvisor(approver), SmallModelAdvisor(system_prefix=None)],
        model=model,
        tools=[cancel_order],
    )
    await _run(chain, "Cancel A-2", path)
    shown = model.requests[1].messages[-1].text
    assert (
        '- cancel_order(order_id="A-2") FAILED, NOT DONE: the call was rejected: '
        "the customer said no" in shown
    )
    assert "never say that it was done" in shown
    assert model.requests[1].messages[0].role == "user"  # no system prefix asked for


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_rounds_are_bounded_and_search_rounds_are_not_counted(path: Path) -> None:
    def looping(request: ChatRequest) -> Reply:
        if request.options.tool_choice == "none":
            return "Done."
        return _status_call("A-1")

    model = ScriptedChatModel(looping)
    chain = Chain(
        [ToolCallingAdvisor(), SmallModelAdvisor(max_rounds=2, results_as_text=False)],
        model=model,
        tools=[get_order_status],
    )
    response, _ = await _run(chain, "Where is A-1?", path)
    assert response.text == "Done."
    assert [r.options.tool_choice for r in model.requests] == [None, None, "none"]
    # without results as text, the model sees the real tool messages
    assert [m.role for m in model.requests[2].messages][-2:] == ["assistant", "tool"]

    catalog = [get_order_status, *_filler_tools()]
    searching = ScriptedChatModel(
        [
            ToolCall.from_arguments("search_tools", {"query": "order status"}),
            _status_call("A-1"),
            "Shipped.",
        ]
    )
    chain = Chain(
        [ToolCallingAdvisor(), ToolSearchAdvisor(), SmallModelAdvisor()],
        model=searching,
        tools=catalog,
    )
    response, _ = await _run(chain, "Where is A-1?", path)
    assert response.text == "Shipped."
    assert [r.options.tool_choice for r in searching.requests] == [None, None, "none"]
    after_search = searching.requests[1].messages[-1].text
    assert after_search.startswith(
        'Results of your tool calls:\n- search_tools(query="order status")'
    )
    assert after_search.endswith(CONTINUE_INSTRUCTION)


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_an_empty_answer_with_tools_off_is_asked_again_without_tools(path: Path) -> None:
    model = ScriptedChatModel([_status_call("A-1"), "", "It shipped."])
    chain = Chain(
        [ToolCallingAdvisor(), SmallModelAdvisor()], model=model, tools=[get_order_status]
    )
    response, streamed = await _run(chain, "Where is A-1?", path)
    assert response.text == "It shipped."
    if path == "stream":
        assert streamed == "It shipped."
    assert len(model.requests) == 3
    assert model.requests[1].tools and not model.requests[2].tools
    assert response.usage.requests == 3


@pytest.mark.anyio
async def test_the_prefix_goes_first_in_the_system_message_once() -> None:
    model = ScriptedChatModel(["Hi.", "Hi.", "Hi."])
    chain = Chain([SmallModelAdvisor(system_prefix="You are Qwen.")], model=model)
    await chain.call([SystemMessage(content="Be brief."), UserMessage(content="hi")])
    await chain.call([SystemMessage(content="You are Qwen. Be brief."), UserMessage(content="hi")])
    await chain.call("hi")
    shown = [r.messages[0] for r in model.requests]
    assert [m.content for m in shown] == ["You are Qwen. Be brief."] * 2 + ["You are Qwen."]
    assert all(isinstance(m, SystemMessage) for m in shown)


def test_options_are_checked_and_reasons_are_cleaned() -> None:
    with pytest.raises(ValueError, match="max_rounds"):
        SmallModelAdvisor(max_rounds=0)
    assert not_done_reason("Error: not executed, the call was rejected: no") == (
        "the call was rejected: no"
    )
    assert not_done_reason("Error: KeyError: 'x'") == "'x'"  # no class names
    assert not_done_reason("  ") == "no reason given"


def test_assistant_text_before_a_call_is_kept() -> None:
    advisor = SmallModelAdvisor(system_prefix=None)
    call = _status_call("A-1")
    request = ChatRequest(
        messages=(
            UserMessage(content="Where is A-1?"),
            AssistantMessage(content="Let me look.", tool_calls=(call,)),
            ToolMessage(tool_call_id=call.id, name=call.name, content="shipped"),
        )
    )
    shown = advisor.adapt(request).messages
    assert [m.role for m in shown] == ["user", "assistant", "user"]
    assert shown[1].content == "Let me look."


def _filler_tools() -> list[Tool]:
    return [
        Tool(f"filler_{i}", "A tool about something else entirely.", None, lambda a, c: "")
        for i in range(12)
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_search_first_searches_with_the_users_words_without_a_model_call(
    path: Path,
) -> None:
    catalog = [get_order_status, *_filler_tools()]
    model = ScriptedChatModel([_status_call("A-1"), "Shipped."])
    chain = Chain(
        [ToolCallingAdvisor(), ToolSearchAdvisor(), SmallModelAdvisor(search_first="search_tools")],
        model=model,
        tools=catalog,
    )
    response, _ = await _run(chain, "What is the order status of A-1?", path)
    assert response.text == "Shipped."
    search = response.messages[0]
    assert isinstance(search, AssistantMessage)
    assert search.tool_calls[0].name == "search_tools"
    assert '"What is the order status of A-1?"' in search.tool_calls[0].arguments
    # the model was asked twice: with the tools found attached, then to answer
    first, second = model.requests
    assert "get_order_status" in [t.name for t in first.tools]
    assert first.messages[-1].text.startswith(
        'Results of your tool calls:\n- search_tools(query="What is the order status of A-1?")'
    )
    assert second.options.tool_choice == "none"
    assert response.usage.requests == 2


def test_the_docs_example_runs() -> None:
    import contextlib
    import io
    import re
    from pathlib import Path

    import advisorchain

    page = Path(advisorchain.__file__).resolve().parent / "docs" / "small-models.md"
    found = re.search(r"<!-- tested: small-model -->\n```python\n(.*?)```", page.read_text(), re.S)
    assert found is not None
    code = found.group(1)
    assert "model = LlamaCppChatModel()" in code
    code = code.replace(
        "model = LlamaCppChatModel()",
        "model = ScriptedChatModel([ToolCall.from_arguments('get_order_status',"
        " {'order_id': 'A-1001'}), 'It shipped with DHL and arrives Dec 2.'])",
    )
    namespace = {"__name__": "readme", "ScriptedChatModel": ScriptedChatModel, "ToolCall": ToolCall}
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, "docs/small-models.md", "exec"), namespace)
    assert output.getvalue() == "It shipped with DHL and arrives Dec 2.\n"
    model = namespace["model"]
    assert isinstance(model, ScriptedChatModel)
    answering = model.requests[1]
    assert answering.messages[-1].text.startswith("Results of your tool calls:")
    assert answering.options.tool_choice == "none"


@pytest.mark.anyio
@pytest.mark.parametrize("path", PATHS)
async def test_a_call_written_when_tools_are_off_is_never_the_answer(path: Path) -> None:
    """Seen on the 0.5B model: with the definitions kept, it wrote the call again as JSON."""
    written = '{"name": "get_order_status", "arguments": {"order_id": "A-1"}}'
    model = ScriptedChatModel([_status_call("A-1"), written, "It shipped with DHL."])
    chain = Chain(
        [ToolCallingAdvisor(), SmallModelAdvisor()], model=model, tools=[get_order_status]
    )
    response, streamed = await _run(chain, "Where is A-1?", path)
    assert response.text == "It shipped with DHL."
    assert "get_order_status" not in streamed and "{" not in streamed
    assert len(model.requests) == 3 and not model.requests[2].tools
    # text beside a written call is kept as the answer, without the call
    model = ScriptedChatModel(
        [_status_call("A-1"), f"It shipped. <tool_call>{written}</tool_call>"]
    )
    chain = Chain(
        [ToolCallingAdvisor(), SmallModelAdvisor()], model=model, tools=[get_order_status]
    )
    response, _ = await _run(chain, "Where is A-1?", path)
    assert response.text == "It shipped."
    assert len(model.requests) == 2 and response.finish_reason == "stop"
