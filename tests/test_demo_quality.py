"""The demo quality benchmark's harness and checks, on the scripted model (no timings)."""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from advisorchain.core.events import StreamEvent
from advisorchain.core.request import ChatRequest
from advisorchain.core.response import ChatResponse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the benchmarks package lives beside the tests

from benchmarks import demo_quality  # noqa: E402 (after the path it is found on)
from benchmarks.demo.questions import (  # noqa: E402
    QUESTIONS,
    Outcome,
    check,
    claims_success,
    eval_case,
    select,
)


def test_the_question_set_covers_what_the_issue_asks() -> None:
    kinds = {q.kind for q in QUESTIONS}
    assert len(QUESTIONS) >= 30
    sessions = {q.session for q in QUESTIONS if q.session is not None}
    assert len(sessions) >= 2 and {q.half for q in QUESTIONS if q.session} == {"tune", "held"}
    assert sum(q.kind.startswith("item name") for q in QUESTIONS) >= 3
    assert sum(q.kind == "impossible request" for q in QUESTIONS) >= 2
    assert sum("approver rejects" in q.kind for q in QUESTIONS) >= 3
    assert sum(q.approval == "yes" for q in QUESTIONS) >= 3
    assert {"another customer's order, change", "another tenant's order, change"} <= kinds
    # every catalog family with sample data is asked about
    assert {q.tool for q in QUESTIONS if q.tool} >= {
        "get_loyalty_points",
        "track_shipment",
        "get_store_hours",
        "get_refund_status",
        "list_payment_methods",
        "get_warranty_status",
        "get_gift_card_balance",
    }
    assert {q.half for q in QUESTIONS} == {"tune", "held"}
    assert {"another tenant's order", "masked contact", "list of my orders"} <= kinds
    assert {"cancellation, approver rejects", "cancellation, approver approves"} <= kinds
    assert sum(q.tool is not None for q in QUESTIONS) >= 3  # found by tool search
    assert sum(q.not_done for q in QUESTIONS) >= 4
    assert len({q.id for q in QUESTIONS}) == len(QUESTIONS)
    with pytest.raises(ValueError, match="unknown question ids"):
        select("all", ["nope"])


@pytest.mark.anyio
async def test_checks_catch_leaks_missing_facts_and_false_success() -> None:
    email = next(q for q in QUESTIONS if q.id == "t-email")
    assert await check(email, Outcome("It is a***@e***.com.")) == []
    assert "forbidden 'ada.lovelace@example.com'" in await check(
        email, Outcome("It is ada.lovelace@example.com (a***@e***.com).")
    )
    assert await check(email, Outcome("It is on file.")) == [r"missing fact /a\*\*\*@e\*\*\*\.com/"]
    other = next(q for q in QUESTIONS if q.id == "t-other-tenant")
    assert await check(other, Outcome("I could not find order B-2001.")) == []
    assert "forbidden 'coffee'" in await check(
        other, Outcome("No order B-2001, but it had coffee beans.")
    )
    rejected = next(q for q in QUESTIONS if q.id == "t-cancel-rejected")
    fine = Outcome(
        "Order A-1002 was not cancelled: nobody approved it.", (), {"A-1002": "processing"}
    )
    assert await check(rejected, fine) == []
    wrong = Outcome("Your order A-1002 has been cancelled.", (), {"A-1002": "cancelled"})
    assert await check(rejected, wrong) == [
        "does not say it was not done; claims success; A-1002 is cancelled, not processing"
    ]
    assert claims_success("Sorry, it failed. Your address was changed.")
    assert not claims_success("Your address was not changed.")
    # a flag's name is no negation (a real answer of the original demo)
    assert claims_success("The order A-1002 was cancelled due to the demo running with --no-input.")
    loyalty = next(q for q in QUESTIONS if q.id == "t-loyalty")
    assert await check(loyalty, Outcome("You have 1240 points.")) == ["no call get_loyalty_points"]
    assert await check(loyalty, Outcome("You have 1,240.", ("get_loyalty_points",))) == []
    assert await check(loyalty, Outcome("", error="ToolCallLimitExceeded: x")) == [
        "turn failed: ToolCallLimitExceeded: x"
    ]
    assert await check(loyalty, Outcome("  ", ("get_loyalty_points",))) == [
        "missing fact /1240|1,240/",
        "empty answer",
    ]


def test_each_question_is_an_eval_case() -> None:
    """The questions' expectations in `advisorchain.evals` terms: alternative spellings one
    fact, the catalog tool an expected call, secrets and leaks forbidden."""
    carrier = next(q for q in QUESTIONS if q.id == "h-carrier")
    case = eval_case(carrier)
    assert (case.name, case.input) == ("h-carrier", carrier.text)
    assert len(case.expected_facts) == 2 and case.expected_tool_calls == []
    fact = case.expected_facts[1]
    assert isinstance(fact, re.Pattern) and fact.search("arrives on DECEMBER 2")
    assert "ada.lovelace@example.com" in case.forbidden
    other = eval_case(next(q for q in QUESTIONS if q.id == "h-other-customer"))
    assert {"monitor arm", "Bob", "<tool_call>"} <= set(other.forbidden)
    track = eval_case(next(q for q in QUESTIONS if q.id == "h-track"))
    assert track.expected_tool_calls == ["track_shipment"]


