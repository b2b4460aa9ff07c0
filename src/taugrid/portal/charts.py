"""Metric charts as inline SVG: one chart per metric name, one line per run.

Pure: logged metric rows in, ``Chart`` and ``Constant`` values out (point lists already
scaled to the chart's box); the template draws them. The x axis is the step when the
job logged one, else the order of logging.

- **Gaps are drawn as gaps.** A line is cut into segments (one ``<polyline>`` each)
  where the step jumps by more than ``GAP_FACTOR`` times the line's median step, or
  goes back (a retried attempt resuming from an older checkpoint): points that never
  reached the hub, or steps never run, are not bridged by a straight line. The chart
  names the holes (``Chart.gaps``); a segment of one point is drawn as a dot.
- **A constant metric is a line of text, not a chart.** When every value of every line
  of a metric is the same, ``charts`` returns a ``Constant`` (name, value, how many
  points) instead of a ``Chart``.
- A metric with thousands of points is thinned to about ``MAX_POINTS`` per line,
  keeping the first and last point of every segment (a gap never disappears).
"""

from __future__ import annotations

import dataclasses
import itertools
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

__all__ = ["Chart", "Constant", "Series", "charts", "segments"]

WIDTH, HEIGHT, PAD = 560.0, 180.0, 6.0
MAX_POINTS = 600
GAP_FACTOR = 5.0  # a step jump this many times the median step is a hole in the line
_MAX_GAPS_SHOWN = 3

Point = tuple[float, float]


@dataclasses.dataclass(frozen=True)
class Series:
    label: str
    segments: list[str]  # each "x,y x,y ..." in SVG coordinates: one polyline
    count: int  # points logged (before thinning)
    last: float
    index: int  # colour slot

    @property
    def end(self) -> tuple[str, str]:
        """SVG coordinates of the newest point (drawn as a dot: a lone point shows too)."""
        x, _, y = self.segments[-1].rpartition(" ")[2].partition(",")
        return x, y


@dataclasses.dataclass(frozen=True)
class Chart:
    constant: ClassVar[bool] = False
    name: str
    series: list[Series]
    xmin: float
    xmax: float
    ymin: float
    ymax: float
    gaps: list[tuple[float, float]] = dataclasses.field(default_factory=list)  # x from, to
    width: float = WIDTH
    height: float = HEIGHT
    xlabel: str = "step"


@dataclasses.dataclass(frozen=True)
class Constant:
    """A metric whose every value is ``value``: shown as one line, not a chart."""

    constant: ClassVar[bool] = True
    name: str
    value: float
    count: int  # points, all lines together
    lines: int  # how many runs logged it


def _xy(rows: Sequence[Mapping[str, Any]]) -> list[Point]:
    return [
        (float(r["step"]) if r.get("step") is not None else float(i), float(r["value"]))
        for i, r in enumerate(rows)
    ]


def segments(pts: Sequence[Point]) -> list[list[Point]]:
    """``pts`` cut where the x step goes back or jumps by more than ``GAP_FACTOR`` times
    the median forward step (points at the same step stay together)."""
    forward = [b[0] - a[0] for a, b in itertools.pairwise(pts) if b[0] > a[0]]
    limit = GAP_FACTOR * statistics.median(forward) if forward else float("inf")
    out: list[list[Point]] = []
    for i, p in enumerate(pts):
        dx = p[0] - pts[i - 1][0] if i else 0.0
        if not out or dx < 0 or dx > limit:
            out.append([])
        out[-1].append(p)
    return out


def _thin(seg: list[Point], budget: int) -> list[Point]:
    """At most ``budget`` (≥ 2) points of ``seg``, evenly spaced, first and last kept."""
    if len(seg) <= budget:
        return seg
    stride = len(seg) / (budget - 1)
    return [seg[int(i * stride)] for i in range(budget - 1)] + [seg[-1]]


def _scale(v: float, lo: float, hi: float, size: float, flip: bool) -> float:
    frac = 0.5 if hi == lo else (v - lo) / (hi - lo)
    out = PAD + (1 - frac if flip else frac) * (size - 2 * PAD)
    return round(out, 1)


@dataclasses.dataclass(frozen=True)
class _Line:
    label: str
    slot: int
    pts: list[Point]
    segs: list[list[Point]]


def _series(line: _Line, box: tuple[float, float, float, float]) -> Series:
    x0, x1, y0, y1 = box
    drawn = [
        " ".join(
            f"{_scale(x, x0, x1, WIDTH, False)},{_scale(y, y0, y1, HEIGHT, True)}"
            for x, y in _thin(seg, max(2, MAX_POINTS * len(seg) // len(line.pts)))
        )
        for seg in line.segs
    ]
    return Series(line.label, drawn, len(line.pts), line.pts[-1][1], line.slot % 6)


def _gaps(lines: Sequence[_Line]) -> list[tuple[float, float]]:
    """The x ranges no line covers between two of its segments (forward jumps only)."""
    found = set()
    for line in lines:
        for a, b in itertools.pairwise(line.segs):
            if b[0][0] > a[-1][0]:
                found.add((a[-1][0], b[0][0]))
    return sorted(found)[:_MAX_GAPS_SHOWN]


def _one(name: str, lines: list[_Line], xlabel: str) -> Chart | Constant:
    xs = [x for line in lines for x, _ in line.pts]
    ys = [y for line in lines for _, y in line.pts]
    if min(ys) == max(ys):
        return Constant(name, ys[0], len(ys), len(lines))
    box = (min(xs), max(xs), min(ys), max(ys))
    series = [_series(line, box) for line in lines]
    return Chart(name, series, *box, gaps=_gaps(lines), xlabel=xlabel)


def charts(
    runs: Iterable[tuple[str, Sequence[Mapping[str, Any]]]], xlabel: str = "step"
) -> list[Chart | Constant]:
    """Charts for ``(label, metric rows)`` pairs, one per metric name (sorted); a metric
    whose values are all equal is a ``Constant``. ``xlabel`` names what ``step`` is (the
    chart of utilisation over time: minutes)."""
    by_name: dict[str, list[_Line]] = {}
    for slot, (label, rows) in enumerate(runs):
        grouped: dict[str, list[Mapping[str, Any]]] = {}
        for r in rows:
            grouped.setdefault(str(r["name"]), []).append(r)
        for name, mine in grouped.items():
            pts = _xy(mine)
            by_name.setdefault(name, []).append(_Line(label, slot, pts, segments(pts)))
    return [_one(name, by_name[name], xlabel) for name in sorted(by_name)]
