"""Shared fixtures: databases (SQLite always, PostgreSQL when TAU_TEST_POSTGRES_URL is set).

Every database fixture gives a fresh, migrated schema; PostgreSQL tests use a schema of
their own (search_path) so runs never see each other's rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import sqlalchemy as sa

from taugrid.store import db
from tests import chromium, pg_schema, wheels, workers
from tests import weed_s3 as weed_s3_server

PG_URL = pg_schema.URL

# CI replays the same property-test examples every run (no example database, a fixed
# seed): a red CI then means the code changed, never that a search got lucky. Local runs
# search at random (and keep what they find in .hypothesis/).
hypothesis.settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    hypothesis.settings.load_profile("ci")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """xdist workers each get a network namespace of their own and keep their stderr in a
    file (tests/workers.py), and while CI still builds weed the S3 tests' groups start
    last; the wheels their pip installs need are fetched first, on the host's network."""
    workers.isolate(config, late=("weed_s3",) if weed_s3_server.build_pending() else ())
    workers.keep_stderr(config)
    if getattr(config, "workerinput", None) is None:
        wheels.fetch()


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> workers.GroupScheduling:
    """Hand out whole worker groups (tests/workers.py)."""
    return workers.GroupScheduling(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched: object) -> None:
    """A dead worker's last stderr lines in its crashed test's report (tests/workers.py)."""
    workers.crash_note(report)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Seconds per worker group, for the next parallel run's order (tests/workers.py)."""
    workers.record(report.nodeid, report.duration)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """This run's seconds per worker group written, its temporary files removed."""
    if getattr(session.config, "workerinput", None) is None:
        workers.write_recorded()
    workers.cleanup(session.config)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Worker groups, and their order in a parallel run (tests/workers.py)."""
    groups = workers.group(items)
    if getattr(config, "workerinput", None) is not None:
        workers.order(items, groups, workers.load_durations())


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sa.Engine]:
    """An engine on each database with no table yet (PostgreSQL skipped when not
    configured)."""
    if request.param == "postgresql":
        if not PG_URL:
            pytest.skip("PostgreSQL not configured: set TAU_TEST_POSTGRES_URL (.ci/run does)")
        with pg_schema.fresh() as url:
            eng = db.create_engine(url)
            yield eng
            eng.dispose()
        return
    eng = db.create_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    yield eng
    eng.dispose()


@pytest.fixture
def engine(empty_engine: sa.Engine) -> sa.Engine:
    """A migrated engine on each database (PostgreSQL skipped when not configured)."""
    db.migrate(empty_engine)
    return empty_engine


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Chromium for the session's browser tests (tests/chromium.py)."""
    yield from chromium.launch()


@pytest.fixture(scope="session")
def weed_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[weed_s3_server.WeedS3]:
    """A real S3-compatible server (SeaweedFS) for the session; see tests/weed_s3.py."""
    server = weed_s3_server.WeedS3(weed_s3_server.weed_binary(), tmp_path_factory.mktemp("weed"))
    server.start()
    yield server
    server.stop()
