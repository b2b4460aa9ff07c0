"""Multi-region simulator: known answers on hand-built 2-region scenarios, accounting,
communication mode, and determinism of the generator and the simulation."""

from __future__ import annotations

import json

import pytest

from taugrid.sim import mr_scenario as sc
from taugrid.sim import mr_sim

GB = 10**9
GBPS = 1e9 / 8  # bytes/s of 1 Gbit/s


def scenario(
    pools: list[sc.Pool],
    datasets: list[sc.Dataset],
    jobs: list[sc.Job],
    bps: float = GBPS,
    egress: float = 0.05,
) -> sc.Scenario:
    """Regions in pool order; every link ``bps`` and ``egress`` $/GB both ways."""
    regions = tuple(dict.fromkeys(p.region for p in pools))
    pairs = [(s, d) for s in regions for d in regions if s != d]
    return sc.Scenario(
        regions,
        tuple(pools),
        tuple(datasets),
        tuple((s, d, bps) for s, d in pairs),
        tuple((s, d, egress) for s, d in pairs),
        tuple(jobs),
    )


def job(
    i: int, submit: float, gpus: int, duration: float, dataset: str | None, **kw: object
) -> sc.Job:
    workers = kw.pop("workers", 1)
    return sc.Job(f"j{i}", submit, workers, gpus, duration, "A100", dataset, **kw)  # type: ignore[arg-type]


def placed(r: mr_sim.Result) -> dict[str, mr_sim.Placement]:
    return {p.job_id: p for p in r.placements}


A1, B1 = sc.Pool("r1", "A100", 1, 3.0), sc.Pool("r2", "A100", 1, 1.0)


def test_first_to_admit_takes_the_first_region_even_with_the_data_elsewhere() -> None:
    s = scenario([A1, B1], [sc.Dataset("d", 10 * GB, "r2")], [job(0, 0, 8, 600, "d")])
    p = placed(mr_sim.simulate(s, "first-to-admit"))["j0"]
    assert p.cluster_id == "r1-a100"
    assert p.moved_bytes == 10 * GB


def test_cheapest_takes_the_cheapest_region_even_with_the_data_elsewhere() -> None:
    s = scenario([A1, B1], [sc.Dataset("d", 10 * GB, "r1")], [job(0, 0, 8, 600, "d")])
    r = mr_sim.simulate(s, "cheapest")
    assert placed(r)["j0"].cluster_id == "r2-a100"
    assert r.egress_cost == pytest.approx(10 * 0.05)


@pytest.mark.parametrize("policy", ["static-weights", "TauGrid"])
def test_data_aware_policies_go_where_the_data_is(policy: str) -> None:
    s = scenario([A1, B1], [sc.Dataset("d", 10 * GB, "r1")], [job(0, 0, 8, 600, "d")])
    r = mr_sim.simulate(s, policy)
    assert placed(r)["j0"].cluster_id == "r1-a100"
    assert r.bytes_moved == 0


HUGE = sc.Dataset("huge", 2000 * GB, "r1")  # 16,000 s over 1 Gbit/s
SMALL = sc.Dataset("small", 1 * GB, "r1")  # 8 s


def test_taugrid_waits_near_a_huge_dataset_rather_than_moving_it() -> None:
    jobs = [job(0, 0, 8, 1000, "huge"), job(1, 1, 8, 1000, "huge")]
    r = mr_sim.simulate(scenario([A1, B1], [HUGE], jobs), "TauGrid")
    p = placed(r)
    assert p["j1"].cluster_id == "r1-a100"
    assert p["j1"].placed == pytest.approx(1000)  # when j0 gives its GPUs back
    assert r.bytes_moved == 0
    # The static weights place it at once on the free region and move 2 TB.
    static = mr_sim.simulate(scenario([A1, B1], [HUGE], jobs), "static-weights")
    assert placed(static)["j1"].cluster_id == "r2-a100"
    assert static.bytes_moved == HUGE.size_bytes
    assert r.avg_jct < static.avg_jct


def test_taugrid_moves_a_small_dataset_rather_than_waiting() -> None:
    jobs = [job(0, 0, 8, 10_000, "small"), job(1, 1, 8, 1000, "small")]
    r = mr_sim.simulate(scenario([A1, B1], [SMALL], jobs), "TauGrid")
    p = placed(r)["j1"]
    assert p.cluster_id == "r2-a100"
    assert p.start - p.placed == pytest.approx(SMALL.size_bytes / GBPS)
    assert p.finish - p.submit == pytest.approx(8 + 1000)


def test_transfers_share_the_link_and_are_billed_once_then_cached() -> None:
    """Two 10 GB copies on one 1 GB/s link end together at 20 s; the replica stays."""
    pools = [sc.Pool("r1", "L4", 1, 0.5), sc.Pool("r2", "A100", 3, 2.0)]
    data = [sc.Dataset("a", 10 * GB, "r1"), sc.Dataset("b", 10 * GB, "r1")]
    jobs = [
        job(0, 0, 8, 100, "a"),
        job(1, 0, 8, 100, "b"),
        job(2, 5, 1, 100, "a"),  # joins the copy on its way
        job(3, 500, 1, 100, "a"),  # finds the replica
    ]
    for policy in mr_sim.POLICIES:
        r = mr_sim.simulate(scenario(pools, data, jobs, bps=1 * GB, egress=0.05), policy)
        p = placed(r)
        assert [p[f"j{i}"].start for i in range(4)] == pytest.approx([20, 20, 20, 500])
        assert [p[f"j{i}"].moved_bytes for i in range(4)] == [10 * GB, 10 * GB, 0, 0]
        assert r.bytes_moved == 20 * GB
        assert r.egress_cost == pytest.approx(20 * 0.05)
        assert p["j0"].finish - p["j0"].submit == pytest.approx(20 + 100)


