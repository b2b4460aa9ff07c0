"""Database engine, URL selection and migrations (SQLite embedded, PostgreSQL production).

Owns: choosing the URL (``TAU_DATABASE_URL`` or SQLite under ``$TAU_HOME``), SQLite
pragmas (WAL, foreign keys, busy timeout), and running the numbered Alembic migrations
at start under a lock (an advisory lock on PostgreSQL, an exclusive file lock next to
the SQLite file) so that several hub processes starting at once migrate exactly once.

Replicas of different versions on one database: the newer one migrates (its newest
revision is ahead of the database's); the older one finds a revision it does not know
and refuses to start (``SchemaTooNew``) rather than write rows an older schema shapes.
A replica already running learns of it from its heartbeat (``hub.core.replica``).

PostgreSQL connections are tested before use only when they sat idle in the pool for
``PING_IDLE_S`` or more (``_ping_if_idle``): a dead one is replaced before a request
sees it, as ``pool_pre_ping`` would, without a round trip per query for connections in
constant use (it had been a fifth of the hub's time under load). A connection broken
in the last second fails its request (503, ``hub.api.ha_api``), which clients retry.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory

from taugrid import errors, home

__all__ = [
    "SchemaTooNew",
    "create_engine",
    "database_revision",
    "database_url",
    "head_revision",
    "migrate",
    "open_engine",
    "too_new",
]

_MIGRATIONS = Path(__file__).parent / "migrations"
_PG_LOCK_KEY = 7_411_530_001  # arbitrary, fixed: "TauGrid migrations"
PING_IDLE_S = 1.0


def database_url(tau_home: Path) -> str:
    """``TAU_DATABASE_URL`` when set, else SQLite at ``$TAU_HOME/hub.db``."""
    return os.environ.get(home.DATABASE_URL_ENV) or f"sqlite:///{tau_home / 'hub.db'}"


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=10000")
    cur.close()


def create_engine(url: str) -> sa.Engine:
    """An engine with the dialect settings TauGrid relies on."""
    if url.startswith("sqlite"):
        engine = sa.create_engine(url, connect_args={"check_same_thread": False, "timeout": 10})
        sa.event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    # connect_timeout: a replica cut off from its database fails (and answers 503)
    # instead of hanging requests on a connect that never completes. 15 s, not less: on
    # a loaded machine opening a PostgreSQL connection alone took over 5 s, and the API
    # tests then got 503s from a healthy database.
    engine = sa.create_engine(
        url, pool_size=10, max_overflow=20, connect_args={"connect_timeout": 15}
    )
    sa.event.listen(engine, "checkout", _ping_if_idle(engine.dialect))
    sa.event.listen(engine, "checkin", _idle_since)
    return engine


def _idle_since(_dbapi_conn: Any, record: Any) -> None:
    record.info["idle_since"] = time.monotonic()


def _ping_if_idle(dialect: sa.Dialect) -> Callable[[Any, Any, Any], None]:
    """The checkout hook: test a connection idle for ``PING_IDLE_S`` or more with the
    dialect's own ping; a dead one is replaced (the pool retries on
    ``DisconnectionError``)."""

    def hook(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        if time.monotonic() - record.info.get("idle_since", float("-inf")) < PING_IDLE_S:
            return
        try:
            dialect.do_ping(dbapi_conn)
        except Exception as exc:
            raise sa.exc.DisconnectionError(f"idle connection is gone: {exc}") from exc

    return hook


@contextlib.contextmanager
def _migration_lock(engine: sa.Engine) -> Iterator[sa.Connection]:
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": _PG_LOCK_KEY})
            try:
                yield conn
            finally:
                conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": _PG_LOCK_KEY})
                conn.commit()
        return
    db_path = engine.url.database or ":memory:"
    lock_path = Path(f"{db_path}.migrate.lock") if db_path != ":memory:" else None
    with contextlib.ExitStack() as stack:
        if lock_path is not None:
            fh = stack.enter_context(lock_path.open("w"))
            fcntl.flock(fh, fcntl.LOCK_EX)
        with engine.connect() as conn:
            yield conn


class SchemaTooNew(errors.SystemFault):
    """The database was migrated by a newer TauGrid than this one."""


def _config(location: Path) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(location))
    return cfg


def head_revision(location: Path = _MIGRATIONS) -> str:
    """The newest migration this TauGrid knows."""
    return str(ScriptDirectory.from_config(_config(location)).get_current_head())


def database_revision(conn: sa.Connection) -> str | None:
    """The revision the database is at (None before the first migration)."""
    if not sa.inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()


def too_new(revision: str, location: Path = _MIGRATIONS) -> SchemaTooNew:
    """The error of a replica whose code is older than the database's schema."""
    return SchemaTooNew(
        f"the database schema is at revision {revision}, newer than this hub knows "
        f"(its newest is {head_revision(location)}): a newer TauGrid migrated it; "
        "this replica refuses to serve so that it never writes with an older schema",
        "upgrade TauGrid on this replica to the version the other replicas run",
    )


def migrate(engine: sa.Engine, location: Path = _MIGRATIONS, revision: str = "head") -> None:
    """Bring the schema to the newest numbered migration (or ``revision``: a test of one
    migration's data step), once, under a lock.

    Raises ``SchemaTooNew`` when the database is at a revision this code does not know.
    """
    cfg = _config(location)
    known = {s.revision for s in ScriptDirectory.from_config(cfg).walk_revisions()}
    with _migration_lock(engine) as conn:
        current = database_revision(conn)
        if current is not None and current not in known:
            raise too_new(current, location)
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
        conn.commit()


def open_engine(url: str) -> sa.Engine:
    """Create the engine and migrate it: what the hub does at start."""
    engine = create_engine(url)
    migrate(engine)
    return engine
