"""TauGrid benchmarks: ``python -m benchmarks.<name> [--quick]``; results in docs/BENCHMARKS.md."""
