"""``tau sweep`` through the real console script against a real hub server (no Ray; the
trials stay queued): a dry run lists the trials, submit, list and status in text and
``-o json``, cancel, and a tau.yaml without a sweep section refused with the fix."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.hub import tenancy_builders as tb
from tests.hub.harness import HubServer

SWEEP = (
    tb.tau_yaml("cli-sweep")
    + """\
sweep:
  parameters:
    lr: {values: [0.1, 0.01, 0.001]}
    layers: {values: [2, 4]}
  parallel: 2
  metric: {name: loss}
"""
)


def _project(tmp_path: Path, text: str) -> Path:
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "tau.yaml").write_text(text)
    return tmp_path


def test_dry_run_submit_list_status_and_cancel(server: HubServer, tmp_path: Path) -> None:
    project = _project(tmp_path, SWEEP)
    dry = server.tau("sweep", "submit", str(project), "--dry-run", "-o", "json")
    assert dry.returncode == 0, dry.stderr
    doc = json.loads(dry.stdout)
    assert doc["budget"] == 6 and doc["trials"][:2] == [
        {"lr": 0.1, "layers": 2},
        {"lr": 0.1, "layers": 4},
    ]
    text = server.tau("sweep", "submit", str(project), "--dry-run")
    assert "6 trials; the first 6:" in text.stdout and "lr=0.01 layers=4" in text.stdout
    sub = server.tau("sweep", "submit", str(project))
    assert sub.returncode == 0 and "submitted sweep cli-sweep-" in sub.stdout, sub.stderr
    sweep_id = sub.stdout.split("submitted sweep ")[1].split()[0]
    deadline = time.time() + 20
    while (st := json.loads(server.tau("sweep", "status", sweep_id, "-o", "json").stdout))[
        "submitted"
    ] < 2:
        assert time.time() < deadline, st
        time.sleep(0.3)
    assert len(st["trials"]) == 2  # parallel: 2; no agent, so none is placed
    assert {t["state"] for t in st["trials"]} <= {"queued", "admitted"}, st["trials"]
    listed = json.loads(server.tau("sweep", "list", "-o", "json").stdout)
    assert [s["id"] for s in listed] == [sweep_id]
    board = server.tau("sweep", "status", "cli-sweep")  # by name: the newest
    assert board.returncode == 0 and f"{sweep_id}-t1" in board.stdout, board.stderr
    assert "2 of 6 trials submitted" in board.stdout and "lr=0.1 layers=4" in board.stdout
    gone = server.tau("sweep", "cancel", sweep_id)
    assert gone.returncode == 0 and f"sweep {sweep_id} cancelled" in gone.stdout, gone.stderr
    after = json.loads(server.tau("sweep", "status", sweep_id, "-o", "json").stdout)
    assert after["counts"] == {"cancelled": 2} and after["submitted"] == 2


def test_a_tau_yaml_without_a_sweep_is_refused_with_the_fix(
    server: HubServer, tmp_path: Path
) -> None:
    project = _project(tmp_path, tb.tau_yaml("plain"))
    out = server.tau("sweep", "submit", str(project))
    assert out.returncode != 0
    assert "has no sweep section" in out.stderr and "tau run submit" in out.stderr, out.stderr
    missing = server.tau("sweep", "status", "nope")
    assert missing.returncode != 0 and "no sweep named 'nope'" in missing.stderr
