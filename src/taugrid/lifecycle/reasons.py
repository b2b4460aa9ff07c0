"""Failure reasons for people: one line from whatever text an attempt ended with.

An attempt ends with raw text: Ray's job message (which already carries the last
logs), the agent's own log tail appended to it, or an exception's ``str`` that may hold
a whole server-side traceback. ``summary`` turns it into the one line a run's
``reason`` shows — how it ended (``exit code 137: killed (out of memory or a signal)``)
and the last meaningful line (the exception, not a frame of the traceback);
``detail`` keeps the full text with repeated log blocks removed, for the run's events
and the attempt's record. Pure: strings in, strings out.
"""

from __future__ import annotations

import re
import signal

from taugrid.lifecycle import failure_shapes

__all__ = ["detail", "exit_phrase", "last_meaningful_line", "summary"]

_RAY_LOGS = re.compile(
    r"^Job entrypoint command failed with exit code -?\d+, last available logs"
    r"(?: \(truncated to [\d,]+ chars\))?:\s*$"
)
_FRAME = re.compile(
    r"^(File \"|Traceback \(most recent call last\)|During handling of|"
    r"The above exception was|\^+$|~+$|\.\.\.$|raise\b)"
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RAY_PREFIX = re.compile(r"^\((?:[\w.:-]+ )?pid=\d+(?:, ip=[\w.:-]+)?\) ?")
_RAY_REPEAT = re.compile(r"\s*\[repeated \d+x across cluster\].*$")
_TRAIN_RANK = re.compile(r"\[Rank (\d+) Error Snippet\]")
_DOTTED_EXC = re.compile(r"^(?:[A-Za-z_][\w]*\.)+([A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b)")
_MAX = 500


def exit_phrase(exit_code: int | None) -> str | None:
    """How a process with ``exit_code`` ended, for people (None: no exit code)."""
    if exit_code is None:
        return None
    if exit_code in (137, -9):
        return f"exit code {exit_code}: killed (out of memory or a signal)"
    number = exit_code - 128 if exit_code > 128 else -exit_code if exit_code < 0 else 0
    try:
        name = signal.Signals(number).name if number else None
    except ValueError:
        name = None
    return f"exit code {exit_code} (killed by {name})" if name else f"exit code {exit_code}"


def last_meaningful_line(text: str) -> str:
    """The last line that says what went wrong: not blank, not a traceback frame or a
    source line under one, not Ray's "last available logs" header; exception names lose
    their module path (``aiohttp.client_exceptions.ClientConnectorError`` → its class)."""
    for raw in map(_plain, reversed(text.splitlines())):
        line = raw.strip()
        if not line or raw[:1].isspace() or _FRAME.match(line) or _RAY_LOGS.match(line):
            continue
        return _DOTTED_EXC.sub(r"\1", line)
    return ""


def _plain(raw: str) -> str:
    """A log line without Ray's decoration: colour codes, the ``(Actor pid=N)`` prefix of
    forwarded worker output and the ``[repeated Nx across cluster]`` note."""
    return _RAY_REPEAT.sub("", _RAY_PREFIX.sub("", _ANSI.sub("", raw)))


def _worker(text: str) -> str:
    """``rank N: `` when Ray Train says which worker's error ended the run."""
    ranks = _TRAIN_RANK.findall(text)
    return f"rank {ranks[-1]}: " if ranks else ""


def detail(text: str) -> str:
    """``text`` without Ray's log header, and without a trailing block of lines that
    repeats the lines just before it.

    Ray's failed-job message ends with the job's last logs and the agent appends its own
    log tail, so the same lines often come twice in a row: the second copy is removed.
    """
    text = _ANSI.sub("", text)
    lines = [ln for ln in text.strip().splitlines() if not _RAY_LOGS.match(ln.strip())]
    for size in range(len(lines) // 2, 0, -1):
        body = lines[:-size]
        while body and not body[-1].strip():
            body.pop()
        if body[-size:] == lines[-size:]:
            return "\n".join(body).strip()
    return "\n".join(lines).strip()


def summary(kind: str, message: str, exit_code: int | None = None) -> str:
    """One line for a run's ``reason``: a known failure shape said for people
    (``lifecycle.failure_shapes``), else how the attempt ended and what it last said."""
    shaped = failure_shapes.one_line(message)
    if shaped is not None:
        return shaped if len(shaped) <= _MAX else shaped[: _MAX - 1] + "…"
    head = exit_phrase(exit_code) or kind
    text = message.strip()
    first = text.splitlines()[0].strip() if text else ""
    last = last_meaningful_line(text)
    if "Traceback (most recent call last)" in first:  # "context: Traceback ..." on one line
        first = first.split("Traceback (most recent call last)")[0].rstrip(" :")
    # Without an exit code, a multi-line text's first line says what was being done
    # (e.g. "submission failed: ... unreachable") and its last what went wrong.
    if len(text.splitlines()) > 1 and first and last and first != last and exit_code is None:
        line = f"{first.rstrip(' :')}: {last}" if not first.endswith(last) else first
    else:
        line = _worker(text) + (last or first)
    line = re.sub(r"\s+", " ", line).strip()
    if len(line) > _MAX:
        line = line[: _MAX - 1] + "…"
    return f"{head}: {line}" if line else head
