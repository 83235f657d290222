"""StructuredOutputAdvisor: validated answers, retries with the errors fed back, on both paths."""

from __future__ import annotations

import json
import pathlib
import typing
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from advisorchain import (
    AnswerDiscarded,
    AssistantMessage,
    Chain,
    ChainConfigurationError,
    ChatModel,
    ChatOptions,
    ChatResponse,
    Message,
    ResponseCompleted,
    StreamEvent,
    SystemMessage,
    TextDelta,
    ToolCall,
    ToolCallFinished,
    ToolCallingAdvisor,
    ToolMessage,
    UserMessage,
    tool,
)
from advisorchain.advisors import (
    ApprovalAdvisor,
    Approve,
    DeferredApprover,
    RedactionAdvisor,
    SQLiteApprovalStore,
    StructuredOutputAdvisor,
    StructuredOutputError,
)
from advisorchain.providers import FallbackModel, OutputSchema, ScriptedChatModel

Path = Literal["call", "stream"]
PATHS = pytest.mark.parametrize("path", ["call", "stream"])


class Weather(BaseModel):
    """The weather in a city."""

    city: str
    temperature: float = Field(description="degrees Celsius")


@dataclass
class Point:
    x: int
    y: int


class Person(TypedDict):
    name: str
    age: int


async def run(
    chain: Chain, prompt: str = "Weather in Paris?", *, path: Path
) -> tuple[ChatResponse, list[StreamEvent]]:
    """One turn on `path`; the stream's events (empty on `call`)."""
    if path == "call":
        return await chain.call(prompt), []
    events = [event async for event in chain.stream(prompt)]
    last = events[-1]
    assert isinstance(last, ResponseCompleted)
    assert sum(isinstance(e, ResponseCompleted) for e in events) == 1
    return last.response, events


