"""The Python client of a TauGrid hub: what the CLI, the portal and scripts use.

Owns hub discovery (``TAU_HUB_URL``/``TAU_TOKEN``, else the current context of
``sdk.client.contexts`` when it is not ``local``, else ``$TAU_HOME/credentials.json`` written
by the embedded platform), bearer auth, and the mapping of HTTP failures to
errors users can act on (hierarchy below). Request path: CLI → SDK → HTTP → hub.
A hub URL may list several replicas, comma-separated: requests fail over between them
(``taugrid.huburls``: connection refused or 503 → the next URL).

    TauError
    ├── ApiError (UserError)       the hub answered 4xx: ``status``, ``detail``, ``hint``,
    │   └── SpecRejected           422 with tau.yaml ``problems`` (file:line:col)
    └── HubUnreachable (SystemFault, retryable)   no answer / 5xx

``httpx`` (which also imports its own CLI: click, rich, pygments) is imported when a
``Client`` is made, not with this module: a ``tau`` command that finds no hub never
imports it (docs/ARCHITECTURE.md, "CLI start-up").
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from taugrid import errors
from taugrid.sdk.client import contexts

if TYPE_CHECKING:
    import httpx

__all__ = ["ApiError", "Client", "HubConfig", "HubUnreachable", "SpecRejected", "tau_home"]


def tau_home() -> Path:
    return Path(os.environ.get("TAU_HOME", "~/.tau")).expanduser()


class ApiError(errors.UserError):
    def __init__(
        self, status: int, detail: str, hint: str = "", body: dict[str, Any] | None = None
    ) -> None:
        super().__init__(detail, hint)
        self.status = status
        self.body = body or {}


class SpecRejected(ApiError):
    """tau.yaml problems found by the hub (each with file:line:col)."""


class HubUnreachable(errors.SystemFault):
    def __init__(self, url: str, why: str) -> None:
        super().__init__(
            f"cannot reach the TauGrid hub at {url}: {why}",
            "start the embedded platform with `tau up`, or set TAU_HUB_URL to a running hub",
            retryable=True,
        )


@dataclasses.dataclass(frozen=True)
class HubConfig:
    """A hub URL and token; ``source`` says where they came from (``env``,
    ``context:<name>`` or ``local``, the embedded platform's credentials)."""

    url: str
    token: str
    source: str = "env"

    @classmethod
    def discover(cls) -> HubConfig | None:
        url, token = os.environ.get("TAU_HUB_URL"), os.environ.get("TAU_TOKEN")
        if url and token:
            return cls(url, token, "env")
        ctx = contexts.Contexts(tau_home()).current()
        if ctx.hub_url is not None:
            token = token or ctx.token()
            return cls(url or ctx.hub_url, token, f"context:{ctx.name}") if token else None
        creds = tau_home() / "credentials.json"
        source = "env" if url else contexts.LOCAL
        if creds.exists():
            doc = json.loads(creds.read_text())
            url, token = url or doc.get("hub_url"), token or doc.get("token")
        return cls(url, token, source) if url and token else None


class Client:
    """A thin typed wrapper over the hub's ``/v1`` API."""

    def __init__(
        self,
        config: HubConfig,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """``transport``: a shared connection pool (the portal makes one client per
        request); with it, proxy settings from the environment are not consulted."""
        import httpx

        from taugrid import huburls

        self.config = config
        self._hubs = huburls.Failover(config.url)
        self._http = httpx.Client(
            timeout=timeout_s,
            headers={"Authorization": f"Bearer {config.token}"},
            transport=transport,
            trust_env=transport is None,
        )

    def close(self) -> None:
        self._http.close()

    def request(self, method: str, path: str, *, raw: bool = False, **kw: Any) -> Any:
        """The decoded JSON reply (bytes for other content, or always with ``raw``; None
        for 204 No Content)."""
        import httpx  # loaded by __init__ already

        try:
            r = self._hubs.send(self._http, method, path, **kw)
        except httpx.HTTPError as exc:
            raise HubUnreachable(self.config.url, str(exc) or type(exc).__name__) from exc
        if r.status_code >= 500:
            raise HubUnreachable(self.config.url, f"HTTP {r.status_code}: {r.text[:300]}")
        if r.status_code >= 400:
            raise _api_error(r)
        if r.status_code == 204 and not raw:
            return None
        if raw or not r.headers.get("content-type", "").startswith("application/json"):
            return r.content
        return r.json()

    # -- runs -----------------------------------------------------------------------
    def submit(
        self,
        tau_yaml: str,
        filename: str,
        code_zip: bytes | None,
        workspace: str | None = None,
        dry_run: bool = False,
        source: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        body = {
            "tau_yaml": tau_yaml,
            "filename": filename,
            "workspace": workspace,
            "dry_run": dry_run,
            "code_zip_b64": base64.b64encode(code_zip).decode() if code_zip else None,
            "source": source,
        }
        out: dict[str, Any] = self.request("POST", "/v1/runs", json=body)
        return out

    def runs(
        self, workspace: str | None = None, state: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        params = {
            k: v for k, v in {"workspace": workspace, "state": state, "limit": limit}.items() if v
        }
        out: list[dict[str, Any]] = self.request("GET", "/v1/runs", params=params)
        return out

    def run(self, ref: str) -> dict[str, Any]:
        out: dict[str, Any] = self.request("GET", f"/v1/runs/{ref}")
        return out

    def cancel(self, ref: str) -> dict[str, Any]:
        out: dict[str, Any] = self.request("POST", f"/v1/runs/{ref}/cancel")
        return out

    def resume(self, ref: str) -> dict[str, Any]:
        out: dict[str, Any] = self.request("POST", f"/v1/runs/{ref}/resume")
        return out

    def logs(self, ref: str, offset: int = 0, tail: int | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"offset": offset}
        if tail is not None:
            params["tail"] = tail
        out: dict[str, Any] = self.request("GET", f"/v1/runs/{ref}/logs", params=params)
        return out

    def metrics(self, ref: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = self.request("GET", f"/v1/runs/{ref}/metrics")
        return out

    def events(self, ref: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = self.request("GET", f"/v1/runs/{ref}/events")
        return out

    def files(self, ref: str, sub: str = "") -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = self.request(
            "GET", f"/v1/runs/{ref}/files", params={"sub": sub}
        )
        return out

    def download(self, ref: str, path: str) -> bytes:
        """The bytes of one file of a run's record, as stored (a JSON file is not decoded)."""
        data: bytes = self.request("GET", f"/v1/runs/{ref}/file", raw=True, params={"path": path})
        return data

    # -- platform -------------------------------------------------------------------
    def clusters(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = self.request("GET", "/v1/clusters")
        return out

    def mark_node(
        self, cluster_id: str, node_id: str, kind: str, reason: str = ""
    ) -> dict[str, Any]:
        body = {"cluster_id": cluster_id, "node_id": node_id, "kind": kind, "reason": reason}
        out: dict[str, Any] = self.request("POST", "/v1/admin/nodes/fault", json=body)
        return out

    def health(self) -> dict[str, Any]:
        out: dict[str, Any] = self.request("GET", "/healthz")
        return out

    def compatible_health(self) -> dict[str, Any]:
        """``/healthz``, refused with the fix when the hub is older than this client
        needs (``taugrid.version``)."""
        from taugrid import version

        out = self.health()
        level = int(out.get("api_level") or 1)
        if level < version.MIN_HUB_API_LEVEL:
            raise errors.UserError(
                f"the hub at {self.config.url} (version {out.get('version', 'unknown')}, API "
                f"level {level}) is older than this client ({version.package_version()}) "
                f"needs (API level {version.MIN_HUB_API_LEVEL})",
                "upgrade the hub, or install the client version the hub runs: "
                f"pip install taugrid=={out.get('version', '<the hub version>')}",
            )
        return out


def _api_error(r: httpx.Response) -> ApiError:
    try:
        body = r.json()
    except ValueError:
        body = {"detail": r.text}
    detail = body.get("detail", r.text)
    if not isinstance(detail, str):
        detail = json.dumps(detail)
    cls = SpecRejected if r.status_code == 422 and "problems" in body else ApiError
    return cls(r.status_code, detail, body.get("hint", ""), body)
