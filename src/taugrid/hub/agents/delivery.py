"""What of an attempt report's log text and metric lines the hub has not stored yet.

The agent resends a report whose sync failed (``agent.outbox``), also one the hub had
applied but whose answer was lost, and after a restart it reads on from the offsets
the hub gives it. Each report says where its log text starts and where each metric
line ends; the attempt row keeps how far the hub has stored both (``log_offset``,
``metrics_offset``), so every line is stored once, in order.

A report whose text starts past what the hub stored is a real hole (the source is
gone: a Ray job log that restarted, an agent whose state was lost): the hub stores
what came and records the hole as a ``log_gap`` event, which ``tau run status``
and the portal show.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from taugrid import payloads as wire

__all__ = ["Delivery", "new"]


@dataclasses.dataclass(frozen=True)
class Delivery:
    """The new part of one report and the offsets to store with it."""

    log_text: str
    metrics: list[dict[str, Any]]
    log_offset: int | None
    metrics_offset: int | None
    gap: tuple[int, int] | None = None
    """Characters of the driver log that never arrived: [from, to)."""


def new(attempt: dict[str, Any], rep: wire.AttemptReport) -> Delivery:
    """Cut what ``attempt`` (its row) already has off ``rep``."""
    have_log = attempt.get("log_offset") or 0
    have_metrics = attempt.get("metrics_offset") or 0
    text, log_to, gap = rep.log_chunk, attempt.get("log_offset"), None
    if rep.log_from is not None and text:  # an agent of an older release sends no offsets
        if rep.log_from > have_log:
            gap = (have_log, rep.log_from)
        text = text[max(0, have_log - rep.log_from) :]
        log_to = max(have_log, rep.log_from + len(rep.log_chunk))
    metrics = rep.metrics
    if len(rep.metric_ends) == len(rep.metrics):
        metrics = [
            m for m, end in zip(rep.metrics, rep.metric_ends, strict=True) if end > have_metrics
        ]
    metrics_to = attempt.get("metrics_offset")
    if rep.metrics_to is not None:
        metrics_to = max(have_metrics, rep.metrics_to)
    return Delivery(text, metrics, log_to, metrics_to, gap)
