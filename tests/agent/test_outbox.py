"""Undelivered reports are kept and coalesced (``agent.outbox``); the hub stores each
log character and metric line once (``hub.agents.delivery``), also when a report it applied
comes again because its answer was lost, and names a real hole."""

from __future__ import annotations

from typing import Any

from taugrid import payloads as wire
from taugrid.agent import outbox
from taugrid.hub.agents import delivery


def _rep(**kw: Any) -> wire.AttemptReport:
    return wire.AttemptReport(token=7, state="running", **kw)


def _metric(step: int) -> dict[str, Any]:
    return {"name": "loss", "value": 1.0 / step, "step": step}


def test_coalesced_reports_keep_every_line_in_order_and_the_newest_state() -> None:
    first = _rep(
        log_chunk="a\nb\n",
        log_from=0,
        metrics=[_metric(1)],
        metric_ends=[30],
        metrics_to=30,
        submission={"entrypoint": "python t.py"},
        progress_warning="stalled: 60 s",
        exit_code=None,
    )
    second = _rep(log_chunk="", metrics=[], metrics_to=30)
    third = wire.AttemptReport(
        token=7,
        state="succeeded",
        log_chunk="c\n",
        log_from=4,
        metrics=[_metric(2)],
        metric_ends=[60],
        metrics_to=60,
        exit_code=0,
        released=True,
    )
    other = wire.AttemptReport(token=8, state="starting")
    (one, two) = outbox.coalesce([first, other, second, third])
    assert (one.token, two.token) == (7, 8)
    assert one.state == "succeeded" and one.exit_code == 0 and one.released
    assert (one.log_chunk, one.log_from) == ("a\nb\nc\n", 0)
    assert [m["step"] for m in one.metrics] == [1, 2] and one.metric_ends == [30, 60]
    assert one.metrics_to == 60
    assert one.submission == {"entrypoint": "python t.py"}  # said once, kept until sent
    assert one.progress_warning == "stalled: 60 s"


def test_an_attempts_first_end_is_its_end() -> None:
    """A submission the backend refused ends the attempt with the refusal; the next poll
    finds no job ("Ray no longer knows this job") and must not rewrite why it failed."""
    refused = wire.AttemptReport(
        token=7,
        state="failed",
        message="submission failed: RayJobs of runs named 'x' are refused",
        failure_kind="submit_error",
        released=True,
    )
    lost = wire.AttemptReport(
        token=7,
        state="failed",
        message="Ray no longer knows this job (its cluster restarted)",
        failure_kind="node_failure",
        released=True,
    )
    (one,) = outbox.coalesce([refused, lost])
    assert (one.state, one.failure_kind, one.message) == (
        "failed",
        "submit_error",
        refused.message,
    )


def test_a_resent_report_stores_only_what_the_hub_has_not() -> None:
    row: dict[str, Any] = {"log_offset": None, "metrics_offset": None}
    sent = _rep(
        log_chunk="a\nb\n", log_from=0, metrics=[_metric(1)], metric_ends=[30], metrics_to=30
    )
    got = delivery.new(row, sent)
    assert (got.log_text, got.log_offset, got.metrics_offset, got.gap) == ("a\nb\n", 4, 30, None)
    row.update(log_offset=got.log_offset, metrics_offset=got.metrics_offset)
    # the answer was lost: the agent sends it again, coalesced with what came since
    again = outbox.coalesce(
        [
            sent,
            _rep(
                log_chunk="c\n",
                log_from=4,
                metrics=[_metric(2)],
                metric_ends=[60],
                metrics_to=60,
            ),
        ]
    )[0]
    got = delivery.new(row, again)
    assert got.log_text == "c\n" and [m["step"] for m in got.metrics] == [2]
    assert (got.log_offset, got.metrics_offset, got.gap) == (6, 60, None)
    row.update(log_offset=got.log_offset, metrics_offset=got.metrics_offset)
    dup = delivery.new(row, again)
    assert (dup.log_text, dup.metrics, dup.log_offset, dup.metrics_offset) == ("", [], 6, 60)


def test_text_that_starts_past_what_the_hub_stored_is_a_named_hole() -> None:
    row = {"log_offset": 6, "metrics_offset": 60}
    got = delivery.new(row, _rep(log_chunk="z\n", log_from=10))
    assert got.gap == (6, 10) and got.log_text == "z\n" and got.log_offset == 12


def test_an_agent_without_offsets_is_stored_as_it_sends() -> None:
    row = {"log_offset": None, "metrics_offset": None}
    got = delivery.new(row, _rep(log_chunk="x\n", metrics=[_metric(3)]))
    assert got.log_text == "x\n" and len(got.metrics) == 1 and got.log_offset is None
