"""The run record's layout: its keys, the checkpoint markers and how steps are named.

Pure names and tiny pure functions, defined once here and nowhere else: the hub writes
the record with them (``record.run``), jobs write scratch with them (``sdk.injob_*``),
agents upload with them (``agent.records.recordsync``) and the portal reads with them. This
module imports nothing from taugrid (an import-linter contract says so), so every
layer may use it. The layout in full: docs/ARCHITECTURE.md, "The run record"::

    <workspace>/runs/<run-id>/          record_prefix(workspace, run_id)
      run.json  tau.yaml  events.jsonl  RUN_JSON, TAU_YAML, EVENTS_FILE
      rendered/code.zip                 CODE_ARCHIVE (and what each attempt sent)
      logs/driver.log                   LOGS_DIR, DRIVER_LOG
      metrics/metrics.jsonl             METRICS_FILE
      metrics/heartbeat-rank-<r>.json   heartbeat_file (scratch only: the agent reads it)
      checkpoints/                      CHECKPOINTS_DIR
        .staging/attempt-<n>-<k>/       STAGING_DIR, stage_name: work in progress
        step-<8 digits>/_CHECKPOINT.json  step_name, MARKER_FILE: a committed step
        latest                          LATEST_FILE: "step-<8 digits>\\n"
      artifacts/MANIFEST.json           ARTIFACTS_DIR, MANIFEST_FILE
      serve/status.json                 SERVE_STATUS_FILE: a Serve deployment's status
      dev/status.json                   DEV_STATUS_FILE: a session's endpoint and state
      relocate.json                     RELOCATE_FILE (scratch only: the job's ask to move)
      FENCE                             FENCE_FILE: the authoritative token (NO_ATTEMPT)
      COMPLETE                          COMPLETE_FILE: written last
"""

from __future__ import annotations

import re

__all__ = [
    "ARTIFACTS_DIR",
    "CHECKPOINTS_DIR",
    "CODE_ARCHIVE",
    "COMPLETE_FILE",
    "DEV_STATUS_FILE",
    "DRIVER_LOG",
    "EVENTS_FILE",
    "FENCE_FILE",
    "HEARTBEATS",
    "LATEST_FILE",
    "LOGS_DIR",
    "MANIFEST_FILE",
    "MARKER_FILE",
    "MARKER_FORMAT",
    "METRICS_FILE",
    "NO_ATTEMPT",
    "RELOCATE_FILE",
    "RENDERED_DIR",
    "RUN_JSON",
    "SERVE_STATUS_FILE",
    "STAGING_DIR",
    "SUBDIRS",
    "TAU_YAML",
    "committed_step",
    "heartbeat_file",
    "record_prefix",
    "stage_attempt",
    "stage_name",
    "step_name",
]

RUN_JSON = "run.json"
"""The run as the hub knows it (rewritten as it moves)."""
TAU_YAML = "tau.yaml"
EVENTS_FILE = "events.jsonl"
RENDERED_DIR = "rendered"
LOGS_DIR = "logs"
DRIVER_LOG = "driver.log"
CHECKPOINTS_DIR = "checkpoints"
ARTIFACTS_DIR = "artifacts"
SUBDIRS = (RENDERED_DIR, LOGS_DIR, "metrics", CHECKPOINTS_DIR, ARTIFACTS_DIR)
"""The folders a record on a directory starts with."""
CODE_ARCHIVE = f"{RENDERED_DIR}/code.zip"
"""The run's code as submitted (a zip), which agents and pods unpack to run it."""
METRICS_FILE = "metrics/metrics.jsonl"
"""One line per logged value (``tau.log``); the record's copy keeps every attempt."""
HEARTBEATS = "metrics/heartbeat-rank-*.json"
"""Every worker's heartbeat (``heartbeat_file``), as a glob under the output dir."""
SERVE_STATUS_FILE = "serve/status.json"
"""A Serve deployment's status, rewritten by its driver while it runs."""
DEV_STATUS_FILE = "dev/status.json"
"""An interactive session's Jupyter endpoint, token and state (``sdk.job.dev_session``),
rewritten while it runs; the hub reads it to proxy (``hub.dev``) and never shows the token."""
RELOCATE_FILE = "relocate.json"
"""Where ``tau.request_relocation`` leaves the job's ask, in its output dir."""
MANIFEST_FILE = "MANIFEST.json"
"""The artifacts' manifest (``artifacts/`` of a record, and an exported output): written
after the files it lists."""
FENCE_FILE = "FENCE"
"""The authoritative attempt's fencing token, a bare integer."""
NO_ATTEMPT = 0
"""The ``FENCE`` value between attempts (an attempt ended, the next not placed yet):
tokens start at 1, so no attempt matches it."""
COMPLETE_FILE = "COMPLETE"
"""Written last: the record is whole."""

MARKER_FILE = "_CHECKPOINT.json"
"""A committed checkpoint's marker: step, attempt, run_id, rank, fencing_token, sha256
per file (``files``) and of them all (``tree_sha256``); its presence is the commit."""
MARKER_FORMAT = 1
LATEST_FILE = "latest"
"""``step-<8 digits>\\n``: the highest committed step (for tools; readers check markers)."""
STAGING_DIR = ".staging"
"""Work in progress under a checkpoint root (hidden: never listed by a record store)."""

_COMMITTED = re.compile(r"^step-(\d{8,})$")
_STAGE = re.compile(r"^attempt-(\d+)-\d+$")


def record_prefix(workspace: str, run_id: str) -> str:
    """The key prefix of one run's record: ``<workspace>/runs/<run-id>``."""
    return f"{workspace}/runs/{run_id}"


def heartbeat_file(rank: int) -> str:
    """The heartbeat of worker ``rank`` (``tau.heartbeat``), under the output dir."""
    return f"metrics/heartbeat-rank-{rank}.json"


def step_name(step: int) -> str:
    """The folder of committed step ``step``: ``step-<8 digits>``."""
    return f"step-{step:08d}"


def committed_step(name: str) -> int | None:
    """The step a ``step_name`` folder name stands for; None for any other name."""
    m = _COMMITTED.match(name)
    return int(m[1]) if m else None


def stage_name(attempt: int, k: int) -> str:
    """The ``k``-th staging folder of attempt ``attempt``: ``attempt-<n>-<k>``."""
    return f"attempt-{attempt}-{k}"


def stage_attempt(name: str) -> int | None:
    """The attempt a ``stage_name`` folder belongs to; None for any other name."""
    m = _STAGE.match(name)
    return int(m[1]) if m else None
