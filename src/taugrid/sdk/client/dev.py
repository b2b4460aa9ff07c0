"""SDK side of ``tau dev``: interactive sessions over the hub's ``/v1/sessions`` API, and
commands and shells in a session through the hub's door (``/v1/dev/<ws>/<name>/``,
``hub.dev.proxy``) to Jupyter's terminals: ``POST api/terminals`` makes one, its
websocket (``terminals/websocket/<id>``, JSON frames ``["stdin", text]``,
``["stdout", text]``, ``["set_size", rows, cols]``, ``["disconnect", code]``) carries
the tty, ``DELETE api/terminals/<id>`` ends it. A terminal counts as activity, so a
session does not autostop under a running ``exec`` or an open ``shell``.

``exec`` runs the command in the session's shell between two markers the shell prints
(``TAUSTART_<nonce>``, ``TAUEND_<nonce> <status>``) with the tty's echo off, and returns
what came between and the status. The payload model and the tau.yaml loader are imported
by ``up`` only.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import secrets
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from taugrid.sdk.client import client

__all__ = ["exec_command", "open_url", "session", "sessions", "shell", "stop", "up"]

EXEC_TIMEOUT_S = 3600.0


def up(
    cli: client.Client,
    name: str,
    *,
    workspace: str | None = None,
    gpus: float | None = None,
    idle_minutes: float | None = None,
    config: str | None = None,
) -> dict[str, Any]:
    """Start session ``name`` (or bring it back from its latest checkpoint)."""
    from taugrid import payloads as wire

    submit = None
    if config is not None:
        from taugrid.sdk.client import submit as sub

        prepared = sub.prepare(None, config)
        submit = wire.SubmitRequest(
            tau_yaml=prepared.text,
            filename=str(prepared.path),
            workspace=workspace,
            code_zip_b64=base64.b64encode(prepared.code_zip).decode(),
        )
    body = wire.DevUpRequest(
        name=name, workspace=workspace, submit=submit, gpus=gpus, idle_minutes=idle_minutes
    )
    out: dict[str, Any] = cli.request("POST", "/v1/sessions", json=body.model_dump(mode="json"))
    return out


def _params(workspace: str | None) -> dict[str, str]:
    return {"workspace": workspace} if workspace else {}


def sessions(cli: client.Client, workspace: str | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = cli.request("GET", "/v1/sessions", params=_params(workspace))
    return out


def session(cli: client.Client, name: str, workspace: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = cli.request("GET", f"/v1/sessions/{name}", params=_params(workspace))
    return out


def stop(cli: client.Client, name: str, workspace: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = cli.request(
        "POST", f"/v1/sessions/{name}/stop", params=_params(workspace)
    )
    return out


def open_url(cli: client.Client, name: str, workspace: str | None = None) -> str:
    """A URL that signs a browser in to the session once (a short-lived ticket)."""
    out: dict[str, Any] = cli.request(
        "POST", f"/v1/sessions/{name}/ticket", params=_params(workspace)
    )
    return str(out["url"])


def wait_running(
    cli: client.Client, name: str, workspace: str | None = None, timeout_s: float = 300.0
) -> dict[str, Any]:
    """The session once it serves; ``UserError``-like ``ApiError`` is the caller's."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = session(cli, name, workspace)
        if got["state"] == "running" or got["state"] in ("autostopped", "stopped", "failed"):
            return got
        if time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def _door(s: dict[str, Any]) -> str:
    return str(s["path"])


@contextlib.contextmanager
def _terminal(cli: client.Client, s: dict[str, Any]) -> Iterator[Any]:
    """A Jupyter terminal of session ``s`` and its websocket, ended on exit."""
    from websockets.sync import client as wsc

    made: dict[str, Any] = cli.request("POST", f"{_door(s)}api/terminals")
    term = str(made["name"])
    url = cli.config.url.rstrip("/").replace("http", "ws", 1)
    try:
        with wsc.connect(
            f"{url}{_door(s)}terminals/websocket/{term}",
            additional_headers={"Authorization": f"Bearer {cli.config.token}"},
            open_timeout=30,
            max_size=None,
        ) as conn:
            yield conn
    finally:
        with contextlib.suppress(client.ApiError, client.HubUnreachable):
            cli.request("DELETE", f"{_door(s)}api/terminals/{term}")


def exec_command(
    cli: client.Client,
    name: str,
    argv: list[str],
    workspace: str | None = None,
    write: Callable[[str], None] | None = None,
    timeout_s: float = EXEC_TIMEOUT_S,
) -> tuple[int, str]:
    """Run ``argv`` in the session's shell; returns (exit status, output). ``write``
    gets the output as it comes."""
    s = session(cli, name, workspace)
    nonce = secrets.token_hex(6)
    start, end = f"TAUSTART_{nonce}", f"TAUEND_{nonce}"
    line = (
        f"stty -echo; printf '\\n%s_%s\\n' TAUSTART {nonce}; {shlex.join(argv)}; "
        f"printf '\\n%s_%s %d\\n' TAUEND {nonce} $?\r"
    )
    done = re.compile(rf"\r?\n{end} (\d+)\r?\n")
    buf, shown = "", 0
    deadline = time.monotonic() + timeout_s
    with _terminal(cli, s) as conn:
        conn.send(json.dumps(["stdin", line]))
        while time.monotonic() < deadline:
            try:
                raw = conn.recv(timeout=max(0.1, deadline - time.monotonic()))
            except TimeoutError:
                break
            msg = json.loads(raw)
            if msg[0] == "disconnect":
                break
            if msg[0] != "stdout":
                continue
            buf += msg[1]
            at = buf.find(start + "\r\n")
            if at < 0:
                at = buf.find(start + "\n")
            if at < 0:
                continue
            body = buf[at + len(start) :].lstrip("\r").removeprefix("\n")
            m = done.search(body)
            text = body[: m.start()] if m else body[: max(0, len(body) - len(end) - 16)]
            if write is not None and len(text) > shown:
                write(text[shown:].replace("\r\n", "\n"))
                shown = len(text)
            if m:
                return int(m.group(1)), text.replace("\r\n", "\n")
    raise TimeoutError(f"the command did not finish within {timeout_s:g} s")


def shell(cli: client.Client, name: str, workspace: str | None = None) -> None:
    """An interactive terminal in the session on this tty, until the shell exits."""
    import os
    import shutil
    import termios
    import threading
    import tty

    s = session(cli, name, workspace)
    fd = sys.stdin.fileno()
    old = termios.tcgetattr(fd) if os.isatty(fd) else None
    with _terminal(cli, s) as conn:
        size = shutil.get_terminal_size()
        conn.send(json.dumps(["set_size", size.lines, size.columns]))
        stop_ = threading.Event()

        def pump_in() -> None:
            while not stop_.is_set():
                data = os.read(fd, 1024)
                if not data:
                    return
                with contextlib.suppress(Exception):
                    conn.send(json.dumps(["stdin", data.decode("utf-8", "replace")]))

        try:
            if old is not None:
                tty.setraw(fd)
            threading.Thread(target=pump_in, daemon=True).start()
            for raw in conn:
                msg = json.loads(raw)
                if msg[0] == "stdout":
                    sys.stdout.write(msg[1])
                    sys.stdout.flush()
                elif msg[0] == "disconnect":
                    break
        finally:
            stop_.set()
            if old is not None:
                termios.tcsetattr(fd, termios.TCSADRAIN, old)
