"""Resolve: tau.yaml + platform.yaml → RunSpec, with the provenance of every value.

Owns the precedence rules and the fail-closed checks that run *before* anything is
sent anywhere (step 2 of docs/ARCHITECTURE.md, "The run flow as implemented").

Precedence, highest first (the platform's profile wins over the researcher's file)::

    profile (platform.yaml profiles[])  >  tau.yaml  >  workspace defaults  >  built-in

Which profile applies: ``policy.profile`` in tau.yaml, else the workspace's
``defaults.profile``, else none. Which workspace: ``policy.workspace``, else the
platform's ``default_workspace``.

Fail-closed checks (each a ``ResolveError``, a ``UserError`` saying what and how to
fix, pointing at the tau.yaml line when the value came from there): unknown workspace,
team or priority; a profile that is unknown or not applicable to the team/lane; a queue
that is not the workspace's; unknown regions; reserved environment variables; a GPU
model that is not declared or not offered by any node pool; a worker larger than every
node pool (GPUs, then CPUs and memory); more GPUs than the platform has in total.
The capacity checks run only when the platform declares node pools at all.

Vocabulary: a *candidate* is ``(value, source)``; the first non-``None`` candidate in
precedence order wins and its source goes to ``RunSpec.provenance``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from taugrid import errors
from taugrid.platform import models as pm
from taugrid.record import jobenv
from taugrid.render import capacity, runspec
from taugrid.spec import models as sm
from taugrid.spec import units

__all__ = [
    "BUILTIN",
    "RAY_VERSION",
    "ResolveError",
    "canonical_hash",
    "named_image",
    "resolve",
]

RAY_VERSION = "2.60.0"
BUILTIN = "built-in default"
_DEFAULT_CPUS = 1.0
_DEFAULT_MEMORY = "4Gi"
_DEFAULT_HEAD_CPUS = 1.0
_DEFAULT_HEAD_MEMORY = "4Gi"
_DEFAULT_RETRIES = 3
_DEFAULT_RETRY_ON = (
    sm.RetryOn.NODE_FAILURE,
    sm.RetryOn.PREEMPTION,
    sm.RetryOn.LOST_CONTACT,
    sm.RetryOn.DATA_STAGING,
)

Candidate = tuple[Any, str]


class ResolveError(errors.UserError):
    """tau.yaml cannot run on this platform; ``field`` is the dotted RunSpec field."""

    def __init__(self, message: str, hint: str = "", *, field: str = "") -> None:
        super().__init__(message, hint)
        self.field = field


def canonical_hash(value: Any) -> str:
    """sha256 of the canonical JSON form (sorted keys, no spaces) of ``value``."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


_ADDED_LATER: tuple[tuple[tuple[str, ...], object], ...] = (
    (("pipeline",), None),
    (("roles",), {}),
    (("sweep",), None),
    (("resilience", "capacity"), sm.Capacity.ON_DEMAND.value),
    (("resilience", "max_price"), None),
    (("resilience", "max_restarts"), None),
)
"""Fields added after configs were first hashed, with the value they have while unset."""


def _hashed_config(config: sm.TauConfig) -> dict[str, Any]:
    """The config as hashed: fields added later (``_ADDED_LATER``) are left out while
    unset, so a tau.yaml that does not use them keeps the hash it always had."""
    doc = config.model_dump(mode="json")
    for path, unset in _ADDED_LATER:
        *parents, key = path
        where = doc
        for part in parents:
            where = where.get(part) or {}
        if key in where and where[key] == unset:
            del where[key]
    return doc


