"""Fencing inside a job: may this attempt still write checkpoints and artifacts?

Every attempt carries a fencing token and exactly one attempt of a run is authoritative
(docs/ARCHITECTURE.md, "Fencing and exactly-one execution"). The hub writes the
authoritative token, a bare integer, to the record's ``FENCE``; the agent mirrors it
into ``$TAU_OUTPUT_DIR/FENCE`` (the attempt's scratch) every second
(``agent.records.recordsync``) and refuses the uploads of a revoked attempt itself. The attempt
learns its own token from ``$TAU_FENCING_TOKEN``.

Decision table of ``check_fence`` (``mine`` = TAU_FENCING_TOKEN, ``fence`` = FENCE):

    FENCE missing                 allowed  (nothing was ever revoked; local runs)
    fence == mine                 allowed  (this attempt is authoritative)
    fence == 0                    FencedError  (the hub ended the attempt; none is current)
    fence != mine                 FencedError  (revoked: another attempt owns the run)
    FENCE present, mine unset     FencedError  (cannot prove authority)
    FENCE unreadable / not int    FencedError  (fail closed; the hub writes it atomically)

The hub sets ``FENCE`` to 0 the moment it declares an attempt ended (any reason), and
to the next attempt's token when that one is placed. Every write path checks it:
checkpoint commits, artifacts, metric lines and heartbeats. Writers check the fence
right before *and* right after making their output visible and undo the write when the
second check fails. That narrows, but cannot close, the window in which a revoked
attempt writes; the agent also kills the processes of ended attempts it can reach.
"""

from __future__ import annotations

import time
from pathlib import Path

from taugrid import errors
from taugrid.record import jobenv, layout
from taugrid.sdk.job import injob_env

__all__ = ["FencedError", "check_fence", "read_fence"]

_READ_TRIES = 3
_RETRY_DELAY_S = 0.05


class FencedError(errors.SystemFault):
    """This attempt was revoked: it may no longer write checkpoints or artifacts.

    Permanent (``retryable`` is False): the process should stop; another attempt of the
    run is authoritative.
    """

    def __init__(self, message: str, *, mine: int | None, fence: int | None) -> None:
        super().__init__(
            message,
            "another attempt of this run is authoritative; stop this process "
            "(the agent kills revoked attempts)",
            retryable=False,
        )
        self.mine = mine
        self.fence = fence


def read_fence(record_dir: Path) -> int | None:
    """The token in ``<record_dir>/FENCE``; None when absent. Raises on garbage."""
    path = record_dir / layout.FENCE_FILE
    last = ""
    for i in range(_READ_TRIES):
        try:
            last = path.read_text().strip()
        except FileNotFoundError:
            return None
        try:
            return int(last)
        except ValueError:
            if i + 1 < _READ_TRIES:
                time.sleep(_RETRY_DELAY_S)
    raise FencedError(
        f"{path} holds {last!r}, not an integer fencing token; refusing to write",
        mine=injob_env.fencing_token(),
        fence=None,
    )


def check_fence(action: str) -> None:
    """Raise ``FencedError`` unless this attempt may perform ``action`` (for the message)."""
    fence = read_fence(injob_env.output_dir())
    if fence is None:
        return
    mine = injob_env.fencing_token()
    if mine == fence:
        return
    who = f"run {injob_env.run_id()} attempt {injob_env.attempt()}"
    if fence == layout.NO_ATTEMPT:
        msg = f"{who} was ended by the hub (no attempt of the run is authoritative now)"
    elif mine is None:
        msg = f"{who} has no {jobenv.FENCING_TOKEN} but the run is fenced at token {fence}"
    else:
        msg = f"{who} was revoked (its token {mine}, authoritative token {fence})"
    raise FencedError(f"{msg}; refusing to {action}", mine=mine, fence=fence)
