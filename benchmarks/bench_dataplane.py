"""Data plane benchmark: transfer throughput and probe accuracy vs the shaped link rate.

Two network namespaces joined by a veth pair shaped with kernel ``tbf`` (``lab.net``),
for several rates (and one link with 20 ms of user-space RTT). Per link: the probe's
throughput and RTT (3 measurements, 1.5 s payload each) and one sha256-verified
transfer of about 4 s worth of data through the agent's data server
(``agent.data.dataserver`` → ``dataplane.transfer``). Needs root.

    python -m benchmarks.bench_dataplane [--quick] [--no-write]

Writes the "## Multi-region: transfers and probes" section of docs/BENCHMARKS.md
(``--quick``: one link, printed only; skipped without root).
"""

from __future__ import annotations

import argparse
import os
import platform
import secrets
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks import report
from taugrid.agent.data import dataserver, probes
from taugrid.dataplane import manifest, transfer
from taugrid.lab import net

__all__ = ["main"]

CASES = ((50.0, 0.0), (100.0, 0.0), (100.0, 20.0), (200.0, 0.0), (400.0, 0.0))


def _case(mbit: float, rtt_ms: float, work: Path) -> dict[str, float]:
    n = net.Net(f"tb{secrets.token_hex(2)}", ("a", "b"), (net.LinkSpec("a", "b", mbit, rtt_ms),))
    n.up()
    try:
        addr = n.address("a", "b")
        delays = {addr: rtt_ms / 1000}
        psrv = probes.ProbeServer([addr], 8870, n.ns("a"), delays).start()
        try:
            ms = [probes.measure(addr, 8870, n.ns("b"), duration_s=1.5) for _ in range(3)]
        finally:
            psrv.stop()
        size = int(mbit * 1e6 / 8 * 4)
        src_dir = work / f"src-{mbit:g}-{rtt_ms:g}"
        src_dir.mkdir(parents=True)
        with (src_dir / "blob").open("wb") as fh:
            for _ in range(size // 10**6):
                fh.write(os.urandom(10**6))
        dsrv = dataserver.DataServer(work, [addr], 8871, n.ns("a"), None, delays).start()
        dsrv.serve({"bench@v1": src_dir.name})
        try:
            res = transfer.fetch(
                transfer.Source(addr, 8871, n.ns("b")),
                "bench@v1",
                manifest.scan(src_dir),
                work / f"dst-{mbit:g}-{rtt_ms:g}",
            )
        finally:
            dsrv.stop()
    finally:
        n.down()
    tput = [m["throughput_mbps"] for m in ms]
    return {
        "mbit": mbit,
        "rtt_ms": rtt_ms,
        "probe_mbps": statistics.mean(tput),
        "probe_spread": max(tput) - min(tput),
        "probe_rtt_ms": statistics.median(m["rtt_ms"] for m in ms),
        "size_mb": size / 1e6,
        "transfer_mbps": res.rate_bps * 8 / 1e6,
        "transfer_s": res.seconds,
    }


def _section(rows: list[dict[str, float]], took: float) -> str:
    lines = [
        "## Multi-region: transfers and probes",
        "",
        "`python -m benchmarks.bench_dataplane` (root): two network namespaces, one veth",
        "link shaped with kernel `tbf` at each rate (RTT added in user space by the",
        "servers); probe = mean of 3 TCP payload probes of 1.5 s (first 25 % discarded);",
        "transfer = one sha256-verified copy of ~4 s of data through the agent's data",
        f"server. {platform.node()}, {os.cpu_count()} CPUs (shared), {took:.0f} s in all.",
        "",
        "| shaped | RTT set | probe Mbit/s (spread) | probe/shaped | probe RTT ms "
        "| transfer MB | transfer Mbit/s | transfer/shaped |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['mbit']:g} Mbit/s | {r['rtt_ms']:g} ms | {r['probe_mbps']:.1f} "
            f"({r['probe_spread']:.1f}) | {r['probe_mbps'] / r['mbit']:.1%} "
            f"| {r['probe_rtt_ms']:.2f} | {r['size_mb']:.0f} | {r['transfer_mbps']:.1f} "
            f"| {r['transfer_mbps'] / r['mbit']:.1%} |"
        )
    lines += [
        "",
        "Measured rates are TCP payload (goodput): about 4-5 % of a shaped link goes to",
        "Ethernet/IP/TCP headers, so ~95 % is the ceiling. Placement uses the probe value",
        "as the link's throughput, so a transfer estimate is size / probe rate + RTT.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="one link, printed only")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_dataplane: skipped (needs root for network namespaces and tbf)")
        return
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [_case(mbit, rtt, Path(tmp)) for mbit, rtt in (CASES[1:2] if args.quick else CASES)]
    section = _section(rows, time.time() - t0)
    print(section)
    if not (args.no_write or args.quick):
        report.write_section(section)


if __name__ == "__main__":
    main()
