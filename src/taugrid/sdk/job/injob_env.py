"""Where an in-job process is: the run's identity and paths, read from the environment.

The platform starts every attempt of a run with these variables (their names are
``record.jobenv``'s; the record they name: docs/ARCHITECTURE.md, "The run record"):

    TAU_RUN_ID          the run ID (the key of the run record)
    TAU_ATTEMPT         attempt number, an int starting at 1
    TAU_OUTPUT_DIR      where the attempt writes: a scratch directory on its node that
                        the agent uploads into the run record (``agent.records.recordsync``);
                        the record ``/data/<ws>/runs/<run-id>/`` itself on Kubernetes
    CHECKPOINT_PATH     where checkpoints go; default ``$TAU_OUTPUT_DIR/checkpoints``
    TAU_FENCING_TOKEN   this attempt's fencing token, an int (see ``injob_fence``)
    TAU_PARAMS          a sweep trial's parameter values, a JSON object (``params``)
    RANK / WORLD_SIZE   worker rank and count of a multi-worker run

Invariants:
- Every accessor reads the environment on each call, so a process that sets the
  variables late (a Ray Train worker receiving them from its driver) sees them.
- Outside a run (no ``TAU_OUTPUT_DIR``) everything lands in ``./.tau-local/`` and a
  ``LocalRunWarning`` is issued once per process, so scripts run unchanged on a laptop.
- Malformed values raise ``InJobEnvError`` naming the variable; nothing guesses.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

from taugrid import errors
from taugrid.record import jobenv, layout

__all__ = [
    "LOCAL_DIR_NAME",
    "InJobEnvError",
    "LocalRunWarning",
    "attempt",
    "checkpoint_root",
    "fencing_token",
    "in_run",
    "output_dir",
    "params",
    "rank",
    "run_id",
    "world_size",
]

LOCAL_DIR_NAME = ".tau-local"

_warned_local = False
_warn_lock = threading.Lock()


class InJobEnvError(errors.UserError):
    """A TAU_* (or RANK/WORLD_SIZE) variable holds a value that cannot be used."""


class LocalRunWarning(UserWarning):
    """The process is not inside a TauGrid run; outputs go to ``./.tau-local/``."""


def in_run() -> bool:
    """True when the platform started this process as part of a run."""
    return bool(os.environ.get(jobenv.OUTPUT_DIR))


def output_dir() -> Path:
    """The run record directory, or ``./.tau-local`` outside a run (warns once)."""
    value = os.environ.get(jobenv.OUTPUT_DIR)
    if value:
        return Path(value)
    _warn_local_once()
    return Path.cwd() / LOCAL_DIR_NAME


def checkpoint_root() -> Path:
    """``$CHECKPOINT_PATH``, else ``<output_dir>/checkpoints``."""
    value = os.environ.get(jobenv.CHECKPOINT_PATH)
    return Path(value) if value else output_dir() / layout.CHECKPOINTS_DIR


def _json_object(name: str) -> dict[str, Any]:
    """The JSON object in variable ``name`` (empty when unset)."""
    raw = os.environ.get(name)
    if not raw:
        return {}
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise InJobEnvError(f"{name} is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise InJobEnvError(f"{name} is not a JSON object: {raw[:80]!r}")
    return doc


def params() -> dict[str, Any]:
    """This sweep trial's parameter values (``tau sweep``); empty outside a sweep."""
    return _json_object(jobenv.PARAMS)


def label_selector() -> dict[str, str]:
    """The Ray node labels this run's workers must have: the spot or on-demand node pools
    the hub placed it on (empty: any node). A script that places its own workers passes
    it on, e.g. ``ScalingConfig(num_workers=4, label_selector=tau.label_selector())``."""
    return {str(k): str(v) for k, v in _json_object(jobenv.LABEL_SELECTOR).items()}


def run_id() -> str:
    """``$TAU_RUN_ID``, or ``"local"`` outside a run."""
    return os.environ.get(jobenv.RUN_ID) or "local"


def attempt() -> int:
    """``$TAU_ATTEMPT`` (1 for the first attempt); 1 when unset."""
    value = _int_var(jobenv.ATTEMPT, default=1)
    if value < 1:
        raise InJobEnvError(
            f"{jobenv.ATTEMPT}={value} is not a valid attempt number",
            f"attempts are numbered from 1; unset {jobenv.ATTEMPT} for a local run",
        )
    return value


def fencing_token() -> int | None:
    """``$TAU_FENCING_TOKEN``, or None when the platform gave none (local runs)."""
    if not os.environ.get(jobenv.FENCING_TOKEN):
        return None
    return _int_var(jobenv.FENCING_TOKEN, default=0)


def rank() -> int:
    """This worker's rank: ``$RANK``, else the Ray Train context, else 0."""
    if os.environ.get("RANK"):
        return _int_var("RANK", default=0)
    return _ray_train_rank()


def world_size() -> int:
    """Number of workers: ``$WORLD_SIZE``, else the Ray Train context, else 1."""
    if os.environ.get("WORLD_SIZE"):
        return _int_var("WORLD_SIZE", default=1)
    return _ray_train_world_size()


def _int_var(name: str, *, default: int) -> int:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        return int(raw.strip())
    except ValueError as exc:
        raise InJobEnvError(
            f"{name}={raw!r} is not an integer",
            f"the platform sets {name}; if you set it by hand, give a whole number",
        ) from exc


def _ray_train_rank() -> int:
    # Only consult Ray Train when the user's code already imported it: importing ray
    # here would make every tau.log call pay for a heavy import.
    if "ray.train" not in sys.modules:
        return 0
    try:
        return int(sys.modules["ray.train"].get_context().get_world_rank())
    except Exception:  # not inside a Ray Train worker
        return 0


def _ray_train_world_size() -> int:
    if "ray.train" not in sys.modules:
        return 1
    try:
        return int(sys.modules["ray.train"].get_context().get_world_size())
    except Exception:  # not inside a Ray Train worker
        return 1


def _warn_local_once() -> None:
    global _warned_local
    with _warn_lock:
        if _warned_local:
            return
        _warned_local = True
    warnings.warn(
        f"{jobenv.OUTPUT_DIR} is not set: not inside a TauGrid run, so metrics, checkpoints "
        f"and artifacts go to {Path.cwd() / LOCAL_DIR_NAME}",
        LocalRunWarning,
        stacklevel=4,
    )
