"""sweeps: a set of trial runs of one tau.yaml, and which run each trial is (hub.sweeps)

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sweeps",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("workspace", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("tau_yaml", sa.Text(), nullable=False),
        sa.Column("filename", sa.String(256), nullable=False),
        sa.Column("code", sa.LargeBinary(), nullable=True),
        sa.Column("source", sa.JSON(), nullable=True),
        sa.Column("model", sa.JSON(), nullable=True),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_sweeps_workspace", "sweeps", ["workspace"])
    op.create_table(
        "sweep_trials",
        sa.Column("sweep_id", sa.String(64), primary_key=True),
        sa.Column("idx", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.String(128), nullable=False, unique=True),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("rung", sa.Integer(), nullable=False),
        sa.Column("stopped", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("sweep_trials")
    op.drop_index("ix_sweeps_workspace", "sweeps")
    op.drop_table("sweeps")