def test_runtime_scales_with_gpu_speed() -> None:
    s = scenario([sc.Pool("r1", "H100", 1, 4.0)], [], [sc.Job("j0", 0, 1, 8, 1000, "H100")])
    p = placed(mr_sim.simulate(s, "TauGrid"))["j0"]
    assert p.finish == pytest.approx(1000 / sc.GPU_SPEED["H100"])


def test_taugrid_sends_any_model_work_to_the_faster_pool_not_the_emptier_one() -> None:
    # One region: 1 node of H100 (2x, $4/h) and 4 nodes of L4 (0.4x, $0.7/h). A 1-GPU
    # any-model job of 1 h (A100 time) ends at 1,800 s on an H100, 9,000 s on an L4.
    pools = [sc.Pool("r1", "L4", 4, 0.7), sc.Pool("r1", "H100", 1, 4.0)]
    jobs = [sc.Job("j0", 0, 1, 1, 3600, None, max_runtime=3600)]
    r = mr_sim.simulate(scenario(pools, [], jobs), "TauGrid")
    assert placed(r)["j0"].cluster_id == "r1-h100"
    assert placed(r)["j0"].finish == pytest.approx(1800)
    # first-to-admit takes its first pool in order: here the L4s
    assert placed(mr_sim.simulate(scenario(pools, [], jobs), "first-to-admit"))["j0"].finish == (
        pytest.approx(9000)
    )


def test_data_heavy_knobs_scale_datasets_and_slow_the_links() -> None:
    base, heavy = (
        sc.generate(5, jobs=20),
        sc.generate(5, jobs=20, data_scale=2.0, link_gbps=(0.2, 2.0)),
    )
    for a, b in zip(base.datasets, heavy.datasets, strict=True):
        assert b.size_bytes == pytest.approx(2 * a.size_bytes, abs=2) and a.home == b.home
    assert all(0.2e9 / 8 <= bps <= 2e9 / 8 for _, _, bps in heavy.bandwidth)
    assert base == sc.generate(5, jobs=20)  # the defaults draw what they always drew


@pytest.mark.parametrize("policy", mr_sim.POLICIES)
def test_a_sync_job_never_spans_regions(policy: str) -> None:
    """A 12-GPU job in each region leaves 4 + 4 GPUs free: the 2x4 sync job waits for one."""
    pools = [sc.Pool("r1", "A100", 2, 2.0), sc.Pool("r2", "A100", 2, 2.0)]
    jobs = [
        job(0, 0, 4, 100, None, workers=3),
        job(1, 0, 4, 200, None, workers=3),
        job(2, 1, 4, 50, None, workers=2, comm=sc.Comm.SYNC),
    ]
    r = mr_sim.simulate(scenario(pools, [], jobs), policy)
    p = placed(r)
    assert {p["j0"].region, p["j1"].region} == {"r1", "r2"}
    assert p["j2"].placed == pytest.approx(100)
    assert p["j2"].region == p["j0"].region


def test_generated_jobs_each_run_in_one_pool_within_its_capacity() -> None:
    """Every job (sync ones included) holds GPUs of one pool; no pool is ever oversubscribed."""
    s = sc.generate(3, jobs=60)
    gpus = {j.job_id: j.gpus for j in s.jobs}
    capacity = {p.cluster_id: p.gpus for p in s.pools}
    for policy in mr_sim.POLICIES:
        r = mr_sim.simulate(s, policy)
        assert sorted(p.job_id for p in r.placements) == sorted(gpus)
        for cluster, cap in capacity.items():
            here = [p for p in r.placements if p.cluster_id == cluster]
            for t in {p.placed for p in here}:
                held = sum(gpus[p.job_id] for p in here if p.placed <= t < p.finish)
                assert held <= cap, (policy, cluster, t)


def test_same_seed_same_scenario_and_results() -> None:
    a, b = sc.generate(7, jobs=40), sc.generate(7, jobs=40)
    assert a == b
    assert sc.generate(8, jobs=40) != a
    for policy in mr_sim.POLICIES:
        assert mr_sim.simulate(a, policy) == mr_sim.simulate(b, policy)


def test_every_generated_job_fits_some_pool_and_every_model_exists() -> None:
    s = sc.generate(11, regions=3, jobs=100)
    models = {p.gpu_model for p in s.pools}
    assert models == set(sc.GPU_PRICES)
    for j in s.jobs:
        assert any((j.gpu_model in (None, p.gpu_model)) and p.gpus >= j.gpus for p in s.pools), j


def test_unknown_policy_and_bad_region_count_say_what_to_do() -> None:
    with pytest.raises(ValueError, match="choose one of: first-to-admit"):
        mr_sim.simulate(sc.generate(1, jobs=5), "fastest")
    with pytest.raises(ValueError, match="between 2 and 6"):
        sc.generate(1, regions=1)


def test_cli_prints_one_row_per_policy_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    from taugrid.sim import __main__ as cli

    assert cli.main(["multiregion", "--seeds", "1", "--jobs", "20", "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["policy"] for r in rows] == list(mr_sim.POLICIES)
    assert all(r["jobs"] == 20 and r["avg_jct"] > 0 for r in rows)
    assert cli.main(["multiregion", "--regions", "9"]) == 2
    assert "between 2 and 6" in capsys.readouterr().err


def test_quick_benchmark_runs_and_leaves_the_docs_alone() -> None:
    from benchmarks import bench_sim_doc, bench_sim_multiregion

    before = bench_sim_doc.DOC.read_text()
    bench_sim_multiregion.main(["--quick"])
    assert bench_sim_doc.DOC.read_text() == before
