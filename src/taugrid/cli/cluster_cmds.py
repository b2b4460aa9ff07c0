"""``tau cluster install | uninstall | validate``: TauGrid on a Kubernetes cluster.

- ``tau cluster install --kubeconfig FILE [--context C] [--dry-run] [--image I]
  [--hub-url U] [--cluster NAME]``: the TauGrid CRDs, ``taugrid-system``, the operator's
  and agent's ServiceAccounts, ClusterRoles (``taugrid-agent`` included) and bindings,
  and their Deployments (``--dry-run``: print them as YAML, touch nothing); with
  ``--with-hub -f platform.yaml`` the hub too (SQLite in a PVC), with tokens made here:
  the agent's goes to the agent, the admin's to ``$TAU_HOME/installs/<cluster>.admin-token``
  for ``tau login``;
- ``tau cluster uninstall --kubeconfig FILE``: deletes them all (and so every Tau object);
- ``tau cluster validate installation|nodes --kubeconfig FILE``: one line per check,
  ``ok`` / ``warn`` / ``FAIL`` with how to fix; exit 1 when any check fails.

These talk to the cluster's API server (``operator.install``), not to the hub: the one
import the CLI makes below the SDK layer (``.importlinter`` names it). The installer
(and with it ``backends.kube.kube_api`` and the platform models) and the renderers are
imported inside the commands: every other ``tau`` command starts without them
(docs/ARCHITECTURE.md, "CLI start-up").
"""

from __future__ import annotations

import dataclasses
import enum
import os
import pathlib
import sys
from typing import TYPE_CHECKING

import typer

from taugrid import errors
from taugrid.cli import app, views

if TYPE_CHECKING:
    from taugrid.operator import install
    from taugrid.platform import models as pm
    from taugrid.render.cluster import AgentCredentials, HubTokens

__all__ = [
    "DEFAULT_HUB_URL",
    "DEFAULT_IMAGE",
    "install_command",
    "uninstall_command",
    "validate_command",
]

# ``render.cluster.InstallOptions``'s defaults, for the help text without the renderer
# (tests/cli/test_startup.py checks that they agree).
DEFAULT_IMAGE = "ghcr.io/taugrid/taugrid:0.1.0"
DEFAULT_HUB_URL = "http://taugrid-hub.taugrid-system.svc:8000"

_KUBECONFIG = typer.Option(None, "--kubeconfig", help="kubeconfig (default: $KUBECONFIG).")
_CONTEXT = typer.Option(None, "--context", help="kubeconfig context (default: current).")


class What(enum.StrEnum):
    INSTALLATION = "installation"
    NODES = "nodes"


def _api(kubeconfig: pathlib.Path | None, context: str | None) -> install.Api:
    from taugrid.operator import install

    return install.api(str(kubeconfig) if kubeconfig else None, context)


