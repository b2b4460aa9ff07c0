"""The layout of a TauGrid home directory (``$TAU_HOME``) where the hub and agents meet:
each agent's hub token (the hub writes it, the agent reads it), state directory and
local Ray cluster. The hub, the agent daemon, the lab and the embedded platform all name
these paths through here."""

from __future__ import annotations

from pathlib import Path

__all__ = ["agent_ray", "agent_ray_token", "agent_state", "agent_token", "agents"]


def agents(home: Path) -> Path:
    """Where every agent's files live."""
    return home / "agents"


def agent_token(home: Path, cluster: str) -> Path:
    """The agent of ``cluster``'s hub token (0600)."""
    return agents(home) / f"{cluster}.token"


def agent_state(home: Path, cluster: str) -> Path:
    """The agent of ``cluster``'s state directory."""
    return agents(home) / cluster


def agent_ray(home: Path, cluster: str) -> Path:
    """The state of the Ray cluster the agent of ``cluster`` started."""
    return agent_state(home, cluster) / "ray"


def agent_ray_token(home: Path, cluster: str) -> Path:
    """That Ray cluster's auth token."""
    return agents(home) / f"{cluster}.ray-token"
