"""The hub's door to sessions, its pure parts: tickets are single use, for one session and
short-lived; the session cookie is refused when altered or old; run kinds."""

from __future__ import annotations

import time

import pytest

from taugrid import private
from taugrid.hub.dev import proxy, sessions


def test_ticket_is_single_use_and_for_one_session() -> None:
    p = proxy.Proxy(hub=None)  # type: ignore[arg-type]  # tickets never touch the hub
    t = p.ticket("tau_secret", "ws", "nb")
    assert p.redeem(t, "ws", "other") is None  # another session's door: refused, and spent
    t = p.ticket("tau_secret", "ws", "nb")
    assert p.redeem(t, "ws", "nb") == "tau_secret"
    assert p.redeem(t, "ws", "nb") is None


def test_ticket_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    p = proxy.Proxy(hub=None)  # type: ignore[arg-type]
    t = p.ticket("tau_secret", "ws", "nb")
    later = time.time() + proxy.TICKET_S + 1
    monkeypatch.setattr(time, "time", lambda: later)
    assert p.redeem(t, "ws", "nb") is None


def test_session_cookie_refuses_altered_and_old() -> None:
    value = private.session_cookie("tau_abc")
    assert private.cookie_token(value, 60) == "tau_abc"
    assert private.cookie_token(value.replace("tau_abc", "tau_abd"), 60) is None
    old = private.session_cookie("tau_abc", time.time() - 120)
    assert private.cookie_token(old, 60) is None
    assert private.cookie_token("", 60) is None


def test_kind() -> None:
    assert sessions.kind({"env": {"TAU_DEV_CONFIG": "{}"}, "workload_kind": "rayjob"}) == "dev"
    assert sessions.kind({"env": {}, "workload_kind": "rayservice"}) == "rayservice"