def streamed_text(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


PARIS = '{"city": "Paris", "temperature": 21.5}'


# --- success ---------------------------------------------------------------------------


@pytest.mark.anyio
@PATHS
async def test_a_valid_answer_is_validated_into_the_output(path: Path) -> None:
    model = ScriptedChatModel([PARIS])
    advisor = StructuredOutputAdvisor(Weather)
    chain = Chain([advisor], model=model)
    response, events = await run(chain, path=path)
    assert response.output == Weather(city="Paris", temperature=21.5)
    assert response.output_as(Weather).temperature == 21.5
    assert advisor.output(response).city == "Paris"
    assert response.text == PARIS
    if path == "stream":
        assert streamed_text(events) == PARIS
    # the model cannot honour a schema: it is stated in the system message
    (request,) = model.requests
    assert request.options.output_schema is None
    system = request.messages[0]
    assert isinstance(system, SystemMessage)
    assert system.content == advisor.instruction
    assert '"temperature"' in system.content and "Weather" in system.content


@pytest.mark.anyio
@PATHS
@pytest.mark.parametrize(
    ("output_type", "answer", "expected"),
    [
        (Weather, PARIS, Weather(city="Paris", temperature=21.5)),
        (Point, '{"x": 1, "y": 2}', Point(1, 2)),
        (Person, '{"name": "Ada", "age": 36}', {"name": "Ada", "age": 36}),
        (list[Point], '{"items": [{"x": 1, "y": 2}]}', [Point(1, 2)]),
        (list[Point], '[{"x": 3, "y": 4}]', [Point(3, 4)]),
    ],
    ids=["pydantic", "dataclass", "typeddict", "list-wrapped", "list-bare"],
)
async def test_each_kind_of_output_type(
    path: Path, output_type: Any, answer: str, expected: Any
) -> None:
    chain = Chain([StructuredOutputAdvisor(output_type)], model=ScriptedChatModel([answer]))
    response, _ = await run(chain, path=path)
    assert response.output == expected
    assert type(response.output) is type(expected)
    assert response.output_as(output_type) == expected


def test_a_list_is_asked_for_wrapped_in_an_object() -> None:
    schema = StructuredOutputAdvisor(list[Point]).output_schema
    assert schema.name == "list_Point"
    assert schema.schema["type"] == "object"
    assert schema.schema["required"] == ["items"]
    assert schema.schema["properties"]["items"]["type"] == "array"
    assert "$defs" in schema.schema  # refs inside the list still resolve from the root


@pytest.mark.anyio
@PATHS
async def test_a_code_fence_around_the_json_is_accepted(path: Path) -> None:
    chain = Chain(
        [StructuredOutputAdvisor(Weather)], model=ScriptedChatModel([f"```json\n{PARIS}\n```"])
    )
    response, _ = await run(chain, path=path)
    assert response.output == Weather(city="Paris", temperature=21.5)


@pytest.mark.anyio
@PATHS
async def test_the_instruction_joins_the_leading_system_message_once(path: Path) -> None:
    model = ScriptedChatModel([PARIS])
    advisor = StructuredOutputAdvisor(Weather)
    chain = Chain([advisor], model=model)
    transcript: list[Message] = [SystemMessage(content="Be brief."), UserMessage(content="Paris?")]
    if path == "call":
        await chain.call(transcript)
    else:
        _ = [e async for e in chain.stream(transcript)]
    messages = model.requests[0].messages
    assert [type(m) for m in messages] == [SystemMessage, UserMessage]
    assert messages[0].text == f"Be brief.\n\n{advisor.instruction}"
    # a transcript that already carries it (a resumed turn) does not get it twice
    again = ScriptedChatModel([PARIS])
    await Chain([advisor], model=again).call(list(messages))
    assert again.requests[0].messages == messages


# --- native: the schema as an option -----------------------------------------------------


@pytest.mark.anyio
@PATHS
async def test_a_model_that_honours_the_schema_gets_it_as_an_option(path: Path) -> None:
    model = ScriptedChatModel([PARIS], output_schema=True)
    advisor = StructuredOutputAdvisor(Weather)
    response, _ = await run(Chain([advisor], model=model), path=path)
    assert response.output == Weather(city="Paris", temperature=21.5)
    (request,) = model.requests
    assert request.options.output_schema == advisor.output_schema
    assert request.options.output_schema.name == "Weather"
    assert request.options.output_schema.strict is True
    assert not any(isinstance(m, SystemMessage) for m in request.messages)


@pytest.mark.anyio
async def test_a_model_that_honours_it_only_without_tools_gets_the_prompt_with_tools() -> None:
    advisor = StructuredOutputAdvisor(Weather)
    model = ScriptedChatModel([PARIS, PARIS], output_schema="without_tools")
    await Chain([advisor], model=model).call("no tools")
    await Chain([advisor, ToolCallingAdvisor()], model=model, tools=[forecast]).call("tools")
    without, with_tools = model.requests
    assert without.options.output_schema == advisor.output_schema
    assert with_tools.options.output_schema is None
    assert with_tools.messages[0].text == advisor.instruction


@pytest.mark.anyio
async def test_mode_forces_either_way_and_a_nested_chain_is_asked_through() -> None:
    native = ScriptedChatModel([PARIS])  # says nothing about schemas
    await Chain([StructuredOutputAdvisor(Weather, mode="native")], model=native).call("x")
    assert native.requests[0].options.output_schema is not None
    prompted = ScriptedChatModel([PARIS], output_schema=True)
    await Chain([StructuredOutputAdvisor(Weather, mode="prompt")], model=prompted).call("x")
    assert prompted.requests[0].options.output_schema is None
    assert isinstance(prompted.requests[0].messages[0], SystemMessage)
    inner_model = ScriptedChatModel([PARIS], output_schema=True)
    inner = Chain([], model=inner_model)
    assert isinstance(inner, ChatModel)
    await Chain([StructuredOutputAdvisor(Weather)], model=inner).call("x")
    assert inner_model.requests[0].options.output_schema is not None


@pytest.mark.anyio
@pytest.mark.parametrize("second", [True, False])
async def test_a_fallback_model_gets_the_schema_only_if_every_model_honours_it(
    second: bool,
) -> None:
    primary = ScriptedChatModel([PARIS], output_schema=True)
    model = FallbackModel([primary, ScriptedChatModel([], output_schema=second)])
    await Chain([StructuredOutputAdvisor(Weather)], model=model).call("x")
    assert (primary.requests[0].options.output_schema is not None) is second


def test_bad_arguments_are_refused() -> None:
    class OldTypedDict(typing.TypedDict):  # pydantic needs typing_extensions' on 3.11
        name: str

    with pytest.raises(TypeError, match="typing_extensions"):
        StructuredOutputAdvisor(OldTypedDict)
    with pytest.raises(ValueError, match="retries"):
        StructuredOutputAdvisor(Weather, retries=-1)
    with pytest.raises(ValueError, match="mode"):
        StructuredOutputAdvisor(Weather, mode="json")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name"):
        OutputSchema(name="has spaces", schema={})
    with pytest.raises(ValueError, match="name"):
        StructuredOutputAdvisor(Weather, name="x" * 65)


def test_output_schema_is_an_option_like_the_others() -> None:
    schema = OutputSchema(name="Weather", schema={"type": "object"})
    merged = ChatOptions(temperature=0).merged(output_schema=schema)
    assert merged.output_schema == schema and merged.temperature == 0
    assert ChatOptions().merged(ChatOptions(output_schema=schema)).output_schema == schema
    assert OutputSchema.from_dict(schema.to_dict()) == schema


# --- retries -----------------------------------------------------------------------------


@pytest.mark.anyio
@PATHS
async def test_a_validation_failure_is_fed_back_and_the_model_asked_again(path: Path) -> None:
    bad = '{"city": "Paris", "temperature": "warm"}'
    model = ScriptedChatModel([bad, PARIS])
    chain = Chain([StructuredOutputAdvisor(Weather)], model=model)
    response, events = await run(chain, path=path)
    assert response.output == Weather(city="Paris", temperature=21.5)
    first, second = model.requests
    feedback = second.messages[-1]
    assert isinstance(feedback, UserMessage)
    assert "- temperature: Input should be a valid number" in feedback.text
    assert "Weather" in feedback.text
    assert second.messages[:-2] == first.messages
    assert second.messages[-2] == AssistantMessage(content=bad)
    # the turn holds every attempt, and the usage of both calls
    assert [m.text for m in response.messages] == [bad, feedback.text, PARIS]
    assert response.usage.requests == 2
    if path == "stream":
        (marker,) = [e for e in events if isinstance(e, AnswerDiscarded)]
        assert marker.attempt == 1 and "temperature" in marker.reason
        index = events.index(marker)
        assert streamed_text(events[:index]) == bad
        assert streamed_text(events[index:]) == PARIS


@pytest.mark.anyio
@PATHS
@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ("It is sunny in Paris.", "(the whole answer): the answer is not valid JSON"),
        ("   ", "(the whole answer): the answer is empty"),
        ('{"city": "Paris"}', "- temperature: Field required"),
        ('{"city": "Paris", "temperature": 1, "x": 2', "not valid JSON"),
    ],
)
async def test_what_the_feedback_says(path: Path, answer: str, says: str) -> None:
    model = ScriptedChatModel([answer, PARIS])
    response, _ = await run(Chain([StructuredOutputAdvisor(Weather)], model=model), path=path)
    assert response.output is not None
    assert says in model.requests[1].messages[-1].text


