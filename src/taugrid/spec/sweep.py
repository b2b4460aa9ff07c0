"""tau.yaml ``sweep`` section: the trials of a hyperparameter sweep and how to judge them.

Owns ``SweepSpec`` and its parts. A sweep is a set of *trials*, each one run of the same
tau.yaml with its own parameter values (``parameters``: a list of values each, or a
numeric range for random search). ``method: grid`` tries every combination (at most
``trials``), ``method: random`` draws ``trials`` combinations from ``seed``. At most
``parallel`` trials are queued or running at once; every trial is admitted under the
workspace's quota like any run. With ``metric`` the trials are ranked by the metric the
job logs (``tau.log``), and ``early_stop`` stops the ones that fall behind (the median
rule, or asynchronous successive halving). ``tau sweep submit`` submits one; ``tau run
submit`` refuses a tau.yaml that has this section.

Invariants: at least one parameter; a parameter has ``values`` or ``min`` < ``max``, not
both; ``method: grid`` needs ``values`` everywhere; ``early_stop`` needs ``metric``.
"""

from __future__ import annotations

import enum
import math
from typing import Annotated

import pydantic

from taugrid.spec import errors

__all__ = ["EarlyStop", "ParamRange", "StopRule", "SweepMethod", "SweepMetric", "SweepSpec"]

ParamName = Annotated[str, pydantic.StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")]
Scalar = bool | int | float | str
MAX_TRIALS = 1000


class _Model(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class SweepMethod(enum.StrEnum):
    """How trials are chosen: every combination, or random draws."""

    GRID = "grid"
    RANDOM = "random"


class StopRule(enum.StrEnum):
    """``median``: stop a trial whose best value is worse than the median of the others'
    at the same step. ``asha``: asynchronous successive halving, at steps ``grace_steps``
    x ``eta``^k only the best 1/``eta`` of the trials that reached that step go on."""

    MEDIAN = "median"
    ASHA = "asha"


class ParamRange(_Model):
    """One parameter: a list of ``values``, or a range ``min``..``max`` (random only)."""

    values: list[Scalar] | None = pydantic.Field(default=None, min_length=1, max_length=1000)
    """The values to try."""
    min: float | None = None
    """Smallest value of a range."""
    max: float | None = None
    """Largest value of a range."""
    log: bool = False
    """Draw a range on a log scale (``min`` > 0), as learning rates usually are."""
    integer: bool = False
    """Round a range's draws to whole numbers."""

    @pydantic.model_validator(mode="after")
    def _one_kind(self) -> ParamRange:
        ranged = self.min is not None or self.max is not None
        if self.values is not None and ranged:
            raise errors.FieldError(
                "a parameter has both values and min/max",
                loc=("values",),
                hint="keep either the list of values or the range",
            )
        if self.values is None and (self.min is None or self.max is None):
            raise errors.FieldError(
                "a parameter needs values, or both min and max",
                loc=("values",),
                hint="write values: [0.1, 0.01] or min: 0.0001 and max: 0.1",
            )
        if ranged and not self._ordered():
            raise errors.FieldError(
                f"min {self.min} is not below max {self.max}"
                + (" (or not above 0, which log needs)" if self.log else ""),
                loc=("min",),
                hint="make min smaller than max" + (" and above 0" if self.log else ""),
            )
        return self

    def _ordered(self) -> bool:
        assert self.min is not None and self.max is not None
        return self.min < self.max and (not self.log or self.min > 0)


class SweepMetric(_Model):
    """The metric that ranks trials: a name the job passes to ``tau.log``."""

    name: str = pydantic.Field(min_length=1, max_length=200)
    """The metric's name, e.g. ``loss`` or ``val_accuracy``."""
    mode: str = pydantic.Field(default="min", pattern=r"^(min|max)$")
    """``min`` (lower is better, a loss) or ``max`` (higher is better, an accuracy)."""


class EarlyStop(_Model):
    """Stop trials that fall behind, judged on ``metric`` at the steps the job logs."""

    rule: StopRule = StopRule.MEDIAN
    """``median`` or ``asha``."""
    grace_steps: int = pydantic.Field(default=1, ge=0, le=10**9)
    """No trial is judged before this step (``asha``: its first rung)."""
    min_trials: int = pydantic.Field(default=3, ge=1, le=MAX_TRIALS)
    """``median``: how many other trials must have reached a step before it judges there."""
    eta: int = pydantic.Field(default=3, ge=2, le=10)
    """``asha``: the reduction factor (1/eta of the trials go on at each rung)."""


class SweepSpec(_Model):
    """``sweep``: a hyperparameter sweep over this tau.yaml (``tau sweep submit``)."""

    method: SweepMethod = SweepMethod.GRID
    """``grid`` (every combination) or ``random``."""
    parameters: dict[ParamName, ParamRange] = pydantic.Field(min_length=1, max_length=50)
    """Each parameter's values or range; a trial gets one value of each."""
    trials: int | None = pydantic.Field(default=None, ge=1, le=MAX_TRIALS)
    """How many trials at most (``random``: required; ``grid``: every combination)."""
    parallel: int = pydantic.Field(default=2, ge=1, le=100)
    """How many trials may be queued or running at once."""
    seed: int = pydantic.Field(default=0, ge=0)
    """The random draws' seed: the same seed draws the same trials."""
    metric: SweepMetric | None = None
    """What ranks the trials (and early stopping judges)."""
    early_stop: EarlyStop | None = None
    """Stop trials that fall behind (needs ``metric``)."""
    model: str | None = pydantic.Field(
        default=None, pattern=r"^[a-z0-9][a-z0-9._-]{0,62}$", max_length=63
    )
    """Register the best trial's model under this name when the sweep ends (needs
    ``metric``)."""

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> SweepSpec:
        ranged = [n for n, p in self.parameters.items() if p.values is None]
        if self.method is SweepMethod.GRID and ranged:
            raise errors.FieldError(
                f"method grid needs a list of values for {ranged[0]}",
                loc=("parameters", ranged[0]),
                hint="give it values: [...], or use method: random",
            )
        if self.method is SweepMethod.RANDOM and self.trials is None:
            raise errors.FieldError(
                "method random needs trials (how many to draw)",
                loc=("trials",),
                hint="add trials: 12",
            )
        for field in ("early_stop", "model"):
            if getattr(self, field) is not None and self.metric is None:
                raise errors.FieldError(
                    f"sweep.{field} needs sweep.metric (what ranks the trials)",
                    loc=(field,),
                    hint="add metric: {name: loss, mode: min}",
                )
        if self.method is SweepMethod.GRID and self.grid_size() > MAX_TRIALS:
            raise errors.FieldError(
                f"the grid has {self.grid_size()} combinations (at most {MAX_TRIALS})",
                loc=("parameters",),
                hint="fewer values, or method: random with trials",
            )
        return self

    def grid_size(self) -> int:
        """How many combinations the parameters' values make."""
        return math.prod(len(p.values or ()) for p in self.parameters.values())

    def budget(self) -> int:
        """How many trials the sweep runs."""
        if self.method is SweepMethod.GRID:
            return min(self.grid_size(), self.trials or MAX_TRIALS)
        assert self.trials is not None
        return self.trials