class _Resolver:
    """One resolution: the inputs, and the provenance collected so far."""

    def __init__(
        self, config: sm.TauConfig, platform: pm.Platform, source: str, lines: Mapping[str, int]
    ) -> None:
        self.config = config
        self.platform = platform
        self.source = source
        self.lines = lines
        self.prov: dict[str, str] = {}

    def where(self, dotted: str) -> str:
        """``tau.yaml:12`` for a key of the file (its nearest located ancestor)."""
        path = dotted
        while path:
            if path in self.lines:
                return f"{self.source}:{self.lines[path]}"
            path = path.rpartition(".")[0]
        return self.source

    def file(self, dotted: str) -> Candidate | None:
        """The tau.yaml value at ``dotted`` when the file sets it, else ``None``."""
        obj: Any = self.config
        for part in dotted.split("."):
            if part not in obj.model_fields_set:
                return None
            obj = getattr(obj, part)
        return None if obj is None else (obj, self.where(dotted))

    def pick(self, field: str, *candidates: Candidate | None) -> Any:
        """First candidate with a value, else the last one (the built-in default).

        Records the winner's source under ``field`` in the provenance.
        """
        chosen = next((c for c in candidates if c is not None and c[0] is not None), None)
        if chosen is None:
            chosen = candidates[-1]
        if chosen is None:  # pragma: no cover - every call ends with a built-in candidate
            raise AssertionError(f"no candidate for {field}")
        self.prov[field] = chosen[1]
        return chosen[0]

    def fail(self, field: str, message: str, hint: str) -> ResolveError:
        where = self.prov.get(field, self.source)
        return ResolveError(f"{where}: {message}", hint, field=field)


def _prof(profile: pm.ProfileSpec | None, attr: str) -> Candidate | None:
    if profile is None:
        return None
    value = getattr(profile, attr)
    if value is None or value == []:
        return None
    return (value, f"profile {profile.name}")


def _ws_default(ws: pm.WorkspaceSpec, attr: str) -> Candidate:
    return (getattr(ws.defaults, attr), f"workspace default ({ws.name})")


def _workspace(r: _Resolver) -> pm.WorkspaceSpec:
    default = r.platform.default_workspace
    name = r.pick(
        "workspace", r.file("policy.workspace"), (default, "platform default_workspace"), ("", "")
    )
    known = sorted(w.name for w in r.platform.workspaces)
    if not name:
        raise ResolveError(
            f"{r.source}: no workspace: tau.yaml sets no policy.workspace and the platform "
            "has no default_workspace",
            f"set policy.workspace to one of {known}",
            field="workspace",
        )
    ws = r.platform.workspace(name)
    if ws is None:
        raise r.fail("workspace", f"unknown workspace '{name}'", f"use one of {known}")
    return ws


def _team(r: _Resolver, ws: pm.WorkspaceSpec) -> str:
    asked = r.file("policy.team")
    r.prov["team"] = f"workspace {ws.name}"
    if asked is not None and asked[0] != ws.team:
        raise ResolveError(
            f"{asked[1]}: policy.team '{asked[0]}' does not match workspace '{ws.name}', "
            f"which belongs to team '{ws.team}'",
            f"remove policy.team or set it to '{ws.team}'",
            field="team",
        )
    return ws.team


def _profile(r: _Resolver, ws: pm.WorkspaceSpec, lane: str | None) -> pm.ProfileSpec | None:
    name = r.pick("profile", r.file("policy.profile"), _ws_default(ws, "profile"), ("", BUILTIN))
    if not name:  # none anywhere, or tau.yaml opted out with profile: ""
        return None
    profile = r.platform.profile(name)
    known = sorted(p.name for p in r.platform.profiles)
    if profile is None:
        raise r.fail("profile", f"unknown profile '{name}'", f"use one of {known}")
    if profile.teams and ws.team not in profile.teams:
        raise r.fail(
            "profile",
            f"profile '{name}' is not available to team '{ws.team}' (only {profile.teams})",
            f"pick a profile your team may use: {_usable(r.platform, ws.team, lane)}",
        )
    if profile.lanes and lane not in profile.lanes:
        raise r.fail(
            "profile",
            f"profile '{name}' is only for lanes {profile.lanes}, and this run's lane is {lane!r}",
            f"set policy.lane to one of {profile.lanes}, or pick another profile",
        )
    return profile


