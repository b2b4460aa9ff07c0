"""The pure rules of a sweep (``scheduling.sweeps``): trial parameters, early stopping
(median and asha) and the ranking, over plain data."""

from __future__ import annotations

import pytest

from taugrid.scheduling import sweeps as core
from taugrid.spec import errors
from taugrid.spec import sweep as ss


def _spec(**kw: object) -> ss.SweepSpec:
    doc: dict[str, object] = {
        "parameters": {"lr": {"values": [0.1, 0.01]}, "bs": {"values": [16, 32, 64]}}
    }
    doc.update(kw)
    return ss.SweepSpec.model_validate(doc)


def test_a_grid_enumerates_every_combination_once_the_last_parameter_fastest() -> None:
    spec = _spec()
    got = [core.trial_params(spec, i) for i in range(spec.budget())]
    assert spec.budget() == 6
    assert got[:3] == [{"lr": 0.1, "bs": 16}, {"lr": 0.1, "bs": 32}, {"lr": 0.1, "bs": 64}]
    assert {(p["lr"], p["bs"]) for p in got} == {(a, b) for a in (0.1, 0.01) for b in (16, 32, 64)}
    assert _spec(trials=4).budget() == 4


def test_random_draws_are_reproducible_per_trial_and_stay_in_their_range() -> None:
    params = {
        "lr": {"min": 1e-5, "max": 1e-1, "log": True},
        "layers": {"min": 1, "max": 8, "integer": True},
    }
    spec = ss.SweepSpec.model_validate(
        {"method": "random", "trials": 50, "seed": 7, "parameters": params}
    )
    draws = [core.trial_params(spec, i) for i in range(50)]
    assert draws == [
        core.trial_params(spec, i) for i in range(50)
    ]  # a restarted hub draws the same
    assert all(1e-5 <= float(d["lr"]) <= 1e-1 for d in draws)
    assert all(isinstance(d["layers"], int) and 1 <= d["layers"] <= 8 for d in draws)
    small = sum(1 for d in draws if float(d["lr"]) < 1e-3)
    assert small > 15  # log scale: half the draws below the range's geometric middle
    other = ss.SweepSpec.model_validate(
        {"method": "random", "trials": 50, "seed": 8, "parameters": params}
    )
    assert core.trial_params(other, 0) != draws[0]


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ({"method": "grid", "parameters": {"lr": {"min": 0.1, "max": 1}}}, "grid needs a list"),
        ({"method": "random", "parameters": {"lr": {"values": [1]}}}, "needs trials"),
        ({"parameters": {"lr": {"values": [1], "min": 0}}}, "both values and min/max"),
        (
            {"parameters": {"lr": {"min": 1, "max": 0.5}}, "method": "random", "trials": 2},
            "not below",
        ),
        ({"parameters": {"lr": {"values": [1]}}, "early_stop": {}}, "needs sweep.metric"),
    ],
)
def test_an_inconsistent_sweep_is_refused_with_the_fix(doc: dict[str, object], says: str) -> None:
    with pytest.raises((errors.FieldError, ValueError), match=says):
        ss.SweepSpec.model_validate(doc)


def _judged(spec: ss.SweepSpec, trials: list[core.Trial]) -> dict[int, core.Decision]:
    return {d.index: d for d in core.judge(spec, trials) if d.stop}


def test_the_median_rule_stops_a_trial_worse_than_the_median_of_the_others_at_its_step() -> None:
    spec = _spec(
        metric={"name": "loss"}, early_stop={"rule": "median", "min_trials": 2, "grace_steps": 2}
    )
    done = [
        core.Trial(0, False, ((1, 2.0), (2, 1.0), (3, 0.5))),
        core.Trial(1, False, ((1, 3.0), (2, 2.0))),
    ]
    bad = core.Trial(2, True, ((1, 9.0), (2, 8.0)))
    good = core.Trial(3, True, ((1, 1.0), (2, 1.2)))
    early = core.Trial(4, True, ((1, 99.0),))  # before grace_steps: not judged yet
    stops = _judged(spec, [*done, bad, good, early])
    assert set(stops) == {2}
    assert "median 1 of 3 other trials" in stops[2].reason, stops[2].reason
    diverged = core.Trial(5, True, ((1, float("nan")), (2, float("nan"))))
    assert 5 in _judged(spec, [*done, diverged])  # NaN is the worst value
    # too few others at that step: nobody is judged
    assert _judged(spec, [done[0], bad]) == {}


def test_the_median_rule_reads_max_metrics_the_other_way() -> None:
    spec = _spec(metric={"name": "acc", "mode": "max"}, early_stop={"min_trials": 2})
    trials = [
        core.Trial(0, False, ((5, 0.9),)),
        core.Trial(1, False, ((5, 0.8),)),
        core.Trial(2, True, ((5, 0.95),)),
        core.Trial(3, True, ((5, 0.1),)),
    ]
    assert set(_judged(spec, trials)) == {3}


def test_asha_judges_each_rung_once_and_keeps_the_best_third() -> None:
    spec = _spec(metric={"name": "loss"}, early_stop={"rule": "asha", "grace_steps": 1, "eta": 3})
    assert core.rungs(spec.early_stop, 10) == [1, 3, 9]  # type: ignore[arg-type]
    first = core.Trial(0, True, ((1, 5.0),))
    (d,) = core.judge(spec, [first])  # alone at rung 1: it goes on
    assert not d.stop and d.rung == 1
    passed = core.Trial(0, True, ((1, 5.0),), rung=1)
    assert core.judge(spec, [passed]) == []  # rung 1 is judged once
    peers = [
        core.Trial(i, False, ((1, v),), rung=1) for i, v in enumerate((1.0, 2.0, 3.0), start=1)
    ]
    worse = core.Trial(9, True, ((1, 2.5),))
    stops = _judged(spec, [*peers, worse])
    assert set(stops) == {9} and "best 1/3 of the 4 trials" in stops[9].reason
    better = core.Trial(9, True, ((1, 0.5),))
    assert _judged(spec, [*peers, better]) == {}


def test_the_ranking_puts_the_best_value_first_and_trials_without_one_last() -> None:
    spec = _spec(metric={"name": "loss"})
    trials = [
        core.Trial(0, False, ((1, 3.0), (2, 2.0))),
        core.Trial(1, True),
        core.Trial(2, False, ((4, 0.5),)),
    ]
    assert core.ranking(spec, trials) == [(2, 0.5, 4), (0, 2.0, 2), (1, None, None)]
