"""The hub's relational schema (SQLAlchemy Core): one table per record kind.

Owns table definitions only; migrations in ``store/migrations`` create them and must
match. Conventions: string primary keys for user-visible IDs (run IDs, cluster IDs);
JSON columns for documents (never pickles); timestamps are UTC epoch seconds (float)
so SQLite and PostgreSQL compare them identically; every state change that matters is
also an ``events`` row.

Vocabulary: a *run* is what a researcher submitted; an *attempt* is one execution of it
on one cluster, identified by its fencing token (``attempts.token``, a global
monotonically increasing integer); exactly one attempt per run is authoritative
(``runs.current_token``).
"""

from __future__ import annotations

import sqlalchemy as sa

__all__ = [
    "attempts",
    "audit",
    "clusters",
    "dataset_replicas",
    "datasets",
    "deployments",
    "events",
    "hub_leader",
    "hub_replicas",
    "metadata",
    "metrics",
    "model_versions",
    "node_marks",
    "phases",
    "quota_requests",
    "runs",
    "secrets",
    "sweep_trials",
    "sweeps",
    "team_quotas",
    "teams",
    "tokens",
    "tracking_mirrors",
    "transfers",
    "workspace_members",
    "workspaces",
]

metadata = sa.MetaData()

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.String(80), primary_key=True),
    sa.Column("name", sa.String(64), nullable=False, index=True),
    sa.Column("workspace", sa.String(64), nullable=False, index=True),
    sa.Column("team", sa.String(64), nullable=False),
    sa.Column("state", sa.String(24), nullable=False, index=True),
    sa.Column("reason", sa.Text, nullable=False, default=""),
    sa.Column("priority", sa.Integer, nullable=False, default=0),
    sa.Column("gpus", sa.Float, nullable=False, default=0),  # a shared GPU: 0.5
    sa.Column("gpu_model", sa.String(64), nullable=True),
    sa.Column("spec", sa.JSON, nullable=False),
    sa.Column("config_yaml", sa.Text, nullable=False),
    sa.Column("cluster_id", sa.String(64), nullable=True),
    sa.Column("current_token", sa.Integer, nullable=True),
    sa.Column("attempts_used", sa.Integer, nullable=False, default=0),
    sa.Column("quota_held", sa.Boolean, nullable=False, default=False, index=True),
    sa.Column("cancel_requested", sa.Boolean, nullable=False, default=False),
    sa.Column("resume_from", sa.Text, nullable=True),
    sa.Column("not_before", sa.Float, nullable=False, default=0.0),
    sa.Column("created_at", sa.Float, nullable=False, index=True),
    sa.Column("updated_at", sa.Float, nullable=False),
    # {"away_from": [cluster ids], "cpus": free CPUs asked} once the hub moved the run
    sa.Column("relocation", sa.JSON, nullable=True),
    # the code's git commit, branch and dirty flag when submitted from a repository
    sa.Column("source", sa.JSON, nullable=True),
    # the capacity the hub keeps the run to when not its spec's (on-demand: a capacity any
    # run reclaimed more than resilience.max_restarts times)
    sa.Column("capacity", sa.String(16), nullable=True),
)

attempts = sa.Table(
    "attempts",
    metadata,
    sa.Column("token", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(80), sa.ForeignKey("runs.id"), nullable=False, index=True),
    sa.Column("number", sa.Integer, nullable=False),
    sa.Column("cluster_id", sa.String(64), nullable=False, index=True),
    sa.Column("state", sa.String(24), nullable=False),
    sa.Column("submission_id", sa.String(120), nullable=True),
    sa.Column("revoked", sa.Boolean, nullable=False, default=False),
    sa.Column("released", sa.Boolean, nullable=False, default=False, index=True),
    sa.Column("exit_code", sa.Integer, nullable=True),
    sa.Column("reason", sa.Text, nullable=False, default=""),
    sa.Column("failure_kind", sa.String(32), nullable=True),
    sa.Column("nodes", sa.JSON, nullable=False, default=list),
    sa.Column("resumed_from", sa.Text, nullable=True),
    sa.Column("last_step", sa.Integer, nullable=True),
    sa.Column("checkpoint_step", sa.Integer, nullable=True),
    sa.Column("log_offset", sa.BigInteger, nullable=True),
    sa.Column("metrics_offset", sa.BigInteger, nullable=True),
    sa.Column("placement", sa.JSON, nullable=False, default=dict),
    # every cluster's verdict when the attempt was placed: read by explain-placement only
    # (one per cluster of the fleet; the placement's other readers never parse them)
    sa.Column("verdicts", sa.JSON, nullable=True),
    sa.Column("spans", sa.Boolean, nullable=False, default=False, server_default=sa.false()),
    # spans: the placement lends worker groups of other clusters (``hub.runs.guests``)
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("started_at", sa.Float, nullable=True),
    sa.Column("ended_at", sa.Float, nullable=True),
    sa.UniqueConstraint("run_id", "number", name="uq_attempt_number"),
)

