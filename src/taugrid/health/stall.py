"""Progress of one attempt: has it stopped making any (no metric, heartbeat or log line)?

``resilience.stall`` in tau.yaml gives an ``interval`` and two counts: ``warn_after``
intervals without progress make the run's Progressing phase a warning;
``restart_after`` intervals (when set) end the attempt as ``stall``, which the hub
restarts from the last checkpoint — or fails with the reason when there is none.
Time is passed in (``now``), never read here.
"""

from __future__ import annotations

import dataclasses
import enum

__all__ = ["Level", "Settings", "StallDetector"]


class Level(enum.StrEnum):
    OK = "ok"
    WARN = "warn"
    RESTART = "restart"


@dataclasses.dataclass(frozen=True)
class Settings:
    interval_s: float = 60.0
    warn_after: int = 5
    restart_after: int | None = None

    @classmethod
    def from_spec(cls, spec: dict[str, object]) -> Settings:
        """From a resolved run spec's ``stall_*`` fields (defaults where absent)."""
        d = cls()
        restart = spec.get("stall_restart_after", d.restart_after)
        return cls(
            interval_s=float(spec.get("stall_interval_s") or d.interval_s),  # type: ignore[arg-type]
            warn_after=int(spec.get("stall_warn_after") or d.warn_after),  # type: ignore[call-overload]
            restart_after=None if restart is None else int(restart),  # type: ignore[call-overload]
        )


class StallDetector:
    """``progress(now)`` on every sign of life; ``level(now)`` says how stalled it is."""

    def __init__(self, settings: Settings, now: float) -> None:
        self.settings = settings
        self.last = now

    def progress(self, now: float) -> None:
        self.last = max(self.last, now)

    def idle_intervals(self, now: float) -> int:
        return int((now - self.last) // self.settings.interval_s)

    def level(self, now: float) -> Level:
        idle = self.idle_intervals(now)
        restart = self.settings.restart_after
        if restart is not None and idle >= restart:
            return Level.RESTART
        return Level.WARN if idle >= self.settings.warn_after else Level.OK

    def describe(self, now: float) -> str:
        return (
            f"no metric, heartbeat or log line for {now - self.last:.0f}s "
            f"({self.idle_intervals(now)} intervals of {self.settings.interval_s:g}s)"
        )
