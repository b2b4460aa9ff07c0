"""Phase 3 of ``cycle.schedule`` through the admission core: quota views in, decisions out."""

from __future__ import annotations

from taugrid.platform import models as pm
from taugrid.scheduling import cycle
from taugrid.scheduling import snapshot as snap

Out = cycle.Outcome


def _cluster(gpus: int = 16) -> snap.ClusterView:
    nodes = tuple(snap.NodeView(f"n{i}", "A100", 8, 8, 64, 2**40) for i in range(max(1, gpus // 8)))
    return snap.ClusterView("east", "us-east", True, nodes)


def _run(
    rid: str, team: str, gpus: int, priority: int = 0, t: float = 0.0, **kw: object
) -> snap.PendingRun:
    return snap.PendingRun(rid, team, priority, t, 1, gpus, 1, 1, **kw)  # type: ignore[arg-type]


def _snapshot(
    quotas: list[snap.QuotaView], admitted: tuple[snap.AdmittedRun, ...] = ()
) -> snap.Snapshot:
    return snap.Snapshot(10.0, (_cluster(),), tuple(quotas), admitted)


def _by_id(decisions: list[cycle.Decision]) -> dict[str, cycle.Decision]:
    return {d.run_id: d for d in decisions}


def test_borrowing_from_the_cohort_is_reported() -> None:
    quotas = [snap.QuotaView("a", "A100", 4, 0, "lab"), snap.QuotaView("b", "A100", 4, 0, "lab")]
    d = _by_id(cycle.schedule(_snapshot(quotas), [_run("x", "a", 8)], cycle.default_policy()))
    assert (d["x"].outcome, d["x"].borrowed, d["x"].flavor) == (Out.PLACED, 4, "A100")


def test_borrowing_limit_from_the_quota_view() -> None:
    quotas = [
        snap.QuotaView("a", "A100", 4, 0, "lab", borrowing_limit=2),
        snap.QuotaView("b", "A100", 4, 0, "lab"),
    ]
    d = _by_id(cycle.schedule(_snapshot(quotas), [_run("x", "a", 8)], cycle.default_policy()))
    assert (
        d["x"].outcome is Out.WAITING_QUOTA
        and "at most 6 can ever be available to it (nominal 4, borrowing limit 2)" in d["x"].reason
    )


def test_higher_priority_waits_with_the_runs_to_preempt() -> None:
    quotas = [snap.QuotaView("a", "A100", 8, 8)]
    held = (snap.AdmittedRun("low", "a", "A100", 8, 0, 1.0),)
    pending = [_run("high", "a", 8, priority=100), _run("low", "a", 8, admitted=True)]
    d = _by_id(cycle.schedule(_snapshot(quotas, held), pending, cycle.default_policy()))
    assert d["high"].outcome is Out.WAITING_QUOTA and d["high"].preempt == ("low",)
    assert d["high"].preempt_reasons[0].startswith("Preempted: preempted by high (priority 100")
    # The target is admitted but not placed yet: it must not be placed in this cycle.
    assert d["low"].outcome is Out.WAITING_QUOTA and d["low"].cluster_id is None


def test_usage_not_listed_as_admitted_runs_cannot_be_preempted() -> None:
    quotas = [snap.QuotaView("a", "A100", 8, 8)]
    d = _by_id(
        cycle.schedule(_snapshot(quotas), [_run("high", "a", 8, 100)], cycle.default_policy())
    )
    assert d["high"].outcome is Out.WAITING_QUOTA and d["high"].preempt == ()


def test_reclaim_preempts_a_borrowing_team() -> None:
    quotas = [snap.QuotaView("a", "A100", 8, 0, "lab"), snap.QuotaView("b", "A100", 8, 16, "lab")]
    held = (
        snap.AdmittedRun("b1", "b", "A100", 8, 0, 1.0),
        snap.AdmittedRun("b2", "b", "A100", 8, 0, 2.0),
    )
    d = _by_id(cycle.schedule(_snapshot(quotas, held), [_run("x", "a", 8)], cycle.default_policy()))
    assert d["x"].preempt == ("b2",) and "quota reclaimed" in d["x"].preempt_reasons[0]


def test_strict_fifo_from_the_quota_view() -> None:
    strict = pm.QueueingStrategy.STRICT_FIFO
    quotas = [snap.QuotaView("a", "A100", 8, 6, strategy=strict)]
    pending = [_run("head", "a", 4, t=1), _run("small", "a", 1, t=2)]
    d = _by_id(cycle.schedule(_snapshot(quotas), pending, cycle.default_policy()))
    assert d["small"].outcome is Out.WAITING_QUOTA and "StrictFIFO" in d["small"].reason


def test_runs_without_gpus_or_quota() -> None:
    pending = [_run("cpu", "none", 0), _run("gpu", "none", 1), _run("later", "a", 1, not_before=99)]
    d = _by_id(cycle.schedule(_snapshot([]), pending, cycle.default_policy()))
    assert d["cpu"].outcome is Out.PLACED
    assert d["gpu"].outcome is Out.WAITING_QUOTA and "team none has no quota" in d["gpu"].reason
    assert d["later"].outcome is Out.NOT_YET


def test_decisions_stay_in_head_order() -> None:
    quotas = [snap.QuotaView("a", "A100", 16, 0)]
    pending = [_run("b", "a", 1, 0, t=2), _run("a", "a", 1, 5, t=3), _run("c", "a", 1, 0, t=1)]
    ids = [d.run_id for d in cycle.schedule(_snapshot(quotas), pending, cycle.default_policy())]
    assert ids == ["a", "c", "b"]
