"""ix_runs_quota_held, ix_attempts_released: the scheduler's snapshot (quota holders and
usage, unreleased attempts) and an agent sync's busy clusters read the live rows by index
instead of every run and attempt the store ever kept

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_runs_quota_held", "runs", ["quota_held"])
    op.create_index("ix_attempts_released", "attempts", ["released"])


def downgrade() -> None:
    op.drop_index("ix_attempts_released", "attempts")
    op.drop_index("ix_runs_quota_held", "runs")
