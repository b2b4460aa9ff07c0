"""Stage callables: loading ``module:function`` references and running one batch.

A stage callable takes a list of items (dicts) and returns the list of items that go
on (fewer for a filter, the same or more for a map). ``run_batch`` calls it on a
batch; when the call raises and the pipeline dead-letters, each item is retried alone
so that only the items that fail are set aside (``DeadItem``: the item's ``id`` when it
has one, the stage and the error), and the rest go on. With ``fail_fast`` the first
error is raised as ``StageFailed`` and ends the run.

Errors a user causes (a reference that does not import, a callable that returns
something other than a list of dicts) are ``StageError`` (a ``UserError``) naming the
stage and saying how to fix it.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from taugrid import errors

__all__ = [
    "BatchResult",
    "DeadItem",
    "Item",
    "StageError",
    "StageFailed",
    "StageFn",
    "load",
    "run_batch",
]

Item = dict[str, Any]
StageFn = Callable[[list[Item]], Iterable[Item]]


class StageError(errors.UserError):
    """A stage or source reference that cannot be used as written in tau.yaml."""


class StageFailed(errors.UserError):
    """A stage raised on an item and the pipeline is fail-fast (``on_error: fail``)."""


@dataclasses.dataclass(frozen=True)
class DeadItem:
    """An item a stage raised on: where and why (the dead-letter record)."""

    stage: str
    item_id: str | None
    error: str
    detail: str

    def record(self) -> dict[str, Any]:
        """The JSON line written to the dead-letter output."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class BatchResult:
    """What one batch gave: items that go on, dead letters, seconds in the callable."""

    items: list[Item]
    dead: list[DeadItem]
    busy_s: float


def load(ref: str, *, where: str, search: str | None = None) -> Callable[..., Any]:
    """The callable ``module:function`` names (``where``: the tau.yaml key, for errors).

    ``search`` (a directory, usually the run's working dir) goes first on ``sys.path``.
    """
    if search is not None and search not in sys.path:
        sys.path.insert(0, search)
    module_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise StageError(
            f"{where}: cannot import module {module_name!r} of {ref!r} ({type(exc).__name__}: "
            f"{exc})",
            f"make {module_name.replace('.', '/')}.py importable from run.working_dir "
            "(and its imports installed)",
        ) from exc
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise StageError(
            f"{where}: module {module_name} has no callable {attr!r}",
            f"define def {attr}(items): ... in {module_name}, or fix the name in tau.yaml",
        )
    return fn  # type: ignore[no-any-return]


def _checked(stage: str, out: object) -> list[Item]:
    items = list(out) if isinstance(out, list | tuple) or hasattr(out, "__iter__") else None
    if items is None or not all(isinstance(i, dict) for i in items):
        raise StageError(
            f"stage {stage} returned {type(out).__name__}, not a list of items (dicts)",
            f"make stage {stage} return a list of dicts (an empty list drops every item)",
        )
    return items


def _dead(stage: str, item: Item, exc: BaseException) -> DeadItem:
    item_id = item.get("id")
    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return DeadItem(stage, None if item_id is None else str(item_id), repr(exc), detail)


def run_batch(stage: str, fn: StageFn, batch: Sequence[Item], *, fail_fast: bool) -> BatchResult:
    """``fn`` on ``batch``; on an error, each item alone, setting aside those that fail."""
    start = time.perf_counter()
    try:
        return BatchResult(_checked(stage, fn(list(batch))), [], time.perf_counter() - start)
    except StageError:
        raise
    except Exception as exc:
        if fail_fast:
            raise StageFailed(
                f"stage {stage} raised {exc!r} (pipeline.on_error is fail)",
                "fix the stage, or set pipeline.on_error: dead_letter to set failing items "
                "aside and go on",
            ) from exc
    good: list[Item] = []
    dead: list[DeadItem] = []
    for item in batch:
        try:
            good.extend(_checked(stage, fn([item])))
        except StageError:
            raise
        except Exception as exc:
            dead.append(_dead(stage, item, exc))
    return BatchResult(good, dead, time.perf_counter() - start)
