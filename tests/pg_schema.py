"""A fresh schema of the test PostgreSQL (``TAU_TEST_POSTGRES_URL``, which ``.ci/run``
sets) for one test or fixture, dropped after it: the URL of a database that looks empty.

``tcp=True`` gives the URL over TCP on 127.0.0.1 instead of the Unix socket, for a
process that cannot see this machine's socket directory (a pod on the host network): a
relay (``tests.hub.cut_proxy``) on 127.0.0.1 of this process's network namespace, which
in a parallel run is an xdist worker's own (``tests/workers.py``) where the server's
port is not.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator

import sqlalchemy as sa

from tests.hub import cut_proxy

__all__ = ["URL", "fresh"]

URL = os.environ.get("TAU_TEST_POSTGRES_URL")


@contextlib.contextmanager
def fresh(tcp: bool = False) -> Iterator[str]:
    """The URL of a new schema (``search_path`` set), dropped with what it holds after."""
    assert URL, "PostgreSQL not configured: set TAU_TEST_POSTGRES_URL (.ci/run does)"
    schema = f"t_{secrets.token_hex(4)}"
    admin = sa.create_engine(URL)
    stack = contextlib.ExitStack()
    try:
        with admin.begin() as c:
            c.execute(sa.text(f"CREATE SCHEMA {schema}"))
        url = sa.make_url(URL).update_query_dict({"options": f"-csearch_path={schema}"})
        if tcp:
            relay = stack.enter_context(contextlib.closing(_relay(url)))
            query = {k: v for k, v in url.query.items() if k != "host"}
            url = url.set(host=relay.ip, port=relay.port, query=query)
        yield url.render_as_string(hide_password=False)
    finally:
        stack.close()
        with admin.begin() as c:
            c.execute(sa.text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        admin.dispose()


def _relay(url: sa.URL) -> cut_proxy.Proxy:
    """TCP on 127.0.0.1 to the server ``url`` names: its Unix socket (``?host=DIR``),
    else its host and port."""
    sockdir = url.query.get("host")
    if isinstance(sockdir, str) and sockdir.startswith("/"):
        return cut_proxy.Proxy("127.0.0.1", f"{sockdir}/.s.PGSQL.{url.port or 5432}")
    return cut_proxy.Proxy("127.0.0.1", (url.host or "127.0.0.1", url.port or 5432))
