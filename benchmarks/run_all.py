"""Run every benchmark module in benchmarks/ and let each write its docs/BENCHMARKS.md section.

A benchmark module is ``benchmarks/bench_*.py`` with a ``main(argv)`` function; each is
run in turn (one process, one core) with ``--quick`` passed through. Helpers without
``main`` (``bench_sim_doc``) are skipped. Quick runs are seconds-long smoke runs for
CI: the simulator benchmarks print their numbers and leave the documentation alone.

    python -m benchmarks.run_all [--quick] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import sys
import time
import traceback

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
        print(f"== {name}{' --quick' if args.quick else ''}", flush=True)
        started = time.perf_counter()
        try:
            importlib.import_module(f"benchmarks.{name}").main(["--quick"] if args.quick else [])
        except Exception:  # report and go on: one broken benchmark must not hide the others
            traceback.print_exc()
            failed.append(name)
        print(f"== {name}: {time.perf_counter() - started:.1f} s", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
