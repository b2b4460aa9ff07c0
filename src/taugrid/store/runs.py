"""Run, attempt, phase, event and metric persistence (the hub's current state + history).

Owns every read and write of those tables. Callers get plain ``dict`` rows. Invariants:
- ``create_attempt`` is the only way a run gets an execution; it moves the run from
  queued/admitted to placed and sets ``runs.current_token`` in the same transaction,
  conditional on the run still waiting — so two schedulers can never both start it.
- Every state change written here also appends an ``events`` row.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import sqlalchemy as sa

from taugrid.lifecycle import phases as ph
from taugrid.lifecycle import states as st
from taugrid.store import schema as t

__all__ = ["RunStore"]

Row = dict[str, Any]
_WAITING = (st.RunState.QUEUED.value, st.RunState.ADMITTED.value)


def _rows(result: sa.CursorResult[Any]) -> list[Row]:
    return [dict(r._mapping) for r in result]


_ATTEMPT = tuple(col for col in t.attempts.c if col.name != "verdicts")
"""An attempt's columns but its placement's verdicts (``attempt_verdicts``): the hot
readers (a sync, a scheduling tick) never parse one verdict per cluster of the fleet."""


def _part(row: sa.RowMapping, columns: Iterable[sa.Column[Any]], label: str) -> Row:
    """``columns`` of a joined row labelled ``<label>_<column>``."""
    return {col.name: row[f"{label}_{col.name}"] for col in columns}


class RunStore:
    """Repository over runs, attempts, phases, events and metrics."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    # -- runs ---------------------------------------------------------------------
    def insert_run(self, row: Row, phases: Iterable[ph.PhaseRecord]) -> None:
        with self.engine.begin() as c:
            c.execute(t.runs.insert().values(**row))
            for rec in phases:
                c.execute(t.phases.insert().values(_phase_row(row["id"], rec)))
            _event(c, row["id"], "submitted", {"state": row["state"]}, row["created_at"])

    def get_run(self, run_id: str) -> Row | None:
        with self.engine.connect() as c:
            r = c.execute(sa.select(t.runs).where(t.runs.c.id == run_id)).first()
        return dict(r._mapping) if r else None

    def get_runs(self, run_ids: list[str]) -> dict[str, Row]:
        """Runs by ID in one query (missing IDs are left out)."""
        if not run_ids:
            return {}
        q = sa.select(t.runs).where(t.runs.c.id.in_(sorted(set(run_ids))))
        with self.engine.connect() as c:
            return {r["id"]: r for r in _rows(c.execute(q))}

    def find_run(self, ref: str, workspaces: list[str] | None = None) -> Row | None:
        """A run by ID, else the newest run with that name (within ``workspaces``)."""
        q = sa.select(t.runs).where(sa.or_(t.runs.c.id == ref, t.runs.c.name == ref))
        if workspaces is not None:
            q = q.where(t.runs.c.workspace.in_(workspaces))
        q = q.order_by((t.runs.c.id == ref).desc(), t.runs.c.created_at.desc()).limit(1)
        with self.engine.connect() as c:
            r = c.execute(q).first()
        return dict(r._mapping) if r else None

    def ids_named(
        self, name: str, workspaces: list[str] | None = None, limit: int = 10
    ) -> list[str]:
        """IDs of the runs named ``name`` (within ``workspaces``), newest first."""
        q = sa.select(t.runs.c.id).where(t.runs.c.name == name)
        if workspaces is not None:
            q = q.where(t.runs.c.workspace.in_(workspaces))
        q = q.order_by(t.runs.c.created_at.desc()).limit(limit)
        with self.engine.connect() as c:
            return [r[0] for r in c.execute(q)]

    def list_runs(
        self,
        workspaces: list[str] | None = None,
        states: list[str] | None = None,
        limit: int = 100,
    ) -> list[Row]:
        cols = [c for c in t.runs.c if c.name not in ("spec", "config_yaml")]
        q = sa.select(*cols).order_by(t.runs.c.created_at.desc()).limit(limit)
        if workspaces is not None:
            q = q.where(t.runs.c.workspace.in_(workspaces))
        if states:
            q = q.where(t.runs.c.state.in_(states))
        with self.engine.connect() as c:
            return _rows(c.execute(q))

    def update_run(self, run_id: str, *, event: str | None = None, **fields: Any) -> None:
        now = time.time()
        with self.engine.begin() as c:
            c.execute(t.runs.update().where(t.runs.c.id == run_id).values(updated_at=now, **fields))
            if event:
                _event(c, run_id, event, _jsonable(fields), now)

    def transition(
        self, run_id: str, from_states: tuple[str, ...], *, event: str, **fields: Any
    ) -> bool:
        """Update a run only while it is in ``from_states`` and not being cancelled.

        The scheduler and agents decide on snapshots; this makes their write lose
        cleanly against a concurrent cancel instead of resurrecting the run.
        """
        now = time.time()
        with self.engine.begin() as c:
            n = c.execute(
                t.runs.update()
                .where(
                    t.runs.c.id == run_id,
                    t.runs.c.state.in_(from_states),
                    t.runs.c.cancel_requested.is_(False),
                )
                .values(updated_at=now, **fields)
            ).rowcount
            if n:
                _event(c, run_id, event, _jsonable(fields), now)
        return bool(n)

    def waiting_runs(self) -> list[Row]:
        """Runs the scheduler should look at: queued, or admitted without a cluster."""
        q = sa.select(t.runs).where(
            t.runs.c.state.in_(_WAITING), t.runs.c.cancel_requested.is_(False)
        )
        with self.engine.connect() as c:
            return _rows(c.execute(q))

    def quota_usage(self) -> dict[tuple[str, str], float]:
        """GPUs held per (team, gpu_model) by runs whose quota is not yet released (a run
        on a shared GPU holds its share: 0.5)."""
        q = (
            sa.select(t.runs.c.team, t.runs.c.gpu_model, sa.func.sum(t.runs.c.gpus))
            .where(t.runs.c.quota_held == sa.true())
            .group_by(t.runs.c.team, t.runs.c.gpu_model)
        )
        with self.engine.connect() as c:
            return {(r[0], r[1] or ""): round(float(r[2] or 0), 6) for r in c.execute(q)}

    def holding_quota(self) -> list[Row]:
        """Runs whose quota is held (admitted, placed, running): preemption candidates."""
        cols = (
            t.runs.c.id,
            t.runs.c.team,
            t.runs.c.gpu_model,
            t.runs.c.gpus,
            t.runs.c.priority,
            t.runs.c.created_at,
        )
        q = sa.select(*cols).where(t.runs.c.quota_held == sa.true())
        with self.engine.connect() as c:
            return _rows(c.execute(q))

    def count_by_state(self) -> dict[str, int]:
        q = sa.select(t.runs.c.state, sa.func.count()).group_by(t.runs.c.state)
        with self.engine.connect() as c:
            return {str(r[0]): int(r[1]) for r in c.execute(q)}

    def count_by_state_workspace(self) -> dict[tuple[str, str], int]:
        """``{(state, workspace): runs}`` (for the metrics)."""
        cols = (t.runs.c.state, t.runs.c.workspace)
        q = sa.select(*cols, sa.func.count()).group_by(*cols)
        with self.engine.connect() as c:
            return {(str(r[0]), str(r[1])): int(r[2]) for r in c.execute(q)}

    def live_runs(self) -> list[Row]:
        """Runs not ended, with their current attempt's cluster, start and last step and
        the time of their last metric and last event (``None`` when there is none)."""
        terminal = [s.value for s in st.TERMINAL_RUN_STATES]
        a = t.attempts
        last_metric = sa.select(sa.func.max(t.metrics.c.wall_time)).where(
            t.metrics.c.run_id == t.runs.c.id
        )
        last_event = sa.select(sa.func.max(t.events.c.ts)).where(t.events.c.run_id == t.runs.c.id)
        q = (
            sa.select(
                t.runs.c.id,
                t.runs.c.workspace,
                t.runs.c.team,
                t.runs.c.state,
                t.runs.c.gpus,
                t.runs.c.attempts_used,
                a.c.cluster_id,
                a.c.started_at,
                a.c.last_step,
                last_metric.scalar_subquery().label("last_metric_at"),
                last_event.scalar_subquery().label("last_event_at"),
            )
            .select_from(t.runs.outerjoin(a, a.c.token == t.runs.c.current_token))
            .where(t.runs.c.state.not_in(terminal))
        )
        with self.engine.connect() as c:
            return _rows(c.execute(q.order_by(t.runs.c.id)))

    def count_runs(self) -> int:
        with self.engine.connect() as c:
            return int(c.execute(sa.select(sa.func.count()).select_from(t.runs)).scalar_one())

    # -- attempts -----------------------------------------------------------------
    def create_attempt(
        self,
        run_id: str,
        cluster_id: str,
        placement: Row,
        *,
        verdicts: list[Row] | None = None,
        before_commit: Callable[[int], None] | None = None,
    ) -> Row | None:
        """Start attempt N+1 on ``cluster_id``; None when the run no longer waits.
        ``before_commit(token)`` runs before any other reader can see the attempt (the
        hub writes the record's ``FENCE`` there: an agent that receives the attempt
        never finds the previous value); when it raises, nothing is created."""
        now = time.time()
        with self.engine.begin() as c:
            run = c.execute(
                sa.select(t.runs).where(t.runs.c.id == run_id, t.runs.c.state.in_(_WAITING))
            ).first()
            if run is None or run.cancel_requested:
                return None
            number = int(run.attempts_used) + 1
            token = c.execute(
                t.attempts.insert().values(
                    run_id=run_id,
                    number=number,
                    cluster_id=cluster_id,
                    state=st.AttemptState.ASSIGNED.value,
                    placement=placement,
                    verdicts=verdicts,
                    spans=bool((placement or {}).get("guests")),
                    nodes=[],
                    resumed_from=run.resume_from,
                    created_at=now,
                    reason="",
                )
            ).inserted_primary_key[0]  # type: ignore[index]
            done = c.execute(
                t.runs.update()
                .where(t.runs.c.id == run_id, t.runs.c.state.in_(_WAITING))
                .values(
                    state=st.RunState.PLACED.value,
                    cluster_id=cluster_id,
                    current_token=token,
                    attempts_used=number,
                    updated_at=now,
                    reason="",
                )
            ).rowcount
            if done != 1:
                raise sa.exc.InvalidRequestError(f"run {run_id} changed while placing")
            _event(
                c,
                run_id,
                "attempt_created",
                {"token": token, "number": number, "cluster": cluster_id},
                now,
            )
            a = c.execute(sa.select(*_ATTEMPT).where(t.attempts.c.token == token)).one()
            if before_commit is not None:
                before_commit(int(token))
        return dict(a._mapping)

    def attempt_verdicts(self, token: int) -> list[Row]:
        """Every cluster's verdict stored when the attempt was placed (explain-placement)."""
        q = sa.select(t.attempts.c.verdicts).where(t.attempts.c.token == token)
        with self.engine.connect() as c:
            return list(c.execute(q).scalar() or [])

    def get_attempt(self, token: int) -> Row | None:
        with self.engine.connect() as c:
            r = c.execute(sa.select(*_ATTEMPT).where(t.attempts.c.token == token)).first()
        return dict(r._mapping) if r else None

    def run_with_attempts(self, run_id: str) -> tuple[Row, list[Row]] | None:
        """The run and its attempts as one statement saw them: a placement commits the
        new attempt and the run's state together, and two separate reads could show one
        without the other (a run ``admitted`` with the attempt that placed it)."""
        q = (
            sa.select(t.runs, *_ATTEMPT)
            .select_from(t.runs.outerjoin(t.attempts, t.attempts.c.run_id == t.runs.c.id))
            .where(t.runs.c.id == run_id)
            .order_by(t.attempts.c.number)
            .set_label_style(sa.LABEL_STYLE_TABLENAME_PLUS_COL)
        )
        with self.engine.connect() as c:
            rows = [r._mapping for r in c.execute(q)]
        if not rows:
            return None
        run = _part(rows[0], t.runs.c, "runs")
        return run, [
            _part(r, _ATTEMPT, "attempts") for r in rows if r["attempts_token"] is not None
        ]

    def current_attempts(self, run_state: str, attempt_state: str) -> list[Row]:
        """The current attempts in ``attempt_state`` of the runs in ``run_state``, each
        with its run's ``cancel_requested`` (one statement; no run's spec is read)."""
        q = (
            sa.select(*_ATTEMPT, t.runs.c.cancel_requested)
            .join(t.runs, t.attempts.c.token == t.runs.c.current_token)
            .where(t.runs.c.state == run_state, t.attempts.c.state == attempt_state)
            .order_by(t.attempts.c.token)
        )
        with self.engine.connect() as c:
            return _rows(c.execute(q))

    def attempts_for_run(self, run_id: str) -> list[Row]:
        q = sa.select(*_ATTEMPT).where(t.attempts.c.run_id == run_id).order_by(t.attempts.c.number)
        with self.engine.connect() as c:
            return _rows(c.execute(q))

    def moved_attempts(self) -> list[Row]:
        """Ended attempts that continued a run on another cluster than its previous
        attempt: ``token, state, ended_at, cluster_id, prev_cluster_id``."""
        a, prev = t.attempts.alias("a"), t.attempts.alias("prev")
        q = (
            sa.select(
                a.c.token,
                a.c.state,
                a.c.ended_at,
                a.c.cluster_id,
                prev.c.cluster_id.label("prev_cluster_id"),
            )
            .join(prev, sa.and_(prev.c.run_id == a.c.run_id, prev.c.number == a.c.number - 1))
            .where(a.c.cluster_id != prev.c.cluster_id, a.c.ended_at.is_not(None))
        )
        with self.engine.connect() as c:
            return _rows(c.execute(q))

    def unreleased_attempts(self) -> list[Row]:
        """Every attempt whose GPUs are not released yet, on any cluster."""
        q = sa.select(*_ATTEMPT).where(t.attempts.c.released == sa.false())
        with self.engine.connect() as c:
            return _rows(c.execute(q.order_by(t.attempts.c.token)))

    def unreleased_with_runs(self) -> list[tuple[Row, Row]]:
        """Every unreleased attempt with its run (two queries): what one scheduling
        tick's limits and snapshot both work from."""
        unreleased = self.unreleased_attempts()
        by_id = self.get_runs([a["run_id"] for a in unreleased])
        return [(a, by_id[a["run_id"]]) for a in unreleased if a["run_id"] in by_id]

    def unreleased_spans(self) -> list[Row]:
        """The unreleased attempts that lend worker groups of other clusters (``spans``)."""
        q = sa.select(*_ATTEMPT).where(
            t.attempts.c.released == sa.false(), t.attempts.c.spans.is_(True)
        )
        with self.engine.connect() as c:
            return _rows(c.execute(q.order_by(t.attempts.c.token)))

    def clusters_with_unreleased(self) -> set[str]:
        """The clusters that have an unreleased attempt (one query for the whole fleet)."""
        q = sa.select(t.attempts.c.cluster_id).where(t.attempts.c.released == sa.false()).distinct()
        with self.engine.connect() as c:
            return {str(r[0]) for r in c.execute(q) if r[0] is not None}

    def attempts_on_cluster(self, cluster_id: str, *, unreleased: bool = True) -> list[Row]:
        q = sa.select(*_ATTEMPT).where(t.attempts.c.cluster_id == cluster_id)
        if unreleased:
            q = q.where(t.attempts.c.released == sa.false())
        with self.engine.connect() as c:
            return _rows(c.execute(q.order_by(t.attempts.c.token)))

    def claim_attempt(self, token: int, seen: str, state: str) -> bool:
        """Set the attempt's ``state`` only if it is still ``seen`` (compare-and-set): two
        deciders that read it at once (an agent's report, the leader's lost-contact
        check) never both end it. Whether this caller won."""
        q = (
            t.attempts.update()
            .where(t.attempts.c.token == token, t.attempts.c.state == seen)
            .values(state=state)
        )
        with self.engine.begin() as c:
            return bool(c.execute(q).rowcount)

    def update_attempt(self, token: int, *, event: str | None = None, **fields: Any) -> None:
        with self.engine.begin() as c:
            c.execute(t.attempts.update().where(t.attempts.c.token == token).values(**fields))
            if event:
                run_id = c.execute(
                    sa.select(t.attempts.c.run_id).where(t.attempts.c.token == token)
                ).scalar_one()
                _event(c, run_id, event, {"token": token, **_jsonable(fields)}, time.time())

    # -- phases, events, metrics ----------------------------------------------------
    def set_phase(
        self, run_id: str, rec: ph.PhaseRecord, *, reset: bool = False, quiet: bool = False
    ) -> bool:
        """Merge ``rec`` into the stored phase; True when it changed.

        Every change is an event, except with ``quiet`` one that keeps the phase's status
        and source (a progress note such as the latest step: the row has it, and the
        run's history is not one line per metrics update).
        """
        with self.engine.begin() as c:
            cur = c.execute(
                sa.select(t.phases).where(
                    t.phases.c.run_id == run_id, t.phases.c.phase == rec.phase.value
                )
            ).first()
            old = _phase_rec(dict(cur._mapping)) if cur else None
            new = ph.merge(old, rec, reset=reset)
            if new == old:
                return False
            key = (t.phases.c.run_id == run_id) & (t.phases.c.phase == rec.phase.value)
            if old is None:
                c.execute(t.phases.insert().values(_phase_row(run_id, new)))
            else:
                c.execute(t.phases.update().where(key).values(_phase_row(run_id, new)))
            if not (quiet and old and (old.status, old.source) == (new.status, new.source)):
                _event(c, run_id, "phase", _phase_row(run_id, new), rec.ts)
            return True

    def in_phase(
        self, state: str, phase: ph.Phase, status: ph.PhaseStatus, source: str
    ) -> list[str]:
        """Ids of the runs in ``state`` whose ``phase`` has ``status`` and ``source``: one
        indexed query (``ix_phases_phase_status``), however many runs the store keeps."""
        q = (
            sa.select(t.runs.c.id)
            .join(t.phases, t.phases.c.run_id == t.runs.c.id)
            .where(t.phases.c.phase == phase.value, t.phases.c.status == status.value)
            .where(t.phases.c.source == source, t.runs.c.state == state)
            .order_by(t.runs.c.created_at)
        )
        with self.engine.connect() as c:
            return [r.id for r in c.execute(q)]

    def phases(self, run_id: str) -> dict[ph.Phase, ph.PhaseRecord]:
        with self.engine.connect() as c:
            rows = _rows(c.execute(sa.select(t.phases).where(t.phases.c.run_id == run_id)))
        return {ph.Phase(r["phase"]): _phase_rec(r) for r in rows}

    def add_event(self, run_id: str | None, kind: str, payload: Mapping[str, Any]) -> None:
        with self.engine.begin() as c:
            _event(c, run_id, kind, dict(payload), time.time())

    def events(self, run_id: str, after_id: int = 0, kind: str | None = None) -> list[Row]:
        q = (
            sa.select(t.events)
            .where(t.events.c.run_id == run_id, t.events.c.id > after_id)
            .order_by(t.events.c.id)
        )
        if kind is not None:
            q = q.where(t.events.c.kind == kind)
        with self.engine.connect() as c:
            return _rows(c.execute(q))

    def node_events(self, limit: int = 10_000) -> list[Row]:
        """The newest platform events about nodes (``node_*`` kinds, no run), oldest first."""
        q = (
            sa.select(t.events)
            .where(t.events.c.run_id.is_(None), t.events.c.kind.like("node\\_%", escape="\\"))
            .order_by(t.events.c.id.desc())
            .limit(limit)
        )
        with self.engine.connect() as c:
            return list(reversed(_rows(c.execute(q))))

    def add_metrics(
        self,
        run_id: str,
        rows: list[Row],
        token: int | None = None,
        offsets: dict[str, int | None] | None = None,
    ) -> None:
        """Store metric rows and, in the same transaction, how far attempt ``token``'s
        reports have been stored (``hub.agents.delivery``): a row is never stored twice."""
        fields = {k: v for k, v in (offsets or {}).items() if v is not None}
        if not rows and not (token and fields):
            return
        with self.engine.begin() as c:
            if rows:
                c.execute(t.metrics.insert(), [{"run_id": run_id, **r} for r in rows])
            if token and fields:
                c.execute(t.attempts.update().where(t.attempts.c.token == token).values(**fields))

    def metric_points(self, run_ids: list[str], name: str) -> dict[str, list[tuple[int, float]]]:
        """(step, value) of metric ``name`` per run, in one query (runs without any: absent)."""
        q = (
            sa.select(t.metrics.c.run_id, t.metrics.c.step, t.metrics.c.value)
            .where(t.metrics.c.run_id.in_(run_ids), t.metrics.c.name == name)
            .where(t.metrics.c.step.is_not(None))
            .order_by(t.metrics.c.id)
        )
        out: dict[str, list[tuple[int, float]]] = {}
        with self.engine.connect() as c:
            for run_id, step, value in c.execute(q):
                out.setdefault(run_id, []).append((int(step), float(value)))
        return out

    def metrics(self, run_id: str, name: str | None = None) -> list[Row]:
        q = sa.select(t.metrics).where(t.metrics.c.run_id == run_id)
        if name:
            q = q.where(t.metrics.c.name == name)
        with self.engine.connect() as c:
            return _rows(c.execute(q.order_by(t.metrics.c.id)))


def _phase_row(run_id: str, rec: ph.PhaseRecord) -> Row:
    return {
        "run_id": run_id,
        "phase": rec.phase.value,
        "status": rec.status.value,
        "source": rec.source,
        "reason": rec.reason,
        "ts": rec.ts,
    }


def _phase_rec(r: Row) -> ph.PhaseRecord:
    return ph.PhaseRecord(
        ph.Phase(r["phase"]), ph.PhaseStatus(r["status"]), r["source"], r["reason"], r["ts"]
    )


def _jsonable(fields: Mapping[str, Any]) -> Row:
    return {
        k: v
        for k, v in fields.items()
        if isinstance(v, str | int | float | bool | list | dict | None)
    }


def _event(c: sa.Connection, run_id: str | None, kind: str, payload: Row, ts: float) -> None:
    c.execute(t.events.insert().values(run_id=run_id, kind=kind, ts=ts, payload=payload))