@pytest.mark.anyio
async def test_a_saved_run_is_rechecked_by_todays_checks() -> None:
    """`--report`: the order's status after the turn comes back from the saved problems."""
    saved = demo_quality.Row(
        variant="after",
        question="t-cancel-rejected",
        half="tune",
        ok=False,
        problems=["does not say it was not done; A-1002 is cancelled, not processing"],
        answer="Done: it is cancelled.",
        called=["prepare_cancellation", "cancel_order"],
        seconds=1.0,
    )
    again = await demo_quality.recheck(saved)
    assert not again.ok
    assert again.problems == [
        "does not say it was not done; claims success; A-1002 is cancelled, not processing"
    ]
    kept = await demo_quality.recheck(
        demo_quality.Row(**{**vars(saved), "problems": [], "answer": "It was not cancelled."})
    )
    assert kept.ok, kept.problems


def test_the_benchmark_runs_the_variants_on_the_scripted_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "quality.json"
    rows = demo_quality.main(
        ["--model", "scripted", "--variant", "baseline,after", "--json", str(out)]
    )
    assert len(rows) == 2 * len(QUESTIONS)
    assert {r.variant for r in rows} == {"baseline", "after"}
    # interleaved: each question on both variants before the next question
    assert [r.question for r in rows[:2]] == [QUESTIONS[0].id] * 2
    by = {(r.variant, r.question): r for r in rows}
    after = by[("after", "t-cancel-rejected")]
    assert after.ok, after.problems
    assert after.called == ["prepare_cancellation", "cancel_order"]
    assert by[("after", "h-other-customer")].ok
    assert by[("after", "t-email")].ok
    # a session's turns share the conversation: the cancellation at its end really happened
    assert by[("after", "s2-cancel")].ok, by[("after", "s2-cancel")].problems
    table = capsys.readouterr().out
    assert "| variant | half | correct | s/question | floor s/question |" in table
    assert "load before:" in table and out.exists()


def test_the_before_variant_runs_an_earlier_tree_beside_todays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--before DIR` imports DIR/advisorchain_prev: here today's tree under that name."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "advisorchain_prev").symlink_to(ROOT, target_is_directory=True)
    rows = demo_quality.main(
        [
            "--model",
            "scripted",
            "--variant",
            "before,after",
            "--before",
            str(tree),
            "--question",
            "t-status",
            "--question",
            "h-store-hours",
        ]
    )
    assert [(r.variant, r.question) for r in rows] == [
        ("before", "t-status"),
        ("after", "t-status"),
        ("after", "h-store-hours"),
        ("before", "h-store-hours"),
    ]
    assert all(r.ok for r in rows if r.question == "t-status")
    with pytest.raises(SystemExit):
        demo_quality.main(["--model", "scripted", "--variant", "before"])
    assert "needs --before" in capsys.readouterr().err


def test_evals_mode_runs_the_questions_through_run_evals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--evals`: today's chain, cases through `run_evals`, each variant's table printed;
    the verdicts are those of the streamed run (the scripted model answers both alike)."""
    out = tmp_path / "evals.json"
    rows = demo_quality.main(
        ["--model", "scripted", "--variant", "after", "--evals", "--concurrency", "3"]
        + ["--half", "held", "--json", str(out)]
    )
    held = [q.id for q in QUESTIONS if q.half == "held" and q.session is None]
    assert [r.question for r in rows] == held and {r.variant for r in rows} == {"after"}
    by = {r.question: r for r in rows}
    # an approved cancellation ran in a shop of its own: A-1002 really is cancelled
    assert by["h-cancel-approved"].ok, by["h-cancel-approved"].problems
    assert by["h-cancel-approved"].called == ["prepare_cancellation", "cancel_order"]
    assert by["h-other-customer"].ok and by["h-cancel-shipped"].ok
    streamed = demo_quality.main(
        ["--model", "scripted", "--variant", "after", "--half", "held"]
        + [arg for q in held for arg in ("--question", q)]
    )
    assert {r.question: r.ok for r in streamed} == {r.question: r.ok for r in rows}
    printed = capsys.readouterr().out
    assert "at most 3 turns at once" in printed
    assert "case                   result  tokens    time  failures" in printed
    passed = sum(r.ok for r in rows)
    assert f"{len(held)} cases, {passed} passed" in printed
    assert out.exists() and '"seconds_per_question"' in out.read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--variant", "before", "--before", "."], "--evals runs today's tree"),
        (["--variant", "after", "--concurrency", "0"], "--concurrency must be at least 1"),
    ],
)
def test_evals_mode_refuses_what_it_cannot_run(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        demo_quality.main(["--model", "scripted", "--evals", *args])
    assert message in capsys.readouterr().err


class _Overlapping:
    """A model that waits a moment in each call and counts the calls in flight."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.provider_name = getattr(model, "provider_name", None)
        self.model_name = getattr(model, "model_name", None)
        self.in_flight = 0
        self.most = 0

    async def call(self, request: ChatRequest) -> ChatResponse:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await anyio.sleep(0.01)
            response: ChatResponse = await self.model.call(request)
            return response
        finally:
            self.in_flight -= 1

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        raise AssertionError("--evals calls, it does not stream")


@pytest.mark.parametrize("concurrency", [1, 3])
def test_evals_mode_runs_at_most_concurrency_turns_at_once(
    concurrency: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    models: list[_Overlapping] = []
    load = demo_quality.load_models

    def overlapping(spec: str, variants: Any) -> dict[Any, demo_quality.RecordingModel]:
        loaded = load(spec, variants)
        for variant, recording in loaded.items():
            models.append(_Overlapping(recording.model))
            loaded[variant] = demo_quality.RecordingModel(models[-1])
        return loaded

    monkeypatch.setattr(demo_quality, "load_models", overlapping)
    rows = demo_quality.main(
        ["--model", "scripted", "--variant", "after", "--evals", "--half", "tune"]
        + ["--concurrency", str(concurrency)]
    )
    assert len(rows) == sum(q.half == "tune" and q.session is None for q in QUESTIONS)
    assert [m.most for m in models] == [concurrency]
