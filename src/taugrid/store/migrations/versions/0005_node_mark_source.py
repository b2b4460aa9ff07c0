"""node marks record who set them: ``admin``, ``checker`` or ``log_monitor``

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("node_marks", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("source", sa.String(length=16), nullable=False, server_default="admin")
        )


def downgrade() -> None:
    with op.batch_alter_table("node_marks", schema=None) as batch_op:
        batch_op.drop_column("source")