@pytest.mark.anyio
async def test_errors_in_a_list_name_the_item_and_the_field() -> None:
    model = ScriptedChatModel(['{"items": [{"x": 1, "y": 2}, {"x": "a", "y": 2}]}', "[]"])
    await Chain([StructuredOutputAdvisor(list[Point])], model=model).call("points")
    assert "- items.1.x: Input should be a valid integer" in model.requests[1].messages[-1].text


@pytest.mark.anyio
@PATHS
async def test_after_the_retries_a_typed_error_carries_the_text_and_errors(path: Path) -> None:
    bad = '{"city": "Paris", "temperature": "warm"}'
    model = ScriptedChatModel([bad, bad])
    chain = Chain([StructuredOutputAdvisor(Weather, retries=1)], model=model)
    with pytest.raises(StructuredOutputError) as caught:
        await run(chain, path=path)
    error = caught.value
    assert error.raw_text == bad
    assert [e["loc"] for e in error.errors] == [("temperature",)]
    assert error.errors[0]["type"] == "float_parsing"
    assert error.attempts == 2
    assert "temperature" in str(error) and "after 2 attempt(s)" in str(error)
    assert error.usage.requests == 2 and error.finish_reason == "stop"
    assert [type(m) for m in error.messages] == [AssistantMessage, UserMessage, AssistantMessage]
    assert len(model.requests) == 2


