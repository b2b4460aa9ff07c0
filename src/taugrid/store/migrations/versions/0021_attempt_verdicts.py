"""attempts.verdicts: every cluster's verdict at placement moves out of the placement
document, which every sync and scheduling tick parses, into a column explain-placement
alone reads

Revision ID: 0021
Revises: 0020
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        batch.add_column(sa.Column("verdicts", sa.JSON(), nullable=True))
    attempts = sa.table(
        "attempts",
        sa.column("token", sa.Integer),
        sa.column("placement", sa.JSON),
        sa.column("verdicts", sa.JSON),
    )
    conn = op.get_bind()
    holding = sa.cast(attempts.c.placement, sa.Text).like('%"verdicts"%')
    rows = conn.execute(sa.select(attempts.c.token, attempts.c.placement).where(holding))
    for token, placement in rows.fetchall():
        doc = dict(placement or {})
        verdicts = doc.pop("verdicts", None)
        conn.execute(
            attempts.update()
            .where(attempts.c.token == token)
            .values(placement=doc, verdicts=verdicts)
        )


def downgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        batch.drop_column("verdicts")
