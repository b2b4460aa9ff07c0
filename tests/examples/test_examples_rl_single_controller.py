"""examples/rl-single-controller on the embedded platform (real tau script, hub, agent,
Ray with emulated GPUs): the roles start with tau.yaml's resources, a killed role actor
is restarted by Ray and the loop goes on, the first attempt fails on purpose after a
checkpoint and the platform's retry resumes from it; the policy learns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from taugrid import errors
from taugrid.sdk.job import roles
from tests.cli import platform_env as pe

IP = "127.0.29.11"
EXAMPLE = pe.ROOT / "examples" / "rl-single-controller"
tau = pe.tau


def test_roles_give_actor_options_and_an_unknown_role_is_a_user_error() -> None:
    config = str(EXAMPLE / "tau.yaml")
    actor = roles.actor_options("actor", config)
    assert actor == {"num_cpus": 0.5, "num_gpus": 1.0, "max_restarts": 3, "max_task_retries": 3}
    assert roles.actor_options("reward", config)["max_restarts"] == -1
    with pytest.raises(errors.UserError, match="role 'judge' is not declared") as exc:
        roles.actor_options("judge", config)
    assert "actor" in exc.value.message and "add 'roles:" in exc.value.hint


env = pe.platform_fixture(IP)


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(900)
def test_rl_recovers_from_a_killed_role_and_resumes_from_its_checkpoint(
    env: dict[str, str], tmp_path: Path
) -> None:
    args = ["--steps", "30", "--kill-role", "reward", "--kill-at-step", "17"]
    args += ["--fail-at-step", "12"]
    work = pe.copy_example(EXAMPLE, tmp_path / "work", lambda doc: doc["run"].update(args=args))
    run = tau(env, "run", str(work), "--watch", cwd=tmp_path, timeout=900)
    assert run.returncode == 0, run.stderr + run.stdout
    run_id = next(w for w in run.stdout.split() if w.startswith("rl-single-controller-"))
    got = tau(env, "run", "get", run_id, "-d", str(tmp_path / "got"), cwd=tmp_path)
    assert got.returncode == 0, got.stderr + got.stdout
    summary = json.loads((tmp_path / "got" / "summary.json").read_text())
    assert summary["attempt"] == 2 and summary["restarted_roles"] == ["reward"]
    assert summary["reward_last10"] > 0.4  # random arms score 0.25
    logs = tau(env, "run", "logs", run_id, cwd=tmp_path).stdout
    assert "resumed from step-00000010 (step 10)" in logs, logs[-3000:]
    assert "killed role reward" in logs
