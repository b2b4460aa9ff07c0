"""Known shapes of Ray and Kubernetes failure texts, each said in one line for people.

An attempt can end with text from deep inside Ray (a dead JobSupervisor actor's
tab-indented dump, a Ray Train worker's ``RayTaskError`` with an object repr) or from
Kubernetes (a pod stuck pulling its image, a ResourceQuota refusal). ``one_line``
finds the first shape that matches and says what happened, where, and the user's own
last error line when there is one: ``node lost: node 3f2a9c01d4e5 (127.0.0.2) stopped
sending heartbeats``. ``None`` when no shape matches (``reasons.summary`` then falls
back to the exit code and the last meaningful line). The texts are Ray 2.60's
(``ray/exceptions.py``, the GCS and raylet) and the kubelet's and API server's own.
Pure: a string in, a string out.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from taugrid.lifecycle import node_ids

__all__ = ["one_line"]

_NODE = r"(?P<node>[0-9a-f]{8,})"
_IP = r"(?P<ip>\d{1,3}(?:\.\d{1,3}){3})"


@dataclasses.dataclass(frozen=True)
class _Shape:
    pattern: re.Pattern[str]
    say: Callable[[re.Match[str], str], str]


def _field(text: str, name: str) -> str:
    """A ``\\tname: value`` line of Ray's actor-death dump ("" when absent)."""
    m = re.search(rf"^\s*{name}: (\S+)", text, re.M)
    return m.group(1) if m else ""


def _user_error(text: str) -> str:
    """The last ``SomeError: message`` line the user's code raised, if any."""
    found = re.findall(r"^(?:[\w.]+\.)?([A-Z]\w*(?:Error|Exception)): (.+)$", text, re.M)
    mine = [f"{e}: {msg.strip()}" for e, msg in found if not e.startswith(("Ray", "Actor"))]
    return mine[-1] if mine else ""


def _where(node: str, ip: str) -> str:
    return f"node {node_ids.short(node)}" + (f" ({ip})" if ip else "")


def _heartbeats(m: re.Match[str], _text: str) -> str:
    return (
        f"node lost: {_where(m['node'], m['ip'])} stopped sending heartbeats "
        "(its raylet crashed, was killed, or was too busy to answer)"
    )


def _node_died(m: re.Match[str], text: str) -> str:
    why = re.search(r"node was terminated(?: unexpectedly)?: ?(.+)", text)
    cause = why.group(1).strip().rstrip(".") if why else "its raylet died"
    return f"node lost: {_where(m['node'], _field(text, 'ip'))}: {cause}"


def _oom(m: re.Match[str], text: str) -> str:
    mem = re.search(
        rf"Memory on the node \(IP: {_IP}, ID: {_NODE}\).*?was (?P<used>[\d.]+\w?B) / "
        r"(?P<total>[\d.]+\w?B)",
        text,
        re.S,
    )
    where = (
        f" on {_where(mem['node'], mem['ip'])}: {mem['used']} of {mem['total']} used" if mem else ""
    )
    return f"out of memory{where}; Ray killed the worker (ask for more: compute.memory)"


def _worker_died(m: re.Match[str], text: str) -> str:
    who = _field(text, "class_name") or "a worker"
    pid, ip = _field(text, "pid"), _field(text, "ip")
    at = f" (pid {pid}" + (f" on {ip}" if ip else "") + ")" if pid else ""
    detail = re.sub(r"\s+", " ", m["detail"]).strip().rstrip(".")
    mine = _user_error(text)
    return f"worker exited: {who}{at}, {m['type']}: {detail}" + (
        f"; last error: {mine}" if mine else ""
    )


def _task_error(m: re.Match[str], text: str) -> str:
    task = m["task"].split(".")[0].lstrip("_").split("__")[0]  # _Class__method: Class
    mine = _user_error(text) or m["exc"]
    return f"worker exited: {task} (pid {m['pid']} on {m['ip']}): {mine}"


def _image(m: re.Match[str], text: str) -> str:
    image = re.search(r'image "([^"]+)"', text)
    name = f" {image.group(1)}" if image else ""
    return (
        f"image pull failed ({m['state']}):{name}: the node cannot pull it "
        "(check the image name and tag, and that the registry is reachable from the node)"
    )


def _quota(m: re.Match[str], _text: str) -> str:
    return "quota exceeded: " + m["what"].strip()


_SHAPES = (
    _Shape(
        re.compile(
            rf"node with node id: {_NODE} and address: {_IP}.*?has been marked dead because "
            r"the detector\s+has missed too many heartbeats",
            re.S,
        ),
        _heartbeats,
    ),
    _Shape(re.compile(rf"The actor died because its node has died\. Node Id: {_NODE}"), _node_died),
    _Shape(re.compile(r"OutOfMemoryError|killed due to the node running low on memory"), _oom),
    _Shape(
        re.compile(
            r"The actor is dead because its worker process has died\. Worker exit type: "
            r"(?P<type>\w+) Worker exit detail: (?P<detail>[^.]+\.)"
        ),
        _worker_died,
    ),
    _Shape(
        re.compile(
            rf"RayTaskError\((?P<exc>\w+)\): ray::(?P<task>[\w.]+)\(\) \(pid=(?P<pid>\d+), "
            rf"ip={_IP}"
        ),
        _task_error,
    ),
    _Shape(re.compile(r"\b(?P<state>ErrImagePull|ImagePullBackOff|InvalidImageName)\b"), _image),
    _Shape(
        re.compile(r"(?P<what>exceeded quota: .+?|insufficient quota for .+?)(?:$|\n|\. )", re.M),
        _quota,
    ),
)


def one_line(text: str) -> str | None:
    """What ``text`` says happened, in one line, if it has a known shape."""
    for shape in _SHAPES:
        m = shape.pattern.search(text)
        if m is not None:
            return re.sub(r"\s+", " ", shape.say(m, text)).strip()
    return None
