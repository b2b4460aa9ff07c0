"""Builders shared by the spec tests: the quickstart text and problem helpers."""

from __future__ import annotations

from taugrid.spec import errors, load

__all__ = ["QUICKSTART", "problems_of"]

QUICKSTART = """\
schema_version: 1
name: aks-gpu-quickstart
run:
  entrypoint: train.py
  workload_kind: rayjob
compute:
  gpus: 1
  workers: 1
  cpus: 16
  memory: 64Gi
runtime:
  image: mcr.microsoft.com/aks/ai-runtime/ray:py3.12-ray2.56.0-cuda13.0
  pip:
    - torch>=2.4.0
"""


def problems_of(text: str, filename: str = "tau.yaml") -> list[errors.Problem]:
    """The problems ``parse_tau_yaml`` reports for ``text``; fails when it loads."""
    try:
        load.parse_tau_yaml(text, filename)
    except errors.SpecError as exc:
        return exc.problems
    raise AssertionError(f"expected a SpecError for:\n{text}")
