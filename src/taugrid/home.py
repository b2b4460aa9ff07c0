"""The layout of a TauGrid home directory (``$TAU_HOME``) where the hub and agents meet:
each agent's hub token (the hub writes it, the agent reads it), state directory and
local Ray cluster. The hub, the agent daemon, the lab and the embedded platform all name
these paths through here. Also the file names of a hub's tokens directory (``tau
cluster install --with-hub`` makes it a Secret; the hub in the cluster adopts it):
``TOKENS_ADMIN`` and ``tokens_agent(cluster)``. And the two environment variables that
move a hub's state out of its home: ``DATABASE_URL_ENV`` (else SQLite in the home) and
``SECRETS_KEY_ENV`` (else a key file in the home). And where interactive sessions find
JupyterLab (``jupyter_binary``: ``JUPYTER_ENV``, else what ``jupyter/build.sh`` built)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "DATABASE_URL_ENV",
    "JUPYTER_ENV",
    "SECRETS_KEY_ENV",
    "TOKENS_ADMIN",
    "TOKENS_AGENT_PREFIX",
    "agent_ray",
    "agent_ray_token",
    "agent_state",
    "agent_token",
    "agents",
    "installed_admin_token",
    "installed_secrets_key",
    "jupyter_binary",
    "tokens_agent",
]

DATABASE_URL_ENV = "TAU_DATABASE_URL"
"""The hub's database URL (PostgreSQL: what replicas share); unset: SQLite in the home."""
SECRETS_KEY_ENV = "TAU_SECRETS_KEY"
"""The key that seals workspace secrets (32 bytes, URL-safe base64); unset: a key file in
the hub's home, made on first use. Replicas of one hub share it."""
JUPYTER_ENV = "TAU_JUPYTER"
"""The ``jupyter`` command interactive sessions start (``tau dev``, docs/dev.md); unset:
the newest one ``jupyter/build.sh`` built under ``~/.cache/taugrid/jupyter/``."""
TOKENS_ADMIN = "admin"
"""In a hub's tokens directory: the admin token's secret."""
TOKENS_AGENT_PREFIX = "agent-"


def tokens_agent(cluster: str) -> str:
    """In a hub's tokens directory: the agent of ``cluster``'s token."""
    return f"{TOKENS_AGENT_PREFIX}{cluster}"


def agents(home: Path) -> Path:
    """Where every agent's files live."""
    return home / "agents"


def agent_token(home: Path, cluster: str) -> Path:
    """The agent of ``cluster``'s hub token (0600)."""
    return agents(home) / f"{cluster}.token"


def installed_admin_token(home: Path, cluster: str) -> Path:
    """The admin token of the hub ``tau cluster install --with-hub`` put on ``cluster``
    (0600), for ``tau login``."""
    return home / "installs" / f"{cluster}.admin-token"


def installed_secrets_key(home: Path, cluster: str) -> Path:
    """The secrets key of the hub ``tau cluster install --with-hub`` put on ``cluster``
    (0600): a reinstall after an uninstall reuses it, so the secrets its database kept
    still open."""
    return home / "installs" / f"{cluster}.secrets-key"


def agent_state(home: Path, cluster: str) -> Path:
    """The agent of ``cluster``'s state directory."""
    return agents(home) / cluster


def agent_ray(home: Path, cluster: str) -> Path:
    """The state of the Ray cluster the agent of ``cluster`` started."""
    return agent_state(home, cluster) / "ray"


def agent_ray_token(home: Path, cluster: str) -> Path:
    """That Ray cluster's auth token."""
    return agents(home) / f"{cluster}.ray-token"


def jupyter_binary() -> Path | None:
    """The ``jupyter`` command of interactive sessions (``JUPYTER_ENV``, else the newest
    complete build of ``jupyter/build.sh``); None when there is none."""
    named = os.environ.get(JUPYTER_ENV)
    if named:
        return Path(named) if Path(named).is_file() else None
    cache = Path(os.environ.get("TAU_JUPYTER_CACHE") or Path.home() / ".cache/taugrid/jupyter")
    built = sorted(p.parent for p in cache.glob("*/.built"))
    found = [b / "venv/bin/jupyter" for b in built if (b / "venv/bin/jupyter").is_file()]
    return found[-1] if found else None
