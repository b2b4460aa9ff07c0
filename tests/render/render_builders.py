"""Builders for render/platform tests: a multi-region platform and tau.yaml configs."""

from __future__ import annotations

import textwrap
from typing import Any

from taugrid.platform import load as platform_load
from taugrid.platform import models as pm
from taugrid.spec import load as spec_load
from taugrid.spec import models as sm

PLATFORM_YAML = textwrap.dedent(
    """\
    schema_version: 1
    gpu_types:
      - name: A100-80G
        memory: 80Gi
        node_label_value: NVIDIA-A100-SXM4-80GB
      - name: H100
        memory: 80Gi
        node_label_value: NVIDIA-H100-80GB-HBM3
      - name: L4
    regions:
      - name: us-east
        egress_cost_per_gb: 0.02
        clusters:
          - name: east-k8s
            backend: kubernetes
            node_pools:
              - {name: a100, gpu_model: A100-80G, gpus_per_node: 8, cpus_per_node: 96,
                 memory_per_node: 1Ti, nodes: 4, cost_per_gpu_hour: 2.5}
              - {name: cpu, cpus_per_node: 32, memory_per_node: 128Gi, nodes: 10}
      - name: eu-west
        compliance: [gdpr]
        clusters:
          - name: eu-k8s
            backend: kubernetes
            node_pools:
              - {name: h100, gpu_model: H100, gpus_per_node: 8, cpus_per_node: 192,
                 memory_per_node: 2Ti, nodes: 2, cost_per_gpu_hour: 4.0}
              - {name: l4, gpu_model: L4, gpus_per_node: 1, cpus_per_node: 8,
                 memory_per_node: 32Gi, nodes: 6, cost_per_gpu_hour: 0.8}
    priority_classes:
      - {name: low, value: 100, description: Preemptible batch}
      - {name: normal, value: 1000}
      - {name: high, value: 10000, description: Deadlines}
    profiles:
      - name: gpu-small
        description: One A100 per worker
        gpus_per_worker: 1
        gpu_model: A100-80G
        cpus_per_worker: 8
        memory_per_worker: 64Gi
      - name: h100-eu
        teams: [vision]
        gpu_model: H100
        allowed_regions: [eu-west]
        priority: high
      - name: interactive
        lanes: [interactive]
        workers: 1
        priority: low
    teams:
      - name: research
        cohort: shared
        queueing_strategy: StrictFIFO
        quotas:
          - {gpu_model: A100-80G, nominal: 16, borrowing_limit: 8, lending_limit: 4}
          - {gpu_model: L4, nominal: 4}
      - name: vision
        cpu_quota: 512
        memory_quota: 2Ti
        quotas:
          - {gpu_model: H100, nominal: 8, borrowing_limit: 2}
    workspaces:
      - name: nlp
        team: research
        namespace: ws-nlp
        queue: nlp-queue
        members: [alice, bob]
        defaults: {priority: normal, profile: gpu-small, gpu_model: A100-80G}
        data: {size: 500Gi, storage_class: nfs}
      - name: cv
        team: vision
        defaults: {priority: low}
    default_workspace: nlp
    """
)


def platform() -> pm.Platform:
    """The multi-region test platform."""
    return platform_load.parse_platform(PLATFORM_YAML, "platform.yaml")


def config(**groups: Any) -> sm.TauConfig:
    """A TauConfig: name ``train``, entrypoint ``train.py``, plus ``groups`` merged in."""
    data: dict[str, Any] = {"schema_version": 1, "name": "train", "run": {"entrypoint": "train.py"}}
    for key, value in groups.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return sm.TauConfig.model_validate(data)


def parse(text: str, filename: str = "tau.yaml") -> sm.TauConfig:
    """A TauConfig from tau.yaml text (through the real loader)."""
    return spec_load.parse_tau_yaml(textwrap.dedent(text), filename)
