"""``benchmarks/cpu_share.py`` counts the CPU a command's processes used, by kind, even a
process that ends between two samples (counted through its parent's reaped-children
time). Real processes burn real CPU under a name nothing else on the machine has (a
link to the interpreter called ``burner``), so another worker's processes cannot make
these pass."""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from benchmarks import cpu_share

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass"
KIND = "other: burner"


@pytest.fixture
def burner() -> Iterator[str]:
    """The interpreter under the name ``burner`` (outside pytest's directories, whose
    names would make its command line read as pytest's)."""
    with tempfile.TemporaryDirectory(prefix="cpu-") as tmp:
        link = Path(tmp) / "burner"
        os.symlink(sys.executable, link)
        yield str(link)


def _rows(out: Path) -> dict[str, float]:
    text = out.read_text()
    return {k: float(v) for k, v in re.findall(r"^\| (.+?) \| (\d+) \|", text, re.M)}


def test_a_process_sampled_while_it_runs_is_counted_under_its_kind(
    burner: str, tmp_path: Path
) -> None:
    out = tmp_path / "cpu.md"
    cmd = [burner, "-c", BURN.format(s=2.0)]
    assert cpu_share.main(["--every", "0.2", "--out", str(out), "--", *cmd]) == 0
    assert _rows(out).get(KIND, 0) >= 2, out.read_text()


def test_a_child_that_ends_between_samples_is_counted_through_its_parent(
    burner: str, tmp_path: Path
) -> None:
    """The child burns 1.5 CPU-s and ends; its parent lives on for the samples after."""
    out = tmp_path / "cpu.md"
    parent = (
        f"import subprocess, time\nsubprocess.run([{burner!r}, '-c', {BURN.format(s=1.5)!r}])\n"
        "time.sleep(3)"
    )
    assert cpu_share.main(["--every", "1", "--out", str(out), "--", burner, "-c", parent]) == 0
    assert _rows(out).get(KIND, 0) >= 1.5, out.read_text()


def test_the_kinds_name_the_processes_the_suite_runs() -> None:
    assert cpu_share.kind_of("raylet", "/x/raylet\0--node") == "Ray raylets"
    assert cpu_share.kind_of("ray::Worker", "ray::Worker.gradient") == "Ray task/actor workers"
    assert cpu_share.kind_of("postgres", "postgres: tau tau_test") == "PostgreSQL"
    assert cpu_share.kind_of("kube-apiserver", "kube-apiserver\0--etcd") == (
        "Kubernetes components"
    )
    assert cpu_share.kind_of("zsh", "zsh") == "other: zsh"
    # a path under pytest's directories names no kind: the program run does
    apiserver = "/x/kube-apiserver\0--cert-dir=/tmp/tau-pytest-test-k8s/cp"
    assert cpu_share.kind_of("kube-apiserver", apiserver) == "Kubernetes components"
    assert cpu_share.kind_of("python", "python\0/tmp/tau-pytest-unit/pipeline.py") == (
        "other Python (job drivers, scripts)"
    )
