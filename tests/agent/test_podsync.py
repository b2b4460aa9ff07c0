"""``python -m taugrid.agent.records.podsync``, the main process of a Kubernetes run's pods, run
here as the pod would run it (a real process, the quickstart as its command) against a
real record store (a directory: the same code as S3, ``record.store``):

- the code comes from the record's ``rendered/code.zip``; the job's metrics,
  checkpoints and artifacts go into the record; the command's status is the pod's;
- a second attempt starts from the first's latest checkpoint, found in the record;
- a command that fails keeps its checkpoints and stores no artifacts;
- an attempt the record has fenced stores nothing and says why;
- a first SIGTERM (Kubernetes deleting the pod) is the job's notice (``NOTICE``): the
  quickstart checkpoints on it, the SIGTERM reaches it ``NOTICE_S`` later, and the
  checkpoint is stored before the pod exits; a second SIGTERM is passed on at once;
- where the wrapper is not the pod's main process (a RayJob's driver), ``--notice`` (the
  Ray container's preStop hook) gives it that SIGTERM and returns once it has stored the
  notice's checkpoint and exited: run in a PID namespace of its own, as in a container.

The Kubernetes tier runs the same program in pods on the real node
(``tests/k8s/test_run_in_pods.py``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from taugrid import payloads as wire
from taugrid.agent.records import podsync
from taugrid.record import layout
from taugrid.record import store as recordstore
from taugrid.sdk.client import submit

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
KEY = "ml/runs/r-pod"


def _store(tmp: Path) -> recordstore.LocalRecordStore:
    store = recordstore.LocalRecordStore(tmp / "records")
    store.write(f"{KEY}/{layout.CODE_ARCHIVE}", submit.zip_dir(QUICKSTART, []))
    return store


def _attempt(tmp: Path, attempt: int, token: int) -> wire.Assignment:
    return wire.Assignment(
        token=token,
        run_id="r-pod",
        attempt=attempt,
        workspace="ml",
        spec={},
        run_dir="",
        records={"url": str(tmp / "records")},
        record_key=KEY,
    )


def _start(
    tmp: Path, a: wire.Assignment, *args: str, fence: int | None = None
) -> subprocess.Popen[str]:
    store = recordstore.LocalRecordStore(tmp / "records")
    store.write(f"{KEY}/FENCE", str(a.token if fence is None else fence).encode())
    env = {
        **os.environ,
        podsync.ATTEMPT_ENV: a.model_dump_json(),
        podsync.ROOT_ENV: str(tmp / f"pod-{a.attempt}"),
    }
    cmd = [sys.executable, "-m", "taugrid.agent.records.podsync", "--", sys.executable, "train.py"]
    return subprocess.Popen(
        [*cmd, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _run(tmp: Path, a: wire.Assignment, *args: str) -> tuple[int, str]:
    proc = _start(tmp, a, *args)
    out, _ = proc.communicate(timeout=240)
    return proc.returncode, out


def _steps(store: recordstore.RecordStore, attempt: int) -> list[int]:
    raw = store.read(f"{KEY}/metrics/metrics.jsonl") or b""
    lines = [json.loads(x) for x in raw.decode().splitlines()]
    return [m["step"] for m in lines if m["attempt"] == attempt and m["name"] == "loss"]


def test_the_pod_runs_the_records_code_and_stores_its_outputs_there(tmp_path: Path) -> None:
    store = _store(tmp_path)
    rc, out = _run(tmp_path, _attempt(tmp_path, 1, 7), "--steps", "30", "--checkpoint-every", "10")
    assert rc == 0, out
    assert _steps(store, 1) == list(range(1, 31))
    assert store.read(f"{KEY}/checkpoints/latest") == b"step-00000030\n"
    assert store.exists(f"{KEY}/checkpoints/step-00000030/_CHECKPOINT.json")
    assert store.exists(f"{KEY}/artifacts/model.npz"), out
    assert store.exists(f"{KEY}/artifacts/MANIFEST.json")


def test_a_second_attempt_resumes_from_the_checkpoint_in_the_record(tmp_path: Path) -> None:
    store = _store(tmp_path)
    args = ("--steps", "40", "--checkpoint-every", "10", "--fail-at-step", "25")
    rc, out = _run(tmp_path, _attempt(tmp_path, 1, 3), *args, "--fail-attempts", "1")
    assert rc == 3, out  # the quickstart's crash on purpose, passed on as the pod's status
    assert store.read(f"{KEY}/checkpoints/latest") == b"step-00000020\n"
    assert not store.exists(f"{KEY}/artifacts/MANIFEST.json")  # a failed attempt's: none
    rc, out = _run(tmp_path, _attempt(tmp_path, 2, 4), *args, "--fail-attempts", "1")
    assert rc == 0, out
    assert min(_steps(store, 2)) == 21  # from the first attempt's checkpoint, not step 1
    assert store.exists(f"{KEY}/artifacts/MANIFEST.json")


def test_a_fenced_attempt_runs_nothing_and_says_why(tmp_path: Path) -> None:
    store = _store(tmp_path)
    proc = _start(tmp_path, _attempt(tmp_path, 1, 5), "--steps", "5", fence=6)
    out, _ = proc.communicate(timeout=240)  # the hub revoked it: another attempt took over
    assert proc.returncode == podsync.EXIT_NOT_STORED, out
    assert "is fenced" in out and "step" not in out, out
    assert store.read(f"{KEY}/metrics/metrics.jsonl") is None


def _stepping(store: recordstore.RecordStore, proc: subprocess.Popen[str], past: int) -> None:
    deadline = time.monotonic() + 120
    while not [s for s in _steps(store, 1) if s > past]:
        assert time.monotonic() < deadline and proc.poll() is None, "no steps stored"
        time.sleep(0.2)


def test_a_first_sigterm_is_the_jobs_notice_and_the_checkpoint_it_writes_is_stored(
    tmp_path: Path,
) -> None:
    """No periodic checkpoint (every 100,000 steps): the only one is the notice's."""
    store = _store(tmp_path)
    args = ("--steps", "100000", "--checkpoint-every", "100000", "--step-sleep", "0.05")
    proc = _start(tmp_path, _attempt(tmp_path, 1, 9), *args)
    _stepping(store, proc, 10)
    proc.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    out, _ = proc.communicate(timeout=120)
    took = time.monotonic() - sent
    assert proc.returncode != 0, out
    notice = json.loads((tmp_path / "pod-1" / "out" / "NOTICE").read_text())
    assert notice["token"] == 9 and "spot reclaim" in notice["reason"]
    latest = (store.read(f"{KEY}/checkpoints/latest") or b"").decode().strip()
    assert store.exists(f"{KEY}/checkpoints/{latest}/_CHECKPOINT.json")
    assert int(latest.rsplit("-", 1)[1]) > 10  # written on the notice, then stored
    assert took >= podsync.NOTICE_S - 1, took  # the SIGTERM passed on after the notice
    assert not store.exists(f"{KEY}/artifacts/MANIFEST.json")


