"""API fuzzing with schemathesis: every operation of the hub's OpenAPI spec
(``/openapi.json`` of a real server) gets generated requests — valid and invalid — as
an admin; no answer may be a 5xx. Bounded examples so the module runs in well under a
minute per database."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from taugrid.hub.core import context
from taugrid.hub.server import app
from taugrid.store import db
from tests import pg_schema
from tests.hub.harness import HubServer, make_hub

pytestmark = pytest.mark.slow

MAX_EXAMPLES = 12


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def fuzz_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HubServer]:
    home: Path = tmp_path_factory.mktemp("fuzz-hub")
    with contextlib.ExitStack() as stack:
        if request.param == "postgresql":
            if not pg_schema.URL:
                pytest.skip("PostgreSQL not configured: set TAU_TEST_POSTGRES_URL")
            engine = db.create_engine(stack.enter_context(pg_schema.fresh()))
        else:
            engine = db.create_engine(f"sqlite:///{home / 'hub.db'}")
        stack.callback(engine.dispose)
        db.migrate(engine)
        server = HubServer(make_hub(engine, home / "home")).start()
        stack.callback(server.stop)
        yield server


def _openapi() -> dict[str, Any]:
    # The spec is a property of the routes alone: build it without a hub (nothing here
    # touches app.state.hub), then check below that the real server serves the same.
    return app.create_app(cast(context.Hub, None)).openapi()


SPEC = _openapi()
schema = schemathesis.openapi.from_dict(SPEC)


def test_server_serves_the_fuzzed_spec(fuzz_server: HubServer) -> None:
    with fuzz_server.http() as c:
        assert c.get("/openapi.json").json() == SPEC
    assert len(SPEC["paths"]) >= 20


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_no_server_errors(case: schemathesis.Case[Any], fuzz_server: HubServer) -> None:
    body = case.body
    wait = body.get("wait_s") if isinstance(body, dict) else None
    if isinstance(body, dict) and isinstance(wait, int | float):
        body["wait_s"] = min(wait, 0.05)  # an agent long-poll: keep it short
    response = case.call(
        base_url=fuzz_server.url,
        headers={"Authorization": f"Bearer {fuzz_server.admin_token}"},
        timeout=30,
    )
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path} -> {response.status_code}: "
        f"{response.text[:500]}\n{case.as_curl_command()}"
    )
