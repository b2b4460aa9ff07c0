"""The openb inflation replay on a tiny synthetic cluster; the real trace when present."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from taugrid.scheduling.packing import packer
from taugrid.scheduling.packing import state as st
from taugrid.sim import __main__ as cli
from taugrid.sim import openb, traces

NODES = traces.OpenbNodes(
    names=[f"n{i}" for i in range(6)],
    cpu_milli=[32000, 96000, 96000, 104000, 104000, 16000],
    memory_mib=[262144] * 6,
    gpus=[0, 8, 8, 2, 2, 2],
    models=["", "G2", "G2", "T4", "T4", "P100"],
)
TASKS = (
    [st.Task(f"s{i}", 6000, 12288, 1, 460) for i in range(10)]
    + [st.Task(f"w{i}", 12000, 16384, 1, 1000) for i in range(8)]
    + [st.Task("big", 64000, 65536, 8, 1000), st.Task("cpu", 8000, 30517, 0, 0)]
)


def test_inflate_shuffles_then_resamples_up_to_the_target() -> None:
    seq, _ = openb.inflate(TASKS, capacity=22_000, seed=5, inflation=1.3)
    assert sorted(t.name for t in seq[: len(TASKS)]) == sorted(t.name for t in TASKS)
    assert sum(t.gpu_total for t in seq) <= 1.3 * 22_000
    assert seq == openb.inflate(TASKS, capacity=22_000, seed=5, inflation=1.3)[0]


@pytest.mark.parametrize("policy", packer.POLICIES)
def test_every_policy_runs_and_is_deterministic(policy: str) -> None:
    a = openb.run_inflation(NODES, TASKS, policy, 42)
    b = openb.run_inflation(NODES, TASKS, policy, 42)
    assert a == b
    assert 0 < a.allocated_pct <= 100 and a.arrived_pct >= 100


def test_missing_traces_are_reported(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAU_TRACES_DIR", str(tmp_path))
    with pytest.raises(traces.TraceMissing, match="TAU_TRACES_DIR"):
        traces.load_openb_nodes()
    assert cli.main(["openb", "--stop", "0.01"]) == 2


def test_real_trace_smoke() -> None:
    try:
        nodes, tasks = traces.load_openb_nodes(), traces.load_openb_tasks("default")
    except traces.TraceMissing as exc:
        pytest.skip(str(exc))
    assert len(nodes.names) == 1213 and sum(nodes.gpus) == 6212 and all(nodes.gpus)
    r = openb.run_inflation(nodes, tasks, "TauGrid", 42, stop=0.05)
    assert r.failed == 0 and r.arrived_pct >= 5


def test_metric_is_the_mean_allocation_while_arrived_rounds_to_the_target() -> None:
    # One 8-GPU node, tasks of 40 milli = 0.5 % of capacity each: arrivals 99.5 % (all
    # placed), 100 % (all placed), 100.5 % (fails: full; rounds half-to-even to 100).
    node = traces.OpenbNodes(["n"], [10**9], [10**9], [8], ["G2"])
    tasks = [st.Task(f"s{i}", 1, 1, 1, 40) for i in range(10)]
    r = openb.run_inflation(node, tasks, "BestFit", 42)
    assert r.allocated_pct == pytest.approx((99.5 + 100 + 100) / 3)
    assert r.failed == 2 and r.arrived_pct == pytest.approx(101.0)  # stops past the window


def test_node_order_is_a_seeded_permutation() -> None:
    def rng(seed: int) -> np.random.Generator:
        return np.random.default_rng(seed)

    def names(seed: int, order: str) -> list[str]:
        return list(openb.ordered_state(NODES, rng(seed), order).names)

    assert names(1, "file") == list(NODES.names)
    assert sorted(names(1, "shuffled")) == sorted(NODES.names)
    assert names(1, "shuffled") == names(1, "shuffled")
    assert any(names(s, "shuffled") != list(NODES.names) for s in range(5))
    with pytest.raises(ValueError, match="node_order"):
        openb.ordered_state(NODES, rng(1), "sorted")


HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n"


def _pod_list(folder: object, workload: str, body: str, header: str = HEADER) -> None:
    path = pathlib.Path(str(folder)) / f"openb_pod_list_{workload}.csv"
    path.write_text(header + body)


def test_any_pod_list_in_the_extra_folder_loads(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAU_TRACES_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("TAU_OPENB_DIR", str(tmp_path))
    _pod_list(tmp_path, "cpu300", "p0,4000,8192,0,0,,BE\np1,8000,1024,1,250,T4|P100,LS\n")
    # The trace's multigpu lists have no gpu_spec column at all.
    _pod_list(
        tmp_path,
        "multigpu50",
        "p2,64000,65536,8,1000\n",
        header=",".join(traces.POD_COLUMNS) + "\n",
    )
    assert traces.openb_workloads() == ["cpu300", "multigpu50"]
    assert traces.load_openb_tasks("cpu300") == [
        st.Task("p0", 4000, 8192, 0, 0),
        st.Task("p1", 8000, 1024, 1, 250, frozenset({"T4", "P100"})),
    ]
    assert traces.load_openb_tasks("multigpu50") == [st.Task("p2", 64000, 65536, 8, 1000)]
    path = str(tmp_path / "openb_pod_list_cpu300.csv")
    assert traces.load_openb_tasks(path) == traces.load_openb_tasks("cpu300")
    with pytest.raises(traces.TraceMissing, match=r"found: cpu300, multigpu50.*TAU_OPENB_DIR"):
        traces.load_openb_tasks("gpushare70")


@pytest.mark.parametrize(
    ("header", "body", "message"),
    [
        ("name,cpu_milli,num_gpu\n", "p0,1000,0\n", "no column memory_mib, gpu_milli"),
        (HEADER, "p0,1000,8192,one,0,,BE\n", r"line 2: num_gpu is 'one'"),
        (HEADER, "p0,1000,8192,0,0,,BE\np1,-5,1,1,500,,BE\n", r"line 3: cpu_milli is '-5'"),
        (HEADER, "p0,1000,8192,9,1000,,BE\n", r"num_gpu is '9'; expected .* 0 to 8"),
        (HEADER, "p0,1000,8192,2,500,,BE\n", "2 GPUs of 500 milli"),
        (HEADER, "p0,1000,8192\n", r"line 2: num_gpu is ''"),
        (HEADER, "", "empty openb pod list"),
    ],
)
def test_a_malformed_pod_list_says_what_and_where(
    tmp_path: pathlib.Path, header: str, body: str, message: str
) -> None:
    _pod_list(tmp_path, "bad", body, header)
    path = tmp_path / "openb_pod_list_bad.csv"
    with pytest.raises(traces.TraceInvalid, match=message) as caught:
        traces.load_openb_tasks(str(path))
    assert str(path) in str(caught.value)


def test_the_cli_takes_any_pod_list_and_refuses_a_malformed_one(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "openb").mkdir()
    nodes = "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,65536,2,T4\nn1,96000,262144,8,G2\n"
    (tmp_path / "openb" / "openb_node_list_gpu_node.csv").write_text(nodes)
    monkeypatch.setenv("TAU_TRACES_DIR", str(tmp_path))
    _pod_list(tmp_path, "mine", "p0,1000,8192,1,500,,BE\np1,4000,8192,2,1000,T4,LS\n")
    _pod_list(tmp_path, "bad", "p0,1000,8192,x,500,,BE\n")
    good = str(tmp_path / "openb_pod_list_mine.csv")
    assert cli.main(["openb", "--workload", good, "--policy", "FGD"]) == 0
    assert "mine.csv FGD seed 42: " in capsys.readouterr().out
    assert cli.main(["openb", "--workload", str(tmp_path / "openb_pod_list_bad.csv")]) == 2
    assert "line 2: num_gpu is 'x'" in capsys.readouterr().err


def test_cpu_only_tasks_and_their_refusals_are_counted() -> None:
    # One 2-GPU node with 10 CPUs; GPU tasks ask 4 CPUs a GPU, so TauGrid's CPU hold
    # keeps 8 CPUs for the two free GPUs and refuses a 4-CPU task FGD places.
    node = traces.OpenbNodes(["n"], [10_000], [10**6], [2], ["G2"])
    tasks = [st.Task("cpu", 4000, 1, 0, 0)] + [st.Task(f"g{i}", 4000, 1, 1, 1000) for i in range(3)]
    fgd, ours = (openb.run_inflation(node, tasks, p, 7) for p in ("FGD", "TauGrid"))
    assert fgd.cpu_tasks == ours.cpu_tasks >= 1
    assert ours.cpu_failed == ours.cpu_tasks > fgd.cpu_failed
    assert ours.allocated_pct >= fgd.allocated_pct