def _usable(platform: pm.Platform, team: str, lane: str | None) -> list[str]:
    return sorted(
        p.name
        for p in platform.profiles
        if (not p.teams or team in p.teams) and (not p.lanes or lane in p.lanes)
    )


def _queue(r: _Resolver, ws: pm.WorkspaceSpec, profile: pm.ProfileSpec | None) -> str:
    own = ws.effective_queue
    queue: str = r.pick(
        "queue", _prof(profile, "queue"), r.file("policy.queue"), (own, f"workspace {ws.name}")
    )
    if queue != own:
        raise r.fail(
            "queue",
            f"queue '{queue}' is not a queue of workspace '{ws.name}' (its queue is '{own}')",
            f"remove the queue setting or set it to '{own}'",
        )
    return queue


def _priority(
    r: _Resolver, ws: pm.WorkspaceSpec, profile: pm.ProfileSpec | None
) -> tuple[str | None, int]:
    classes = sorted(r.platform.priority_classes, key=lambda p: (p.value, p.name))
    lowest = classes[0].name if classes else ""
    name = r.pick(
        "priority",
        _prof(profile, "priority"),
        r.file("policy.priority"),
        _ws_default(ws, "priority"),
        (lowest, BUILTIN),
    )
    if not name:
        r.prov["priority_value"] = BUILTIN
        return None, 0
    found = next((p for p in classes if p.name == name), None)
    if found is None:
        raise r.fail(
            "priority",
            f"unknown priority class '{name}'",
            f"use one of {[p.name for p in classes]}",
        )
    r.prov["priority_value"] = f"priority class {name}"
    return name, found.value


def _regions(r: _Resolver, profile: pm.ProfileSpec | None) -> tuple[list[str], list[str]]:
    allowed = r.pick(
        "allowed_regions",
        _prof(profile, "allowed_regions"),
        r.file("placement.allowed_regions"),
        ([], BUILTIN),
    )
    preferred = r.pick("preferred_regions", r.file("placement.preferred_regions"), ([], BUILTIN))
    known = {reg.name for reg in r.platform.regions}
    for field, names in (("allowed_regions", allowed), ("preferred_regions", preferred)):
        unknown = sorted(set(names) - known)
        if unknown:
            raise r.fail(field, f"unknown regions {unknown}", f"use regions of {sorted(known)}")
    _compliance(r, allowed)
    return list(allowed), list(preferred)


def _compliance(r: _Resolver, allowed: list[str]) -> None:
    """Check that some (allowed) region meets every domain of ``placement.compliance``."""
    domains = list(r.pick("compliance", r.file("placement.compliance"), ([], BUILTIN)))
    if not domains:
        return
    fits = [
        reg.name
        for reg in r.platform.regions
        if set(domains) <= set(reg.compliance) and (not allowed or reg.name in allowed)
    ]
    if not fits:
        meets = {reg.name: reg.compliance for reg in r.platform.regions}
        raise r.fail(
            "compliance",
            f"no {'allowed ' if allowed else ''}region meets compliance {domains}",
            f"regions meet {meets}; drop a domain or ask the platform team",
        )


_FILE_FIELDS: tuple[tuple[str, str, Any], ...] = (
    # (RunSpec field, tau.yaml key, built-in default): fields only tau.yaml sets.
    ("name", "name", None),
    ("workload_kind", "run.workload_kind", sm.WorkloadKind.RAYJOB),
    ("entrypoint", "run.entrypoint", None),
    ("args", "run.args", []),
    ("working_dir", "run.working_dir", "."),
    ("excludes", "run.excludes", []),
    ("launcher", "execution.launcher", sm.Launcher.PYTHON),
    ("serve", "serve", None),
    ("pip", "runtime.pip", []),
    ("secrets", "runtime.secrets", []),
    ("inputs", "data.inputs", []),
    ("outputs", "data.outputs", []),
    ("output_dir", "storage.output", None),
    ("metrics_history", "metrics.history", []),
    ("tensorboard", "metrics.tensorboard", False),
    ("max_retries", "resilience.max_retries", _DEFAULT_RETRIES),
    ("retry_on", "resilience.retry_on", list(_DEFAULT_RETRY_ON)),
    ("backoff", "resilience.backoff", sm.Backoff()),
    ("capacity", "resilience.capacity", sm.Capacity.ON_DEMAND),
    ("max_price", "resilience.max_price", None),
    ("max_restarts", "resilience.max_restarts", None),
    ("lane", "policy.lane", None),
)


