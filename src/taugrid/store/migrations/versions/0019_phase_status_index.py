"""ix_phases_phase_status: the runs whose phase waits on something (a pending export) are
found by one indexed query instead of reading every succeeded run

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_phases_phase_status", "phases", ["phase", "status"])


def downgrade() -> None:
    op.drop_index("ix_phases_phase_status", "phases")
