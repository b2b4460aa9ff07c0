"""Writing benchmark results into docs/BENCHMARKS.md: one "## Title" section per benchmark.

Each benchmark owns its section(s); ``write_section`` replaces the section whose
heading matches the first line of ``section`` (or appends it), leaving the rest alone.
"""

from __future__ import annotations

import pathlib
import re

__all__ = ["DOC", "write_section"]

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "BENCHMARKS.md"


def write_section(section: str, doc: pathlib.Path = DOC) -> None:
    """Replace (or append) the section whose ``## `` heading starts ``section``."""
    heading = section.splitlines()[0]
    text = doc.read_text() if doc.exists() else "# Benchmarks\n\nResults of `benchmarks/`.\n"
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section.rstrip("\n") + "\n\n", text).rstrip("\n") + "\n"
    else:
        text = text.rstrip("\n") + "\n\n" + section
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(text)
