"""The embedded platform on this machine: start, check and stop the hub and its agent.

``tau up`` (and ``tau run``, which may start it) starts two daemons under
``$TAU_HOME``: the hub (``python -m taugrid.hub.server.daemon``, SQLite in WAL mode,
127.0.0.1) and the agent of region ``local`` (``python -m taugrid.agent.daemon
--start-ray``), which starts a real Ray cluster on 127.0.0.2 with token auth, or
adopts the one a killed agent left running. Read-only commands never start anything:
``ensure_client`` says the platform is not running and names ``tau up``.

Ports are per ``$TAU_HOME``: the hub takes ``TAU_HUB_PORT`` if set, else the port
recorded in ``$TAU_HOME/run/ports.json``, else 8787, else any free port (recorded,
and the hub rewrites ``credentials.json``'s URL); the agent picks free Ray ports unless
``TAU_RAY_GCS_PORT``/``TAU_RAY_DASHBOARD_PORT`` pin them and records them in its
``cluster.json``. A hub on our port that refuses our token is another platform's:
that is a clear error, not ``unknown or revoked token``.

Each daemon has a pid file and a log under ``$TAU_HOME``; a daemon is also found by
its command line (``-m MODULE --home $TAU_HOME``), so ``tau down`` stops whatever
runs for this home, whoever started it: the agent (which stops Ray), a Ray cluster
left by a killed agent (its processes and /tmp dirs), then the hub.

Supervised: once up, ``tau up`` starts ``sdk.local.supervise``, which restarts the hub or
the agent within seconds when one dies (the agent re-attaches to its running
attempts); ``tau down`` stops it first. While the hub is down and the agent runs,
read-only commands say so (``HubDown``), not that nothing runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from taugrid import errors, private
from taugrid import home as tau_home
from taugrid.record import files
from taugrid.sdk.client import client, contexts

__all__ = [
    "SUPERVISOR_MODULE",
    "Daemon",
    "EmbeddedPlatform",
    "HubDown",
    "PlatformNotRunning",
    "ensure_client",
    "start_supervisor",
]

Progress = Callable[[str], None]
DEFAULT_HUB_PORT = 8787
SUPERVISOR_MODULE = "taugrid.sdk.local.supervise"
_PROC = Path("/proc")
# Daemons this process started: pid file -> (process, log size before it started). Their
# own exit status, not a /proc lookup, says whether one "exited while starting".
_STARTED: dict[Path, tuple[subprocess.Popen[bytes], int]] = {}


def _quiet(_: str) -> None:
    return None


class PlatformNotRunning(errors.UserError):
    """A command that does not start the platform found none running."""


class HubDown(errors.SystemFault):
    """The embedded hub is down while its region runs on (retry: it comes back)."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message, hint, retryable=True)


