"""Trace replay through the scheduling core on a simulated clock.

Owns the simulators of the benchmarks: openb GPU packing (``openb``), Philly queueing
(``philly``) and multi-region placement (``mr_sim`` over ``mr_scenario``), the trace
loaders (``traces``) and the ``python -m taugrid.sim`` command. Every decision goes
through ``taugrid.scheduling``, the code the live hub runs; nothing here does I/O beyond
reading traces.
"""
