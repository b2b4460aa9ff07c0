"""``python -m taugrid.hub.server.daemon``: the hub process (uvicorn on 127.0.0.1).

On first start it bootstraps credentials: an admin token written to
``$TAU_HOME/credentials.json`` (mode 0600) and, for each cluster of the platform whose
agent runs on this machine, an agent token in ``$TAU_HOME/agents/<cluster>.token``
(0600). Tokens are stored hashed; secrets exist only in those files. When the hub
later starts on another port (the embedded platform moves off a port another
platform took), ``credentials.json`` keeps its token and gets the new URL.

A hub installed in a cluster (``tau cluster install --with-hub``) starts with
``--tokens-dir``, the Secret ``taugrid-hub-tokens`` mounted: its tokens were made by the
installer, which handed them to the agent and the platform engineer, and the hub adopts
them (``adopt_tokens``) instead of bootstrapping its own files.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

import uvicorn

from taugrid import home as tau_home
from taugrid import private
from taugrid.hub.core import context
from taugrid.hub.server import app
from taugrid.store import db

__all__ = ["adopt_tokens", "bootstrap_credentials", "main"]

log = logging.getLogger(__name__)


def adopt_tokens(hub: context.Hub, tokens_dir: Path) -> list[str]:
    """Registers the tokens of ``tokens_dir`` (``home.TOKENS_ADMIN``, ``home.tokens_agent``)
    that this hub has never seen; a token once adopted and later revoked stays revoked.
    Returns the names adopted."""
    adopted = []
    for path in sorted(p for p in tokens_dir.iterdir() if not p.name.startswith(".")):
        secret = path.read_text().strip()
        if path.name == tau_home.TOKENS_ADMIN:
            role, scope = "admin", {}
        elif path.name.startswith(tau_home.TOKENS_AGENT_PREFIX):
            cluster = path.name.removeprefix(tau_home.TOKENS_AGENT_PREFIX)
            role, scope = "agent", {"cluster": cluster}
        else:
            log.warning("%s: not a token this hub knows how to adopt; ignored", path)
            continue
        if not secret or hub.auth.ever_created(secret):
            continue
        name = f"installed-{path.name}"
        _, row = hub.auth.create_token(name, role, scope, secret=secret)
        hub.auth.audit("system", "token.create", row["id"], {"name": name, "role": role})
        adopted.append(path.name)
    return adopted


def bootstrap_credentials(hub: context.Hub, url: str) -> None:
    """Create the admin token and local agent tokens once (idempotent)."""
    home = hub.config.tau_home
    creds = home / "credentials.json"
    doc = json.loads(creds.read_text()) if creds.exists() else {}
    if hub.auth.count("admin") == 0 or not doc.get("token"):
        secret, _ = hub.auth.create_token("embedded-admin", "admin", {})
        private.write(creds, json.dumps({"hub_url": url, "token": secret}, indent=2))
        hub.auth.audit("system", "token.create", "embedded-admin", {"role": "admin"})
    elif doc.get("hub_url") != url and hub.auth.lookup(str(doc["token"])) is not None:
        # our own token (not one `tau login` saved for a remote hub): follow the port
        private.write(creds, json.dumps({**doc, "hub_url": url}, indent=2))
    for cluster in (c for r in hub.platform.regions for c in r.clusters):
        path = tau_home.agent_token(home, cluster.name)
        if not path.exists():
            secret, _ = hub.auth.create_token(
                f"agent-{cluster.name}", "agent", {"cluster": cluster.name}
            )
            private.write(path, secret)


def main() -> None:
    parser = argparse.ArgumentParser(description="TauGrid hub")
    parser.add_argument(
        "--home", type=Path, default=Path(os.environ.get("TAU_HOME", "~/.tau")).expanduser()
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("TAU_HUB_PORT", "8787")))
    parser.add_argument("--platform", type=Path, default=os.environ.get("TAU_PLATFORM_FILE"))
    parser.add_argument("--grace", type=float, default=float(os.environ.get("TAU_GRACE_S", "120")))
    parser.add_argument("--lease", type=float, default=float(os.environ.get("TAU_LEASE_S", "30")))
    parser.add_argument(
        "--leader-lease",
        type=float,
        default=float(os.environ.get("TAU_LEADER_LEASE_S", "10")),
        help="leader lease of replicated hubs (PostgreSQL), seconds",
    )
    parser.add_argument(
        "--tokens-dir",
        type=Path,
        help="adopt the tokens made by `tau cluster install --with-hub` (its Secret, "
        "mounted) instead of bootstrapping credentials files",
    )
    parser.add_argument(
        "--advertise-url",
        default=os.environ.get("TAU_HUB_ADVERTISE_URL", ""),
        help="this replica's URL as `tau admin hub status` shows it",
    )
    args = parser.parse_args()
    private.restrict()  # hub.db, run records, logs: the owner's only
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    url = f"http://{args.host}:{args.port}"
    cfg = context.HubConfig(
        tau_home=args.home,
        platform_file=args.platform,
        grace_s=args.grace,
        lease_s=args.lease,
        leader_lease_s=args.leader_lease,
        advertise_url=args.advertise_url or url,
    )
    try:
        hub = context.Hub(cfg)
    except db.SchemaTooNew as exc:  # an older replica on a newer database: say why, exit
        logging.getLogger(__name__).error("%s", exc)
        print(f"tau hub: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    if args.tokens_dir is not None:
        log.info("adopted tokens: %s", ", ".join(adopt_tokens(hub, args.tokens_dir)) or "none")
    else:
        bootstrap_credentials(hub, url)
    uvicorn.run(
        app.create_app(hub),
        host=args.host,
        port=args.port,
        log_level="warning",
        timeout_keep_alive=app.KEEP_ALIVE_S,
    )


if __name__ == "__main__":
    main()