@pytest.mark.anyio
async def test_retries_zero_asks_once() -> None:
    model = ScriptedChatModel(["nope"])
    with pytest.raises(StructuredOutputError) as caught:
        await Chain([StructuredOutputAdvisor(Weather, retries=0)], model=model).call("x")
    assert caught.value.attempts == 1 and len(model.requests) == 1


@pytest.mark.anyio
@PATHS
async def test_untrusted_json_is_bounded_and_reported(path: Path) -> None:
    deep = "[" * 5000 + "]" * 5000
    model = ScriptedChatModel([deep, PARIS])
    response, _ = await run(Chain([StructuredOutputAdvisor(Weather)], model=model), path=path)
    assert response.output is not None
    assert "too deeply nested" in model.requests[1].messages[-1].text


def test_a_huge_answer_is_refused_before_it_is_read() -> None:
    advisor = StructuredOutputAdvisor(Weather)
    with pytest.raises(StructuredOutputError, match="too long"):
        advisor.validate(" " * 4_000_001)


@pytest.mark.anyio
async def test_a_truncated_answer_is_told_so() -> None:
    cut = ChatResponse(message=AssistantMessage(content='{"city": "Pa'), finish_reason="length")
    model = ScriptedChatModel([cut, PARIS])
    await Chain([StructuredOutputAdvisor(Weather)], model=model).call("x")
    assert "cut off at the token limit" in model.requests[1].messages[-1].text


@pytest.mark.anyio
@PATHS
async def test_a_refusal_is_not_asked_again(path: Path) -> None:
    refusal = ChatResponse(
        message=AssistantMessage(content="I can't help with that."), finish_reason="content_filter"
    )
    model = ScriptedChatModel([refusal, PARIS])
    with pytest.raises(StructuredOutputError, match="the model refused") as caught:
        await run(Chain([StructuredOutputAdvisor(Weather)], model=model), path=path)
    assert caught.value.finish_reason == "content_filter" and caught.value.attempts == 1
    assert len(model.requests) == 1


def test_validate_alone() -> None:
    advisor = StructuredOutputAdvisor(Point)
    assert advisor.validate('{"x": 1, "y": 2}') == Point(1, 2)
    with pytest.raises(StructuredOutputError) as caught:
        advisor.validate('{"x": 1}')
    assert caught.value.errors[0]["loc"] == ("y",)


# --- tools in the same turn --------------------------------------------------------------


@tool
def forecast(city: str) -> str:
    """Tomorrow's forecast for a city."""
    return f"{city}: 21.5 C"


def forecast_call(call_id: str = "c1") -> ToolCall:
    return ToolCall.from_arguments("forecast", {"city": "Paris"}, id=call_id)


