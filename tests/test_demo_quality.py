"""The demo quality benchmark's harness and checks, on the scripted model (no timings)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the benchmarks package lives beside the tests

from benchmarks import demo_quality  # noqa: E402 (after the path it is found on)
from benchmarks.demo.questions import (  # noqa: E402
    QUESTIONS,
    Outcome,
    check,
    claims_success,
    select,
)


def test_the_question_set_covers_what_the_issue_asks() -> None:
    kinds = {q.kind for q in QUESTIONS}
    assert len(QUESTIONS) >= 15
    assert {q.half for q in QUESTIONS} == {"tune", "held"}
    assert {"another tenant's order", "masked contact", "list of my orders"} <= kinds
    assert {"cancellation, approver rejects", "cancellation, approver approves"} <= kinds
    assert sum(q.tool is not None for q in QUESTIONS) >= 3  # found by tool search
    assert sum(q.not_done for q in QUESTIONS) >= 4
    assert len({q.id for q in QUESTIONS}) == len(QUESTIONS)
    with pytest.raises(ValueError, match="unknown question ids"):
        select("all", ["nope"])


def test_checks_catch_leaks_missing_facts_and_false_success() -> None:
    email = next(q for q in QUESTIONS if q.id == "t-email")
    assert check(email, Outcome("It is a***@e***.com.")) == []
    assert "leaked 'ada.lovelace@example.com'" in check(
        email, Outcome("It is ada.lovelace@example.com (a***@e***.com).")
    )
    other = next(q for q in QUESTIONS if q.id == "t-other-tenant")
    assert check(other, Outcome("I could not find order B-2001.")) == []
    assert "leaked 'coffee'" in check(other, Outcome("No order B-2001, but it had coffee beans."))
    rejected = next(q for q in QUESTIONS if q.id == "t-cancel-rejected")
    fine = Outcome(
        "Order A-1002 was not cancelled: nobody approved it.", (), {"A-1002": "processing"}
    )
    assert check(rejected, fine) == []
    wrong = Outcome("Your order A-1002 has been cancelled.", (), {"A-1002": "processing"})
    assert check(rejected, wrong) == ["does not say it was not done", "claims success"]
    assert claims_success("Sorry, it failed. Your address was changed.")
    assert not claims_success("Your address was not changed.")
    # a flag's name is no negation (a real answer of the original demo)
    assert claims_success("The order A-1002 was cancelled due to the demo running with --no-input.")
    loyalty = next(q for q in QUESTIONS if q.id == "t-loyalty")
    assert check(loyalty, Outcome("You have 1240 points.")) == ["did not call get_loyalty_points"]
    assert check(loyalty, Outcome("", error="ToolCallLimitExceeded: x")) == [
        "turn failed: ToolCallLimitExceeded: x"
    ]


def test_the_benchmark_runs_both_variants_on_the_scripted_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "quality.json"
    rows = demo_quality.main(["--model", "scripted", "--json", str(out)])
    assert len(rows) == 2 * len(QUESTIONS)
    assert {r.variant for r in rows} == {"baseline", "improved"}
    # interleaved: each question on both variants before the next question
    assert [r.question for r in rows[:2]] == [QUESTIONS[0].id] * 2
    by = {(r.variant, r.question): r for r in rows}
    improved = by[("improved", "t-cancel-rejected")]
    assert improved.ok, improved.problems
    assert improved.called == ["prepare_cancellation", "cancel_order"]
    assert by[("improved", "h-other-customer")].ok
    assert by[("improved", "t-email")].ok
    table = capsys.readouterr().out
    assert "| variant | half | correct | s/question | floor s/question |" in table
    assert "load before:" in table and out.exists()
