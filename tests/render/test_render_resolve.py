"""resolve(): precedence (profile > tau.yaml > workspace defaults > built-in), provenance
of every field, and the fail-closed checks."""

from __future__ import annotations

import pytest

from taugrid import errors
from taugrid.platform import load as platform_load
from taugrid.render import resolve, runspec
from taugrid.spec import models as sm
from tests.render import render_builders as rb


def _resolve(**groups: object) -> runspec.RunSpec:
    return resolve.resolve(rb.config(**groups), rb.platform())


def test_profile_beats_tau_yaml_beats_workspace_defaults() -> None:
    # gpu-small (the nlp workspace's default profile) sets 1 GPU, A100, 8 CPUs, 64Gi.
    spec = _resolve(compute={"gpus": 4, "cpus": 2, "workers": 3})
    assert spec.profile == "gpu-small"
    assert spec.gpus_per_worker == 1 and spec.provenance["gpus_per_worker"] == "profile gpu-small"
    assert spec.cpus_per_worker == 8 and spec.provenance["cpus_per_worker"] == "profile gpu-small"
    assert spec.memory_per_worker_bytes == 64 * 2**30
    assert spec.workers == 3 and spec.provenance["workers"].startswith("tau.yaml")
    assert spec.priority == "normal"
    assert spec.provenance["priority"] == "workspace default (nlp)"
    assert spec.provenance["profile"] == "workspace default (nlp)"


def test_tau_yaml_beats_workspace_defaults_and_builtins() -> None:
    spec = _resolve(
        policy={"workspace": "cv", "priority": "high"},
        compute={"gpus": 2, "gpu_model": "H100", "cpus": 16, "memory": "128Gi"},
    )
    assert spec.profile is None and spec.provenance["profile"] == resolve.BUILTIN
    assert (spec.priority, spec.priority_value) == ("high", 10000)
    assert spec.provenance["priority_value"] == "priority class high"
    assert spec.gpu_model == "H100"
    assert spec.node_selector == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert spec.total_gpus == 2
    assert spec.head_cpus == 1.0 and spec.provenance["head_cpus"] == resolve.BUILTIN


def test_workspace_defaults_fill_what_tau_yaml_leaves_unset() -> None:
    spec = _resolve(policy={"workspace": "cv"}, compute={"gpus": 1, "gpu_model": "H100"})
    assert spec.priority == "low" and spec.provenance["priority"] == "workspace default (cv)"
    assert spec.namespace == "cv" and spec.queue == "cv" and spec.team == "vision"


def test_provenance_points_at_tau_yaml_lines() -> None:
    text = """\
        schema_version: 1
        name: demo
        run:
          entrypoint: train.py
        compute:
          workers: 2
        policy:
          workspace: cv
        """
    lines = {"name": 2, "run.entrypoint": 4, "compute": 5, "compute.workers": 6, "policy": 7}
    spec = resolve.resolve(rb.parse(text), rb.platform(), source="tau.yaml", lines=lines)
    assert spec.provenance["workers"] == "tau.yaml:6"
    assert spec.provenance["entrypoint"] == "tau.yaml:4"
    assert spec.provenance["workspace"] == "tau.yaml:7"  # nearest located ancestor
    assert spec.provenance["communication"] == resolve.BUILTIN
    assert spec.communication is sm.Communication.SYNC  # several workers


def test_every_field_has_a_provenance() -> None:
    spec = _resolve(compute={"gpus": 1})
    missing = set(runspec.RunSpec.model_fields) - set(spec.provenance) - {"provenance"}
    assert not missing


def test_hashes_are_stable_and_sensitive() -> None:
    a, b = _resolve(), _resolve()
    assert a.config_hash == b.config_hash and a.profile_hash == b.profile_hash
    c = _resolve(run={"entrypoint": "other.py"})
    assert c.config_hash != a.config_hash and c.profile_hash == a.profile_hash
    assert _resolve(policy={"workspace": "cv"}).profile_hash != a.profile_hash


def test_default_platform_resolves_a_minimal_file() -> None:
    spec = resolve.resolve(rb.config(), platform_load.default_platform())
    assert (spec.workspace, spec.queue, spec.priority) == ("default", "default", "normal")
    assert spec.workers == 1 and spec.gpus_per_worker == 0 and spec.gpu_model is None
    assert spec.communication is sm.Communication.NONE
    assert spec.image.startswith("rayproject/ray:")


