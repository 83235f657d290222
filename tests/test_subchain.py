"""Chains as tools (`chain_tool`): a sub-agent's turn inside a parent's tool call."""

from __future__ import annotations

from typing import Any

import pytest

from advisorchain import (
    Chain,
    ChatResponse,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallingAdvisor,
    ToolCallStarted,
    ToolContext,
    ToolMessage,
    ToolProgress,
    UserMessage,
    chain_tool,
    tool,
)
from advisorchain.advisors import (
    ApprovalAdvisor,
    Approve,
    DeferredApprover,
    InMemoryApprovalStore,
    RedactionAdvisor,
)
from advisorchain.core.errors import ChainConfigurationError
from advisorchain.providers import ScriptedChatModel


def _call(name: str, call_id: str, **arguments: Any) -> ToolCall:
    return ToolCall.from_arguments(name, arguments, id=call_id)


def _tool_messages(response: ChatResponse) -> list[ToolMessage]:
    return [m for m in response.messages if isinstance(m, ToolMessage)]


def _researcher(model: ScriptedChatModel, **tools: Any) -> Chain:
    @tool
    def lookup(topic: str, context: ToolContext) -> str:
        """Look a topic up."""
        return f"{topic}: 42 (for {dict(context)})"

    return Chain([ToolCallingAdvisor()], model=model, tools=[lookup, *tools.values()])


async def _run(chain: Chain, prompt: Any, streamed: bool, **kw: Any) -> ChatResponse:
    if not streamed:
        return await chain.call(prompt, **kw)
    events = [e async for e in chain.stream(prompt, **kw)]
    last = events[-1]
    assert isinstance(last, ResponseCompleted)
    return last.response


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_the_parent_reads_the_childs_answer_and_pays_for_it(streamed: bool) -> None:
    child_model = ScriptedChatModel([_call("lookup", "k1", topic="answer"), "It is 42."])
    researcher = chain_tool(_researcher(child_model), "research", "Research a topic.")
    assert researcher.definition.parameters["required"] == ["task"]
    parent_model = ScriptedChatModel([_call("research", "c1", task="Find the answer."), "42!"])
    parent = Chain([ToolCallingAdvisor()], model=parent_model, tools=[researcher])

    response = await _run(parent, "what is the answer?", streamed)

    [result] = _tool_messages(response)
    assert result.content == "It is 42." and not result.is_error
    assert child_model.requests[0].messages == (UserMessage(content="Find the answer."),)
    assert response.text == "42!"
    # The same two turns on their own: the parent's usage is the sum of both.
    child_alone = await _researcher(
        ScriptedChatModel([_call("lookup", "k1", topic="answer"), "It is 42."])
    ).call("Find the answer.")

    @tool
    def research(task: str) -> str:
        """Research a topic."""
        return "It is 42."

    parent_alone = await Chain(
        [ToolCallingAdvisor()],
        model=ScriptedChatModel([_call("research", "c1", task="Find the answer."), "42!"]),
        tools=[research],
    ).call("what is the answer?")
    assert child_alone.usage.total_tokens > 0
    assert response.usage == parent_alone.usage + child_alone.usage


@pytest.mark.anyio
async def test_child_events_reach_the_parent_stream_as_nested_progress() -> None:
    child_model = ScriptedChatModel([_call("lookup", "k1", topic="t"), "child text"])
    researcher = chain_tool(_researcher(child_model), "research", "Research.")
    parent_model = ScriptedChatModel([_call("research", "c1", task="go"), "parent text"])
    parent = Chain([ToolCallingAdvisor()], model=parent_model, tools=[researcher])

    events: list[StreamEvent] = [e async for e in parent.stream("hi")]

    nested = [e for e in events if isinstance(e, ToolProgress)]
    assert nested and all(e.call_id == "c1" for e in nested)
    inner = [e.event for e in nested]
    assert any(isinstance(e, ToolCallStarted) and e.call.name == "lookup" for e in inner)
    assert any(isinstance(e, ToolCallFinished) and e.call.name == "lookup" for e in inner)
    assert "".join(e.text for e in inner if isinstance(e, TextDelta)) == "child text"
    assert not any(isinstance(e, ResponseCompleted) for e in inner)
    # The parent's own text is only the parent's.
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "parent text"
    started = next(i for i, e in enumerate(events) if isinstance(e, ToolCallStarted))
    finished = next(i for i, e in enumerate(events) if isinstance(e, ToolCallFinished))
    assert all(started < events.index(e) < finished for e in nested)


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_only_the_named_context_keys_go_down(streamed: bool) -> None:
    child_model = ScriptedChatModel([_call("lookup", "k1", topic="t"), "done"])
    researcher = chain_tool(_researcher(child_model), "research", "R.", context_keys=["tenant"])
    parent_model = ScriptedChatModel([_call("research", "c1", task="go"), "ok"])
    parent = Chain([ToolCallingAdvisor()], model=parent_model, tools=[researcher])

    await _run(parent, "hi", streamed, tool_context={"tenant": "acme", "api_key": "sk-secret"})

    [looked_up] = [m for m in child_model.requests[1].messages if isinstance(m, ToolMessage)]
    assert looked_up.text == "t: 42 (for {'tenant': 'acme'})"


