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