def _cmdline(pid: int) -> list[str]:
    try:
        return (_PROC / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie (reaps it when it is our child)."""
    with contextlib.suppress(ChildProcessError):
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :][:1] not in ("Z", "X")


@dataclasses.dataclass(frozen=True)
class Daemon:
    """A background process with a pid file and a log under ``home``.

    ``module`` (``taugrid.hub.server.daemon``) and ``match`` (extra argv items) identify it
    by command line too, so one started by someone else (or whose pid file is gone)
    is still found; a stale pid file of a reused pid is ignored.
    """

    name: str
    home: Path
    module: str = ""
    match: tuple[str, ...] = ()

    @property
    def pidfile(self) -> Path:
        return self.home / "run" / f"{self.name}.pid"

    @property
    def logfile(self) -> Path:
        return self.home / "logs" / f"{self.name}.log"

    @property
    def cmdfile(self) -> Path:
        """How it was started (argv, environment; 0600): what ``restart`` runs again."""
        return self.home / "run" / f"{self.name}.cmd.json"

    @classmethod
    def recorded(cls, name: str, home: Path) -> Daemon:
        """The daemon ``name`` of ``home`` as its command file describes it."""
        doc = _read_json(home / "run" / f"{name}.cmd.json")
        return cls(name, home, str(doc.get("module", "")), tuple(doc.get("match", ())))

    def restart(self) -> int:
        """Start it again as it was last started (``start``); a stopped one has no
        command file any more and is not started (``UserError``)."""
        doc = json.loads(self.cmdfile.read_text()) if self.cmdfile.exists() else None
        if doc is None:
            raise errors.UserError(f"{self.name} was stopped on purpose (no {self.cmdfile})")
        return self.start(list(doc["argv"]), dict(doc["env"]))

    def _is_mine(self, pid: int) -> bool:
        argv = _cmdline(pid)
        if not self.module:
            return bool(argv)
        want = [self.module, "--home", str(self.home), *self.match]
        return all(w in argv for w in want)

    def pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError):
            pid = int(self.pidfile.read_text())
            if _alive(pid) and self._is_mine(pid):
                return pid
        if self.module:
            for entry in _PROC.iterdir():
                if entry.name.isdigit() and int(entry.name) != os.getpid():
                    pid = int(entry.name)
                    if self._is_mine(pid) and _alive(pid):
                        return pid
        return None

    def tail(self, lines: int = 12) -> str:
        """The last lines of the log (what to show when the daemon died); only what the
        process this command started wrote, so an older failure is never shown."""
        offset = _STARTED[self.pidfile][1] if self.pidfile in _STARTED else 0
        try:
            with self.logfile.open("rb") as f:
                f.seek(offset)
                text = f.read().decode(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.rstrip().splitlines()[-lines:]) or "(empty log)"

    def exited(self) -> bool:
        """The daemon is gone: the one this command started has exit status, or (started
        by someone else) no live process of it is found."""
        started = _STARTED.get(self.pidfile)
        if started is not None:
            return started[0].poll() is not None
        return self.pid() is None

    def start(self, argv: list[str], env: dict[str, str]) -> int:
        self.logfile.parent.mkdir(parents=True, exist_ok=True)
        self.pidfile.parent.mkdir(parents=True, exist_ok=True)
        with self.logfile.open("ab") as log:
            offset = log.tell()
            proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        files.write_atomic(self.pidfile, str(proc.pid).encode())  # a reader never sees ''
        _STARTED[self.pidfile] = (proc, offset)
        doc = {"argv": argv, "env": env, "module": self.module, "match": list(self.match)}
        private.write(self.cmdfile, json.dumps(doc))
        return proc.pid

    def stop(self, timeout_s: float = 30.0) -> bool:
        self.cmdfile.unlink(missing_ok=True)  # stopped on purpose: never restarted
        pid = self.pid()
        if pid is None:
            self.pidfile.unlink(missing_ok=True)
            return False
        os.kill(pid, signal.SIGTERM)
        deadline = time.time() + timeout_s
        while time.time() < deadline and _alive(pid):
            time.sleep(0.2)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        self.pidfile.unlink(missing_ok=True)
        return True


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class EmbeddedPlatform:
    """Hub + the ``local`` agent on this machine, rooted at ``home``."""

    def __init__(self, home: Path | None = None, port: int | None = None) -> None:
        self.home = home or client.tau_home()
        self._pinned = port or _env_port("TAU_HUB_PORT")
        self.port = self._pinned or self._recorded().get("hub_port") or DEFAULT_HUB_PORT
        self.hub = Daemon("hub", self.home, "taugrid.hub.server.daemon")
        self.agent = Daemon("agent-local", self.home, "taugrid.agent.daemon", ("local",))
        self.supervisor = Daemon("supervisor", self.home, SUPERVISOR_MODULE)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ray_state_dir(self) -> Path:
        return tau_home.agent_ray(self.home, "local")

    def _ports_file(self) -> Path:
        return self.home / "run" / "ports.json"

    def _recorded(self) -> dict[str, int]:
        with contextlib.suppress(OSError, ValueError):
            return dict(json.loads(self._ports_file().read_text()))
        return {}

    def _pick_hub_port(self) -> None:
        """Before starting our hub: keep a free port, else move to one (unless pinned)."""
        if _port_free(self.port):
            pass
        elif self._pinned:
            raise errors.UserError(
                f"port 127.0.0.1:{self.port} (TAU_HUB_PORT) is taken by another process, "
                f"perhaps the hub of another TAU_HOME",
                "stop that process, or set TAU_HUB_PORT to a free port (or unset it: "
                "tau then picks a free one)",
            )
        else:
            self.port = DEFAULT_HUB_PORT if _port_free(DEFAULT_HUB_PORT) else _any_port()
        self._ports_file().parent.mkdir(parents=True, exist_ok=True)
        self._ports_file().write_text(json.dumps({"hub_port": self.port}))

    def _env(self) -> dict[str, str]:
        return {**os.environ, "TAU_HOME": str(self.home), "PYTHONUNBUFFERED": "1"}

    def up(self, progress: Progress = _quiet, timeout_s: float | None = None) -> client.Client:
        """Start whatever is not running and wait until region ``local`` reports; then
        the supervisor that restarts them (``sdk.local.supervise``). ``timeout_s``: by
        default the hub, the agent and its Ray head, then the time a Ray node may take to
        register (the agent's own start allows it too)."""
        if timeout_s is None:
            from taugrid.render import command  # the renderers: not at `tau` start

            timeout_s = 120.0 + command.RAYLET_REGISTER_S
        for var in ("TAU_RAY_GCS_PORT", "TAU_RAY_DASHBOARD_PORT"):
            _env_port(var, _RAY_WORKER_PORTS)  # before anything starts
        deadline = time.time() + timeout_s
        self.home.mkdir(parents=True, exist_ok=True)
        self.home.chmod(0o700)  # tokens, hub.db, run records: the owner's only
        if self.hub.pid() is not None and self.agent.pid() is not None:
            progress = _quiet  # already up: nothing to report
        if self.hub.pid() is None:
            self._pick_hub_port()
            progress(f"starting hub on {self.url} (log: {self.hub.logfile})")
            argv = [sys.executable, "-m", "taugrid.hub.server.daemon", "--home", str(self.home)]
            self.hub.start([*argv, "--port", str(self.port)], self._env())
        cli = self._wait_hub(deadline, progress)
        since = 0.0
        if self.agent.pid() is None:
            since = time.time()
            progress(
                f"starting agent of region 'local' and its Ray cluster (log: {self.agent.logfile})"
            )
            self.agent.start(self._agent_argv(), self._env())
        self._wait_cluster(cli, deadline, progress, since)
        start_supervisor(self.supervisor, [self.hub, self.agent], self._env(), progress)
        return cli

    def _agent_argv(self) -> list[str]:
        argv = [sys.executable, "-m", "taugrid.agent.daemon", "--home", str(self.home)]
        argv += ["--hub", self.url, "--cluster", "local", "--start-ray"]
        return [*argv, "--ray-ip", os.environ.get("TAU_RAY_IP", "127.0.0.2")]

    def connect(self, timeout_s: float = 20.0) -> client.Client:
        """A client of the running hub of this home (identity checked)."""
        return self._wait_hub(time.time() + timeout_s, _quiet)

    def _wait_hub(self, deadline: float, progress: Progress) -> client.Client:
        creds = self.home / "credentials.json"
        while time.time() < deadline:
            doc = _read_json(creds)
            if doc.get("hub_url") == self.url and doc.get("token"):
                cli = client.Client(client.HubConfig(self.url, doc["token"], "local"), 10)
                if self._answers(cli):
                    progress("hub is up")
                    return cli
            if self.hub.exited():
                raise errors.SystemFault(
                    f"the hub of {self.home} exited while starting; its log ends with:\n"
                    f"{self.hub.tail()}",
                    f"full log: {self.hub.logfile}",
                )
            time.sleep(0.3)
        raise client.HubUnreachable(self.url, f"hub did not answer in time; see {self.hub.logfile}")

    def _answers(self, cli: client.Client) -> bool:
        try:
            cli.request("GET", "/v1/whoami")
        except client.HubUnreachable:
            cli.close()
            return False
        except client.ApiError as exc:
            cli.close()
            if exc.status in (401, 403):
                raise errors.UserError(
                    f"the hub answering at {self.url} is not the one of {self.home}: it "
                    f"refuses this home's token, so another TauGrid platform uses port "
                    f"{self.port}",
                    "stop that platform (tau down with its TAU_HOME), or give this one "
                    "another port: TAU_HUB_PORT=<free port> tau up",
                ) from None
            raise
        return True

    def _wait_cluster(
        self, cli: client.Client, deadline: float, progress: Progress, since: float
    ) -> None:
        """Wait for a report of region ``local`` from an agent alive since ``since``."""
        while time.time() < deadline:
            ready = [
                c
                for c in cli.clusters()
                if c["id"] == "local"
                and c["state"] in ("ready", "degraded")  # degraded still takes work
                and c["report"].get("nodes")
                and (c["last_heartbeat"] or 0) >= since
            ]
            if ready and not self.agent.exited():
                r = ready[0]["report"]
                kind = "emulated" if r.get("emulated_gpus") else "real"
                why = f" ({r['health_reason']})" if r.get("health_reason") else ""
                progress(
                    f"region local {ready[0]['state']}{why}: {len(r['nodes'])} nodes, "
                    f"{r['gpu_free']:g}/{r['gpu_free'] + r['gpu_busy']:g} GPUs free ({kind} GPUs)"
                )
                return
            if self.agent.exited():
                raise errors.SystemFault(
                    "the agent of region 'local' exited while starting; its log ends with:\n"
                    f"{self.agent.tail()}",
                    f"full log: {self.agent.logfile}; fix the cause, then run: tau up",
                )
            time.sleep(0.5)
        raise errors.SystemFault(
            f"region 'local' did not report within the wait; its agent's log ends with:\n"
            f"{self.agent.tail()}",
            f"full log: {self.agent.logfile}",
        )

    def down(self, progress: Progress = _quiet) -> None:
        """Stop the supervisor (nothing comes back), the agent (and its Ray cluster),
        a Ray cluster left behind, the hub."""
        self.supervisor.stop()
        if self.agent.stop(timeout_s=60):
            progress("agent and its Ray cluster stopped")
        if (self.ray_state_dir / "cluster.json").exists():
            argv = [sys.executable, "-m", "taugrid.agent.daemon", "--home", str(self.home)]
            argv += ["--cluster", "local", "--stop-leftover-ray"]
            out = subprocess.run(
                argv, capture_output=True, text=True, env=self._env(), timeout=120, check=False
            )
            if out.returncode != 0:
                raise errors.SystemFault(
                    f"could not stop the Ray cluster left under {self.ray_state_dir}:\n"
                    f"{out.stderr.strip()[-1500:]}",
                    "stop its processes by hand (they carry TAU_RAY_NODE in their environment)",
                )
            if out.stdout.strip():
                progress(out.stdout.strip().splitlines()[-1])
        if self.hub.stop():
            progress("hub stopped")

    def status(self) -> dict[str, object]:
        return {
            "home": str(self.home),
            "url": self.url,
            "hub_pid": self.hub.pid(),
            "agent_pid": self.agent.pid(),
            "supervisor_pid": self.supervisor.pid(),
            "hub_log": str(self.hub.logfile),
            "agent_log": str(self.agent.logfile),
        }


def start_supervisor(
    supervisor: Daemon, daemons: list[Daemon], env: dict[str, str], progress: Progress
) -> None:
    """Start ``supervisor`` (``sdk.local.supervise``) over ``daemons`` unless it runs."""
    if supervisor.pid() is not None:
        return
    argv = [sys.executable, "-m", supervisor.module, "--home", str(supervisor.home)]
    watch = [a for d in daemons for a in ("--watch", f"{d.name}={d.home}")]
    supervisor.start([*argv, *watch], env)
    progress(
        f"supervisor started: a daemon that dies comes back by itself (log: {supervisor.logfile})"
    )


_RAY_WORKER_PORTS = (10002, 19999)  # `ray start`'s default --min/--max-worker-port


def _env_port(name: str, avoid: tuple[int, int] | None = None) -> int | None:
    """``$name`` as a port (None when unset); a value that is no usable port is a
    UserError naming the variable (Ray refuses GCS/dashboard ports in its worker range)."""
    value = os.environ.get(name)
    if not value:
        return None
    lo, hi = avoid or (0, -1)
    if not value.isdigit() or not 1 <= int(value) <= 65535 or lo <= int(value) <= hi:
        outside = f", outside Ray's worker ports {lo}-{hi}" if avoid else ""
        raise errors.UserError(
            f"{name}={value} is not a port this platform can use",
            f"set {name} to a free port (1-65535{outside}), or unset it: tau picks a free one",
        )
    return int(value)


def _any_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _read_json(path: Path) -> dict[str, str]:
    with contextlib.suppress(OSError, ValueError):
        return dict(json.loads(path.read_text()))
    return {}


def ensure_client(progress: Progress = _quiet, *, start: bool = False) -> client.Client:
    """A client of the hub this shell targets.

    ``TAU_HUB_URL`` (+ ``TAU_TOKEN``), a non-``local`` current context or credentials
    ``tau login`` saved for another hub name a hub; otherwise it is this home's
    embedded platform, which only ``start=True`` (``tau
    run``, ``tau up``) starts. Without ``start`` a stopped platform is a
    ``PlatformNotRunning`` error naming ``tau up``; a dead agent is reported.
    """
    cfg = client.HubConfig.discover()
    plat = EmbeddedPlatform()
    if cfg is not None and (cfg.source != contexts.LOCAL or cfg.url.rstrip("/") != plat.url):
        cli = client.Client(cfg)  # TAU_HUB_URL, a context, or credentials of `tau login`
        cli.health()
        return cli
    if os.environ.get("TAU_HUB_URL"):
        raise client.HubUnreachable(
            os.environ["TAU_HUB_URL"], "no token: set TAU_TOKEN or run `tau login`"
        )
    if start:
        if plat.hub.pid() is None or plat.agent.pid() is None:
            progress(f"the platform of {plat.home} is not (fully) running: starting it")
        return plat.up(progress)
    if plat.hub.pid() is None and plat.agent.pid() is not None:
        raise HubDown(
            f"the hub of TAU_HOME={plat.home} is down, but region 'local' is still running "
            f"(agent pid {plat.agent.pid()}): runs go on, and their logs and metrics are kept "
            "until the hub is back",
            "the supervisor restarts the hub within seconds"
            if plat.supervisor.pid() is not None
            else f"start it again with: tau up (its log: {plat.hub.logfile})",
        )
    if plat.hub.pid() is None:
        raise PlatformNotRunning(
            f"the TauGrid platform is not running (nothing runs for TAU_HOME={plat.home})",
            "start it with: tau up (tau run starts it too); or target another hub "
            "with: tau context use NAME",
        )
    if plat.agent.pid() is None:
        progress(
            f"warning: the agent of region 'local' is not running (log: {plat.agent.logfile}); "
            "restart it with: tau up"
        )
    return plat.connect()
