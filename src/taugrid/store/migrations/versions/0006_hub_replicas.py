"""hub high availability: the leader lease row and the replicas' heartbeats

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    leader = op.create_table(
        "hub_leader",
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("holder", sa.String(64), nullable=False),
        sa.Column("holder_url", sa.String(256), nullable=False),
        sa.Column("epoch", sa.Integer, nullable=False),
        sa.Column("acquired_at", sa.Float, nullable=False),
        sa.Column("renewed_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
    )
    op.bulk_insert(
        leader,
        [
            {
                "name": "scheduler",
                "holder": "",
                "holder_url": "",
                "epoch": 0,
                "acquired_at": 0.0,
                "renewed_at": 0.0,
                "expires_at": 0.0,
            }
        ],
    )
    op.create_table(
        "hub_replicas",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("url", sa.String(256), nullable=False),
        sa.Column("host", sa.String(256), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("last_seen", sa.Float, nullable=False),
        sa.Column("schema_revision", sa.String(32), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("hub_replicas")
    op.drop_table("hub_leader")
