"""Workspace secrets through the real hub server (SQLite and PostgreSQL): who may set,
list and delete them, what the audit log and listings show (names and keys, never
values), that the database holds them sealed, and that a run naming a secret or key
that does not exist is refused before anything is stored (``hub.core.vault``)."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from taugrid import errors
from taugrid.hub.core import vault
from taugrid.store import schema
from taugrid.store import secrets as store
from tests.hub import tenancy_builders as tb
from tests.hub.harness import HubServer, make_hub

VALUE = "hf_s3cr3t-value-0123456789"
SECRET_YAML = tb.tau_yaml("uses-secret") + (
    "runtime:\n  secrets:\n    - {name: hf, key: token, env: HF_TOKEN}\n"
)


@pytest.fixture
def server(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    s = HubServer(make_hub(engine, tmp_path / "home")).start()
    try:
        tb.workspace(s, "ws-a")
        tb.workspace(s, "ws-b")
        yield s
    finally:
        s.stop()


def _submit(c: object, text: str, workspace: str = "ws-a", dry: bool = False) -> object:
    body = {"tau_yaml": text, "filename": "tau.yaml", "workspace": workspace, "dry_run": dry}
    return c.post("/v1/runs", json=body)  # type: ignore[attr-defined]


def test_members_set_their_workspaces_secrets_and_only_admins_the_platforms(
    server: HubServer,
) -> None:
    alice = tb.token(server, "alice", workspaces=["ws-a"])
    with server.http(alice) as a:
        row = tb.ok(a.put("/v1/workspaces/ws-a/secrets/hf", json={"data": {"token": VALUE}}))
        assert row["keys"] == ["token"] and row["updated_by"] == "alice" and "sealed" not in row
        assert a.put("/v1/workspaces/ws-b/secrets/hf", json={"data": {"k": "v"}}).status_code == 403
        assert a.get("/v1/workspaces/ws-b/secrets").status_code == 403
        assert a.put("/v1/secrets/registry", json={"data": {"k": "v"}}).status_code == 403
        assert (
            a.put("/v1/workspaces/ws-a/secrets/Bad_Name", json={"data": {"k": "v"}}).status_code
            == 422
        )
        assert a.put("/v1/workspaces/ws-a/secrets/empty", json={"data": {}}).status_code == 422
    with server.http() as admin:
        tb.ok(admin.put("/v1/secrets/registry", json={"data": {"user": "u", "password": VALUE}}))
        assert (
            admin.put("/v1/workspaces/nope/secrets/x", json={"data": {"k": "v"}}).status_code == 404
        )
        audit = tb.ok(admin.get("/v1/admin/audit", params={"action": "secret.set"}))
    with server.http(alice) as a:
        listed = tb.ok(a.get("/v1/workspaces/ws-a/secrets"))
        assert [(r["scope"], r["name"], r["keys"]) for r in listed] == [
            ("*", "registry", ["password", "user"]),
            ("ws-a", "hf", ["token"]),
        ]
        assert a.delete("/v1/secrets/registry").status_code == 403
        assert a.delete("/v1/workspaces/ws-a/secrets/hf").status_code == 204
        assert a.delete("/v1/workspaces/ws-a/secrets/hf").status_code == 400
    assert {(e["actor"], e["target"]) for e in audit} >= {("alice", "ws-a/hf")}
    assert VALUE not in str(audit) and VALUE not in str(listed)


def test_values_are_sealed_in_the_database_and_bound_to_their_row(
    server: HubServer, engine: sa.Engine
) -> None:
    hub = server.hub
    hub.vault.put("ws-a", "hf", {"token": VALUE}, "alice")
    with engine.connect() as c:
        rows = c.execute(sa.select(schema.secrets)).all()
    assert len(rows) == 1 and VALUE.encode() not in bytes(rows[0].sealed)
    refs = [{"name": "hf", "key": "token", "env": "HF_TOKEN"}]
    assert hub.vault.values("ws-a", refs) == {"HF_TOKEN": VALUE}
    # the same sealed bytes under another workspace's name do not open (associated data)
    hub.vault.store.put("ws-b", "hf", ["token"], bytes(rows[0].sealed), "mallory")
    with pytest.raises(errors.SystemFault, match="cannot be opened"):
        hub.vault.values("ws-b", refs)


def test_a_replica_with_another_key_says_so(tmp_path: Path, engine: sa.Engine) -> None:
    secrets = store.SecretStore(engine)
    vault.Vault(secrets, tmp_path / "one").put("ws-a", "hf", {"token": VALUE}, "alice")
    other = vault.Vault(secrets, tmp_path / "two")  # its own secrets.key
    with pytest.raises(errors.SystemFault, match=vault.KEY_ENV):
        other.values("ws-a", [{"name": "hf", "key": "token", "env": "T"}])
    assert (tmp_path / "one" / vault.KEY_FILE).stat().st_mode & 0o077 == 0


def test_a_malformed_key_is_refused_with_how_to_make_one(
    tmp_path: Path, engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(vault.KEY_ENV, base64.urlsafe_b64encode(os.urandom(16)).decode())
    with pytest.raises(errors.SystemFault, match="32 bytes") as err:
        vault.Vault(store.SecretStore(engine), tmp_path).put("ws-a", "x", {"k": "v"}, "a")
    assert "urandom(32)" in err.value.hint


def test_a_run_naming_a_missing_secret_or_key_is_refused_before_anything_is_stored(
    server: HubServer,
) -> None:
    with server.http() as admin:
        for dry in (True, False):
            r = _submit(admin, SECRET_YAML, dry=dry)
            assert r.status_code == 400, r.text  # type: ignore[attr-defined]
            body = r.json()  # type: ignore[attr-defined]
            assert "secret hf" in body["detail"] and "tau secret set" in body["hint"]
        tb.ok(admin.put("/v1/workspaces/ws-a/secrets/hf", json={"data": {"other": "x"}}))
        r = _submit(admin, SECRET_YAML)
        assert r.status_code == 400 and "no key token (its keys: other)" in r.text  # type: ignore[attr-defined]
        assert tb.ok(admin.get("/v1/runs")) == []
        tb.ok(admin.put("/v1/secrets/hf", json={"data": {"token": VALUE}}))  # the platform's
        assert _submit(admin, SECRET_YAML, workspace="ws-b").status_code == 201  # type: ignore[attr-defined]
