"""Shared helpers of the simulator benchmarks: machine line, Markdown tables, sections, plots.

``write_section(title, body)`` replaces (or appends) the ``## <title>`` section of
docs/BENCHMARKS.md and leaves every other section alone. Plots use matplotlib's Agg
backend and land in docs/img/; without matplotlib the tables are still written.
"""

from __future__ import annotations

import os
import pathlib
import platform
import re
from collections.abc import Mapping, Sequence

__all__ = ["DOC", "IMG", "machine", "plot_lines", "table", "write_section"]

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "BENCHMARKS.md"
IMG = DOC.parent / "img"


def machine() -> str:
    return (
        f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f} at the end (shared machine, one process)"
    )


def table(header: Sequence[str], rows: Sequence[Sequence[object]], align: str = "") -> str:
    align = align or "l" + "r" * (len(header) - 1)
    marks = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(marks) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_section(title: str, body: str, doc: pathlib.Path = DOC) -> None:
    """Replace the ``## title`` section (up to the next ``## ``) or append it."""
    section = f"## {title}\n\n{body.rstrip()}\n"
    text = doc.read_text() if doc.exists() else "# Benchmarks\n\nResults of `benchmarks/`.\n"
    pattern = re.compile(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text).rstrip("\n") + "\n"
    else:
        text = text.rstrip("\n") + "\n\n" + section
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(text)


def plot_lines(
    name: str,
    series: Mapping[str, tuple[Sequence[float] | Sequence[str], Sequence[float]]],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    bar: bool = False,
) -> str | None:
    """Save ``docs/img/<name>.png``; returns its Markdown image line (None without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, (xs, ys) in series.items():
        if bar:
            ax.bar(list(map(str, xs)), ys, label=label)
        else:
            ax.plot(xs, ys, label=label, linewidth=1.2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if not bar:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    IMG.mkdir(parents=True, exist_ok=True)
    fig.savefig(IMG / f"{name}.png", dpi=110)
    plt.close(fig)
    return f"![{title}](img/{name}.png)\n"