@app.cluster_app.command("install")
@views.guard
def install_command(
    kubeconfig: pathlib.Path | None = _KUBECONFIG,
    context: str | None = _CONTEXT,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the objects; apply nothing."),
    image: str = typer.Option(DEFAULT_IMAGE, help="TauGrid image."),
    hub_url: str = typer.Option(DEFAULT_HUB_URL, help="The agent's hub."),
    cluster: str = typer.Option("kubernetes", help="The agent's cluster name (platform.yaml)."),
    agent_token_file: pathlib.Path | None = typer.Option(
        None, help="The agent's hub token (the hub's $TAU_HOME/agents/<cluster>.token)."
    ),
    platform: pathlib.Path | None = typer.Option(
        None, "--platform", "-f", help="The platform file the agent reads (platform.yaml)."
    ),
    with_hub: bool = typer.Option(
        False, "--with-hub", help="Run the hub in the cluster too (SQLite in a PVC)."
    ),
    hub_port: int = typer.Option(8000, help="--with-hub: the port the hub's pod listens on."),
    hub_storage_class: str | None = typer.Option(
        None, help="--with-hub: the StorageClass of the hub's PVC (default: the cluster's)."
    ),
    hub_database_secret: str | None = typer.Option(
        None,
        help="--with-hub: the hub's database is PostgreSQL at the URL in this Secret's "
        "'url' key (in taugrid-system, made by you); no PVC then.",
    ),
) -> None:
    """Install TauGrid's CRDs, operator, agent and their RBAC on a cluster."""
    from taugrid.operator import install
    from taugrid.render import cluster as cluster_render
    from taugrid.render import plan

    if with_hub:
        _check_with_hub(agent_token_file, platform, hub_database_secret)
    elif hub_database_secret is not None:
        raise errors.UserError(
            "--hub-database-secret is the database of the hub --with-hub installs",
            hint="add --with-hub, or drop --hub-database-secret",
        )
    # checked before the cluster is contacted; with the hub, its tokens come from there
    credentials = None if dry_run else _agent_credentials(agent_token_file, platform, with_hub)
    spec = _cluster_of(platform, cluster)
    opts = cluster_render.InstallOptions(image=image, hub_url=hub_url, cluster=cluster)
    if spec is not None:  # the cluster's pod settings apply to TauGrid's own pods too
        opts = dataclasses.replace(opts, pods=spec.pods)
    if with_hub:
        hub = cluster_render.HubInstall(
            port=hub_port, storage_class=hub_storage_class, database_secret=hub_database_secret
        )
        opts = dataclasses.replace(opts, hub=hub)
    if dry_run:
        sys.stdout.write(plan.to_yaml(cluster_render.install_objects(opts)))
        return
    api = _api(kubeconfig, context)
    try:
        tokens = None
        if with_hub:
            if hub_database_secret is not None:
                install.check_database_secret(api, hub_database_secret)
            tokens = install.hub_tokens(api, cluster, _saved_key(cluster))
        if tokens is not None and credentials is not None:
            credentials = dataclasses.replace(credentials, token=tokens.agent)
        for line in install.install(api, opts, credentials=credentials, tokens=tokens):
            typer.echo(f"applied {line}")
    finally:
        api.close()
    typer.echo(f"installed on {api.server}; check with: tau cluster validate installation")
    if tokens is not None:
        _save_installed(tokens, cluster)


def _check_with_hub(
    token_file: pathlib.Path | None, platform: pathlib.Path | None, database_secret: str | None
) -> None:
    """``--with-hub`` makes the agent's token and needs the platform file (the hub's); on
    a database of its own the hub keeps nothing on disk, so the records must be in an
    object store."""
    if token_file is not None:
        raise errors.UserError(
            "--with-hub makes the agent's token itself: --agent-token-file is for a hub "
            "outside the cluster",
            hint="drop --agent-token-file",
        )
    if platform is None:
        raise errors.UserError(
            "--with-hub needs the platform file: the hub and the agent both read it",
            hint="pass -f platform.yaml",
        )
    if database_secret is not None:
        _check_records_off_disk(platform)


def _record_stores(platform: pathlib.Path) -> list[pm.RecordStoreSpec]:
    """Every record store ``platform`` names (``RecordStoreSpec``): the platform's and
    each workspace's own."""
    from taugrid.platform import load as platform_load

    spec = platform_load.load_platform(platform)
    return [spec.records, *(w.records for w in spec.workspaces if w.records is not None)]


def _check_records_off_disk(platform: pathlib.Path) -> None:
    if not all(r.in_object_store for r in _record_stores(platform)):
        raise errors.UserError(
            f"{platform} keeps run records on the hub's disk, and a hub on "
            "--hub-database-secret has none that outlives its pod",
            hint="put the records in an object store (records: {url: s3://BUCKET/PREFIX}) "
            "or drop --hub-database-secret (the hub then keeps SQLite and records in a PVC)",
        )


def _saved_key(cluster: str) -> str | None:
    from taugrid import home
    from taugrid.sdk.client import client

    path = home.installed_secrets_key(client.tau_home(), cluster)
    return path.read_text().strip() if path.exists() else None


def _save_installed(tokens: HubTokens, cluster: str) -> None:
    """The admin token and the secrets key of the hub just installed, saved 0600 where
    ``tau login`` and a reinstall find them (never printed)."""
    from taugrid import home, private
    from taugrid.render import naming
    from taugrid.sdk.client import client

    tau_home, ns, svc = client.tau_home(), naming.AGENT_NAMESPACE, naming.HUB_NAME
    path = private.write(home.installed_admin_token(tau_home, cluster), tokens.admin)
    key = private.write(home.installed_secrets_key(tau_home, cluster), tokens.secrets_key)
    typer.echo(
        f"the hub's admin token: {path} (0600; also in Secret {ns}/{naming.HUB_TOKENS_SECRET})"
    )
    typer.echo(
        f"the hub's secrets key: {key} (0600; also in Secret "
        f"{ns}/{naming.HUB_SECRETS_KEY_SECRET}); a reinstall reuses it"
    )
    typer.echo(
        f"reach the hub (Service {ns}/{svc}, e.g. kubectl -n {ns} port-forward svc/{svc} "
        f'8000), then: tau login --hub http://127.0.0.1:8000 --token "$(cat {path})"'
    )


