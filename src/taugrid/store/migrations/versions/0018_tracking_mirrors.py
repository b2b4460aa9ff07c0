"""tracking_mirrors: how far each run's metrics reached the MLflow server its workspace
names (hub.tracking)

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tracking_mirrors",
        sa.Column("run_id", sa.String(80), primary_key=True),
        sa.Column("mlflow_run_id", sa.String(64), nullable=True),
        sa.Column("metric_id", sa.Integer, nullable=False),
        sa.Column("done", sa.Boolean, nullable=False),
        sa.Column("error", sa.Text, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("tracking_mirrors")
