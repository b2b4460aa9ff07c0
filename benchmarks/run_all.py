"""Run every benchmark module in benchmarks/ and let each write its docs/BENCHMARKS.md section.

A benchmark module is ``benchmarks/bench_*.py`` with a ``main`` function; each runs in
turn as ``python -m benchmarks.<name> [--quick]`` in a child process (one at a time, so
one core; a crash or a stray global in one cannot affect the next). Helpers without
``main`` (``bench_sim_doc``) are skipped. Quick runs are seconds-long smoke runs for
CI: the simulator benchmarks print their numbers and leave the documentation alone; a
module whose smoke run would take a minute of Ray start-up or lease waits declares
``QUICK_SKIP`` (why, and which test runs the same path) and is left out of quick runs.

    python -m benchmarks.run_all [--quick] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import subprocess
import sys
import time

__all__ = ["discover", "main"]

HERE = pathlib.Path(__file__).resolve().parent


def discover() -> list[str]:
    """Module names of the benchmarks present, sorted."""
    names = []
    for path in sorted(HERE.glob("bench_*.py")):
        module = importlib.import_module(f"benchmarks.{path.stem}")
        if callable(getattr(module, "main", None)):
            names.append(path.stem)
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seconds-long smoke run (CI)")
    parser.add_argument("--only", nargs="*", default=None, help="bench module names to run")
    args = parser.parse_args(argv)
    failed = []
    for name in discover():
        if args.only and name not in args.only:
            continue
        skip = getattr(importlib.import_module(f"benchmarks.{name}"), "QUICK_SKIP", None)
        if args.quick and skip:
            print(f"== {name} --quick: skipped ({skip})", flush=True)
            continue
        print(f"== {name}{' --quick' if args.quick else ''}", flush=True)
        started = time.perf_counter()
        command = [sys.executable, "-m", f"benchmarks.{name}"] + (["--quick"] if args.quick else [])
        if subprocess.run(command, cwd=HERE.parent, check=False).returncode != 0:
            failed.append(name)  # go on: one broken benchmark must not hide the others
        print(f"== {name}: {time.perf_counter() - started:.1f} s", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
