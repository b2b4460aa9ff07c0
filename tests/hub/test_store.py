"""The store on SQLite and PostgreSQL: migrations, the one-attempt invariant, phases."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa

from taugrid.lifecycle import phases as ph
from taugrid.store import db, runs, tracking


def _row(run_id: str, **kw: object) -> dict[str, object]:
    now = time.time()
    row = {
        "id": run_id,
        "name": "r",
        "workspace": "default",
        "team": "research",
        "state": "queued",
        "reason": "",
        "priority": 0,
        "gpus": 2,
        "gpu_model": "A100-80G",
        "spec": {"workers": 1},
        "config_yaml": "x",
        "cluster_id": None,
        "current_token": None,
        "attempts_used": 0,
        "quota_held": False,
        "cancel_requested": False,
        "resume_from": None,
        "not_before": 0.0,
        "created_at": now,
        "updated_at": now,
    }
    row.update(kw)
    return row


def test_migrations_are_idempotent_and_concurrent(engine: sa.Engine) -> None:
    errors: list[BaseException] = []

    def go() -> None:
        try:
            db.migrate(engine)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=go) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert "runs" in sa.inspect(engine).get_table_names()


def test_only_one_attempt_can_start_a_waiting_run(engine: sa.Engine) -> None:
    store = runs.RunStore(engine)
    store.insert_run(_row("r-1"), ph.initial_phases(time.time()).values())
    first = store.create_attempt("r-1", "c1", {})
    second = store.create_attempt("r-1", "c2", {})
    assert first is not None and second is None
    run = store.get_run("r-1")
    assert run is not None
    assert (
        run["state"] == "placed"
        and run["current_token"] == first["token"]
        and run["attempts_used"] == 1
    )


def test_before_commit_runs_while_the_attempt_is_invisible_and_can_undo_it(
    engine: sa.Engine,
) -> None:
    """The hub writes the record's FENCE in ``before_commit``: an agent that reads its
    attempt from the store must never find the FENCE of the previous one."""
    store = runs.RunStore(engine)
    store.insert_run(_row("r-1"), [])
    seen: list[tuple[int, int]] = []

    def fence(token: int) -> None:
        seen.append((token, len(store.attempts_for_run("r-1"))))

    a = store.create_attempt("r-1", "c1", {}, before_commit=fence)
    assert a is not None and seen == [(a["token"], 0)]

    store.insert_run(_row("r-2"), [])

    def fail(token: int) -> None:
        raise OSError("record store down")

    with pytest.raises(OSError, match="record store down"):
        store.create_attempt("r-2", "c1", {}, before_commit=fail)
    run = store.get_run("r-2")
    assert run is not None and run["state"] == "queued" and run["current_token"] is None
    assert store.attempts_for_run("r-2") == []


def test_run_with_attempts_reads_the_run_and_its_attempts_together(engine: sa.Engine) -> None:
    store = runs.RunStore(engine)
    store.insert_run(_row("r-1"), [])
    assert store.run_with_attempts("r-1") == (store.get_run("r-1"), [])
    first = store.create_attempt("r-1", "c1", {"workers": 2})
    assert first is not None
    both = store.run_with_attempts("r-1")
    assert both is not None
    run, attempts = both
    assert run == store.get_run("r-1") and run["state"] == "placed"
    assert attempts == store.attempts_for_run("r-1") and attempts[0]["placement"] == {"workers": 2}
    assert store.run_with_attempts("r-missing") is None


def test_fencing_tokens_increase_across_runs(engine: sa.Engine) -> None:
    store = runs.RunStore(engine)
    tokens = []
    for i in range(3):
        store.insert_run(_row(f"r-{i}"), [])
        a = store.create_attempt(f"r-{i}", "c", {})
        assert a is not None
        tokens.append(a["token"])
    assert tokens == sorted(tokens) and len(set(tokens)) == 3


def test_phase_merge_keeps_done_and_records_events(engine: sa.Engine) -> None:
    store = runs.RunStore(engine)
    store.insert_run(_row("r-p"), ph.initial_phases(1.0).values())
    done = ph.PhaseRecord(ph.Phase.ADMITTED, ph.PhaseStatus.DONE, "queue", "ok", 2.0)
    assert store.set_phase("r-p", done)
    back = ph.PhaseRecord(ph.Phase.ADMITTED, ph.PhaseStatus.ACTIVE, "queue", "again", 3.0)
    assert not store.set_phase("r-p", back)
    assert store.phases("r-p")[ph.Phase.ADMITTED].status is ph.PhaseStatus.DONE
    assert store.set_phase("r-p", back, reset=True)
    kinds = [e["kind"] for e in store.events("r-p")]
    assert kinds.count("phase") == 2 and kinds[0] == "submitted"


def test_quota_usage_counts_only_held_runs(engine: sa.Engine) -> None:
    store = runs.RunStore(engine)
    store.insert_run(_row("a", quota_held=True, gpus=3), [])
    store.insert_run(_row("b", quota_held=True, gpus=2), [])
    store.insert_run(_row("c", quota_held=False, gpus=8), [])
    assert store.quota_usage() == {("research", "A100-80G"): 5}


def test_find_run_by_name_returns_newest_within_workspaces(engine: sa.Engine) -> None:
    store = runs.RunStore(engine)
    store.insert_run(_row("q-1", name="q", created_at=1.0), [])
    store.insert_run(_row("q-2", name="q", created_at=2.0), [])
    store.insert_run(_row("q-3", name="q", created_at=3.0, workspace="other"), [])
    found = store.find_run("q", ["default"])
    assert found is not None and found["id"] == "q-2"
    assert store.find_run("q-3", ["default"]) is None


def test_the_migrated_schema_is_the_one_the_code_declares(engine: sa.Engine) -> None:
    """``store/schema.py`` and the migrations describe one schema: a column added to
    one and not the other (or typed differently) fails here, on both databases."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from taugrid.store import schema

    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(ctx, schema.metadata)
    assert diff == [], diff


def test_tracking_pending_lists_runs_with_metrics_past_their_cursor_or_an_unsent_end(
    engine: sa.Engine,
) -> None:
    """``store.tracking`` (the MLflow bridge's progress): a run is pending while it has
    metric rows past its mirror's cursor or has ended without its end sent; other
    workspaces' runs never are."""
    store, mirrors = runs.RunStore(engine), tracking.TrackingStore(engine)
    store.insert_run(_row("quiet"), [])
    store.insert_run(_row("busy"), [])
    store.insert_run(_row("ended", state="succeeded"), [])
    store.insert_run(_row("other", workspace="elsewhere", state="failed"), [])
    point = {"attempt": 1, "step": 1, "name": "loss", "value": 1.0, "wall_time": time.time()}
    store.add_metrics("busy", [point, {**point, "step": 2}])

    def pending() -> list[str]:
        return sorted(r["id"] for r in mirrors.pending(["default"], 10))

    assert pending() == ["busy", "ended"]
    sent = mirrors.metrics_after("busy", 0, 1)
    assert [m["step"] for m in sent] == [1]
    mirrors.save("busy", mlflow_run_id="m1", metric_id=sent[0]["id"])
    assert pending() == ["busy", "ended"]  # step 2 is left
    last = mirrors.metrics_after("busy", sent[0]["id"], 10)
    mirrors.save("busy", metric_id=last[-1]["id"])
    mirrors.save("ended", done=True)
    assert pending() == []
    assert mirrors.mirror("busy") == {
        **(mirrors.mirror("busy") or {}),
        "mlflow_run_id": "m1",
        "done": False,
        "error": "",
    }
