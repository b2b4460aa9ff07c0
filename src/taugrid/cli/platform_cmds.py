"""``tau platform ...`` and ``tau run explain-config``: platform.yaml and resolution, offline.

Owns the commands that read platform.yaml and show how a tau.yaml resolves against it,
without a hub:

- ``tau platform validate [-f FILE] [-o text|json]``: exit 0 and a summary, or every
  problem as ``file:line:col`` and exit 2; object record stores (``records``) are
  opened and probed: a missing bucket or refused credentials is a problem too;
- ``tau platform show [-f FILE] [-o text|json|yaml]``: regions/clusters/pools with GPU
  counts and cost, GPU types, priority classes, profiles, teams/quotas, workspaces;
- ``tau platform manifests [-f FILE] [-o yaml|json]``: the TauGrid CRDs, the agent's
  ClusterRole, the Kueue, workspace and Tau objects the platform renders to (they
  apply as printed, in order);
- ``tau run explain-config [-c FILE] [-f PLATFORM] [-o text|json]``: every resolved
  value and where it came from;
- ``dry_run_text(config_path, output)``: what ``tau run --dry-run=client -o yaml|json``
  prints (called by the ``tau run`` command's owner).

The platform file is ``-f FILE``, else ``$TAU_PLATFORM_FILE``, else the packaged
default. User errors print message and hint on stderr and exit 2, never a traceback.
The platform models, the spec loader and the renderers are imported by the functions
that use them: ``tau run --help`` and the hub's commands start without them
(docs/ARCHITECTURE.md, "CLI start-up").
"""

from __future__ import annotations

import enum
import json
import pathlib
import sys
from typing import TYPE_CHECKING, Any

import rich.console
import rich.table
import typer

from taugrid import errors
from taugrid.cli import app as _app

if TYPE_CHECKING:
    from taugrid.platform import models as pm
    from taugrid.render import runspec
    from taugrid.spec import models as sm

__all__ = [
    "dry_run_text",
    "explain_config_command",
    "load_config",
    "manifests_command",
    "resolve_file",
    "show_command",
    "tau_yaml_lines",
    "validate_command",
]

_USER_ERROR_EXIT = 2
_PLATFORM_HELP = "platform.yaml (default: $TAU_PLATFORM_FILE, else the packaged default)."


class TextOrJson(enum.StrEnum):
    TEXT = "text"
    JSON = "json"


class ShowFormat(enum.StrEnum):
    TEXT = "text"
    JSON = "json"
    YAML = "yaml"


class ManifestFormat(enum.StrEnum):
    YAML = "yaml"
    JSON = "json"


def _console(stderr: bool = False) -> rich.console.Console:
    probe = rich.console.Console(stderr=stderr)
    width = None if probe.is_terminal else 200
    return rich.console.Console(stderr=stderr, width=width, highlight=False, soft_wrap=False)


def _fail(exc: errors.UserError) -> typer.Exit:
    console = _console(stderr=True)
    console.print(exc.message, markup=False)
    if exc.hint:
        console.print(f"  hint: {exc.hint}", markup=False, style="dim")
    return typer.Exit(_USER_ERROR_EXIT)


def _platform(path: pathlib.Path | None) -> pm.Platform:
    from taugrid.platform import load as platform_load

    return platform_load.platform_from_env(path)


def _platform_name(path: pathlib.Path | None) -> str:
    import os

    from taugrid.platform import load as platform_load

    return str(path or os.environ.get(platform_load.ENV_VAR) or "<packaged default>")


def tau_yaml_lines(text: str, filename: str) -> dict[str, int]:
    """Dotted tau.yaml key (``compute.gpus``, ``data.inputs[0]``) → 1-based line of the key."""
    from taugrid.spec import yamlpos

    return yamlpos.key_lines(text, filename)


def load_config(path: pathlib.Path) -> tuple[sm.TauConfig, dict[str, int]]:
    """A tau.yaml and its line map (raises ``SpecError``)."""
    from taugrid.spec import load as spec_load

    config = spec_load.load_tau_yaml(path)
    return config, tau_yaml_lines(path.read_text(encoding="utf-8"), str(path))


def resolve_file(
    config_path: pathlib.Path, platform_path: pathlib.Path | None, *, workspace: str | None = None
) -> runspec.RunSpec:
    """Load, validate and resolve a tau.yaml against a platform (raises ``UserError``).

    ``workspace`` overrides ``policy.workspace`` (its provenance reads ``--workspace``).
    """
    from taugrid.render import resolve

    config, lines = load_config(config_path)
    source = str(config_path)
    if workspace is not None:
        policy = config.policy.model_copy(update={"workspace": workspace})
        config = config.model_copy(update={"policy": policy})
        lines = {k: v for k, v in lines.items() if k != "policy.workspace"}
    spec = resolve.resolve(config, _platform(platform_path), source=source, lines=lines)
    if workspace is not None:
        spec = spec.model_copy(
            update={"provenance": {**spec.provenance, "workspace": "--workspace"}}
        )
    return spec


