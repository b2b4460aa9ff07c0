"""Attempt reports the hub has not acknowledged yet, kept until a sync gets through.

A sync that fails (the hub is down, or its answer was lost) leaves its reports here;
the next sync sends them again, coalesced with what was observed since, one report
per attempt: log text and metric lines are concatenated in order, the newest state
wins until the attempt has ended (its first end, with its message, failure kind and
exit code, is its end: a later observation, such as Ray no longer knowing a job that
never reached it, does not rewrite why it failed), and what is said once (a submission,
a stall warning, a relocation ask) is kept until it is delivered. Nothing is dropped
while the hub is away, however long.

Delivered at most once: each report says where its log text starts (``log_from``)
and where each metric line ends (``metric_ends``), so the hub stores only what it has
not stored yet, also when a sync it applied is sent again because its answer was lost
(``hub.agents.delivery``). After an agent restart the hub's offsets (``Assignment.log_offset``,
``metrics_offset``) say where to read on.
"""

from __future__ import annotations

from taugrid import payloads as wire
from taugrid.lifecycle import states as st

__all__ = ["coalesce"]

_MAX_PHASES = 20  # AttemptReport.phases' own limit


def coalesce(reports: list[wire.AttemptReport]) -> list[wire.AttemptReport]:
    """One report per attempt (first-seen order) saying all that ``reports`` say."""
    merged: dict[int, wire.AttemptReport] = {}
    for r in reports:
        old = merged.get(r.token)
        merged[r.token] = r if old is None else _merge(old, r)
    return list(merged.values())


def _merge(old: wire.AttemptReport, new: wire.AttemptReport) -> wire.AttemptReport:
    """``old`` then ``new`` as one report: accumulate streams, keep the newest state."""
    out = new.model_copy(deep=True)
    out.log_chunk = old.log_chunk + new.log_chunk
    out.log_from = old.log_from if old.log_chunk else new.log_from
    out.metrics = [*old.metrics, *new.metrics]
    out.metric_ends = [*old.metric_ends, *new.metric_ends]
    out.metrics_to = new.metrics_to if new.metrics_to is not None else old.metrics_to
    out.phases = [*old.phases, *new.phases][-_MAX_PHASES:]
    out.released = old.released or new.released
    out.uploaded = old.uploaded or new.uploaded
    for name in _ONCE:
        if getattr(new, name) in (None, "", [], {}):  # 0 and False are values
            setattr(out, name, getattr(old, name))
    if old.state in _ENDED:  # the attempt's first end is its end
        for name in ("state", *_END):
            setattr(out, name, getattr(old, name))
    return out


_ENDED = frozenset(s.value for s in st.AttemptState) - {s.value for s in st.ACTIVE_ATTEMPT_STATES}
_END = ("message", "exit_code", "failure_kind")


_ONCE = (
    "submission_id",
    "message",
    "exit_code",
    "failure_kind",
    "last_step",
    "checkpoint_step",
    "submission",
    "progress_warning",
    "serve_status",
    "relocate",
    "adopted",
    "unusable",
    "nodes",
    "worker_nodes",
)
"""Fields a later report may leave empty without meaning to clear them."""
