"""The hub's schema is written twice: ``store/schema.py`` (the SQLAlchemy tables the code
queries) and ``store/migrations/versions/`` (what ``db.migrate`` creates). An empty
database migrated to head must have exactly ``schema.py``'s tables, with the same column
names, nullability, primary keys and indexes, on SQLite and (when configured) PostgreSQL.
"""

from __future__ import annotations

import json
import time
from typing import Any

import sqlalchemy as sa

from taugrid.store import db, runs, schema

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


def test_placement_verdicts_move_to_their_own_column(empty_engine: sa.Engine) -> None:
    """Migration 0021: an attempt placed before it keeps its verdicts, read by
    explain-placement from the new column, and its placement no longer carries them."""
    db.migrate(empty_engine, revision="0020")
    verdicts = [{"cluster_id": "c1", "ok": True, "total": 0.5}]
    now = time.time()
    with empty_engine.begin() as c:
        c.execute(
            schema.runs.insert().values(
                id="r-1",
                name="r",
                workspace="w",
                team="t",
                state="running",
                spec={},
                config_yaml="",
                created_at=now,
                updated_at=now,
                not_before=0.0,
            )
        )
        c.execute(
            sa.text(
                "INSERT INTO attempts (run_id, number, cluster_id, state, revoked, released, "
                "reason, nodes, placement, spans, created_at) VALUES ('r-1', 1, 'c1', "
                "'running', false, false, '', '[]', :p, false, :now)"
            ),
            {"p": json.dumps({"cluster": "c1", "verdicts": verdicts}), "now": now},
        )
    db.migrate(empty_engine)
    store = runs.RunStore(empty_engine)
    (attempt,) = store.attempts_for_run("r-1")
    assert attempt["placement"] == {"cluster": "c1"} and "verdicts" not in attempt
    assert store.attempt_verdicts(attempt["token"]) == verdicts
