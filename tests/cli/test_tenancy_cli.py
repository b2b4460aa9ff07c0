"""Tenancy commands through the real ``tau`` console script against a real hub server
started by the test (``TAU_HUB_URL``/``TAU_TOKEN``; no Ray): workspaces, members, quota
requests and their approval, the queue, tokens, login and the audit log."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.hub import tenancy_builders as tb
from tests.hub.harness import HubServer

TAU = shutil.which("tau") or str(Path(sys.executable).parent / "tau")


def tau(
    server: HubServer, *args: str, token: str | None = None, home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAU_")}
    env.update(COLUMNS="200", TAU_HOME=str(home or server.hub.config.tau_home / "cli"))
    if token != "":
        env.update(TAU_HUB_URL=server.url, TAU_TOKEN=token or server.admin_token)
    return subprocess.run(
        [TAU, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def js(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return json.loads(proc.stdout)


def test_workspace_and_quota_flow(server: HubServer) -> None:
    ws = js(
        tau(
            server,
            "workspace",
            "create",
            "vision",
            "--team",
            "research",
            "--member",
            "alice",
            "-o",
            "json",
        )
    )
    assert ws["name"] == "vision" and ws["members"] == ["alice"]
    assert [w["name"] for w in js(tau(server, "workspace", "list", "-o", "json"))] == [
        "default",
        "vision",
    ]
    assert js(tau(server, "workspace", "members", "vision", "--add", "bob", "-o", "json")) == [
        "alice",
        "bob",
    ]
    alice = js(
        tau(
            server,
            "admin",
            "token",
            "create",
            "--role",
            "researcher",
            "--name",
            "alice",
            "-o",
            "json",
        )
    )
    secret = alice["secret"]
    assert js(tau(server, "workspace", "list", "-o", "json", token=secret))[0]["name"] == "vision"
    req = js(
        tau(
            server,
            "workspace",
            "quota",
            "request",
            "vision",
            "--gpu-model",
            "A100-80G",
            "--gpus",
            "12",
            "--reason",
            "bigger sweep",
            "-o",
            "json",
            token=secret,
        )
    )
    assert req["state"] == "pending" and req["nominal"] == 12
    denied = tau(server, "admin", "quota", "approve", req["id"], token=secret)
    assert denied.returncode == 2 and "admin token" in denied.stderr
    pending = js(tau(server, "admin", "quota", "list", "--state", "pending", "-o", "json"))
    assert [p["id"] for p in pending] == [req["id"]]
    text = tau(server, "admin", "quota", "approve", req["id"])
    assert text.returncode == 0 and "8 → 12" in text.stdout
    shown = js(tau(server, "workspace", "quota", "show", "vision", "-o", "json", token=secret))
    assert shown["quotas"][0]["nominal"] == 12 and shown["requests"][0]["state"] == "approved"
    status = tau(server, "workspace", "status", "vision", token=secret)
    assert status.returncode == 0 and "A100-80G" in status.stdout and "runs:" in status.stdout
    audit = js(tau(server, "admin", "audit", "--action", "quota", "-o", "json"))
    assert [a["action"] for a in audit] == ["quota.approve", "quota.change", "quota.request"]
    assert audit[1]["detail"]["to"] == 12 and audit[2]["actor"] == "alice"
    # The text table piped to a file is whole: every detail field, none cut off.
    lines = tau(server, "admin", "audit", "--action", "quota").stdout.splitlines()
    approve = next(line for line in lines if "quota.approve" in line)
    assert "previous_nominal=8" in approve
    assert "reason=bigger sweep" in next(line for line in lines if "quota.request" in line)


def test_reject_queue_and_researcher_limits(server: HubServer) -> None:
    secret = tb.token(server, "carol", workspaces=["default"])
    assert tau(server, "queue", "list").stdout.splitlines() == ["no runs waiting"]  # no header
    with server.http() as admin:
        run = tb.ok(tb.submit(admin, "default", "waits", gpus=4), 201)
    queue = js(tau(server, "queue", "list", "--workspace", "default", "-o", "json", token=secret))
    assert [q["id"] for q in queue] == [run["id"]] and queue[0]["reason"]
    (row,) = [ln for ln in tau(server, "queue", "list").stdout.splitlines() if run["id"] in ln]
    assert row.rstrip().endswith(queue[0]["reason"])  # the why, whole
    req = js(
        tau(
            server,
            "workspace",
            "quota",
            "request",
            "default",
            "--gpu-model",
            "A100-80G",
            "--gpus",
            "64",
            "--reason",
            "x",
            "-o",
            "json",
            token=secret,
        )
    )
    no_reason = tau(server, "admin", "quota", "reject", req["id"])
    assert no_reason.returncode == 2 and "--reason" in no_reason.stderr
    out = js(
        tau(server, "admin", "quota", "reject", req["id"], "--reason", "no budget", "-o", "json")
    )
    assert out["state"] == "rejected"
    for args in (
        ("workspace", "create", "evil", "--team", "research"),
        ("admin", "token", "list"),
        ("admin", "audit"),
        ("workspace", "status", "nope"),
    ):
        p = tau(server, *args, token=secret)
        assert p.returncode == 2 and "Traceback" not in p.stderr, (args, p.stderr)
    bad = tau(server, "workspace", "create", "x1", "--team", "nope")
    assert bad.returncode == 2 and "unknown team 'nope'" in bad.stderr and "hint" in bad.stderr


def test_tokens_login_and_revoke(server: HubServer, tmp_path: Path) -> None:
    made = js(
        tau(
            server,
            "admin",
            "token",
            "create",
            "--role",
            "researcher",
            "--name",
            "dave",
            "--workspace",
            "default",
            "-o",
            "json",
        )
    )
    listed = js(tau(server, "admin", "token", "list", "-o", "json"))
    assert made["id"] in {t["id"] for t in listed} and made["secret"] not in json.dumps(listed)
    home = tmp_path / "dave-home"
    login = tau(
        server, "login", "--hub", server.url, "--token", made["secret"], token="", home=home
    )
    assert login.returncode == 0 and "as dave (researcher" in login.stdout, login.stderr
    creds = home / "credentials.json"
    assert stat.S_IMODE(creds.stat().st_mode) == 0o600
    assert json.loads(creds.read_text()) == {"hub_url": server.url, "token": made["secret"]}
    mine = js(tau(server, "workspace", "list", "-o", "json", token="", home=home))  # from the file
    assert [w["name"] for w in mine] == ["default"]
    wrong = tau(
        server, "login", "--hub", server.url, "--token", "tau_bogus", token="", home=tmp_path / "x"
    )
    assert wrong.returncode == 2 and "revoked" in wrong.stderr
    assert not (tmp_path / "x" / "credentials.json").exists()
    assert js(tau(server, "admin", "token", "revoke", made["id"], "-o", "json"))["revoked"]
    after = tau(server, "workspace", "list", token="", home=home)
    assert after.returncode == 2 and "unknown or revoked token" in after.stderr
    audit = js(tau(server, "admin", "audit", "--action", "token", "-o", "json"))
    assert [a["action"] for a in audit][:2] == ["token.revoke", "token.create"]
