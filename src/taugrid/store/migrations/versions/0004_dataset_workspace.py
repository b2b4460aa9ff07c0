"""datasets belong to a workspace (existing datasets go to ``default``)

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("workspace", sa.String(length=64), nullable=False, server_default="default")
        )
        batch_op.create_index(batch_op.f("ix_datasets_workspace"), ["workspace"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_datasets_workspace"))
        batch_op.drop_column("workspace")
