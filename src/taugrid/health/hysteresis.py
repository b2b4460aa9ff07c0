"""When a node's conditions become a mark, and when the checker clears its own mark.

A node is marked after ``fail_after`` failing checks in a row and cleared after
``clear_after`` passing checks in a row; anything in between keeps the current state,
so a check that flaps (fail, pass, fail, ...) never marks. A node the checker has
cleared ``max_clears`` times is *sticky*: its next mark stays until an admin clears
it, so a fault that comes and goes cannot mark and clear a node in a loop. A crashing
check (``unknown``) neither marks nor clears: it breaks both runs.
"""

from __future__ import annotations

import dataclasses
import enum

from taugrid.health import conditions as cd

__all__ = ["Action", "Debouncer", "Verdict"]


class Action(enum.StrEnum):
    NONE = "none"
    MARK = "mark"
    CLEAR = "clear"


@dataclasses.dataclass(frozen=True)
class Verdict:
    action: Action
    kind: str = ""
    reason: str = ""


@dataclasses.dataclass
class _Node:
    fails: int = 0
    passes: int = 0
    marked: str | None = None
    clears: int = 0


class Debouncer:
    """Per-node counters; ``observe`` once per check round."""

    def __init__(self, fail_after: int = 2, clear_after: int = 3, max_clears: int = 2) -> None:
        self.fail_after, self.clear_after, self.max_clears = fail_after, clear_after, max_clears
        self.nodes: dict[str, _Node] = {}

    def restore(self, node_id: str, kind: str, clears: int = 0) -> None:
        """A mark the checker set before a restart (kept in the agent's state dir)."""
        self.nodes[node_id] = _Node(marked=kind, clears=clears)

    def observe(self, node_id: str, conds: list[cd.Condition]) -> Verdict:
        n = self.nodes.setdefault(node_id, _Node())
        failing = [c for c in conds if c.status is cd.Status.FAILING]
        if failing:
            n.fails, n.passes = n.fails + 1, 0
            if n.marked is None and n.fails >= self.fail_after:
                n.marked = failing[0].kind or "gpu"
                why = "; ".join(f"{c.type}: {c.reason}" for c in failing)
                if n.clears >= self.max_clears:
                    why += f" (flapping: cleared {n.clears} times; an admin must clear it)"
                return Verdict(Action.MARK, n.marked, why)
            return Verdict(Action.NONE)
        if any(c.status is cd.Status.UNKNOWN for c in conds):
            n.fails = n.passes = 0
            return Verdict(Action.NONE)
        n.fails, n.passes = 0, n.passes + 1
        sticky = n.clears >= self.max_clears
        if n.marked is not None and n.passes >= self.clear_after and not sticky:
            kind, n.marked, n.clears = n.marked, None, n.clears + 1
            return Verdict(Action.CLEAR, kind, f"{n.passes} passing checks in a row")
        return Verdict(Action.NONE)

    def forget(self, node_id: str) -> None:
        """An admin cleared the node: the checker's own mark is gone too."""
        n = self.nodes.get(node_id)
        if n is not None:
            n.marked, n.fails = None, 0
