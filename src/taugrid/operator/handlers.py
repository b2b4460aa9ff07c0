"""kopf handlers: the Tau custom resources wired to ``reconcile.Reconciler``.

- TauTeam, TauWorkspace, TauCluster: created or changed (spec, labels) → one reconcile
  pass, its status written;
- TauQuotaRequest: every watch event → an approved request re-reconciles its team
  (``status.state`` is the admin's, set on the status subresource; kopf's change
  handlers do not see status, so this is an event handler), and a deleted approved
  request gives the quota back;
- every ``resync_s`` seconds (a task started at startup) every TauTeam and TauWorkspace
  is reconciled again: hand edits of managed objects are put back, a workspace whose
  team appeared since is made.

No handler reacts to deletion: what the operator makes carries an ownerReference to its
Tau object, so Kubernetes' garbage collector deletes it, and no finalizer can keep an
object (or an uninstall) waiting for an operator that is gone. kopf keeps its progress
and last-handled state in ``operator.taugrid.io/*`` annotations. API server failures
raise ``kopf.TemporaryError`` (retried after ``RETRY_S``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

import kopf

from taugrid.backends import errors as berr
from taugrid.operator import reconcile
from taugrid.platform import crds

__all__ = ["Settings", "registry"]

RETRY_S = 5.0
PREFIX = "operator.taugrid.io"
_log = logging.getLogger("taugrid.operator")
registry = kopf.OperatorRegistry()


@dataclasses.dataclass
class Settings:
    """What ``__main__`` passes in kopf's memo."""

    reconciler: reconcile.Reconciler
    resync_s: float = 30.0
    task: asyncio.Task[None] | None = None


def _run(
    fn: Callable[[Mapping[str, Any]], reconcile.Status], body: Mapping[str, Any], memo: Any
) -> None:
    settings: Settings = memo.settings
    try:
        settings.reconciler.write_status(body, fn(body))
    except (berr.KubernetesUnavailable, berr.KubernetesRejected) as exc:
        raise kopf.TemporaryError(str(exc), delay=RETRY_S) from exc


def _on_change(plural: str, method: str) -> None:
    def handler(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
        _run(getattr(memo.settings.reconciler, method), body, memo)

    for decorator in (kopf.on.create, kopf.on.update, kopf.on.resume):
        decorator(crds.GROUP, crds.VERSION, plural, registry=registry, id=f"{method}")(handler)


_on_change("tauteams", "team")
_on_change("tauworkspaces", "workspace")
_on_change("tauclusters", "cluster")


@kopf.on.event(crds.GROUP, crds.VERSION, "tauquotarequests", registry=registry)
def quota_request_event(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    rec: reconcile.Reconciler = memo.settings.reconciler
    try:
        if event.get("type") == "DELETED":
            team = rec.api.get("TauTeam", str((body.get("spec") or {}).get("team", "")))
            if team is not None:
                rec.write_status(team, rec.team(team))
            return
        status = rec.quota_request(body)
        if status is not None:
            rec.write_status(body, status)
    except (berr.KubernetesUnavailable, berr.KubernetesRejected) as exc:
        _log.warning("TauQuotaRequest %s: %s", body.get("metadata", {}).get("name"), exc)


async def _resync_forever(settings: Settings) -> None:
    while True:
        await asyncio.sleep(settings.resync_s)
        try:
            await asyncio.to_thread(settings.reconciler.resync)
        except (berr.KubernetesUnavailable, berr.KubernetesRejected) as exc:
            _log.warning("resync failed (next in %.0fs): %s", settings.resync_s, exc)


@kopf.on.startup(registry=registry)
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=PREFIX, key="last-handled-configuration"
    )
    settings.persistence.finalizer = f"{PREFIX}/finalizer"
    settings.posting.level = logging.WARNING
    ours: Settings = memo.settings
    ours.task = asyncio.create_task(_resync_forever(ours))


@kopf.on.cleanup(registry=registry)
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    ours: Settings = memo.settings
    if ours.task is not None:
        ours.task.cancel()