def _file_fields(r: _Resolver) -> dict[str, Any]:
    out = {f: r.pick(f, r.file(key), (default, BUILTIN)) for f, key, default in _FILE_FIELDS}
    platform_objective = sm.Objective(r.platform.scheduling.default_objective)
    out["objective"] = r.pick(
        "objective",
        r.file("placement.objective"),
        (platform_objective, "platform scheduling.default_objective"),
    )
    out["checkpoint_path"] = r.pick(
        "checkpoint_path",
        r.file("resilience.checkpoint_path"),
        r.file("storage.checkpoint"),
        (None, BUILTIN),
    )
    runtime = r.pick("max_runtime_s", r.file("resilience.max_runtime"), (None, BUILTIN))
    out["max_runtime_s"] = None if runtime is None else units.parse_duration(runtime)
    stall: sm.StallSpec = r.pick(
        "stall_interval_s", r.file("resilience.stall"), (sm.StallSpec(), BUILTIN)
    )
    out["stall_interval_s"] = units.parse_duration(stall.interval)
    out["stall_warn_after"], out["stall_restart_after"] = stall.warn_after, stall.restart_after
    r.prov["stall_warn_after"] = r.prov["stall_restart_after"] = r.prov["stall_interval_s"]
    return out


def _sizing(r: _Resolver, ws: pm.WorkspaceSpec, profile: pm.ProfileSpec | None) -> dict[str, Any]:
    def take(field: str, attr: str | None, key: str, default: Any) -> Any:
        return r.pick(
            field, _prof(profile, attr) if attr else None, r.file(key), (default, BUILTIN)
        )

    gpus: float = take("gpus_per_worker", "gpus_per_worker", "compute.gpus", 0)
    model = None
    if gpus > 0:
        model = r.pick(
            "gpu_model",
            _prof(profile, "gpu_model"),
            r.file("compute.gpu_model"),
            _ws_default(ws, "gpu_model"),
            (None, BUILTIN),
        )
    else:
        r.prov["gpu_model"] = f"{BUILTIN} (no GPUs requested)"
    memory = take("memory_per_worker_bytes", "memory_per_worker", "compute.memory", _DEFAULT_MEMORY)
    head_memory = take("head_memory_bytes", None, "compute.head.memory", _DEFAULT_HEAD_MEMORY)
    return {
        "workers": take("workers", "workers", "compute.workers", 1),
        "gpus_per_worker": gpus,
        "gpu_model": model,
        "cpus_per_worker": float(
            take("cpus_per_worker", "cpus_per_worker", "compute.cpus", _DEFAULT_CPUS)
        ),
        "memory_per_worker_bytes": units.parse_quantity_bytes(memory),
        "head_cpus": float(take("head_cpus", None, "compute.head.cpus", _DEFAULT_HEAD_CPUS)),
        "head_memory_bytes": units.parse_quantity_bytes(head_memory),
    }


def _runtime(r: _Resolver, gpus: int) -> dict[str, Any]:
    image = f"rayproject/ray:{RAY_VERSION}-py311" + ("-gpu" if gpus > 0 else "")
    env: dict[str, str] = r.pick("env", r.file("runtime.env"), ({}, BUILTIN))
    clash = sorted((set(env) | {s.env for s in r.config.runtime.secrets}) & jobenv.RESERVED)
    if clash:
        raise r.fail(
            "env",
            f"runtime sets environment variables {clash}, which TauGrid sets for every run",
            f"remove them from runtime.env/runtime.secrets; reserved: {sorted(jobenv.RESERVED)}",
        )
    return {"image": r.pick("image", r.file("runtime.image"), (image, BUILTIN)), "env": dict(env)}