def dry_run_text(
    config_path: str | pathlib.Path,
    output: str,
    *,
    platform_path: str | pathlib.Path | None = None,
    run_id: str | None = None,
    workspace: str | None = None,
) -> str:
    """What ``tau run --dry-run=client -o yaml|json`` prints: the rendered manifests.

    ``workspace`` overrides ``policy.workspace`` (``tau run --workspace``). Raises
    ``UserError`` (a ``SpecError`` or ``ResolveError``) when the file cannot run;
    ``ValueError`` for an ``output`` other than ``yaml``/``json``.
    """
    if output not in ("yaml", "json"):
        raise ValueError(f"output must be 'yaml' or 'json', not {output!r}")
    from taugrid.render import plan

    spec = resolve_file(
        pathlib.Path(config_path),
        pathlib.Path(platform_path) if platform_path else None,
        workspace=workspace,
    )
    objs = plan.render_manifests(spec, run_id or f"{spec.name}-dry-run")
    return plan.to_yaml(objs) if output == "yaml" else plan.to_json(objs)


@_app.platform_app.command("validate")
def validate_command(
    file: pathlib.Path | None = typer.Option(None, "-f", "--file", help=_PLATFORM_HELP),
    output: TextOrJson = typer.Option(TextOrJson.TEXT, "-o", "--output", help="text|json"),
) -> None:
    """Check a platform.yaml; report every problem with file:line:column."""
    try:
        platform = _platform(file)
    except errors.UserError as exc:
        if output is TextOrJson.JSON:
            problems = [p.to_dict() for p in getattr(exc, "problems", [])]
            doc = {"valid": False, "file": _platform_name(file), "problems": problems}
            sys.stdout.write(json.dumps(doc, indent=2) + "\n")
            raise typer.Exit(_USER_ERROR_EXIT) from None
        raise _fail(exc) from None
    from taugrid.sdk.client import records

    stores = records.check_platform(platform)
    if stores:
        if output is TextOrJson.JSON:
            doc = {"valid": False, "file": _platform_name(file), "record_stores": stores}
            sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        else:
            for line in stores:
                sys.stderr.write(f"{_platform_name(file)}: {line}\n")
        raise typer.Exit(_USER_ERROR_EXIT)
    summary = _summary(platform)
    if output is TextOrJson.JSON:
        doc = {"valid": True, "file": _platform_name(file), "summary": summary}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    counts = ", ".join(f"{v} {k}" for k, v in summary.items() if k != "gpus_by_model")
    _console().print(f"{_platform_name(file)}: valid - {counts}", markup=False)


def _summary(platform: pm.Platform) -> dict[str, Any]:
    clusters = [c for r in platform.regions for c in r.clusters]
    return {
        "regions": len(platform.regions),
        "clusters": len(clusters),
        "gpus": platform.total_gpus(),
        "gpus_by_model": {g.name: platform.total_gpus(g.name) for g in platform.gpu_types},
        "profiles": len(platform.profiles),
        "teams": len(platform.teams),
        "workspaces": len(platform.workspaces),
    }


@_app.platform_app.command("show")
def show_command(
    file: pathlib.Path | None = typer.Option(None, "-f", "--file", help=_PLATFORM_HELP),
    output: ShowFormat = typer.Option(ShowFormat.TEXT, "-o", "--output", help="text|json|yaml"),
) -> None:
    """Show regions, clusters, node pools, profiles, teams/quotas and workspaces."""
    try:
        platform = _platform(file)
    except errors.UserError as exc:
        raise _fail(exc) from None
    if output is not ShowFormat.TEXT:
        doc = {"summary": _summary(platform), "platform": platform.model_dump(mode="json")}
        text = json.dumps(doc, indent=2) + "\n" if output is ShowFormat.JSON else _yaml(doc)
        sys.stdout.write(text)
        return
    console = _console()
    for table in _show_tables(platform):
        console.print(table)


def _yaml(doc: Any) -> str:
    import yaml

    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


def _table(title: str, *columns: str) -> rich.table.Table:
    table = rich.table.Table(title=title, title_justify="left", title_style="bold")
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def _text(value: Any) -> str:
    if value is None or value == []:
        return "-"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def _show_tables(platform: pm.Platform) -> list[rich.table.Table]:
    pools = _table(
        "Regions, clusters and node pools",
        "region",
        "cluster",
        "backend",
        "pool",
        "gpu model",
        "gpus/node",
        "nodes",
        "gpus",
        "cpus/node",
        "memory/node",
        "$/gpu-hour",
        "capacity",
    )
    for region in platform.regions:
        for cluster in region.clusters:
            backend = cluster.backend + (" (emulated GPUs)" if cluster.emulated_gpus else "")
            listed: list[pm.NodePool | None] = [*cluster.node_pools] or [None]
            for p in listed:
                row = (
                    [
                        p.name,
                        _text(p.gpu_model),
                        str(p.gpus_per_node),
                        str(p.nodes),
                        str(p.gpus_per_node * p.nodes),
                        _text(p.cpus_per_node),
                        p.memory_per_node,
                        f"{p.cost_per_gpu_hour:.2f}",
                        _capacity(p),
                    ]
                    if p
                    else ["-"] * 9
                )
                pools.add_row(region.name, cluster.name, backend, *row)
    gpus = _table("GPU types", "name", "memory", "node label", "total gpus")
    for g in platform.gpu_types:
        label = f"{g.node_label}={g.node_label_value or g.name}"
        gpus.add_row(g.name, _text(g.memory), label, str(platform.total_gpus(g.name)))
    prios = _table("Priority classes", "name", "value", "description")
    for pc in sorted(platform.priority_classes, key=lambda x: -x.value):
        prios.add_row(pc.name, str(pc.value), pc.description or "-")
    return [pools, gpus, prios, _profiles_table(platform), *_team_tables(platform)]


