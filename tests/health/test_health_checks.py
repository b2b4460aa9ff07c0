"""Checks, hysteresis, the fault-injection file, log patterns and the stall detector."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from taugrid.health import checks, hysteresis, logscan, signals, stall
from taugrid.health import conditions as cd

OK = [cd.Condition("GpuXid", cd.Status.OK)]
BAD = [cd.Condition("GpuXid", cd.Status.FAILING, "GPU 0: Xid 79", kind="xid")]
CRASH = [cd.Condition("HealthChecker", cd.Status.UNKNOWN, "health check crashed")]


def _verdicts(d: hysteresis.Debouncer, seq: list[list[cd.Condition]]) -> list[str]:
    return [d.observe("n1", c).action.value for c in seq]


def test_a_flapping_check_never_marks() -> None:
    d = hysteresis.Debouncer(fail_after=2, clear_after=3)
    assert set(_verdicts(d, [BAD, OK] * 10)) == {"none"}


def test_mark_after_consecutive_failures_and_clear_after_consecutive_passes() -> None:
    d = hysteresis.Debouncer(fail_after=2, clear_after=3)
    assert _verdicts(d, [BAD, BAD, BAD, OK, OK, OK]) == [
        "none",
        "mark",
        "none",
        "none",
        "none",
        "clear",
    ]


def test_a_node_cleared_too_often_stays_marked_until_an_admin_clears_it() -> None:
    d = hysteresis.Debouncer(fail_after=1, clear_after=1, max_clears=2)
    verdicts = [d.observe("n1", c) for c in [BAD, OK, BAD, OK, BAD, OK, OK, OK]]
    acts = [v.action.value for v in verdicts]
    assert acts == ["mark", "clear", "mark", "clear", "mark", "none", "none", "none"]
    assert "flapping" in verdicts[4].reason and "flapping" not in verdicts[0].reason
    d.forget("n1")  # the admin cleared it
    assert d.nodes["n1"].marked is None


def test_a_crashing_checker_neither_marks_nor_clears() -> None:
    d = hysteresis.Debouncer(fail_after=2, clear_after=2)
    assert _verdicts(d, [BAD, CRASH, BAD, CRASH, BAD]) == ["none"] * 5  # crash breaks the run
    d.observe("n1", BAD)
    assert d.nodes["n1"].marked == "xid"
    assert _verdicts(d, [OK, CRASH, OK, CRASH]) == ["none"] * 4  # never cleared by a crash
    assert cd.worst(CRASH + OK) is cd.Status.UNKNOWN and cd.worst([]) is cd.Status.UNKNOWN


def test_injection_file_overrides_readings(tmp_path: Path) -> None:
    (tmp_path / "10.0.0.5.json").write_text(
        json.dumps(
            {"ecc_uncorrected": 2, "disk_free_fraction": 0.01, "memory_available_fraction": 0.5}
        )
    )
    doc = signals.injected(tmp_path, ["node-abc", "10.0.0.5"])
    assert doc is not None
    host = signals.NodeSample(disk_free_fraction={"data": 0.5, "scratch": 0.4})
    sample = signals.apply_injection(host, doc, gpu_count=4)
    conds = {c.type: c for c in checks.evaluate(sample, checks.Limits())}
    assert conds["GpuEcc"].kind == "ecc" and conds["DiskSpace"].kind == "disk"
    assert "data root 1.0% free" in conds["DiskSpace"].reason
    assert conds["MemoryPressure"].status is cd.Status.OK
    assert signals.injected(tmp_path, ["nobody"]) is None


@pytest.mark.parametrize("text", ["{not json", '{"crash": "NVML hung"}', "[1]"])
def test_a_broken_or_crashing_injection_is_a_crash(tmp_path: Path, text: str) -> None:
    (tmp_path / "n.json").write_text(text)
    with pytest.raises(signals.CheckerCrashed):
        signals.injected(tmp_path, ["n"])


def test_host_sample_reads_real_disk_and_memory(tmp_path: Path) -> None:
    s = signals.host_sample({"data": tmp_path / "not" / "yet"})  # nearest existing parent
    assert 0 < s.disk_free_fraction["data"] <= 1
    assert s.memory_available_fraction is not None and 0 < s.memory_available_fraction <= 1


def test_dead_ray_node_is_lost() -> None:
    conds = checks.evaluate(signals.NodeSample(ray_alive=False), checks.Limits())
    assert [(c.type, c.kind) for c in conds if c.status is cd.Status.FAILING] == [
        ("RayNode", "lost")
    ]


@pytest.mark.parametrize(
    ("line", "kind", "node"),
    [
        ("NVRM: Xid (PCI:0000:3b:00): 79, pid=123, GPU has fallen off the bus.", "xid", True),
        ("RuntimeError: CUDA error: an illegal memory access was encountered", "gpu", True),
        ("[E ProcessGroupNCCL.cpp:475] Watchdog caught collective operation timeout", "nccl", True),
        ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB", "oom", False),
        ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "ecc", True),
    ],
)
def test_log_patterns(line: str, kind: str, node: bool) -> None:
    [f] = logscan.scan(f"step 10 loss 0.3\n{line}\n")
    assert (f.kind, f.node) == (kind, node)
    assert (logscan.first_node_fault(line) is not None) is node
    assert logscan.scan("step 10 loss 0.3 ecc=0 nccl ok") == []


def test_stall_levels_and_settings() -> None:
    s = stall.Settings.from_spec(
        {"stall_interval_s": 10.0, "stall_warn_after": 2, "stall_restart_after": 4}
    )
    det = stall.StallDetector(s, now=0.0)
    assert [det.level(t).value for t in (5, 20, 39, 40)] == ["ok", "warn", "warn", "restart"]
    det.progress(35.0)
    assert det.level(40.0) is stall.Level.OK
    assert "for 25s" in det.describe(60.0)
    assert stall.Settings.from_spec({}).restart_after is None  # default: never restart
