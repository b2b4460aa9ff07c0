"""Where a command's CPU goes, by kind of process (issue 30: the suite is CPU-bound on 2
cores, so its time is cut only by cutting CPU somewhere; this says where).

Runs the command, samples ``/proc`` every ``--every`` seconds and adds up the CPU seconds
(user + system) every process on the machine used meanwhile, by kind: Ray's GCS,
raylets, dashboards, task and actor workers, the pytest workers, hubs and agents in
their own processes, PostgreSQL, SeaweedFS, Chromium, the Kubernetes components,
builds... A process that ends between two samples is counted through its parent
(``cutime`` + ``cstime``: what it used after its last sample, or all of it if it was
never seen). Prints a table (to stderr, or into ``--out``); the command's exit status is
its own.

    python -m benchmarks.cpu_share [--every S] [--out FILE] -- COMMAND...
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

__all__ = ["cpu_s", "kind_of", "main"]

_TICK = os.sysconf("SC_CLK_TCK")
# (kind, pattern over "comm\0cmdline"); the first that matches names the process
_KINDS = [
    ("Ray task/actor workers", r"^ray::|\0ray::|default_worker\.py"),
    ("Ray GCS", r"^gcs_server"),
    ("Ray raylets", r"^raylet"),
    ("PostgreSQL", r"^postgres"),
    ("SeaweedFS", r"^weed"),
    ("Chromium", r"^(chrom|headless)"),
    ("Prometheus", r"^(prometheus|promtool)"),
    ("Kubernetes components", r"^(etcd|kube|kwok|kueue|kuberay|containerd|runc|helm|pause)"),
    ("builds (Go, C)", r"^(go|compile|link|asm|cgo|vet|cc1|gcc|ld|as|collect2)$|^(go|compile)\0"),
    ("Ray dashboards and agents", r"dashboard|runtime_env/agent|ray_client_server"),
    ("Ray monitors and `ray start`", r"log_monitor|monitor\.py|ray start|/bin/ray\0"),
    # by the program run, not by paths in its arguments (test directories say "pytest")
    ("pytest (workers, in-process hubs and clients)", r"/pytest\0|exec\(eval\(sys\.stdin"),
    ("hubs and agents (own processes)", r"-m\0taugrid\.(hub|agent)|/tau\0(hub|agent)\0"),
    ("tau CLI", r"/bin/tau\0|-m\0taugrid\.cli"),
    ("pip", r"(^|/)pip3?(\.\d+)?\0|\0-m\0pip\0"),
    ("other Python (job drivers, scripts)", r"^python"),
]


def cpu_s(pid: int | str, *, children: bool = False) -> float:
    """CPU seconds (user + system) ``pid`` has used (with ``children``: what its reaped
    children used); 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    first = 13 if children else 11
    return (int(fields[first]) + int(fields[first + 1])) / _TICK


def kind_of(comm: str, cmdline: str) -> str:
    """The kind a process is counted under (``comm``, then its NUL-joined cmdline)."""
    text = f"{comm}\0{cmdline}"
    for kind, pattern in _KINDS:
        if re.search(pattern, text):
            return kind
    return f"other: {comm}"


class _Sampler:
    """Adds up CPU seconds by kind, from successive ``/proc`` samples."""

    def __init__(self) -> None:
        self.by_kind: dict[str, float] = collections.defaultdict(float)
        self.seen: dict[str, tuple[str, str, float, float]] = {}  # pid → kind, ppid, own, kids

    def sample(self) -> None:
        now: dict[str, tuple[str, str, float, float]] = {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            comm, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat.rsplit(")", 1)[1]
            f = rest.split()
            own, kids = (int(f[11]) + int(f[12])) / _TICK, (int(f[13]) + int(f[14])) / _TICK
            old = self.seen.get(pid)
            kind = kind_of(comm, raw.decode(errors="replace"))  # again: it may have exec'd
            now[pid] = (kind, f[1], own, kids)
            if old:
                self.by_kind[kind] += own - old[2]
                self._reaped(pid, kind, kids - old[3], now)
            else:  # new since the last sample: all it used, and its children that ended
                self.by_kind[kind] += own + kids
        self.seen = now

    def _reaped(self, pid: str, kind: str, kids_delta: float, now: Mapping[str, object]) -> None:
        """What children that ended since the last sample used after it: the parent's
        ``cutime`` growth less what they had been counted for already."""
        gone = self._gone_below(pid, now)
        # each ended process's CPU reached this one's cutime through its ended parents;
        # what was counted of the whole ended subtree is subtracted, so none counts twice
        counted = sum(v[2] + v[3] for v in gone)
        if kids_delta > counted:
            self.by_kind[kind if not gone else gone[0][0]] += kids_delta - counted

    def _gone_below(
        self, pid: str, now: Mapping[str, object]
    ) -> list[tuple[str, str, float, float]]:
        """The ended processes below ``pid``: its ended children, theirs, and so on."""
        ended: dict[str, list[str]] = {}
        for p, v in self.seen.items():
            if p not in now:
                ended.setdefault(v[1], []).append(p)
        out, todo = [], [pid]
        while todo:
            for child in ended.get(todo.pop(), []):
                out.append(self.seen[child])
                todo.append(child)
        return out


def table(by_kind: Mapping[str, float], wall_s: float) -> str:
    total = sum(by_kind.values()) or 1.0
    lines = [
        f"CPU by kind of process over {wall_s:.0f} s of wall time "
        f"({total:.0f} CPU-s, {total / wall_s:.2f} cores busy on average):",
        "| kind | CPU-s | share |",
        "| --- | ---: | ---: |",
    ]
    for kind, s in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        if s >= 0.5:
            lines.append(f"| {kind} | {s:.0f} | {100 * s / total:.1f} % |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--every", type=float, default=2.0, help="seconds between samples")
    p.add_argument("--out", type=Path, help="also write the table here")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("name the command to measure after --")
    sampler, t0 = _Sampler(), time.monotonic()
    baseline = _Sampler()
    baseline.sample()  # processes running before the command are not its cost
    sampler.seen = baseline.seen
    proc = subprocess.Popen(command)
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(args.every):
            sampler.sample()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    rc = proc.wait()
    stop.set()
    thread.join()
    sampler.sample()
    out = table(sampler.by_kind, time.monotonic() - t0)
    if args.out:
        args.out.write_text(out + "\n")
    else:
        print(out, file=sys.stderr)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
