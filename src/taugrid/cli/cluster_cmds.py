"""``tau cluster install | uninstall | validate``: TauGrid on a Kubernetes cluster.

- ``tau cluster install --kubeconfig FILE [--context C] [--dry-run] [--image I]
  [--hub-url U] [--cluster NAME]``: the TauGrid CRDs, ``taugrid-system``, the operator's
  and agent's ServiceAccounts, ClusterRoles (``taugrid-agent`` included) and bindings,
  and their Deployments (``--dry-run``: print them as YAML, touch nothing);
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
    from taugrid.render.cluster import AgentCredentials

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
) -> None:
    """Install TauGrid's CRDs, operator, agent and their RBAC on a cluster."""
    from taugrid.operator import install
    from taugrid.render import cluster as cluster_render
    from taugrid.render import plan

    credentials = None if dry_run else _agent_credentials(agent_token_file, platform)
    spec = _cluster_of(platform, cluster)
    opts = cluster_render.InstallOptions(image=image, hub_url=hub_url, cluster=cluster)
    if spec is not None:  # the cluster's pod settings apply to TauGrid's own pods too
        opts = dataclasses.replace(opts, pods=spec.pods)
    if dry_run:
        sys.stdout.write(plan.to_yaml(cluster_render.install_objects(opts)))
        return
    api = _api(kubeconfig, context)
    try:
        for line in install.install(api, opts, credentials=credentials):
            typer.echo(f"applied {line}")
    finally:
        api.close()
    typer.echo(f"installed on {api.server}; check with: tau cluster validate installation")


def _agent_credentials(
    token_file: pathlib.Path | None, platform: pathlib.Path | None
) -> AgentCredentials | None:
    """The agent's Secrets and ConfigMap, checked before anything is applied: token and
    platform both or neither, the token readable, the record store's credentials in
    this environment (``_records_env``)."""
    if token_file is None and platform is None:
        return None
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
    from taugrid.render import cluster as cluster_render

    return cluster_render.AgentCredentials(token, platform.read_text(), _records_env(platform))


def _records_env(platform: pathlib.Path) -> dict[str, str]:
    """The object stores' credentials the platform's ``records`` name (variable →
    value), from the environment ``tau cluster install`` runs in: the installed agent
    and its pods read the same variables."""
    from taugrid.platform import load as platform_load
    from taugrid.render import naming

    spec = platform_load.load_platform(platform)
    stores = [spec.records, *(w.records for w in spec.workspaces if w.records is not None)]
    s3 = [r for r in stores if (r.url or "").startswith("s3://")]
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
