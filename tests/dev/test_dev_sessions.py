"""``tau dev`` on the embedded platform: real hub, agent, Ray, JupyterLab and Chromium.

One session goes through its life: ``up`` (a run of kind ``dev`` holding its GPU),
``exec`` and ``shell`` (on a pseudo-terminal) through the hub's door to Jupyter's
terminals (output, exit status), Jupyter's REST and kernel websocket through the door
with the bearer token (and nothing without it), the browser signed in by the ``open``
URL's ticket seeing JupyterLab, then **autostop** when idle (saved, GPU released),
``up`` again with the files back, and ``stop`` saving the same way. The Jupyter token
is in the record's status file only, never in a log or a view; Jupyter listens on the
Ray node's address only.
"""

from __future__ import annotations

import json
import select
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import chromium
from tests.cli import platform_env as pe
from tests.dev import jupyter_env

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(600)]

IP = "127.0.36.2"
IDLE_MIN = 0.5  # 30 s: more than two CLI calls take on a loaded machine (load average 20 in CI)
WAIT_S = 120.0


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    home = tmp_path_factory.mktemp("tau-home")
    e = pe.home_env(home, IP)
    e["TAU_JUPYTER"] = jupyter_env.jupyter_binary()
    up = pe.tau(e, "up", cwd=home)
    assert up.returncode == 0, up.stderr + up.stdout
    try:
        yield e
    finally:
        down = pe.tau(e, "down", cwd=home)
        assert down.returncode == 0, down.stderr
        time.sleep(1)
        assert not pe.ray_left(IP).strip()
        left = subprocess.run(["pgrep", "-af", f"ServerApp.ip={IP}"], capture_output=True)
        assert not left.stdout.strip(), f"Jupyter left running: {left.stdout!r}"


def _json(env: dict[str, str], *args: str) -> Any:
    out = pe.tau(env, *args, "-o", "json")
    assert out.returncode == 0, out.stderr + out.stdout
    return json.loads(out.stdout)


def _hub(env: dict[str, str]) -> tuple[str, str]:
    doc = json.loads((Path(env["TAU_HOME"]) / "credentials.json").read_text())
    return str(doc["hub_url"]).rstrip("/"), str(doc["token"])


def _wait_state(env: dict[str, str], name: str, states: set[str]) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while True:
        (s,) = [s for s in _json(env, "dev", "list") if s["name"] == name]
        if s["state"] in states or time.monotonic() > deadline:
            assert s["state"] in states, s
            return dict(s)
        time.sleep(0.5)


def _kernel_says(url: str, token: str, path: str) -> str:
    """Start a kernel through the door, run ``print(6*7)`` over its websocket."""
    from websockets.sync import client as wsc

    auth = {"Authorization": f"Bearer {token}"}
    k = httpx.post(f"{url}{path}api/kernels", headers=auth, json={}, timeout=60).json()
    session, msg_id = uuid.uuid4().hex, uuid.uuid4().hex
    ws_url = f"{url.replace('http', 'ws', 1)}{path}api/kernels/{k['id']}/channels"
    out = ""
    try:
        with wsc.connect(ws_url, additional_headers=auth, open_timeout=30) as conn:
            header = {"msg_id": msg_id, "username": "t", "session": session}
            header |= {"msg_type": "execute_request", "version": "5.3"}
            content = {"code": "print(6*7)", "silent": False, "store_history": False}
            content |= {"user_expressions": {}, "allow_stdin": False}
            msg = {"header": header, "parent_header": {}, "metadata": {}, "content": content}
            conn.send(json.dumps({**msg, "channel": "shell", "buffers": []}))
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and "42" not in out:
                got = json.loads(conn.recv(timeout=60))
                if got.get("msg_type") == "stream" and got["parent_header"].get("msg_id") == msg_id:
                    out += got["content"]["text"]
    finally:
        httpx.delete(f"{url}{path}api/kernels/{k['id']}", headers=auth, timeout=30)
    return out


def _shell_says(env: dict[str, str], name: str, keys: bytes) -> str:
    """``tau dev shell NAME`` on a pseudo-terminal, typing ``keys``; what it printed."""
    import os
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen([pe.TAU, "dev", "shell", name], env=env, stdin=slave, stdout=slave)
    os.close(slave)
    out = b""
    try:
        time.sleep(2)  # the terminal's shell starts
        os.write(master, keys)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            ready = select.select([master], [], [], 0.5)[0]
            if ready:
                try:
                    out += os.read(master, 65536)
                except OSError:  # EIO: the tty's other side closed, tau exited
                    break
        assert proc.wait(10) == 0, out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return out.decode("utf-8", "replace")


