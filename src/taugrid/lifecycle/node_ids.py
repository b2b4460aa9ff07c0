"""How a node ID is shown to people: one length everywhere (the CLI, the hub's and the
agents' messages, failure reasons), a prefix that ``tau admin node ...`` accepts. Ray's
node IDs are 56 hex digits; ``-o json`` and the store keep the whole ID."""

from __future__ import annotations

SHOWN_CHARS = 12
"""How many leading characters of a node ID are shown."""


def short(node: str) -> str:
    """A node ID as people see it: its first ``SHOWN_CHARS`` characters."""
    return str(node)[:SHOWN_CHARS]
