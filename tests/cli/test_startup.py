"""``tau`` starts without the heavy layers (issue 36, item 4; docs/ARCHITECTURE.md, "CLI
start-up").

Runs the installed console script in a subprocess with ``PYTHONPROFILEIMPORTTIME=1``:
Python then writes a line for every module the process imports, from start-up to exit,
on stderr. Read-only commands against no platform and the ``--help`` of every command
group must import none of ``FORBIDDEN`` (the Kubernetes client, Ray, the hub's web and
database stacks, the renderers, the hub, the backends, the heavy pydantic models, the
HTTP client). Commands that need them import them inside the command function. Timing
is the benchmark's business (benchmarks/bench_cli_startup.py), not this test's.
"""

from __future__ import annotations

import importlib
import os
import pathlib
import subprocess
import sys

import pytest
import typer.main

from taugrid.cli import app as cli_app
from taugrid.cli import cluster_cmds
from taugrid.render import cluster as cluster_render
from tests.cli.test_spec_cli import tau_script

FORBIDDEN = (
    "kubernetes",
    "ray",
    "fastapi",
    "uvicorn",
    "sqlalchemy",
    "kopf",
    "taugrid.render",
    "taugrid.hub",
    "taugrid.backends",
    "taugrid.operator",
    "taugrid.spec.models",
    "taugrid.platform.models",
    "taugrid.payloads",
    "httpx",  # a command that finds no hub makes no client
    "typer.rich_utils",  # rich's help and error formatter (markdown, tracebacks): 0.13 s
)
QUICKSTART = pathlib.Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "tau.yaml"
NOT_RUNNING = "the TauGrid platform is not running"

# Every group's --help, run in one process by executing the console script once per
# argv (runpy): the modules they import together are the union of the lines logged.
_ALL_HELPS = """
import runpy, sys
script, paths = sys.argv[1], sys.argv[2:]
for path in paths:
    sys.argv = [script, *path.split(), "--help"]
    try:
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    print(f"==> {path or '(root)'}: exit {code}", flush=True)
"""


def _env(home: pathlib.Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TAU_HUB_URL", "TAU_TOKEN")}
    return env | {
        "TAU_HOME": str(home),
        "PYTHONPROFILEIMPORTTIME": "1",
        "COLUMNS": "100",
        "NO_COLOR": "1",
    }


def _imported(stderr: str) -> set[str]:
    """Module names from ``-X importtime`` lines (``import time: self | cumulative | name``)."""
    names = {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    names.discard("imported package")  # the header line
    assert {"typer", "taugrid.cli.main"} <= names, "no import log: was importtime honoured?"
    return names


def _heavy(modules: set[str]) -> list[str]:
    """The entries of ``FORBIDDEN`` that ``modules`` holds (a package or its modules)."""
    return sorted({f for m in modules for f in FORBIDDEN if m == f or m.startswith(f + ".")})


def _run(argv: list[str], home: pathlib.Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    done = subprocess.run(argv, env=_env(home), capture_output=True, text=True, timeout=120)
    return done, _imported(done.stderr)


def _messages(stderr: str) -> str:
    return "\n".join(line for line in stderr.splitlines() if not line.startswith("import time:"))


READ_ONLY = [  # argv, exit code, what stderr says (TAU_HOME is empty: no platform runs)
    (["--help"], 0, ""),
    (["run", "--help"], 0, ""),
    (["run", "list"], 2, NOT_RUNNING),
    (["run", "list", "-o", "json"], 2, NOT_RUNNING),
    (["run", "status", "some-run"], 2, NOT_RUNNING),
    (["run", "logs", "some-run"], 2, NOT_RUNNING),
    (["cluster", "list"], 2, NOT_RUNNING),
    (["queue", "list"], 2, NOT_RUNNING),
    (["context", "list"], 0, ""),
    (["context", "current"], 0, ""),
    (["context", "use", "local"], 0, ""),
]


@pytest.mark.parametrize(
    ("args", "code", "says"), READ_ONLY, ids=[" ".join(argv) for argv, _, _ in READ_ONLY]
)
def test_read_only_commands_import_no_heavy_layer(
    args: list[str], code: int, says: str, tmp_path: pathlib.Path
) -> None:
    done, modules = _run([tau_script(), *args], tmp_path)
    assert done.returncode == code, _messages(done.stderr)
    assert says in _messages(done.stderr)
    assert _heavy(modules) == []


def _group_paths() -> list[str]:
    """``""`` (the root), ``"run"``, ``"admin hub"``, ...: every command group."""
    paths: list[str] = []

    def walk(command: object, path: list[str]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands is None:
            return
        paths.append(" ".join(path))
        for name, sub in sorted(subcommands.items()):
            walk(sub, [*path, name])

    importlib.import_module("taugrid.cli.main")  # registers every command module
    walk(typer.main.get_command(cli_app.app), [])
    return paths


def test_every_group_help_imports_no_heavy_layer(tmp_path: pathlib.Path) -> None:
    paths = _group_paths()
    assert {"", "run", "cluster", "admin", "admin hub", "workspace quota"} <= set(paths)
    done, modules = _run([sys.executable, "-c", _ALL_HELPS, tau_script(), *paths], tmp_path)
    assert done.returncode == 0, _messages(done.stderr)
    assert done.stdout.count("Usage:") == len(paths), done.stdout[-2000:]
    assert done.stdout.count(": exit 0\n") == len(paths), done.stdout[-2000:]
    assert _heavy(modules) == []


def test_the_check_sees_a_command_that_loads_the_models(tmp_path: pathlib.Path) -> None:
    """Control: ``tau run validate`` needs the tau.yaml models; the log shows them."""
    done, modules = _run([tau_script(), "run", "validate", str(QUICKSTART)], tmp_path)
    assert done.returncode == 0, _messages(done.stderr)
    assert _heavy(modules) == ["taugrid.spec.models"]


def test_cluster_install_help_shows_the_renderer_defaults() -> None:
    """``tau cluster install --help`` spells the defaults without importing the renderer."""
    options = cluster_render.InstallOptions()
    assert options.image == cluster_cmds.DEFAULT_IMAGE
    assert options.hub_url == cluster_cmds.DEFAULT_HUB_URL