phases = sa.Table(
    "phases",
    metadata,
    sa.Column("run_id", sa.String(80), sa.ForeignKey("runs.id"), primary_key=True),
    sa.Column("phase", sa.String(32), primary_key=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("source", sa.String(64), nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("ts", sa.Float, nullable=False),
    # the runs whose phase waits on something (an export to retry): found without a scan
    sa.Index("ix_phases_phase_status", "phase", "status"),
)

events = sa.Table(
    "events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(80), nullable=True, index=True),
    sa.Column("kind", sa.String(48), nullable=False),
    sa.Column("ts", sa.Float, nullable=False),
    sa.Column("payload", sa.JSON, nullable=False),
)

metrics = sa.Table(
    "metrics",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(80), nullable=False, index=True),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("step", sa.Integer, nullable=True),
    sa.Column("name", sa.String(128), nullable=False),
    sa.Column("value", sa.Float, nullable=False),
    sa.Column("wall_time", sa.Float, nullable=False),
)

clusters = sa.Table(
    "clusters",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("region", sa.String(64), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("registered_at", sa.Float, nullable=False),
    sa.Column("last_heartbeat", sa.Float, nullable=False),
    sa.Column("lease_expires", sa.Float, nullable=False),
    sa.Column("report", sa.JSON, nullable=False),
)

node_marks = sa.Table(
    "node_marks",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("cluster_id", sa.String(64), nullable=False, index=True),
    sa.Column("node_id", sa.String(128), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("marked_at", sa.Float, nullable=False),
    sa.Column("cleared_at", sa.Float, nullable=True),
    sa.Column("source", sa.String(16), nullable=False, server_default="admin"),
)

# What the hub has seen of each spot pool: node-seconds its nodes were reported alive and
# the reclaims marked on them (hub.pools turns them into the pool's reclaim rate).
pool_stats = sa.Table(
    "pool_stats",
    metadata,
    sa.Column("cluster_id", sa.String(64), primary_key=True),
    sa.Column("pool", sa.String(64), primary_key=True),
    sa.Column("node_seconds", sa.Float, nullable=False),
    sa.Column("reclaims", sa.Integer, nullable=False),
    sa.Column("seen_at", sa.Float, nullable=False),
)

tokens = sa.Table(
    "tokens",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("hash", sa.String(64), nullable=False, unique=True),
    sa.Column("name", sa.String(128), nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("scope", sa.JSON, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("revoked_at", sa.Float, nullable=True),
)

audit = sa.Table(
    "audit",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("ts", sa.Float, nullable=False),
    sa.Column("actor", sa.String(128), nullable=False),
    sa.Column("action", sa.String(64), nullable=False),
    sa.Column("target", sa.String(256), nullable=False),
    sa.Column("detail", sa.JSON, nullable=False),
)

# -- the MLflow bridge (hub.tracking): how far each run's metrics reached its server ----
tracking_mirrors = sa.Table(
    "tracking_mirrors",
    metadata,
    sa.Column("run_id", sa.String(80), primary_key=True),
    sa.Column("mlflow_run_id", sa.String(64), nullable=True),
    sa.Column("metric_id", sa.Integer, nullable=False, default=0),  # metrics.id sent up to
    sa.Column("done", sa.Boolean, nullable=False, default=False),  # its end sent too
    sa.Column("error", sa.Text, nullable=False, default=""),
    sa.Column("updated_at", sa.Float, nullable=False),
)

# -- workspace secrets (hub.vault): values sealed with the platform's key --------------
# ``scope`` is a workspace's name or ``*`` (the platform's, set by admins); ``keys`` are
# the secret's key names (shown by listings), ``sealed`` the encrypted JSON of its values.

secrets = sa.Table(
    "secrets",
    metadata,
    sa.Column("scope", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("keys", sa.JSON, nullable=False),
    sa.Column("sealed", sa.LargeBinary, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("updated_by", sa.String(128), nullable=False),
)

# -- sweeps (hub.sweeps): a set of trial runs of one tau.yaml ---------------------------
# ``spec`` is the tau.yaml's ``sweep`` section; ``code`` the zipped working directory the
# trials are submitted with. A trial is a run (``runs.id``); ``rung`` is the highest
# asha rung it passed, ``stopped`` why the sweep stopped it early.

sweeps = sa.Table(
    "sweeps",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(64), nullable=False),
    sa.Column("workspace", sa.String(64), nullable=False, index=True),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("spec", sa.JSON, nullable=False),
    sa.Column("tau_yaml", sa.Text, nullable=False),
    sa.Column("filename", sa.String(256), nullable=False),
    sa.Column("code", sa.LargeBinary, nullable=True),
    sa.Column("source", sa.JSON, nullable=True),
    sa.Column("model", sa.JSON, nullable=True),
    sa.Column("created_by", sa.String(128), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

sweep_trials = sa.Table(
    "sweep_trials",
    metadata,
    sa.Column("sweep_id", sa.String(64), primary_key=True),
    sa.Column("idx", sa.Integer, primary_key=True),
    sa.Column("run_id", sa.String(128), nullable=False, unique=True),
    sa.Column("params", sa.JSON, nullable=False),
    sa.Column("rung", sa.Integer, nullable=False),
    sa.Column("stopped", sa.Text, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
)

# -- tenancy (hub.tenancy): teams, workspaces, quotas, quota requests ------------------
# ``origin`` is ``platform`` for an object seeded from platform.yaml and never changed
# through the hub (re-seeded at start), ``api`` once the hub changed it (kept as is).

teams = sa.Table(
    "teams",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("spec", sa.JSON, nullable=False),  # TeamSpec less name and quotas
    sa.Column("origin", sa.String(16), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

team_quotas = sa.Table(
    "team_quotas",
    metadata,
    sa.Column("team", sa.String(64), sa.ForeignKey("teams.name"), primary_key=True),
    sa.Column("gpu_model", sa.String(64), primary_key=True),
    sa.Column("position", sa.Integer, nullable=False),  # order of TeamSpec.quotas
    sa.Column("nominal", sa.Integer, nullable=False),
    sa.Column("borrowing_limit", sa.Integer, nullable=True),
    sa.Column("lending_limit", sa.Integer, nullable=True),
    sa.Column("updated_at", sa.Float, nullable=False),
)

workspaces = sa.Table(
    "workspaces",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("team", sa.String(64), nullable=False, index=True),
    sa.Column("spec", sa.JSON, nullable=False),  # WorkspaceSpec less name, team, members
    sa.Column("origin", sa.String(16), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

workspace_members = sa.Table(
    "workspace_members",
    metadata,
    sa.Column("workspace", sa.String(64), sa.ForeignKey("workspaces.name"), primary_key=True),
    sa.Column("member", sa.String(128), primary_key=True, index=True),
    sa.Column("added_at", sa.Float, nullable=False),
)

quota_requests = sa.Table(
    "quota_requests",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("workspace", sa.String(64), nullable=False, index=True),
    sa.Column("team", sa.String(64), nullable=False),
    sa.Column("gpu_model", sa.String(64), nullable=False),
    sa.Column("nominal", sa.Integer, nullable=False),  # the quota asked for (new nominal)
    sa.Column("previous_nominal", sa.Integer, nullable=True),  # set when decided
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("requested_by", sa.String(128), nullable=False),
    sa.Column("decided_by", sa.String(128), nullable=True),
    sa.Column("decision_reason", sa.Text, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("decided_at", sa.Float, nullable=True),
)

# -- data plane (store.data): datasets, their replicas per region, transfers -----------

datasets = sa.Table(
    "datasets",
    metadata,
    sa.Column("id", sa.String(160), primary_key=True),  # name@version
    sa.Column("name", sa.String(128), nullable=False, index=True),
    sa.Column("version", sa.String(31), nullable=False),
    sa.Column("workspace", sa.String(64), nullable=False, index=True, server_default="default"),
    sa.Column("state", sa.String(16), nullable=False),  # scanning | ready | failed
    sa.Column("origin_region", sa.String(64), nullable=False),
    sa.Column("size_bytes", sa.BigInteger, nullable=False, default=0),
    sa.Column("sha256", sa.String(64), nullable=True),  # digest of the manifest
    sa.Column("files", sa.JSON, nullable=False),  # [{path, size, sha256}]
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("created_by", sa.String(128), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

dataset_replicas = sa.Table(
    "dataset_replicas",
    metadata,
    sa.Column("dataset_id", sa.String(160), sa.ForeignKey("datasets.id"), primary_key=True),
    sa.Column("region", sa.String(64), primary_key=True),
    sa.Column("state", sa.String(16), nullable=False),  # scanning|queued|copying|complete|failed
    sa.Column("path", sa.Text, nullable=False),
    sa.Column("bytes_present", sa.BigInteger, nullable=False, default=0),
    sa.Column("updated_at", sa.Float, nullable=False),
)

transfers = sa.Table(
    "transfers",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("dataset_id", sa.String(160), sa.ForeignKey("datasets.id"), nullable=False),
    sa.Column("src_region", sa.String(64), nullable=False),
    sa.Column("dst_region", sa.String(64), nullable=False, index=True),
    sa.Column("state", sa.String(16), nullable=False, index=True),  # queued|active|done|failed
    sa.Column("bytes_total", sa.BigInteger, nullable=False, default=0),
    sa.Column("bytes_done", sa.BigInteger, nullable=False, default=0),
    sa.Column("reserved_bps", sa.Float, nullable=False, default=0.0),
    sa.Column("rate_bps", sa.Float, nullable=False, default=0.0),
    sa.Column("estimate_s", sa.Float, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("created_by", sa.String(128), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("started_at", sa.Float, nullable=True),
    sa.Column("ended_at", sa.Float, nullable=True),
)

# Hub high availability (migration 0006, ``store.leader``): the leader lease row and the
# replicas' heartbeats. ``hub_leader`` holds one row per singleton role ("scheduler").
hub_leader = sa.Table(
    "hub_leader",
    metadata,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("holder", sa.String(64), nullable=False),
    sa.Column("holder_url", sa.String(256), nullable=False),
    sa.Column("epoch", sa.Integer, nullable=False),
    sa.Column("acquired_at", sa.Float, nullable=False),
    sa.Column("renewed_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
)

hub_replicas = sa.Table(
    "hub_replicas",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("url", sa.String(256), nullable=False),
    sa.Column("host", sa.String(256), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("last_seen", sa.Float, nullable=False),
    sa.Column("schema_revision", sa.String(32), nullable=False),
)

deployments = sa.Table(
    "deployments",
    metadata,
    sa.Column("id", sa.String(140), primary_key=True),  # <workspace>/<name>
    sa.Column("name", sa.String(64), nullable=False),
    sa.Column("workspace", sa.String(64), nullable=False, index=True),
    sa.Column("state", sa.String(16), nullable=False),  # active|deleted
    sa.Column("run_id", sa.String(80), nullable=False),  # the serving run
    sa.Column("previous_run_id", sa.String(80), nullable=True),  # being replaced
    sa.Column("source", sa.JSON, nullable=False),  # run, checkpoint/artifact, model path
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

model_versions = sa.Table(
    "model_versions",
    metadata,
    sa.Column("id", sa.String(160), primary_key=True),  # <workspace>/<name>/<version>
    sa.Column("name", sa.String(64), nullable=False),
    sa.Column("workspace", sa.String(64), nullable=False, index=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("source", sa.JSON, nullable=False),  # run, checkpoint/artifact, model path
    sa.Column("lineage", sa.JSON, nullable=False),  # config hash, datasets, metric
    sa.Column("aliases", sa.JSON, nullable=False),  # e.g. ["production"]
    sa.Column("created_by", sa.String(128), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)
