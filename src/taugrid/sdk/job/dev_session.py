"""The program of an interactive session (``tau dev``): ``python -m taugrid.sdk.job.dev_session``.

Runs as the session run's Ray job entrypoint (the run is admitted, placed and released
like any run, and the entrypoint holds the session's GPUs, so the notebook's kernels
see them). From ``TAU_DEV_CONFIG`` (JSON written by ``hub.dev.sessions``):

1. makes the session's working directory (a fresh temporary directory on the node) and
   fills it from the run's latest checkpoint (``tau.latest_checkpoint``) when it is
   brought back, else with the code ``tau dev up -c`` sent (the job's working dir);
2. starts JupyterLab (the ``jupyter`` command the config names, ``taugrid.home.jupyter_binary``)
   bound to this Ray node's own loopback address, never 0.0.0.0, with ``base_url`` the
   hub's path of the session (``/v1/dev/<workspace>/<name>/``) and a random token
   passed in Jupyter's environment. The token goes only into
   ``$TAU_OUTPUT_DIR/dev/status.json`` (uploaded to the run's record while it changes,
   ``record.layout.DEV_STATUS_FILE``), from which the hub's proxy takes it; Jupyter's
   output is copied to the log with the token masked;
3. every ``POLL_S`` asks Jupyter's ``api/status`` (last activity, kernel connections)
   and ``api/terminals`` (open terminals, asked without counting as activity). Idle for
   ``idle_s`` — no activity, no kernel connection, no terminal (``tau dev exec`` and
   ``shell`` are terminals) — it **autostops**: saves the working directory as a
   checkpoint (``tau.checkpoint``), stops Jupyter and exits 0, so the GPUs are released;
4. stopped (``tau dev stop`` cancels the run; the hub warns the attempt first, with
   ``hub.agents.agents.DEV_STOP_GRACE_S`` to go, as a spot reclaim does:
   ``tau.preemption_notice()``), or on SIGTERM, it saves the same way and exits.

``status.json``: ``state`` (``starting | running | saving | autostopped | stopped |
failed``), ``endpoint`` (``http://<node-ip>:<port>``), ``base_url``, ``token``,
``reason``, ``idle_s``, ``last_activity``, ``checkpoint`` (the step saved last),
``attempt`` (the run's attempt that wrote it).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

from taugrid.record import files, jobenv, layout
from taugrid.sdk.job import injob, injob_checkpoint, injob_env

__all__ = ["main"]

POLL_S = 2.0
START_S = 120.0
"""How long Jupyter may take to answer its first ``api/status``."""
STOP_S = 10.0


class _Stop(Exception):
    """SIGTERM: the session was stopped (``tau dev stop``)."""


def _node_ip() -> str:
    """This Ray node's address (every node here binds a loopback address of its own)."""
    import logging

    import ray

    ray.init(address="auto", logging_level=logging.WARNING)
    try:
        me = ray.get_runtime_context().get_node_id()
        for node in ray.nodes():  # type: ignore[no-untyped-call]
            if node["NodeID"] == me:
                return str(node["NodeManagerAddress"])
        raise RuntimeError(f"this Ray node ({me}) is not among ray.nodes()")
    finally:
        ray.shutdown()


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class Session:
    """One Jupyter server and the status file that describes it."""

    def __init__(self, cfg: dict[str, Any], host: str, work: Path) -> None:
        self.cfg, self.host, self.work = cfg, host, work
        self.token = secrets.token_hex(24)
        self.port = _free_port(host)
        self.base_url = str(cfg["base_url"])
        self.proc: subprocess.Popen[bytes] | None = None
        self.state: dict[str, Any] = {}
        self.status_path = injob_env.output_dir() / layout.DEV_STATUS_FILE

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def write(self, **fields: Any) -> None:
        self.state.update(fields, updated_at=time.time())
        doc = {
            **self.state,
            "endpoint": self.endpoint,
            "base_url": self.base_url,
            "token": self.token,
            "idle_s": float(self.cfg["idle_s"]),
            "attempt": injob_env.attempt(),
        }
        self.status_path.parent.mkdir(parents=True, exist_ok=True)
        files.write_json_atomic(self.status_path, doc)

    def start(self) -> None:
        state = self.work.parent / "jupyter-state"
        env = {
            **os.environ,
            "JUPYTER_TOKEN": self.token,
            "JUPYTER_CONFIG_DIR": str(state / "config"),
            "JUPYTER_DATA_DIR": str(state / "data"),
            "JUPYTER_RUNTIME_DIR": str(state / "runtime"),
            "IPYTHONDIR": str(state / "ipython"),
        }
        argv = [
            str(self.cfg["jupyter"]),
            "lab",
            "--no-browser",
            f"--ServerApp.ip={self.host}",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--ServerApp.base_url={self.base_url}",
            f"--ServerApp.root_dir={self.work}",
            "--ServerApp.terminals_enabled=True",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.news_url=",
            *(["--allow-root"] if os.geteuid() == 0 else []),  # a container's root user
        ]
        self.proc = subprocess.Popen(
            argv,
            cwd=self.work,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        threading.Thread(target=self._copy_log, daemon=True).start()
        self.write(state="starting", reason="starting JupyterLab")

    def _copy_log(self) -> None:
        """Jupyter's output to ours, the token masked (Jupyter masks a token it did not
        make; this holds even if it did not)."""
        assert self.proc is not None and self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").replace(self.token, "***")
            sys.stdout.write(f"jupyter: {line}")
            sys.stdout.flush()

    def api(self, path: str) -> Any:
        req = urllib.request.Request(
            f"{self.endpoint}{self.base_url}{path}",
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with code {self.proc.returncode}")
            with contextlib.suppress(OSError, ValueError):
                self.api("api/status")
                self.write(state="running", reason="JupyterLab is up")
                return
            time.sleep(0.3)
        raise RuntimeError(f"JupyterLab did not answer within {START_S:g} s")

    def idle_for(self) -> float:
        """Seconds since the last activity; 0 while a kernel or terminal is open."""
        status = self.api("api/status")
        terminals = self.api("api/terminals?no_track_activity=1")
        if int(status.get("connections", 0)) > 0 or terminals:
            return 0.0
        last = datetime.fromisoformat(str(status["last_activity"]).replace("Z", "+00:00"))
        self.state["last_activity"] = last.timestamp()
        return max(0.0, time.time() - last.timestamp())

    def stop_jupyter(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(STOP_S)


def _die_with_parent() -> None:
    """In Jupyter's process, before exec: SIGTERM when this program dies (Ray SIGKILLs a
    job's process group after its stop grace; Jupyter has a session of its own)."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _restore(work: Path, copy_code: bool) -> int | None:
    """Fill ``work`` from the latest checkpoint; its step, or None when there is none
    (then with the run's code, when ``tau dev up -c`` sent some: the job's working dir)."""
    ckpt = injob_checkpoint.latest_checkpoint()
    if ckpt is None:
        if copy_code:
            shutil.copytree(Path.cwd(), work, dirs_exist_ok=True, symlinks=True)
        return None
    shutil.copytree(
        ckpt, work, dirs_exist_ok=True, ignore=shutil.ignore_patterns(layout.MARKER_FILE)
    )
    return injob_checkpoint.checkpoint_info(ckpt).step


def _save(work: Path) -> int:
    """The working directory as a checkpoint (step: seconds since the epoch, so a later
    save always has a higher step); returns the step."""
    step = int(time.time())
    with injob_checkpoint.checkpoint(step) as d:
        shutil.copytree(work, d, dirs_exist_ok=True, symlinks=True)
    return step


def _terminate(signum: int, frame: object) -> None:
    raise _Stop()


def _watch(s: Session, idle_s: float) -> None:
    """Returns once idle for ``idle_s``."""
    while True:
        try:
            idle = s.idle_for()
        except (OSError, ValueError) as exc:
            if s.proc is not None and s.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with code {s.proc.returncode}") from exc
            idle = 0.0  # a slow answer is not idleness
        if idle >= idle_s:
            return
        if injob.preemption_notice() is not None:  # tau dev stop: the hub warns first
            raise _Stop()
        s.write(state="running")
        time.sleep(min(POLL_S, max(0.2, idle_s / 4)))


def main() -> int:
    cfg: dict[str, Any] = json.loads(os.environ[jobenv.DEV_CONFIG])
    idle_s = float(cfg["idle_s"])
    signal.signal(signal.SIGTERM, _terminate)
    root = Path(tempfile.mkdtemp(prefix="tau-dev-"))
    work = root / "work"
    work.mkdir()
    s = Session(cfg, _node_ip(), work)
    try:
        step = _restore(work, bool(cfg.get("copy_code")))
        print(f"dev: session {cfg['name']}: " + (f"restored step {step}" if step else "new"))
        s.start()
        s.wait_ready()
        print(f"dev: JupyterLab is up on {s.endpoint}{s.base_url} (via the hub)", flush=True)
        _watch(s, idle_s)
        why = f"autostopped: idle for {idle_s / 60:g} min"
        final = "autostopped"
    except _Stop:
        why, final = "stopped (tau dev stop)", "stopped"
    except Exception as exc:  # Jupyter failed: the session's failure, saved all the same
        signal.signal(signal.SIGTERM, _ignore)
        s.stop_jupyter()
        saved = _save(work)
        s.write(state="failed", reason=str(exc), checkpoint=saved)
        print(f"dev: {exc}; working directory saved (step {saved})", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, _ignore)
    s.write(state="saving", reason=why)
    if final == "stopped":  # Ray kills a few seconds after SIGTERM: save first
        saved = _save(work)
        s.stop_jupyter()
    else:  # idle: nothing writes, so stop first for a settled copy
        s.stop_jupyter()
        saved = _save(work)
    s.write(state=final, reason=why, checkpoint=saved)
    print(f"dev: {why}; working directory saved as checkpoint step {saved}", flush=True)
    shutil.rmtree(root, ignore_errors=True)
    return 0


def _ignore(signum: int, frame: object) -> None:
    """A second SIGTERM while saving: finish saving (Ray kills after its grace period)."""


if __name__ == "__main__":
    sys.exit(main())
