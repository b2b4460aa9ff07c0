"""Shared fixtures: databases (SQLite always, PostgreSQL when TAU_TEST_POSTGRES_URL is set).

Every database fixture gives a fresh, migrated schema; PostgreSQL tests use a schema of
their own (search_path) so runs never see each other's rows.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import hypothesis
import pytest
import sqlalchemy as sa

from taugrid.store import db
from tests import ci_budget
from tests import weed_s3 as weed_s3_server

PG_URL = os.environ.get("TAU_TEST_POSTGRES_URL")

# CI replays the same property-test examples every run (no example database, a fixed
# seed): a red CI then means the code changed, never that a search got lucky. Local runs
# search at random (and keep what they find in .hypothesis/).
hypothesis.settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    hypothesis.settings.load_profile("ci")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``long`` scenarios (minutes each) run only with ``TAU_TEST_LONG=1``: ``make
    test-long``, which .ci/run runs after ``make test`` while its time budget allows."""
    if os.environ.get("TAU_TEST_LONG") == "1":
        return
    skip = pytest.mark.skip(reason="long scenario: set TAU_TEST_LONG=1 (make test-long)")
    for item in items:
        if "long" in item.keywords:
            item.add_marker(skip)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under ``TAU_TEST_DEADLINE`` (.ci/run sets it from its time budget) a ``long``
    scenario that would end past the deadline is skipped, and says so (tests/ci_budget.py)."""
    marker = item.get_closest_marker("long")
    if marker is None:
        return
    reason = ci_budget.skip_reason(marker.kwargs, os.environ.get("TAU_TEST_DEADLINE"), time.time())
    if reason:
        pytest.skip(reason)


def _pg_engine() -> tuple[sa.Engine, str]:
    assert PG_URL
    schema = f"t_{secrets.token_hex(4)}"
    admin = sa.create_engine(PG_URL)
    with admin.begin() as c:
        c.execute(sa.text(f"CREATE SCHEMA {schema}"))
    admin.dispose()
    url = sa.make_url(PG_URL).update_query_dict({"options": f"-csearch_path={schema}"})
    return db.create_engine(url.render_as_string(hide_password=False)), schema


def _drop_pg(schema: str) -> None:
    assert PG_URL
    admin = sa.create_engine(PG_URL)
    with admin.begin() as c:
        c.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
    admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sa.Engine]:
    """A migrated engine on each database (PostgreSQL skipped when not configured)."""
    if request.param == "postgresql":
        if not PG_URL:
            pytest.skip("PostgreSQL not configured: set TAU_TEST_POSTGRES_URL (.ci/run does)")
        eng, schema = _pg_engine()
        db.migrate(eng)
        yield eng
        eng.dispose()
        _drop_pg(schema)
        return
    eng = db.create_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    db.migrate(eng)
    yield eng
    eng.dispose()


@pytest.fixture(scope="session")
def weed_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[weed_s3_server.WeedS3]:
    """A real S3-compatible server (SeaweedFS) for the session; see tests/weed_s3.py."""
    server = weed_s3_server.WeedS3(weed_s3_server.weed_binary(), tmp_path_factory.mktemp("weed"))
    server.start()
    yield server
    server.stop()
