"""Alembic environment: runs TauGrid's numbered migrations on the connection it is given.

The hub calls ``store.db.migrate`` which passes a live connection in
``config.attributes["connection"]``; nothing here reads alembic.ini or the environment.
"""

from __future__ import annotations

from alembic import context

from taugrid.store import schema

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=schema.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
