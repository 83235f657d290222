"""Typed results: `StructuredOutputAdvisor[T]` gives `T` to a type checker.

`.ci/typecheck` runs mypy --strict on this file: each `assert_type` fails it if the type
of the output is lost (becomes `object` or `Any`), and each assignment to a wrong type
carries an `# type: ignore[...]` that mypy reports as unused (`warn_unused_ignores` of
--strict) if the checker stops seeing the mismatch. At run time the same lines check the
values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_type

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from advisorchain import Chain, ChatResponse
from advisorchain.advisors import StructuredOutputAdvisor
from advisorchain.providers import ScriptedChatModel


class Weather(BaseModel):
    city: str
    temperature: float


@dataclass
class Point:
    x: int
    y: int


class Person(TypedDict):
    name: str
    age: int


@pytest.mark.anyio
async def test_a_pydantic_model_is_typed_through_the_advisor() -> None:
    weather = StructuredOutputAdvisor(Weather)
    assert_type(weather, StructuredOutputAdvisor[Weather])
    chain = Chain([weather], model=ScriptedChatModel(['{"city": "Paris", "temperature": 21.5}']))
    response = await chain.call("weather?")
    report = weather.output(response)
    assert_type(report, Weather)
    assert_type(report.temperature, float)
    assert_type(response.output_as(Weather), Weather)
    wrong: int = weather.output(response)  # type: ignore[assignment]
    assert not isinstance(wrong, int)
    assert report.temperature + 1 == 22.5


@pytest.mark.anyio
async def test_lists_dataclasses_and_typeddicts_are_typed_too() -> None:
    points = StructuredOutputAdvisor(list[Point])
    chain = Chain([points], model=ScriptedChatModel(['{"items": [{"x": 1, "y": 2}]}']))
    response: ChatResponse = await chain.call("points?")
    found = points.output(response)
    assert_type(found, list[Point])
    assert_type(found[0].x, int)
    assert found[0].x == 1
    assert_type(response.output_as(list[Point]), list[Point])
    assert response.output_as(list[Point]) == found

    person = StructuredOutputAdvisor(Person)
    chain = Chain([person], model=ScriptedChatModel(['{"name": "Ada", "age": 36}']))
    ada = person.output(await chain.call("who?"))
    assert_type(ada, Person)
    assert_type(ada["age"], int)
    not_a_str: str = ada["age"]  # type: ignore[assignment]
    assert isinstance(not_a_str, int)


def test_validate_is_typed() -> None:
    weather = StructuredOutputAdvisor(Weather)
    value = weather.validate('{"city": "Oslo", "temperature": -3}')
    assert_type(value, Weather)
    assert value.city == "Oslo"
