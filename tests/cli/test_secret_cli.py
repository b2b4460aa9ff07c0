"""``tau secret`` through the real console script against a real hub server (no Ray):
set from the command line and from standard input, list (text and ``-o json``) without
values, the workspace a one-workspace token means, the platform scope for admins only,
delete, and a submission naming a missing secret refused with the fix."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.hub import tenancy_builders as tb
from tests.hub.harness import HubServer

VALUE = "cli-s3cr3t-value"


def tau(server: HubServer, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return server.tau(*args, **kw)


def test_set_list_delete_and_a_submission_that_names_a_missing_secret(
    server: HubServer, tmp_path: Path
) -> None:
    tb.workspace(server, "nlp", members=["alice"])
    alice = tb.token(server, "alice", workspaces=["nlp"])
    done = tau(server, "secret", "set", "hf", "token=-", "user=me", token=alice, stdin=VALUE + "\n")
    assert done.returncode == 0 and "workspace nlp (keys: token, user)" in done.stdout, done.stderr
    assert VALUE not in done.stdout + done.stderr
    admin_plain = tau(server, "secret", "set", "registry", f"password={VALUE}", "--platform")
    assert admin_plain.returncode == 0, admin_plain.stderr
    refused = tau(server, "secret", "set", "registry", "a=b", "--platform", token=alice)
    assert refused.returncode == 2 and "needs an admin token" in refused.stderr
    listed = tau(server, "secret", "list", "-o", "json", token=alice)
    rows = json.loads(listed.stdout)
    assert [(r["name"], r["scope"], r["keys"]) for r in rows] == [
        ("registry", "*", ["password"]),
        ("hf", "nlp", ["token", "user"]),
    ]
    text = tau(server, "secret", "list", token=alice).stdout
    assert "platform" in text and "token, user" in text and VALUE not in text + listed.stdout
    which = tau(server, "secret", "list")  # an admin has no single workspace
    assert which.returncode == 2 and "--workspace" in which.stderr
    bad = tau(server, "secret", "set", "hf", "novalue", token=alice)
    assert bad.returncode == 2 and "KEY=VALUE" in bad.stderr
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "tau.yaml").write_text(
        tb.tau_yaml("needs")
        + "runtime:\n  secrets:\n    - {name: wandb, key: key, env: WANDB_API_KEY}\n"
    )
    sub = tau(server, "run", "submit", token=alice, cwd=tmp_path)
    assert sub.returncode == 2, sub.stdout + sub.stderr
    assert "secret wandb, which does not exist" in sub.stderr and "tau secret set" in sub.stderr
    assert tau(server, "secret", "delete", "hf", token=alice).returncode == 0
    gone = tau(server, "secret", "delete", "hf", token=alice)
    assert gone.returncode == 2 and "no secret hf in workspace nlp" in gone.stderr
