"""pool_stats: node-seconds and reclaims the hub has seen per spot pool (hub.pools)

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pool_stats",
        sa.Column("cluster_id", sa.String(64), primary_key=True),
        sa.Column("pool", sa.String(64), primary_key=True),
        sa.Column("node_seconds", sa.Float(), nullable=False),
        sa.Column("reclaims", sa.Integer(), nullable=False),
        sa.Column("seen_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("pool_stats")
