"""The hub's schema is written twice: ``store/schema.py`` (the SQLAlchemy tables the code
queries) and ``store/migrations/versions/`` (what ``db.migrate`` creates). An empty
database migrated to head must have exactly ``schema.py``'s tables, with the same column
names, nullability, primary keys and indexes, on SQLite and (when configured) PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from taugrid.store import schema

_ALEMBIC = "alembic_version"


def _declared_columns(table: sa.Table) -> dict[str, bool]:
    return {c.name: bool(c.nullable) for c in table.columns}


def _migrated_columns(insp: sa.Inspector, name: str) -> dict[str, bool]:
    return {c["name"]: bool(c["nullable"]) for c in insp.get_columns(name)}


def _declared_indexes(table: sa.Table) -> set[tuple[str, tuple[str, ...], bool]]:
    return {(str(i.name), tuple(c.name for c in i.columns), bool(i.unique)) for i in table.indexes}


def _migrated_indexes(insp: sa.Inspector, name: str) -> set[tuple[str, tuple[str, ...], bool]]:
    out = set()
    for ix in insp.get_indexes(name):
        if ix.get("duplicates_constraint"):
            continue  # PostgreSQL's index behind a UNIQUE constraint: compared as such
        cols = tuple(str(c) for c in ix["column_names"])
        out.add((str(ix["name"]), cols, bool(ix["unique"])))
    return out


def _migrated_tables(engine: sa.Engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names()) - {_ALEMBIC}


def _shape(insp: sa.Inspector, table: sa.Table) -> dict[str, Any]:
    return {
        "columns": _migrated_columns(insp, table.name),
        "primary_key": set(insp.get_pk_constraint(table.name)["constrained_columns"]),
        "indexes": _migrated_indexes(insp, table.name),
    }


def _declared_shape(table: sa.Table) -> dict[str, Any]:
    return {
        "columns": _declared_columns(table),
        "primary_key": {c.name for c in table.primary_key.columns},
        "indexes": _declared_indexes(table),
    }


def test_migrations_create_exactly_the_tables_of_schema_py(engine: sa.Engine) -> None:
    assert _migrated_tables(engine) == set(schema.metadata.tables)


def test_every_table_matches_schema_py(engine: sa.Engine) -> None:
    """Column names and nullability, primary key and indexes, table by table."""
    insp = sa.inspect(engine)
    mismatched = {}
    for table in schema.metadata.sorted_tables:
        declared, migrated = _declared_shape(table), _shape(insp, table)
        if declared != migrated:
            mismatched[table.name] = {"schema.py": declared, "migrated": migrated}
    assert mismatched == {}
