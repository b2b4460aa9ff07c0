"""attempts remember how much of their driver log and metrics file the hub has stored

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        batch.add_column(sa.Column("log_offset", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("metrics_offset", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        batch.drop_column("metrics_offset")
        batch.drop_column("log_offset")
