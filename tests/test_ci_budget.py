"""The long scenarios' CI budget (tests/ci_budget.py): start only what fits."""

from __future__ import annotations

from tests import ci_budget


def test_no_deadline_runs_everything() -> None:
    assert ci_budget.skip_reason({"expect_s": 10_000}, None, now=0.0) == ""


def test_a_scenario_that_fits_runs_and_one_that_does_not_says_why() -> None:
    assert ci_budget.skip_reason({"expect_s": 300}, "1300", now=1000.0) == ""
    reason = ci_budget.skip_reason({"expect_s": 301}, "1300", now=1000.0)
    assert "about 301 s" in reason and "300 s are left" in reason


def test_undeclared_duration_counts_as_ten_minutes() -> None:
    assert ci_budget.skip_reason({}, "1599", now=1000.0).startswith("CI time budget")
    assert ci_budget.skip_reason({}, "1600", now=1000.0) == ""


def test_past_the_deadline_shows_nothing_left() -> None:
    assert "0 s are left" in ci_budget.skip_reason({"expect_s": 1}, "900", now=1000.0)
