"""serving: the ``deployments`` table (``tau serve``)

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "deployments",
        sa.Column("id", sa.String(length=140), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("workspace", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("run_id", sa.String(length=80), nullable=False),
        sa.Column("previous_run_id", sa.String(length=80), nullable=True),
        sa.Column("source", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_deployments_workspace"), "deployments", ["workspace"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_deployments_workspace"), table_name="deployments")
    op.drop_table("deployments")
