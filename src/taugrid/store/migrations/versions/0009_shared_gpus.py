"""shared GPUs: ``runs.gpus`` holds shares of one GPU (``compute.gpus: 0.5``)

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:  # SQLite rebuilds the table
        batch.alter_column("gpus", existing_type=sa.Integer(), type_=sa.Float())


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.alter_column("gpus", existing_type=sa.Float(), type_=sa.Integer())