def _browser_sees_lab(browser: Any, url: str) -> str:
    """The title of the page a fresh browser context gets at ``url`` once the lab loaded."""
    ctx = browser.new_context()
    try:
        page = ctx.new_page()
        page.set_default_timeout(60_000)
        page.goto(url)
        page.wait_for_selector("#jp-main-dock-panel")
        page.wait_for_selector(".jp-Launcher")  # the lab's launcher, so its API calls worked
        return str(page.title())
    finally:
        ctx.close()


def test_session_lifecycle(env: dict[str, str], request: pytest.FixtureRequest) -> None:
    url, token = _hub(env)
    t0 = time.monotonic()
    s = _json(env, "dev", "up", "nb", "--gpus", "1", "--idle-minutes", str(IDLE_MIN))
    up_s = time.monotonic() - t0
    assert s["state"] == "running", s
    path = s["path"]
    runs = _json(env, "run", "list")
    (run,) = [r for r in runs if r["id"] == s["run_id"]]
    assert run["kind"] == "dev" and run["gpus"] == 1 and run["state"] == "running"

    # exec: output and exit status, through the hub and Jupyter's terminal websocket
    ex = pe.tau(
        env, "dev", "exec", "nb", "--", "sh", "-c", "echo kept > notes.txt; echo hi; exit 3"
    )
    assert ex.returncode == 3, ex.stderr + ex.stdout
    assert ex.stdout.strip() == "hi"

    # shell: an interactive terminal on a tty, until the shell exits
    assert "42" in _shell_says(env, "nb", b"echo $((6*7))\rexit\r")

    # the door: REST and a kernel's websocket with the bearer token; nothing without it
    got = httpx.get(
        f"{url}{path}api/contents/notes.txt", headers={"Authorization": f"Bearer {token}"}
    )
    assert got.status_code == 200 and got.json()["content"] == "kept\n"
    assert httpx.get(f"{url}{path}api/contents/notes.txt").status_code == 401
    bad = {"Authorization": "Bearer tau_not-a-token"}
    assert httpx.get(f"{url}{path}api/contents", headers=bad).status_code == 401
    assert "42" in _kernel_says(url, token, path)

    # the browser: the open URL's ticket signs it in once; it sees JupyterLab
    link = pe.tau(env, "dev", "open", "nb")
    assert link.returncode == 0, link.stderr
    if chromium.CHROMIUM.exists():  # the session's one browser (tests/chromium.py)
        browser = request.getfixturevalue("browser")
        assert "JupyterLab" in _browser_sees_lab(browser, link.stdout.strip())
    assert httpx.get(link.stdout.strip()).status_code == 401  # used: worth nothing now

    # the Jupyter token: in the record's status file only; Jupyter on the node's address
    home = Path(env["TAU_HOME"])
    status = sorted(home.glob(f"**/{s['run_id']}/dev/status.json"))
    assert status, "no dev/status.json in the run's record"
    doc = json.loads(status[0].read_text())
    assert doc["endpoint"].startswith(f"http://{IP}:"), doc["endpoint"]
    jt = doc["token"]
    assert jt not in json.dumps(_json(env, "dev", "list"))
    logs = [p for p in home.rglob("*.log") if p.is_file()]
    assert logs and not [p for p in logs if jt in p.read_text(errors="replace")]

    # autostop: idle, saved, the GPU released; up brings it back with the files
    s = _wait_state(env, "nb", {"autostopped"})
    assert "autostopped" in s["reason"] and s["checkpoint"], s
    run = _json(env, "run", "status", s["run_id"])
    assert run["state"] == "succeeded", run["state"]
    s = _json(env, "dev", "up", "nb")
    assert s["state"] == "running", s
    back = pe.tau(env, "dev", "exec", "nb", "--", "cat", "notes.txt")
    assert back.returncode == 0 and back.stdout.strip() == "kept", back.stderr + back.stdout

    # stop saves the same way
    assert pe.tau(env, "dev", "exec", "nb", "--", "sh", "-c", "echo 2 > more.txt").returncode == 0
    s = _json(env, "dev", "stop", "nb")
    s = _wait_state(env, "nb", {"stopped"})
    s = _json(env, "dev", "up", "nb")
    back = pe.tau(env, "dev", "exec", "nb", "--", "cat", "more.txt")
    assert back.stdout.strip() == "2", back.stderr + back.stdout
    pe.tau(env, "dev", "stop", "nb")
    _wait_state(env, "nb", {"stopped"})
    print(f"tau dev up -> running: {up_s:.1f} s")
