"""The embedded platform's daemons under abuse, through the real ``tau`` console script.

One platform (hub + agent + real Ray) under a temporary ``$TAU_HOME`` whose recorded
hub port is held by another home's hub: ``tau up`` moves to a free port and both run
side by side. Its Ray cluster demands a token (dashboard and GCS refuse clients
without it) and the hub and agent listen on loopback only. ``kill -9`` of the agent:
the supervisor brings it back, it adopts the running Ray cluster and re-attaches to the
running attempt, which finishes with every step once; ``kill -9`` of the hub for 60 s:
the CLI says the region still runs, and after ``tau up`` no log line or metric point is
missing; ``tau down`` after a ``kill -9`` of supervisor and agent stops the orphaned Ray
cluster and removes its /tmp dir; an agent that cannot start is reported with the
real cause, never as ``region local ready`` nor as an unreachable hub.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import listeners
from tests.backends import backend_helpers as bh
from tests.cli import platform_env as pe
from tests.hub.harness import free_port

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROOT, TAU, tau = pe.ROOT, pe.TAU, pe.tau
IP = "127.0.0.47"


def _wait(what: str, check: object, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def _ray_pids() -> list[int]:
    out = subprocess.run(["pgrep", "-f", f"node-ip-address={IP}"], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def _cluster_state(home: Path) -> dict[str, object]:
    return dict(json.loads((home / "agents" / "local" / "ray" / "cluster.json").read_text()))


@pytest.fixture(scope="module")
def foreign(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    """Another home's hub on the port our home recorded before."""
    home, port = tmp_path_factory.mktemp("foreign-home"), free_port()
    argv = [
        sys.executable,
        "-m",
        "taugrid.hub.server.daemon",
        "--home",
        str(home),
        "--port",
        str(port),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAU_")}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        _wait("the foreign hub", lambda: (home / "credentials.json").exists() and _answers(port))
        yield home, port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _answers(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def env(
    tmp_path_factory: pytest.TempPathFactory, foreign: tuple[Path, int]
) -> Iterator[dict[str, str]]:
    home = tmp_path_factory.mktemp("tau-home")
    (home / "run").mkdir()
    (home / "run" / "ports.json").write_text(json.dumps({"hub_port": foreign[1]}))
    e = {k: v for k, v in os.environ.items() if not k.startswith(("TAU_", "RAY_"))}
    e.update(TAU_HOME=str(home), TAU_RAY_IP=IP, COLUMNS="200")
    up = tau(e, "up")
    assert up.returncode == 0, up.stderr + up.stdout
    try:
        yield e
    finally:
        down = tau(e, "down")
        assert down.returncode == 0, down.stderr
        _wait("Ray processes to exit", lambda: not _ray_pids(), 30)


def test_two_homes_run_side_by_side(env: dict[str, str], foreign: tuple[Path, int]) -> None:
    home = Path(env["TAU_HOME"])
    mine = json.loads((home / "credentials.json").read_text())
    theirs = json.loads((foreign[0] / "credentials.json").read_text())
    assert mine["hub_url"] != theirs["hub_url"]
    assert json.loads((home / "run" / "ports.json").read_text())["hub_port"] != foreign[1]
    for doc in (mine, theirs):
        auth = {"Authorization": f"Bearer {doc['token']}"}
        assert httpx.get(f"{doc['hub_url']}/v1/whoami", headers=auth).status_code == 200
    listed = tau(env, "cluster", "list", "-o", "json")
    assert listed.returncode == 0 and json.loads(listed.stdout)[0]["id"] == "local"


def test_ray_demands_the_token_kept_private(env: dict[str, str]) -> None:
    home = Path(env["TAU_HOME"])
    token = home / "agents" / "local.ray-token"
    assert token.stat().st_mode & 0o777 == 0o600
    state = _cluster_state(home)
    assert state["auth_token_file"] == str(token)
    dash, gcs = str(state["dashboard_url"]), str(state["gcs_address"])
    assert httpx.get(f"{dash}/api/version").status_code == 401
    auth = {"Authorization": f"Bearer {token.read_text().strip()}"}
    assert httpx.get(f"{dash}/api/version", headers=auth).status_code == 200
    probe = f"import ray; ray.init(address={gcs!r}, log_to_driver=False); print('CONNECTED')"
    base = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    base["HOME"] = str(home)  # no ~/.ray/auth_token to fall back on
    refused = subprocess.run(
        [sys.executable, "-c", probe], env=base, capture_output=True, text=True, timeout=180
    )
    assert refused.returncode != 0 and "CONNECTED" not in refused.stdout
    assert "Authentication token is missing or incorrect" in refused.stderr
    with_token = {**base, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
    ok = subprocess.run(
        [sys.executable, "-c", probe], env=with_token, capture_output=True, text=True, timeout=180
    )
    assert "CONNECTED" in ok.stdout, ok.stderr[-2000:]


def test_nothing_answers_off_loopback_without_the_token(env: dict[str, str]) -> None:
    """Hub, agent and dashboard bind loopback; what Ray binds to every interface (its
    C++ gRPC servers and Prometheus endpoints: Ray 2.60 has no option for a 127.0.0.x
    node) serves nothing but read-only metrics to a client without the token."""
    home = Path(env["TAU_HOME"])
    pids = {int((home / "run" / f).read_text()) for f in ("hub.pid", "agent-local.pid")}
    socks = listeners.listeners(pids)
    assert socks and all(listeners.is_loopback(ip) for _, ip, _ in socks), socks
    dash_port = int(str(_cluster_state(home)["dashboard_url"]).rsplit(":", 1)[1])
    ray_socks = listeners.listeners(_descendants(_ray_pids()))
    assert [ip for _, ip, port in ray_socks if port == dash_port] == [IP], ray_socks
    wide = {port for _, ip, port in ray_socks if not listeners.is_loopback(ip)}
    for port in sorted(wide):
        try:
            resp = httpx.get(f"http://{IP}:{port}/", timeout=5)
        except httpx.HTTPError:
            continue  # a gRPC server: no HTTP/1.1 without the token's metadata
        ok = resp.status_code != 200 or resp.text.lstrip().startswith("# HELP")
        assert ok, f"{IP}:{port} answered without the token: {resp.text[:200]}"


def _descendants(roots: list[int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(roots), list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _slow_run(env: dict[str, str], tmp_path: Path, name: str) -> str:
    work = tmp_path / name
    shutil.copytree(ROOT / "examples" / "quickstart", work)
    slow = '"--checkpoint-every", "50", "--step-sleep", "0.1"]'
    text = (work / "tau.yaml").read_text().replace('"--checkpoint-every", "50"]', slow)
    (work / "tau.yaml").write_text(text.replace("name: quickstart", f"name: {name}"))
    sub = tau(env, "run", str(work), "-o", "json")
    assert sub.returncode == 0, sub.stderr
    return str(json.loads(sub.stdout)["id"])


def _state(env: dict[str, str], run_id: str) -> str:
    return str(json.loads(tau(env, "run", "status", run_id, "-o", "json").stdout)["state"])


STEPS_JOB = """
import sys, time
import taugrid as tau

steps, pause = int(sys.argv[1]), float(sys.argv[2])
ckpt = tau.latest_checkpoint()
start = tau.checkpoint_info(ckpt).step + 1 if ckpt is not None else 0
for step in range(start, steps):
    print(f"line {step:04d} of attempt {tau.attempt()}", flush=True)
    tau.log({"loss": 1.0 / (step + 1)}, step=step)
    if step % 20 == 19:
        with tau.checkpoint(step) as d:
            (d / "step.txt").write_text(str(step))
    time.sleep(pause)
"""


def _steps_run(env: dict[str, str], tmp_path: Path, name: str, steps: int, pause: float) -> str:
    """A run that prints one line and logs one metric point per step, checkpointing."""
    work = tmp_path / name
    work.mkdir()
    (work / "steps.py").write_text(STEPS_JOB)
    (work / "tau.yaml").write_text(
        f"schema_version: 1\nname: {name}\nrun:\n  entrypoint: steps.py\n"
        f'  args: ["{steps}", "{pause}"]\ncompute: {{gpus: 1, cpus: 1, memory: 1Gi}}\n'
        "resilience: {max_retries: 2, retry_on: [node_failure, lost_contact]}\n"
    )
    sub = tau(env, "run", str(work), "-o", "json")
    assert sub.returncode == 0, sub.stderr
    return str(json.loads(sub.stdout)["id"])


def _steps_seen(env: dict[str, str], run_id: str) -> list[int]:
    out = tau(env, "run", "metrics", run_id, "-o", "json")
    assert out.returncode == 0, out.stderr
    return sorted(m["step"] for m in json.loads(out.stdout) if m["name"] == "loss")


def _assert_every_step_once(env: dict[str, str], run_id: str, steps: int) -> None:
    """Every line and metric point is in the hub's views, once and in order."""
    logs = tau(env, "run", "logs", run_id)
    lines = [ln.split(" of ")[0] for ln in logs.stdout.splitlines() if ln.startswith("line ")]
    assert lines == [f"line {i:04d}" for i in range(steps)], lines[:5]
    assert _steps_seen(env, run_id) == list(range(steps))
    status = json.loads(tau(env, "run", "status", run_id, "-o", "json").stdout)
    assert status["gaps"] == [] and len(status["attempts"]) == 1
    assert status["attempts"][0]["exit_code"] == 0


def _pid(home: Path, name: str) -> int:
    return int((home / "run" / f"{name}.pid").read_text())


def test_kill_9_agent_comes_back_by_itself_and_no_step_runs_twice(
    env: dict[str, str], tmp_path: Path
) -> None:
    """The supervisor restarts the agent; it adopts Ray and re-attaches to the attempt:
    one attempt, every step once, no human action."""
    home = Path(env["TAU_HOME"])
    run_id = _steps_run(env, tmp_path, "survivor", steps=160, pause=0.25)
    _wait("the run to log steps", lambda: len(_steps_seen(env, run_id)) >= 10, 120)
    gcs_before, dead = _cluster_state(home)["gcs_address"], _pid(home, "agent-local")
    os.kill(dead, signal.SIGKILL)
    _wait("the agent to come back", lambda: _pid(home, "agent-local") != dead, 60)
    _wait("the run to succeed", lambda: _state(env, run_id) == "succeeded", 180)
    assert _cluster_state(home)["gcs_address"] == gcs_before
    log = (home / "logs" / "agent-local.log").read_text()
    assert "adopted the running Ray cluster" in log and "re-attaching to attempt" in log
    assert (
        "agent-local was not running; started it again"
        in (home / "logs" / "supervisor.log").read_text()
    )
    _assert_every_step_once(env, run_id, 160)


OUTAGE_S = 60.0


def test_hub_down_60_s_loses_no_log_line_or_metric_point(
    env: dict[str, str], tmp_path: Path
) -> None:
    """``kill -9`` of the hub (and its supervisor, so it stays down) mid-run; 60 s later
    ``tau up``. Meanwhile the CLI says the region still runs; afterwards the hub's log
    and metric views (the CLI's and the portal's source) have every line and point."""
    home = Path(env["TAU_HOME"])
    steps = int((OUTAGE_S + 40) / 0.25)
    run_id = _steps_run(env, tmp_path, "outage", steps=steps, pause=0.25)
    _wait("the run to log steps", lambda: len(_steps_seen(env, run_id)) >= 10, 120)
    os.kill(_pid(home, "supervisor"), signal.SIGKILL)
    os.kill(_pid(home, "hub"), signal.SIGKILL)
    down_at = time.monotonic()
    listed = tau(env, "run", "list")
    assert listed.returncode == 1, listed.stdout + listed.stderr
    assert "hub of TAU_HOME" in listed.stderr and "still running" in listed.stderr
    assert "platform is not running" not in listed.stderr
    time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - down_at)))
    up = tau(env, "up", timeout=150)
    assert up.returncode == 0, up.stderr + up.stdout
    _wait("the run to succeed", lambda: _state(env, run_id) == "succeeded", 240)
    _assert_every_step_once(env, run_id, steps)


def test_down_after_kill_9_stops_the_orphaned_ray_cluster(env: dict[str, str]) -> None:
    home = Path(env["TAU_HOME"])
    tmp_root = Path(str(_cluster_state(home)["tmp_root"]))
    assert tmp_root.exists() and _ray_pids()
    os.kill(_pid(home, "supervisor"), signal.SIGKILL)  # else it brings the agent back
    os.kill(_pid(home, "agent-local"), signal.SIGKILL)
    down = tau(env, "down")
    assert down.returncode == 0, down.stderr
    assert "stopped the Ray cluster left" in down.stderr
    _wait("Ray processes to exit", lambda: not _ray_pids(), 30)
    assert not tmp_root.exists()
    assert not (home / "run" / "hub.pid").exists()


def test_an_agent_that_cannot_start_is_reported_with_its_cause(env: dict[str, str]) -> None:
    """The GCS port is pinned to one another process holds: the agent dies at once."""
    home = Path(env["TAU_HOME"])
    with socket.socket() as held:
        held.bind((IP, 0))
        held.listen()
        port = held.getsockname()[1]
        pinned = {
            **env,
            "TAU_RAY_GCS_PORT": str(port),
            "TAU_RAY_DASHBOARD_PORT": str(bh.free_port(IP, 8700, 8799)),
        }
        up = tau(pinned, "up", timeout=150)
    assert up.returncode == 1, up.stdout + up.stderr
    assert "region local ready" not in up.stderr
    assert "cannot reach the TauGrid hub" not in up.stderr
    assert "agent of region 'local' exited" in up.stderr and f"{IP}:{port}" in up.stderr
    assert "already in use" in up.stderr and str(home / "logs") in up.stderr
    # the hub it started still runs; the fixture's `tau down` stops it