@pytest.mark.anyio
@PATHS
@pytest.mark.parametrize("native", [False, True])
async def test_tools_first_then_the_structured_answer(path: Path, native: bool) -> None:
    model = ScriptedChatModel([forecast_call(), PARIS], output_schema=native)
    advisor = StructuredOutputAdvisor(Weather)
    chain = Chain([advisor, ToolCallingAdvisor()], model=model, tools=[forecast])
    response, events = await run(chain, path=path)
    assert response.output == Weather(city="Paris", temperature=21.5)
    assert [type(m) for m in response.messages] == [AssistantMessage, ToolMessage, AssistantMessage]
    # the schema never takes the tools away: both rounds had them
    for request in model.requests:
        assert [t.name for t in request.tools] == ["forecast"]
        assert (request.options.output_schema is not None) is native
    if path == "stream":
        assert any(isinstance(e, ToolCallFinished) for e in events)


@pytest.mark.anyio
@PATHS
async def test_a_retry_after_tools_keeps_the_transcript_valid(path: Path) -> None:
    model = ScriptedChatModel([forecast_call(), '{"city": "Paris"}', forecast_call("c2"), PARIS])
    chain = Chain(
        [StructuredOutputAdvisor(Weather), ToolCallingAdvisor()], model=model, tools=[forecast]
    )
    response, _ = await run(chain, path=path)
    assert response.output == Weather(city="Paris", temperature=21.5)
    kinds = [type(m).__name__ for m in response.messages]
    assert kinds == [
        "AssistantMessage",  # c1
        "ToolMessage",
        "AssistantMessage",  # the invalid answer
        "UserMessage",  # the feedback
        "AssistantMessage",  # c2
        "ToolMessage",
        "AssistantMessage",  # the valid answer
    ]
    retry = model.requests[2].messages
    assert isinstance(retry[-1], UserMessage) and "temperature" in retry[-1].text
    assert [type(m).__name__ for m in retry[2:]] == kinds[:4]


@pytest.mark.anyio
@PATHS
async def test_a_turn_answered_by_tools_directly_has_no_output(path: Path) -> None:
    @tool(return_direct=True)
    def shout(text: str) -> str:
        """Shout."""
        return text.upper()

    model = ScriptedChatModel([ToolCall.from_arguments("shout", {"text": "hi"}, id="s1")])
    chain = Chain([StructuredOutputAdvisor(Weather), ToolCallingAdvisor()], model=model)
    response, _ = await run(chain_with(chain, shout), path=path)
    assert response.finish_reason == "return_direct"
    assert response.output is None
    with pytest.raises(TypeError, match="no structured output"):
        response.output_as(Weather)


def chain_with(chain: Chain, *tools: Any) -> Chain:
    return Chain(chain.advisors, model=chain.model, tools=tools)


@pytest.mark.anyio
async def test_a_chain_without_a_loop_passes_tool_calls_through() -> None:
    model = ScriptedChatModel([forecast_call()])
    response = await Chain([StructuredOutputAdvisor(Weather)], model=model).call("x")
    assert response.tool_calls and response.output is None


# --- placement ---------------------------------------------------------------------------


def test_inside_the_tool_loop_is_refused() -> None:
    with pytest.raises(ChainConfigurationError, match="before the tool loop"):
        Chain([ToolCallingAdvisor(), StructuredOutputAdvisor(Weather)], model=ScriptedChatModel([]))


def test_after_a_text_rewriting_link_is_refused() -> None:
    with pytest.raises(ChainConfigurationError, match="RedactionAdvisor"):
        Chain([RedactionAdvisor(), StructuredOutputAdvisor(Weather)], model=ScriptedChatModel([]))
    Chain([StructuredOutputAdvisor(Weather), RedactionAdvisor()], model=ScriptedChatModel([]))


@pytest.mark.anyio
async def test_one_advisor_in_two_chains_asks_each_model() -> None:
    advisor = StructuredOutputAdvisor(Weather)
    native = ScriptedChatModel([PARIS], output_schema=True)
    prompted = ScriptedChatModel([PARIS])
    await Chain([advisor], model=native).call("x")
    await Chain([advisor], model=prompted).call("x")
    assert native.requests[0].options.output_schema is not None
    assert prompted.requests[0].options.output_schema is None


