"""model registry: the ``model_versions`` table (``tau model``)

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "model_versions",
        sa.Column("id", sa.String(length=160), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("workspace", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("source", sa.JSON(), nullable=False),
        sa.Column("lineage", sa.JSON(), nullable=False),
        sa.Column("aliases", sa.JSON(), nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        op.f("ix_model_versions_workspace"), "model_versions", ["workspace"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_model_versions_workspace"), table_name="model_versions")
    op.drop_table("model_versions")
