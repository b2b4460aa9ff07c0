"""The ``tau`` command tree: the Typer apps every command module attaches to.

Owns only the command groups. Command modules (``cli.run_cmds``, ``cli.spec_cmds``,
``cli.platform_cmds``, ...) import this module and register on these apps;
``cli.main`` imports them all. The CLI talks to a hub only through ``taugrid.sdk``.
"""

from __future__ import annotations

import typer

__all__ = ["admin_app", "app", "data_app", "platform_app", "run_app", "workspace_app"]

_SETTINGS = {"help_option_names": ["-h", "--help"]}

app = typer.Typer(
    name="tau",
    help="TauGrid: run AI workloads on GPU clusters across regions.",
    no_args_is_help=True,
    context_settings=_SETTINGS,
    pretty_exceptions_enable=False,
)
run_app = typer.Typer(help="Submit, watch and manage runs.", context_settings=_SETTINGS)
platform_app = typer.Typer(help="Validate and show platform.yaml.", no_args_is_help=True)
admin_app = typer.Typer(help="Platform administration.", no_args_is_help=True)
workspace_app = typer.Typer(help="Workspaces, members and quotas.", no_args_is_help=True)
data_app = typer.Typer(help="Datasets and replicas.", no_args_is_help=True)

app.add_typer(run_app, name="run")
app.add_typer(platform_app, name="platform")
app.add_typer(admin_app, name="admin")