def _capacity(p: pm.NodePool) -> str:
    """``on-demand``, or ``spot`` with its expected reclaims per node-hour."""
    if p.capacity.value != "spot":
        return p.capacity.value
    return f"spot ({p.reclaims_per_hour:g} reclaims/node-hour)"


def _profiles_table(platform: pm.Platform) -> rich.table.Table:
    table = _table(
        "Profiles",
        "name",
        "teams",
        "lanes",
        "workers",
        "gpus/worker",
        "gpu model",
        "cpus/worker",
        "memory/worker",
        "regions",
        "queue",
        "priority",
    )
    for p in platform.profiles:
        table.add_row(
            p.name,
            _text(p.teams) if p.teams else "any",
            _text(p.lanes) if p.lanes else "any",
            _text(p.workers),
            _text(p.gpus_per_worker),
            _text(p.gpu_model),
            _text(p.cpus_per_worker),
            _text(p.memory_per_worker),
            _text(p.allowed_regions),
            _text(p.queue),
            _text(p.priority),
        )
    return table


def _team_tables(platform: pm.Platform) -> list[rich.table.Table]:
    teams = _table(
        "Teams and quotas",
        "team",
        "cohort",
        "strategy",
        "gpu model",
        "nominal",
        "borrowing limit",
        "lending limit",
        "cpu quota",
        "memory quota",
    )
    for t in platform.teams:
        head = [t.name, _text(t.cohort), t.queueing_strategy.value]
        tail = [_text(t.cpu_quota), t.memory_quota]
        quotas: list[pm.Quota | None] = [*t.quotas] or [None]
        for q in quotas:
            mid = (
                [q.gpu_model, str(q.nominal), _text(q.borrowing_limit), _text(q.lending_limit)]
                if q
                else ["-"] * 4
            )
            teams.add_row(*head, *mid, *tail)
    spaces = _table(
        "Workspaces",
        "name",
        "team",
        "namespace",
        "queue",
        "default profile",
        "default priority",
        "data",
        "members",
    )
    for w in platform.workspaces:
        default = " (default)" if platform.default_workspace == w.name else ""
        spaces.add_row(
            w.name + default,
            w.team,
            w.effective_namespace,
            w.effective_queue,
            _text(w.defaults.profile),
            _text(w.defaults.priority),
            w.data.size,
            _text(w.members),
        )
    return [teams, spaces]


@_app.platform_app.command("manifests")
def manifests_command(
    file: pathlib.Path | None = typer.Option(None, "-f", "--file", help=_PLATFORM_HELP),
    output: ManifestFormat = typer.Option(ManifestFormat.YAML, "-o", "--output", help="yaml|json"),
) -> None:
    """Print the objects of a platform, in apply order: TauGrid's CRDs, the agent's
    ClusterRole and account, the Kueue and workspace objects, the Tau objects."""
    try:
        platform = _platform(file)
    except errors.UserError as exc:
        raise _fail(exc) from None
    from taugrid.platform import crds
    from taugrid.render import cluster as cluster_render
    from taugrid.render import kueue, plan

    objs = crds.crd_definitions() + cluster_render.agent_rbac()
    objs += kueue.render_platform(platform) + crds.platform_objects(platform)
    sys.stdout.write(plan.to_yaml(objs) if output is ManifestFormat.YAML else plan.to_json(objs))


@_app.run_app.command("explain-config")
def explain_config_command(
    config: pathlib.Path = typer.Option(
        pathlib.Path("tau.yaml"), "-c", "--config", help="The tau.yaml to resolve."
    ),
    file: pathlib.Path | None = typer.Option(None, "-f", "--platform", help=_PLATFORM_HELP),
    output: TextOrJson = typer.Option(TextOrJson.TEXT, "-o", "--output", help="text|json"),
) -> None:
    """Show every resolved value of a tau.yaml and where it came from."""
    try:
        spec = resolve_file(config, file)
    except errors.UserError as exc:
        raise _fail(exc) from None
    values = spec.fields()
    if output is TextOrJson.JSON:
        doc = {"spec": values, "provenance": spec.provenance, "total_gpus": spec.total_gpus}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    table = _table(f"{config} resolved against {_platform_name(file)}", "field", "value", "source")
    for field, value in values.items():
        shown = value if isinstance(value, str) else json.dumps(value)
        table.add_row(field, shown, spec.provenance.get(field, "derived"))
    _console().print(table)