def _communication(r: _Resolver, workers: int) -> sm.Communication:
    comm = sm.Communication.NONE if workers == 1 else sm.Communication.SYNC
    value: sm.Communication = r.pick(
        "communication", r.file("placement.communication"), (comm, BUILTIN)
    )
    return value


def resolve(
    config: sm.TauConfig,
    platform: pm.Platform,
    *,
    source: str = "tau.yaml",
    lines: dict[str, int] | None = None,
) -> runspec.RunSpec:
    """Merge ``config`` with ``platform`` into a RunSpec; raise ``ResolveError`` if it can't run.

    ``source`` names the file in messages and provenance; ``lines`` maps dotted tau.yaml
    keys (``compute.gpus``) to 1-based lines, so provenance reads ``tau.yaml:12``.
    """
    r = _Resolver(config, platform, source, lines or {})
    ws = _workspace(r)
    team = _team(r, ws)
    fields = _file_fields(r)
    profile = _profile(r, ws, fields["lane"])
    priority, priority_value = _priority(r, ws, profile)
    allowed, preferred = _regions(r, profile)
    sizing = _sizing(r, ws, profile)
    spec = runspec.RunSpec(
        **fields,
        **sizing,
        **_runtime(r, sizing["gpus_per_worker"]),
        communication=_communication(r, sizing["workers"]),
        workspace=ws.name,
        team=team,
        namespace=_namespace(r, ws),
        queue=_queue(r, ws, profile),
        priority=priority,
        priority_value=priority_value,
        profile=profile.name if profile else None,
        allowed_regions=tuple(allowed),
        preferred_regions=tuple(preferred),
        compliance=tuple(config.placement.compliance),
        config_hash=canonical_hash(_hashed_config(config)),
        profile_hash=canonical_hash(profile.model_dump(mode="json") if profile else None),
        provenance={},
    )
    problem = capacity.check(spec, platform)
    if problem is not None:
        field, message, hint = problem
        raise r.fail(field, message, hint)
    selector = _node_selector(r, spec.gpu_model)
    r.prov["spec_version"] = _format_source(r)
    return spec.model_copy(update={"node_selector": selector, "provenance": _ordered(r.prov, spec)})


def _node_selector(r: _Resolver, gpu_model: str | None) -> dict[str, str]:
    gpu = next((g for g in r.platform.gpu_types if g.name == gpu_model), None)
    if gpu is None:
        r.prov["node_selector"] = BUILTIN
        return {}
    r.prov["node_selector"] = f"gpu type {gpu.name}"
    return {gpu.node_label: gpu.node_label_value or gpu.name}


def _namespace(r: _Resolver, ws: pm.WorkspaceSpec) -> str:
    r.prov["namespace"] = f"workspace {ws.name}"
    return ws.effective_namespace


def _format_source(r: _Resolver) -> str:
    """Where the spec's format comes from: the file's ``schema_version`` line, or the
    built-in format when the file names none."""
    if "schema_version" in r.config.model_fields_set:
        return f"{r.where('schema_version')} (schema_version: {r.config.schema_version})"
    return f"{BUILTIN} (the file has no schema_version)"


def _ordered(prov: dict[str, str], spec: runspec.RunSpec) -> dict[str, str]:
    """Provenance in RunSpec field order, with the derived hashes accounted for."""
    prov = dict(prov)
    prov.setdefault("config_hash", "tau.yaml (sha256 of the canonical config)")
    prov.setdefault("profile_hash", f"profile {spec.profile}" if spec.profile else BUILTIN)
    return {f: prov[f] for f in type(spec).model_fields if f in prov}


def named_image(spec: Mapping[str, Any]) -> str | None:
    """The image a resolved run spec (``RunSpec`` dump) names in tau.yaml, None when its
    image is the built-in default (what a Ray region runs anyway)."""
    source = (spec.get("provenance") or {}).get("image", BUILTIN)
    return None if source == BUILTIN else spec.get("image")