# --- output_as ---------------------------------------------------------------------------


def test_output_as_checks_the_type() -> None:
    response = ChatResponse(message=AssistantMessage(content="{}"), output=Point(1, 2))
    assert response.output_as(Point) == Point(1, 2)
    with pytest.raises(TypeError, match="not a Weather"):
        response.output_as(Weather)
    listed = ChatResponse(message=AssistantMessage(content="[]"), output=[Point(1, 2)])
    assert listed.output_as(list[Point]) == [Point(1, 2)]
    typed = ChatResponse(message=AssistantMessage(content="{}"), output={"name": "A", "age": 1})
    assert typed.output_as(Person)["age"] == 1
    with pytest.raises(TypeError, match="no structured output"):
        ChatResponse(message=AssistantMessage(content="x")).output_as(Point)


def test_output_survives_with_message() -> None:
    response = ChatResponse(message=AssistantMessage(content="{}"), output=Point(1, 2))
    changed = response.with_message(AssistantMessage(content="{ }"))
    assert changed.output == Point(1, 2) and changed.text == "{ }"


def test_the_instruction_is_compact_json() -> None:
    advisor = StructuredOutputAdvisor(Point)
    schema_text = advisor.instruction.split("\n", 1)[1]
    assert json.loads(schema_text) == advisor.output_schema.schema


# --- deferred approval -------------------------------------------------------------------


@pytest.mark.anyio
@PATHS
@pytest.mark.parametrize("native", [False, True])
async def test_a_deferred_turn_is_validated_when_resumed_and_a_retry_answers_once(
    path: Path, native: bool, tmp_path: pathlib.Path
) -> None:
    sent: list[str] = []

    @tool(requires_approval=True)
    def book(city: str) -> str:
        """Book a trip."""
        sent.append(city)
        return f"booked {city}"

    def chain_for(replies: list[Any]) -> tuple[Chain, ScriptedChatModel]:
        model = ScriptedChatModel(replies, output_schema=native)
        store = SQLiteApprovalStore(tmp_path / "approvals.db")  # durable: a fresh chain resumes
        approval = ApprovalAdvisor(DeferredApprover(), store=store)
        advisors = [StructuredOutputAdvisor(Weather), ToolCallingAdvisor(), approval]
        return Chain(advisors, model=model), model

    chain, _ = chain_for([ToolCall.from_arguments("book", {"city": "Paris"}, id="b1")])
    suspended = await chain.call("book Paris", tools=[book])
    assert suspended.finish_reason == "deferred" and suspended.output is None
    transcript = [UserMessage(content="book Paris"), *suspended.messages]

    later, model = chain_for(['{"city": "Paris"}', PARIS])  # one invalid answer, then valid
    decisions = {"b1": Approve()}
    if path == "call":
        response = await later.call(transcript, decisions=decisions, tools=[book])
    else:
        events = [e async for e in later.stream(transcript, decisions=decisions, tools=[book])]
        assert isinstance(events[-1], ResponseCompleted)
        assert sum(isinstance(e, AnswerDiscarded) for e in events) == 1
        response = events[-1].response
    assert sent == ["Paris"]
    assert response.output == Weather(city="Paris", temperature=21.5)
    first, retry = model.requests
    assert (first.options.output_schema is not None) is native
    instructions = [m for m in first.messages if isinstance(m, SystemMessage)]
    assert len(instructions) == (0 if native else 1)  # never twice
    # the retry continues the transcript: the tool result once, then the answer and feedback
    results = [m for m in retry.messages if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in results] == ["b1"]
    assert retry.messages[: len(first.messages)] == first.messages
    assert [type(m) for m in retry.messages[len(first.messages) :]] == [
        AssistantMessage,
        UserMessage,
    ]
    assert isinstance(response.messages[0], ToolMessage)  # the resumed result, then the rest
