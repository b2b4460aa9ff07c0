"""Test timings from pytest's JUnit XML: CI's report, and the worker order's input.

``python -m tests.timings report TIER=FILE.xml ...`` prints, for each tier, its test
count, outcomes and summed test time, then the 30 slowest tests over all tiers (setup,
call and teardown together, as JUnit counts them). ``.ci/run`` prints it at the end.

(The seconds per worker group that order a parallel run are written by pytest itself,
``tests/workers.py``.)
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

SLOWEST = 30


@dataclasses.dataclass(frozen=True)
class Case:
    """One test case of a JUnit report."""

    module: str
    name: str
    seconds: float
    outcome: str


def cases(path: Path) -> list[Case]:
    """Every test case in ``path`` (a pytest ``--junitxml`` file)."""
    out = []
    for tc in ET.parse(path).getroot().iter("testcase"):
        module = tc.get("classname", "").split(".")
        # pytest writes classname as the dotted module path (plus a class, if any).
        path_parts = [p for p in module if not p[:1].isupper()]
        out.append(
            Case(
                module="/".join(path_parts) + ".py",
                name=tc.get("name", ""),
                seconds=float(tc.get("time", "0") or 0),
                outcome=_outcome(tc),
            )
        )
    return out


def _outcome(tc: ET.Element) -> str:
    for tag in ("failure", "error", "skipped"):
        if tc.find(tag) is not None:
            return {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
    return "passed"


def report(tiers: dict[str, list[Case]]) -> str:
    """Per-tier totals, then the slowest tests over every tier."""
    lines = ["tier        tests  passed  failed  errors  skipped  test-seconds"]
    for tier, cs in tiers.items():
        n: defaultdict[str, int] = defaultdict(int)
        for c in cs:
            n[c.outcome] += 1
        total = sum(c.seconds for c in cs)
        lines.append(
            f"{tier:<10} {len(cs):>6} {n['passed']:>7} {n['failed']:>7} {n['error']:>7}"
            f" {n['skipped']:>8} {total:>13.0f}"
        )
    every = [(tier, c) for tier, cs in tiers.items() for c in cs]
    every.sort(key=lambda tc: -tc[1].seconds)
    lines.append(f"\nthe {SLOWEST} slowest tests (seconds, setup + call + teardown):")
    for tier, c in every[:SLOWEST]:
        lines.append(f"{c.seconds:>8.1f}  {tier:<6} {c.module}::{c.name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """The command line (module docstring)."""
    p = argparse.ArgumentParser(prog="python -m tests.timings")
    sub = p.add_subparsers(dest="cmd", required=True)
    rep = sub.add_parser("report")
    rep.add_argument("tiers", nargs="+", metavar="TIER=FILE.xml")
    args = p.parse_args(argv)
    tiers: dict[str, list[Case]] = {}
    for spec in args.tiers:
        tier, _, file = spec.partition("=")
        path = Path(file)
        tiers[tier] = cases(path) if path.exists() else []
    print(report(tiers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
