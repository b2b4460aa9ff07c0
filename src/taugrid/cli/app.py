"""The ``tau`` command tree: the Typer apps every command module attaches to.

Owns only the command groups. Command modules (``cli.run_cmds``, ``cli.spec_cmds``,
``cli.platform_cmds``, ...) import this module and register on these apps;
``cli.main`` imports them all. The CLI talks to a hub only through ``taugrid.sdk``.
"""

from __future__ import annotations

import difflib
import os
from typing import Any

import typer
import typer.core

__all__ = [
    "admin_app",
    "app",
    "cluster_app",
    "context_app",
    "data_app",
    "dev_app",
    "lab_app",
    "model_app",
    "platform_app",
    "queue_app",
    "region_app",
    "run_app",
    "serve_app",
    "workspace_app",
]

_SETTINGS = {"help_option_names": ["-h", "--help"]}


class _RunGroup(typer.core.TyperGroup):
    """``tau run [TARGET]`` submits; ``tau run <subcommand>`` runs the subcommand. A
    TARGET that is no path but close to a subcommand's name is a typo, not a submit."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("-h", "--help")):
            if args:
                self._refuse_typo(ctx, args[0])
            args = ["submit", *args]
        return super().parse_args(ctx, args)

    def _refuse_typo(self, ctx: Any, word: str) -> None:
        if word.startswith("-") or os.path.exists(word):
            return
        names = [n for n, c in self.commands.items() if not c.hidden]
        close = difflib.get_close_matches(word, names, n=1)
        if close:
            ctx.fail(f"No such command or tau.yaml: '{word}'. Did you mean 'tau run {close[0]}'?")


app = typer.Typer(
    name="tau",
    help="TauGrid: run AI workloads on GPU clusters across regions.",
    no_args_is_help=True,
    context_settings=_SETTINGS,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help and errors: rich's help formatter costs 0.13 s CPU
)
_RUN_HELP = """Submit a run, then watch and manage runs.

Submit: tau run [TARGET] [-c FILE] [--watch] [--workspace WS] [-o json]

\b
TARGET: a directory holding tau.yaml (default: here) or the file itself.
-c FILE: another tau.yaml.  --watch: follow the run to its end.
--workspace WS: instead of policy.workspace.  --dry-run client: show it.
Example: tau run examples/quickstart --watch

Anything else is one of the commands below (NAME: a run ID or a run name).
"""

run_app = typer.Typer(
    cls=_RunGroup,
    help=_RUN_HELP,
    subcommand_metavar="[TARGET] | COMMAND [ARGS]...",
    context_settings=_SETTINGS,
)
cluster_app = typer.Typer(help="Regions and clusters: capacity, health, heartbeats.")
platform_app = typer.Typer(help="Validate and show platform.yaml.", no_args_is_help=True)
admin_app = typer.Typer(help="Platform administration.", no_args_is_help=True)
workspace_app = typer.Typer(
    help="Workspaces: members, status, quota and quota requests.", no_args_is_help=True
)
queue_app = typer.Typer(help="Runs waiting for admission or placement.", no_args_is_help=True)
data_app = typer.Typer(
    help="Datasets: register, list, replicas per region, replicate.", no_args_is_help=True
)
region_app = typer.Typer(help="Regions: capacity, health and the measured link matrix.")
lab_app = typer.Typer(help="Local multi-region lab: hub + N regions on this machine.")
context_app = typer.Typer(
    help="Which hub tau talks to: 'local' (tau up) or another (tau lab up adds 'lab').",
    no_args_is_help=True,
)

serve_app = typer.Typer(
    help="Serve a trained run as a live endpoint (Ray Serve).", no_args_is_help=True
)

app.add_typer(run_app, name="run")
app.add_typer(platform_app, name="platform")
app.add_typer(admin_app, name="admin")
app.add_typer(cluster_app, name="cluster")
app.add_typer(workspace_app, name="workspace")
app.add_typer(queue_app, name="queue")
app.add_typer(data_app, name="data")
app.add_typer(region_app, name="region")
app.add_typer(lab_app, name="lab")
app.add_typer(context_app, name="context")
app.add_typer(serve_app, name="serve")
dev_app = typer.Typer(
    help="Interactive sessions: JupyterLab on the platform's GPUs, autostopped when idle.",
    no_args_is_help=True,
)
app.add_typer(dev_app, name="dev")
model_app = typer.Typer(
    help="Model registry: versions of a run's model, aliases, lineage.", no_args_is_help=True
)
app.add_typer(model_app, name="model")
