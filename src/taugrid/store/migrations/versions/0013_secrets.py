"""workspace secrets: sealed values per scope and name (hub.vault)

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "secrets",
        sa.Column("scope", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("keys", sa.JSON(), nullable=False),
        sa.Column("sealed", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("updated_by", sa.String(128), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("secrets")