def test_a_second_sigterm_reaches_the_command_at_once(tmp_path: Path) -> None:
    store = _store(tmp_path)
    args = ("--steps", "100000", "--checkpoint-every", "5", "--step-sleep", "0.05")
    proc = _start(tmp_path, _attempt(tmp_path, 1, 9), *args)
    _stepping(store, proc, 10)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0, out
    assert time.monotonic() - sent < podsync.NOTICE_S - 5
    latest = (store.read(f"{KEY}/checkpoints/latest") or b"").decode().strip()
    assert store.exists(f"{KEY}/checkpoints/{latest}/_CHECKPOINT.json")


_IN_CONTAINER = """
import subprocess, sys, time
metrics, wrapped = sys.argv[1], sys.argv[2:]
wrapper = subprocess.Popen(wrapped)  # a Ray job's driver: not this namespace's first process
deadline = time.monotonic() + 120
while time.monotonic() < deadline and wrapper.poll() is None:
    try:
        if len(open(metrics).read().splitlines()) > 10:
            break
    except OSError:
        pass
    time.sleep(0.2)
t0 = time.monotonic()
hook = subprocess.run([sys.executable, "-m", "taugrid.agent.records.podsync", "--notice"])
print("hook", hook.returncode, round(time.monotonic() - t0, 1), wrapper.poll(), flush=True)
"""


def test_the_prestop_notice_reaches_a_wrapper_that_is_not_the_main_process(
    tmp_path: Path,
) -> None:
    """``--notice`` in a PID namespace (``unshare``, as a container has) beside a wrapper
    started by another process: the hook returns once the wrapper stored the notice's
    checkpoint and exited (the only checkpoint: none periodic)."""
    store = _store(tmp_path)
    a = _attempt(tmp_path, 1, 9)
    store.write(f"{KEY}/FENCE", b"9")
    env = {**os.environ, podsync.ATTEMPT_ENV: a.model_dump_json()}
    env[podsync.ROOT_ENV] = str(tmp_path / "pod-1")
    args = ["--steps", "100000", "--checkpoint-every", "100000", "--step-sleep", "0.05"]
    wrapped = [sys.executable, "-m", "taugrid.agent.records.podsync", "--"]
    wrapped += [sys.executable, "train.py", *args]
    metrics = tmp_path / "records" / KEY / "metrics" / "metrics.jsonl"
    container = ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c"]
    done = subprocess.run(
        [*container, _IN_CONTAINER, str(metrics), *wrapped],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    out = done.stdout + done.stderr
    hook = next(line.split() for line in done.stdout.splitlines() if line.startswith("hook"))
    assert hook[1] == "0" and hook[3] != "None", out  # the wrapper had exited when it returned
    assert float(hook[2]) >= podsync.NOTICE_S - 1, out  # it waited through the notice
    latest = (store.read(f"{KEY}/checkpoints/latest") or b"").decode().strip()
    assert store.exists(f"{KEY}/checkpoints/{latest}/_CHECKPOINT.json"), out
    assert int(latest.rsplit("-", 1)[1]) > 10, out  # written on the notice, then stored