def _agent_credentials(
    token_file: pathlib.Path | None, platform: pathlib.Path | None, with_hub: bool = False
) -> AgentCredentials | None:
    """The agent's Secrets and ConfigMap, checked before anything is applied: token and
    platform both or neither (``--with-hub``: the platform alone, the token left empty
    for the hub's), the token readable, the record store's credentials in this
    environment (``_records_env``)."""
    from taugrid.render import cluster as cluster_render

    if token_file is None and platform is None:
        return None
    if token_file is None and platform is not None and with_hub:
        return cluster_render.AgentCredentials("", platform.read_text(), _records_env(platform))
    if token_file is None or platform is None:
        raise errors.UserError(
            "--agent-token-file and --platform go together: the agent needs both",
            hint="pass both, or neither (then create the Secret "
            "taugrid-agent-token and the ConfigMap taugrid-platform yourself)",
        )
    try:
        token = token_file.read_text().strip()
    except OSError as exc:
        raise errors.UserError(
            f"cannot read {token_file}: {exc.strerror}",
            hint="the hub writes each agent's token to its $TAU_HOME/agents/<cluster>.token",
        ) from None
    return cluster_render.AgentCredentials(token, platform.read_text(), _records_env(platform))


def _records_env(platform: pathlib.Path) -> dict[str, str]:
    """The object stores' credentials the platform's ``records`` name (variable →
    value), from the environment ``tau cluster install`` runs in: the installed agent
    and its pods read the same variables."""
    from taugrid.render import naming

    s3 = [r for r in _record_stores(platform) if r.in_object_store]
    names = sorted({n for r in s3 for n in (r.access_key_env, r.secret_key_env)})
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        raise errors.UserError(
            f"{platform} keeps records in an object store whose credentials are read from "
            f"${', $'.join(missing)}, not set here",
            hint="set them in the environment of tau cluster install: the installed agent "
            f"gets them as the Secret {naming.AGENT_RECORDS_SECRET}",
        )
    return {n: os.environ[n] for n in names}


def _cluster_of(platform: pathlib.Path | None, cluster: str) -> pm.ClusterSpec | None:
    """The cluster's entry in the platform file (valid, naming ``cluster``), if given."""
    from taugrid.platform import load as platform_load

    if platform is None:
        return None
    spec = platform_load.load_platform(platform)
    found = {c.name: c for r in spec.regions for c in r.clusters}
    if cluster not in found:
        raise errors.UserError(
            f"cluster {cluster} is not in {platform} (it has: {', '.join(found) or 'none'})",
            hint="pass --cluster with the name platform.yaml gives this cluster",
        )
    return found[cluster]


@app.cluster_app.command("uninstall")
@views.guard
def uninstall_command(
    kubeconfig: pathlib.Path | None = _KUBECONFIG, context: str | None = _CONTEXT
) -> None:
    """Delete everything install made (the CRDs too: every Tau object goes with them)."""
    from taugrid.operator import install

    api = _api(kubeconfig, context)
    try:
        for line in install.uninstall(api):
            typer.echo(f"deleted {line}")
    finally:
        api.close()
    typer.echo(f"nothing of TauGrid's is left on {api.server}")


@app.cluster_app.command("validate")
@views.guard
def validate_command(
    what: What = typer.Argument(..., help="installation | nodes"),
    kubeconfig: pathlib.Path | None = _KUBECONFIG,
    context: str | None = _CONTEXT,
) -> None:
    """Check TauGrid, Kueue and KubeRay (installation) or the GPU nodes (nodes)."""
    from taugrid.operator import install

    api = _api(kubeconfig, context)
    try:
        check = (
            install.validate_installation if what is What.INSTALLATION else install.validate_nodes
        )
        findings = check(api)
    finally:
        api.close()
    for f in findings:
        level = "FAIL" if f.level == "fail" else f.level
        typer.echo(f"{level:<4}  {f.subject}: {f.message}")
        if f.hint and f.level != "ok":
            typer.echo(f"      fix: {f.hint}")
    failed = sum(f.level == "fail" for f in findings)
    typer.echo(f"{what.value}: {failed} problem(s) on {api.server}")
    if failed:
        raise typer.Exit(1)
