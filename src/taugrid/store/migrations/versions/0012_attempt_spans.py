"""attempts say whether they span other clusters, so guest orders are found by index

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        batch.add_column(
            sa.Column("spans", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    conn = op.get_bind()
    rows = conn.execute(sa.text("SELECT token, placement FROM attempts WHERE NOT released"))
    for token, placement in rows.fetchall():
        doc = json.loads(placement) if isinstance(placement, str) else placement
        if (doc or {}).get("guests"):
            conn.execute(
                sa.text("UPDATE attempts SET spans = :t WHERE token = :k"), {"t": True, "k": token}
            )


def downgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        batch.drop_column("spans")
