"""Metric charts as inline SVG: one chart per metric name, one line per run.

Pure: logged metric rows in, ``Chart`` values out (point lists already scaled to the
chart's box); the template draws them. The x axis is the step when the job logged one,
else the order of logging; a metric with thousands of points is thinned to at most
``MAX_POINTS`` per line, keeping the first and the last.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["Chart", "Series", "charts"]

WIDTH, HEIGHT, PAD = 560.0, 180.0, 6.0
MAX_POINTS = 600


@dataclasses.dataclass(frozen=True)
class Series:
    label: str
    points: str  # "x,y x,y ..." in SVG coordinates
    count: int
    last: float
    index: int  # colour slot

    @property
    def end(self) -> tuple[str, str]:
        """SVG coordinates of the newest point (drawn as a dot: a lone point shows too)."""
        x, _, y = self.points.rpartition(" ")[2].partition(",")
        return x, y


@dataclasses.dataclass(frozen=True)
class Chart:
    name: str
    series: list[Series]
    xmin: float
    xmax: float
    ymin: float
    ymax: float
    width: float = WIDTH
    height: float = HEIGHT
    xlabel: str = "step"


def _xy(rows: Sequence[Mapping[str, Any]]) -> list[tuple[float, float]]:
    pts = [
        (float(r["step"]) if r.get("step") is not None else float(i), float(r["value"]))
        for i, r in enumerate(rows)
    ]
    if len(pts) > MAX_POINTS:
        stride = len(pts) / (MAX_POINTS - 1)
        pts = [pts[int(i * stride)] for i in range(MAX_POINTS - 1)] + [pts[-1]]
    return pts


def _scale(v: float, lo: float, hi: float, size: float, flip: bool) -> float:
    frac = 0.5 if hi == lo else (v - lo) / (hi - lo)
    out = PAD + (1 - frac if flip else frac) * (size - 2 * PAD)
    return round(out, 1)


def charts(
    runs: Iterable[tuple[str, Sequence[Mapping[str, Any]]]], xlabel: str = "step"
) -> list[Chart]:
    """Charts for ``(label, metric rows)`` pairs, one chart per metric name (sorted);
    ``xlabel`` names what ``step`` is (the chart of utilisation over time: minutes)."""
    by_name: dict[str, list[tuple[str, int, list[tuple[float, float]]]]] = {}
    for slot, (label, rows) in enumerate(runs):
        grouped: dict[str, list[Mapping[str, Any]]] = {}
        for r in rows:
            grouped.setdefault(str(r["name"]), []).append(r)
        for name, mine in grouped.items():
            by_name.setdefault(name, []).append((label, slot, _xy(mine)))
    out = []
    for name in sorted(by_name):
        lines = by_name[name]
        xs = [x for _, _, pts in lines for x, _ in pts]
        ys = [y for _, _, pts in lines for _, y in pts]
        x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
        series = [
            Series(
                label,
                " ".join(
                    f"{_scale(x, x0, x1, WIDTH, False)},{_scale(y, y0, y1, HEIGHT, True)}"
                    for x, y in pts
                ),
                len(pts),
                pts[-1][1],
                slot % 6,
            )
            for label, slot, pts in lines
        ]
        out.append(Chart(name, series, x0, x1, y0, y1, xlabel=xlabel))
    return out
