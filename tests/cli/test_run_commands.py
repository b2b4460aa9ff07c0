"""``tau run`` commands against a real embedded platform (hub, agent, Ray), through the
real console script: the two entrypoint forms with ``args``, a minimal tau.yaml, ``get``
of every artifact (one of them JSON, compared byte for byte), ``--watch`` charting a
metric other than ``loss``, ``logs -o json`` and runs that share a name.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli import platform_env as pe

pytestmark = [pytest.mark.ray, pytest.mark.slow]

IP = "127.0.0.153"
JOB = """\
import json
import sys
import time

import taugrid as tau

with open("result.json", "w") as f:  # spacing json.dumps would not write: bytes must match
    f.write('{"argv":   ' + json.dumps(sys.argv[1:]) + ',\\n  "kept": "as written"}\\n')
with open("report.txt", "w") as f:
    f.write("done\\n")
for step in range(5):  # spread over several agent syncs: history must not grow per update
    tau.log({"accuracy": 0.5 + step / 10}, step=step)
    time.sleep(0.6)
tau.save_artifact("result.json")
tau.save_artifact("report.txt")
print("job args:", sys.argv[1:])
time.sleep(2)  # long enough for the agent to see it running (history shows that event)
"""
# A minimal tau.yaml: no schema_version (the current one is assumed).
TAU_YAML = """\
name: twoforms
run:
  entrypoint: {entrypoint}
  args: ["--lr", "0.1", "two words"]
compute:
  gpus: 0
  cpus: 1
  memory: 1Gi
"""


tau = pe.tau


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    home = tmp_path_factory.mktemp("tau-home")
    with pe.embedded_platform(home, IP, columns="40", cwd=home) as e:
        yield e


def _project(root: Path, entrypoint: str) -> Path:
    root.mkdir()
    (root / "job.py").write_text(JOB)
    (root / "tau.yaml").write_text(TAU_YAML.format(entrypoint=entrypoint))
    return root


@pytest.mark.parametrize("entrypoint", ["python job.py", "job.py"])
def test_both_entrypoint_forms_run_with_args_and_get_fetches_every_artifact(
    env: dict[str, str], tmp_path: Path, entrypoint: str
) -> None:
    work = _project(tmp_path / "work", entrypoint)
    run = tau(env, "run", str(work), "--watch", cwd=tmp_path)
    assert run.returncode == 0, run.stderr + run.stdout
    assert "accuracy  " in run.stdout  # no `loss`: the first logged metric is charted
    run_id = next(w for w in run.stdout.split() if w.startswith("twoforms-"))
    dest = tmp_path / "got"
    got = tau(env, "run", "get", run_id, "-d", str(dest), cwd=tmp_path)
    assert got.returncode == 0, got.stderr + got.stdout
    argv = json.dumps(["--lr", "0.1", "two words"])
    expected = '{"argv":   ' + argv + ',\n  "kept": "as written"}\n'
    assert (dest / "result.json").read_bytes() == expected.encode()
    assert (dest / "report.txt").read_text() == "done\n"
    manifest = json.loads((dest / "MANIFEST.json").read_text())
    assert set(manifest["artifacts"]) == {"result.json", "report.txt"}
    assert sorted(p.name for p in dest.iterdir()) == ["MANIFEST.json", "report.txt", "result.json"]
    history = tau(env, "run", "history", run_id, cwd=tmp_path).stdout  # a pipe: events whole
    started = [
        line
        for line in history.splitlines()
        if " attempt_running " in line or " attempt_starting " in line
    ]
    assert any(f"submission_id=tau-{run_id}-a1" in line for line in started), history
    assert not re.search(r"_at=\d{6,}", history), history  # times of day, not epoch seconds
    progress = [ln for ln in history.splitlines() if "progressing → active (metrics)" in ln]
    assert len(progress) == 1, history  # the latest step is in the phase, not a line per sync
    cancel = tau(env, "run", "cancel", run_id, cwd=tmp_path)
    assert cancel.stdout.strip() == f"{run_id}: already succeeded; nothing to cancel"
    one = tau(
        env,
        "run",
        "get",
        run_id,
        "--artifact",
        "result.json",
        "-d",
        str(tmp_path / "one"),
        cwd=tmp_path,
    )
    assert one.returncode == 0 and (tmp_path / "one" / "result.json").read_text().startswith("{")


def test_logs_json_and_runs_sharing_a_name(env: dict[str, str], tmp_path: Path) -> None:
    work = _project(tmp_path / "work", "job.py")
    first = tau(env, "run", str(work), "-o", "json", cwd=tmp_path)
    second = tau(env, "run", str(work), "-o", "json", cwd=tmp_path)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    old, new = json.loads(first.stdout)["id"], json.loads(second.stdout)["id"]
    status = tau(env, "run", "status", "twoforms", "-o", "json", cwd=tmp_path)
    assert json.loads(status.stdout)["id"] == new
    assert f"using the newest, {new}" in status.stderr and old in status.stderr
    listing = tau(env, "run", "list", cwd=tmp_path).stdout.splitlines()  # COLUMNS=40
    for run_id in (old, new):  # a pipe gets whole rows, however narrow COLUMNS is
        (row,) = [line for line in listing if run_id in line]
        assert "default" in row and row.split()[0] == run_id and "…" not in row
    cancel = tau(env, "run", "cancel", "twoforms", cwd=tmp_path)
    assert cancel.returncode == 2 and "pass the run ID" in cancel.stderr and old in cancel.stderr
    deadline = time.time() + 240
    while "job args:" not in tau(env, "run", "logs", new, cwd=tmp_path).stdout:
        assert time.time() < deadline, "the job's output never reached its logs"
        time.sleep(2)
    logs = tau(env, "run", "logs", new, "-o", "json", cwd=tmp_path)
    assert logs.returncode == 0, logs.stderr
    (chunk,) = [json.loads(line) for line in logs.stdout.splitlines()]
    assert chunk["run"] == new and "job args: ['--lr', '0.1', 'two words']" in chunk["text"]
    assert chunk["offset"] >= len(chunk["text"].encode()) > 0
    for ref in (old, new):
        tau(env, "run", "cancel", ref, cwd=tmp_path)