def _fails(match: str, **groups: object) -> resolve.ResolveError:
    with pytest.raises(resolve.ResolveError, match=match) as info:
        _resolve(**groups)
    assert isinstance(info.value, errors.UserError) and info.value.hint
    return info.value


def test_unknown_workspace_fails_closed() -> None:
    err = _fails("unknown workspace 'nope'", policy={"workspace": "nope"})
    assert "cv" in err.hint and err.field == "workspace"


def test_unknown_profile_fails_closed() -> None:
    _fails("unknown profile 'huge'", policy={"profile": "huge"})


def test_profile_of_another_team_fails_closed() -> None:
    err = _fails("not available to team 'research'", policy={"profile": "h100-eu"})
    assert "gpu-small" in err.hint


def test_profile_of_another_lane_fails_closed() -> None:
    _fails("only for lanes", policy={"profile": "interactive"})
    spec = _resolve(policy={"profile": "interactive", "lane": "interactive"})
    assert spec.priority == "low" and spec.provenance["priority"] == "profile interactive"


def test_gpu_model_not_offered_fails_closed() -> None:
    _fails(
        "'B200' is not offered",
        policy={"workspace": "cv"},
        compute={"gpus": 1, "gpu_model": "B200"},
    )


def test_gpu_model_outside_allowed_regions_fails_closed() -> None:
    _fails(
        "not offered by any node pool in regions",
        policy={"workspace": "cv"},
        compute={"gpus": 1, "gpu_model": "A100-80G"},
        placement={"allowed_regions": ["eu-west"]},
    )


def test_gpus_per_worker_over_every_pool_fails_closed() -> None:
    err = _fails("exceeds every node pool", policy={"workspace": "cv"}, compute={"gpus": 16})
    assert "8 GPUs per worker" in err.hint


def test_worker_too_large_for_any_node_fails_closed() -> None:
    _fails("more than one node", policy={"workspace": "cv"}, compute={"gpus": 1, "cpus": 500})


def test_more_gpus_than_the_platform_has_fails_closed() -> None:
    _fails(
        "only 16 H100",
        policy={"workspace": "cv"},
        compute={"workers": 3, "gpus": 8, "gpu_model": "H100"},
    )


def test_foreign_queue_and_team_fail_closed() -> None:
    _fails("not a queue of workspace", policy={"queue": "other"})
    _fails("does not match workspace", policy={"team": "vision"})


def test_unknown_priority_and_regions_fail_closed() -> None:
    _fails("unknown priority class 'urgent'", policy={"workspace": "cv", "priority": "urgent"})
    _fails("unknown regions", placement={"allowed_regions": ["mars"]})


def test_reserved_environment_fails_closed() -> None:
    _fails("TAU_RUN_ID", runtime={"env": {"TAU_RUN_ID": "x"}})


def test_error_points_at_the_tau_yaml_line() -> None:
    text = """\
        schema_version: 1
        name: demo
        run:
          entrypoint: train.py
        policy:
          workspace: cv
        compute:
          gpus: 16
        """
    lines = {"policy.workspace": 6, "compute.gpus": 8}
    with pytest.raises(resolve.ResolveError) as info:
        resolve.resolve(rb.parse(text), rb.platform(), source="job/tau.yaml", lines=lines)
    assert info.value.message.startswith("job/tau.yaml:8: gpus_per_worker 16 exceeds")


def test_a_gpu_share_where_only_kubernetes_clusters_may_run_fails_closed() -> None:
    # Every cluster of the test platform is a Kubernetes one: no device plugin shares a GPU.
    err = _fails("share of one GPU", policy={"workspace": "cv"}, compute={"gpus": 0.5})
    assert err.field == "gpus_per_worker" and "Ray cluster" in err.hint


def test_a_run_spec_newer_than_the_reader_is_refused_with_what_to_upgrade() -> None:
    wire = _resolve().model_dump(mode="json")
    assert wire["spec_version"] == runspec.SPEC_VERSION
    old = {k: v for k, v in wire.items() if k != "spec_version"}  # written before versions
    assert runspec.RunSpec.model_validate(old).spec_version == 1
    newer = {**wire, "spec_version": runspec.SPEC_VERSION + 1, "a_future_field": 1}
    with pytest.raises(ValueError, match=r"newer than this component reads.*upgrade it"):
        runspec.RunSpec.model_validate(newer)
    with pytest.raises(errors.SystemFault, match="newer than this component") as info:
        runspec.read(newer)  # what the agent and the Kubernetes backend call
    assert "same release" in info.value.hint
