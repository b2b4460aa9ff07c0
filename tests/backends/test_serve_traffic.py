"""``backends.programs.serve_traffic.summarise``: requests/s and latency from Ray Serve's proxy
access log (lines in the exact format Ray 2.60's proxy writes)."""

from __future__ import annotations

import datetime as dt

from taugrid.backends.programs import serve_traffic

_FMT = "INFO {ts} proxy 127.0.28.2 af6b2ff7-0f27-43c0-8413-3f189f9fcf47 -- {req} {ms}ms"


def _line(at: float, req: str, ms: float) -> str:
    ts = dt.datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    return _FMT.format(ts=ts, req=req, ms=ms)


def test_counts_only_the_apps_route_within_the_window() -> None:
    now = 1_796_154_130.0
    lines = [_line(now - 1 - i * 0.1, "POST /digits 200", 10.0 + i) for i in range(60)]
    lines += [_line(now - 2, "POST /digits/batch 503", 500.0)]
    lines += [_line(now - 2, "POST /other 200", 1.0), _line(now - 2, "GET /digitsx 200", 1.0)]
    lines += [_line(now - serve_traffic.WINDOW_S - 5, "POST /digits 200", 999.0)]
    lines += ["INFO 2026-12-01 19:41:48,853 proxy 127.0.28.2 -- Proxy starting", ""]
    got = serve_traffic.summarise(lines, "/digits", now)
    assert got["requests_per_s"] == round(61 / serve_traffic.WINDOW_S, 2)
    assert got["errors"] == 1
    assert got["p50_ms"] == 40.0 and got["p99_ms"] == 69.0  # index 59 of 61: the 503 is the max


def test_no_requests_means_zero_rate_and_no_latency() -> None:
    got = serve_traffic.summarise([], "/digits", 0.0)
    assert got["requests_per_s"] == 0.0 and got["p50_ms"] is None and got["p99_ms"] is None
