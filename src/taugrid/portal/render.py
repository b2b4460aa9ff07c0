"""HTML rendering of portal pages: the Jinja2 environment (autoescape on) and filters.

Every value a user or a job can influence (run names, reasons, log lines, metric
names) reaches the page only through an autoescaping template, so HTML in it renders
as text. Pages are sent with a strict Content-Security-Policy (scripts and styles only
from ``/ui/static``), no caching, and no framing.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

import fastapi
import jinja2
from fastapi import responses

from taugrid.sdk.client import usage

__all__ = ["SECURITY_HEADERS", "html", "template"]

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("taugrid.portal", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def _when(ts: float | None) -> str:
    if not ts:
        return "-"
    return datetime.datetime.fromtimestamp(float(ts), datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _ago(ts: float | None) -> str:
    if not ts:
        return "never"
    s = max(0.0, time.time() - float(ts))
    if s < 120:
        return f"{s:.0f}s ago"
    return f"{s / 60:.0f}m ago" if s < 7200 else f"{s / 3600:.1f}h ago"


def _num(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _size(n: Any) -> str:
    """Bytes for people: 812 bytes, 4.2 KB, 1.3 GB (powers of 1000, as disks count)."""
    v = float(n)
    if v < 1000:
        return f"{v:.0f} bytes"
    for unit in ("KB", "MB", "GB", "TB"):
        v /= 1000
        if v < 1000 or unit == "TB":
            break
    return f"{v:.1f} {unit}"


_ENV.filters.update(when=_when, ago=_ago, num=_num, size=_size, money=usage.money)


def template(name: str, **ctx: Any) -> str:
    return _ENV.get_template(name).render(**ctx)


def html(name: str, status: int = 200, **ctx: Any) -> fastapi.Response:
    """A page rendered from ``name`` with the portal's security headers."""
    return responses.HTMLResponse(template(name, **ctx), status, headers=SECURITY_HEADERS)