@pytest.mark.anyio
async def test_a_schema_makes_the_arguments_the_childs_prompt() -> None:
    child_model = ScriptedChatModel(["Bonjour"])
    schema = {
        "type": "object",
        "properties": {"text": {"type": "string"}, "to": {"type": "string"}},
        "required": ["text", "to"],
    }
    translator = chain_tool(
        Chain([ToolCallingAdvisor()], model=child_model),
        "translate",
        "Translate a text.",
        parameters=schema,
    )
    parent_model = ScriptedChatModel([_call("translate", "c1", text="Hello", to="fr"), "ok"])
    parent = Chain([ToolCallingAdvisor()], model=parent_model, tools=[translator])
    response = await parent.call("translate hello")
    assert child_model.requests[0].messages == (
        UserMessage(content='{"text": "Hello", "to": "fr"}'),
    )
    assert _tool_messages(response)[0].content == "Bonjour"


@pytest.mark.anyio
async def test_nesting_is_bounded_by_max_depth() -> None:
    # A chain whose model keeps calling the chain itself as a tool.
    model = ScriptedChatModel(
        [_call("again", f"c{i}", task="deeper") for i in range(3)] + ["x"] * 3
    )
    chain = Chain([ToolCallingAdvisor()], model=model)
    chain.tools = (chain_tool(chain, "again", "Ask again.", max_depth=2),)
    response = await chain.call("start")
    assert not _tool_messages(response)[0].is_error
    errors = [
        m for r in model.requests for m in r.messages if isinstance(m, ToolMessage) and m.is_error
    ]
    [error] = errors
    assert "SubchainError" in error.text and "max_depth 2" in error.text


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_child_that_waits_for_approval_defers_a_parent_without_approvals(
    streamed: bool,
) -> None:
    """The parent needs no ApprovalAdvisor: the transcript carries the child's turn."""

    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay."""
        return "paid"

    child_model = ScriptedChatModel([_call("pay", "k1", amount=5), "paid 5"])
    approvals = ApprovalAdvisor(DeferredApprover(), store=InMemoryApprovalStore())
    child = Chain([approvals, ToolCallingAdvisor()], model=child_model, tools=[pay])
    parent_model = ScriptedChatModel([_call("payer", "c1", task="pay 5"), "done"])
    parent = Chain(
        [ToolCallingAdvisor()], model=parent_model, tools=[chain_tool(child, "payer", "Pays.")]
    )
    response = await _run(parent, "pay", streamed)
    assert response.finish_reason == "deferred"
    [payer] = response.deferred
    assert [(d.id, d.kind) for d in payer.nested] == [("k1", "approval")]
    transcript = [UserMessage(content="pay"), *response.messages]
    resumed = await _run(parent, transcript, streamed, decisions={"c1": {"k1": Approve()}})
    [result] = _tool_messages(resumed)
    assert not result.is_error and result.text == "paid 5"
    assert resumed.text == "done"


def test_bad_options_are_refused() -> None:
    chain = Chain([ToolCallingAdvisor()], model=ScriptedChatModel([]))
    with pytest.raises(ChainConfigurationError, match="max_depth"):
        chain_tool(chain, "t", "d", max_depth=0)
    with pytest.raises(ChainConfigurationError, match="collection"):
        chain_tool(chain, "t", "d", context_keys="tenant")


@pytest.mark.anyio
async def test_the_childs_call_fragments_stay_inside_it() -> None:
    """The parent's stream carries its own model's fragments, never the child's: a child's
    call reaches it as its `ToolCallStarted`, which a link that rewrites progress (a
    redaction before the tool loop) rewrites; it could not rewrite split fragments."""
    child_model = ScriptedChatModel([_call("lookup", "k1", topic="ada@example.com"), "done"])
    researcher = chain_tool(_researcher(child_model), "research", "Research.")
    parent_model = ScriptedChatModel([_call("research", "c1", task="go"), "parent text"])
    parent = Chain(
        [RedactionAdvisor(), ToolCallingAdvisor()], model=parent_model, tools=[researcher]
    )

    events: list[StreamEvent] = [e async for e in parent.stream("hi")]

    own = [e for e in events if isinstance(e, ToolCallDelta)]
    assert "".join(e.arguments for e in own) == '{"task":"go"}'
    inner = [e.event for e in events if isinstance(e, ToolProgress)]
    assert not any(isinstance(e, ToolCallDelta) for e in inner)
    started = next(e for e in inner if isinstance(e, ToolCallStarted))
    assert started.call.arguments == '{"topic":"[REDACTED:email]"}'
    assert "ada@example.com" not in repr(events[:-1])
