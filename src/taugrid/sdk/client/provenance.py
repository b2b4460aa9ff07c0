"""Where a run's code came from: the git commit, branch and dirty flag of the working
directory ``tau run submit`` zips (standard library only; ``git`` when installed).

A directory outside a repository, or a machine without git, gives None: provenance is
recorded when it can be, and its absence never stops a submission.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

__all__ = ["git_source"]

_TIMEOUT_S = 10


def _git(workdir: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(workdir), *args],
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_source(workdir: Path) -> dict[str, Any] | None:
    """``{"commit", "branch", "dirty"}`` of ``workdir``'s repository, or None.

    ``branch`` is None on a detached HEAD; ``dirty`` is True when a tracked file under
    ``workdir`` differs from the commit or an untracked, not ignored file exists there
    (what the submission's code archive holds beyond the commit)."""
    commit = _git(workdir, "rev-parse", "--verify", "-q", "HEAD")
    if not commit:
        return None
    status = _git(workdir, "status", "--porcelain", "--untracked-files=normal", "--", ".")
    return {
        "commit": commit,
        "branch": _git(workdir, "symbolic-ref", "--short", "-q", "HEAD") or None,
        "dirty": bool(status) if status is not None else True,
    }
