"""Writing benchmark results into docs/BENCHMARKS.md: one "## Title" section per benchmark.

Each benchmark owns its section(s); ``write_section`` replaces the section whose
heading matches the first line of ``section`` (or appends it), leaving the rest alone.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
from collections.abc import Callable

__all__ = ["DOC", "k8s_args", "sized_main", "write_section"]

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


def sized_main(
    argv: list[str] | None,
    name: str,
    size: tuple[str, int],
    quick_skip: str,
    run: Callable[[int, str], str],
) -> int:
    """The command line of a benchmark with one size option that ``--quick`` skips.

    ``size``: the option's name and default (``("items", 1800)``); ``quick_skip``: why a
    quick run skips it; ``run(size, command)`` measures and returns the section, which is
    printed and written unless ``--no-write``.
    """
    flag, default = size
    p = argparse.ArgumentParser(prog=f"python -m benchmarks.{name}")
    p.add_argument("--quick", action="store_true")
    p.add_argument(f"--{flag}", type=int, default=default, dest="size")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        print(f"{name} --quick: skipped ({quick_skip}); run it without --quick")
        return 0
    command = f"python -m benchmarks.{name}" + (
        f" --{flag} {args.size}" if args.size != default else ""
    )
    section = run(args.size, command)
    print(section)
    if not args.no_write:
        write_section(section)
    return 0


def k8s_args(
    doc: str,
    missing: Callable[[], list[str]],
    more: Callable[[argparse.ArgumentParser], object] | None = None,
) -> argparse.Namespace | None:
    """``--quick``, ``--reps N`` and ``--no-write`` (and what ``more`` adds) of a
    benchmark on the test control plane; None, after saying why, when it is skipped:
    ``--quick`` without ``TAU_TEST_K8S=1`` (the control plane takes minutes to start), or
    ``missing()`` names what is not built."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--no-write", action="store_true")
    if more is not None:
        more(p)
    args = p.parse_args()
    if args.quick and os.environ.get("TAU_TEST_K8S") != "1":
        print("skipped: --quick starts no control plane unless TAU_TEST_K8S=1")
        return None
    absent = missing()
    if absent:
        print(f"skipped: {', '.join(sorted(set(absent)))} not built")
        return None
    return args


def seeded_main(
    argv: list[str] | None,
    name: str,
    run: Callable[[list[int], int, str], str],
    *,
    seeds: int,
    jobs: int,
) -> int:
    """The command line of a simulation benchmark over generated scenarios of seeds
    1..``seeds`` with ``jobs`` jobs each; ``--quick``: seeds 1 and 2 of 40 jobs, printed
    only. ``run(seeds, jobs, command)`` measures and returns the section."""
    p = argparse.ArgumentParser(prog=f"python -m benchmarks.{name}")
    p.add_argument("--quick", action="store_true", help="2 seeds x 40 jobs, print only")
    p.add_argument("--seeds", type=int, default=seeds)
    p.add_argument("--jobs", type=int, default=jobs)
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    chosen = [1, 2] if args.quick else list(range(1, args.seeds + 1))
    n = 40 if args.quick else args.jobs
    section = run(chosen, n, f"python -m benchmarks.{name} --seeds {len(chosen)} --jobs {n}")
    print(section)
    if not (args.quick or args.no_write):
        write_section(section)
    return 0
