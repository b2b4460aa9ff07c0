"""The portal's entry into the hub: ``install(app)`` adds ``/ui`` to the hub's app.

Called by the hub's extension hook at start (``taugrid.hub.server.app.install_extensions``).
Owns the login and logout pages, the static files (served from the package: nothing
from the internet) and the mapping of failures to pages: no or revoked session →
the login form, 403 → a refusal page, 404 → not found, a hub error → 503.
"""

from __future__ import annotations

import importlib.resources

import anyio.to_thread
import fastapi
from fastapi import responses, staticfiles

from taugrid.portal import (
    admin_views,
    cost_views,
    render,
    runs_views,
    session,
    submit_views,
    sweeps_views,
)
from taugrid.sdk.client import client, tenancy

__all__ = ["install"]

router = fastapi.APIRouter(prefix="/ui", include_in_schema=False)
_COOKIE = {"httponly": True, "samesite": "strict", "path": "/ui"}


@router.get("")
@router.get("/")
def home() -> fastapi.Response:
    return responses.RedirectResponse("/ui/runs", status_code=303)


def _login_page(error: str = "", status: int = 200) -> fastapi.Response:
    token = session.new_login_csrf()
    page = render.html("login.html", status, login_csrf=token, error=error)
    page.set_cookie(session.LOGIN_COOKIE, token, **_COOKIE)  # type: ignore[arg-type]
    page.delete_cookie(session.COOKIE, path="/ui")
    return page


@router.get("/login")
def login_form() -> fastapi.Response:
    return _login_page()


@router.post("/login")
async def login(request: fastapi.Request) -> fastapi.Response:
    fields = await session.form(request)
    session.check_csrf(request, fields, request.cookies.get(session.LOGIN_COOKIE, ""))
    token = fields.get("token", "").strip()
    if not token:
        return _login_page("paste a hub token (from `tau admin token create`)", 400)

    def who() -> str:
        c = client.Client(client.HubConfig(session.hub_url(request), token, "portal"), 30)
        try:
            return str(tenancy.whoami(c)["role"])
        except client.ApiError:
            return ""
        finally:
            c.close()

    role = await anyio.to_thread.run_sync(who)
    if role not in ("admin", "researcher"):
        why = "agent tokens cannot sign in" if role else "the hub does not know this token"
        return _login_page(f"{why}; check it with `tau admin token list`", 401)
    page = responses.RedirectResponse("/ui/runs", status_code=303)
    page.set_cookie(
        session.COOKIE,
        session.cookie_value(token),
        max_age=int(session.SESSION_S),
        secure=request.url.scheme == "https",
        **_COOKIE,  # type: ignore[arg-type]
    )
    page.delete_cookie(session.LOGIN_COOKIE, path="/ui")
    return page


@router.post("/logout")
async def logout(request: fastapi.Request) -> fastapi.Response:
    fields = await session.form(request)
    session.check_csrf(request, fields, session.csrf_token(session.token_of(request)))
    page = responses.RedirectResponse("/ui/login", status_code=303)
    page.delete_cookie(session.COOKIE, path="/ui")
    return page


def _install_errors(app: fastapi.FastAPI) -> None:
    @app.exception_handler(session.LoggedOut)
    async def _logged_out(request: fastapi.Request, _: Exception) -> fastapi.Response:
        if request.url.path.endswith("/stream"):
            return fastapi.Response(status_code=401)
        page = responses.RedirectResponse("/ui/login", status_code=303)
        page.delete_cookie(session.COOKIE, path="/ui")
        return page

    @app.exception_handler(session.Refused)
    async def _refused(_: fastapi.Request, __: Exception) -> fastapi.Response:
        why = "this form is stale or came from another site (CSRF check failed)"
        return render.html("error.html", 403, title="Refused", message=why, hint="reload the page")

    @app.exception_handler(client.ApiError)
    async def _api(_: fastapi.Request, exc: Exception) -> fastapi.Response:
        assert isinstance(exc, client.ApiError)
        titles = {403: "Not allowed", 404: "Not found"}
        title = titles.get(exc.status, "Cannot do that")
        problems = [p for p in exc.body.get("problems", []) if isinstance(p, dict)]
        return render.html(
            "error.html",
            exc.status,
            title=title,
            message=exc.message,
            hint=exc.hint,
            problems=problems,
        )

    @app.exception_handler(client.HubUnreachable)
    async def _down(_: fastapi.Request, exc: Exception) -> fastapi.Response:
        assert isinstance(exc, client.HubUnreachable)
        return render.html("error.html", 503, title="Hub unavailable", message=exc.message)


def install(app: fastapi.FastAPI) -> None:
    """Serve the portal under ``/ui`` of the hub's ``app``."""
    static = importlib.resources.files("taugrid.portal") / "static"
    app.mount("/ui/static", staticfiles.StaticFiles(directory=str(static)), name="portal-static")
    app.include_router(router)
    app.include_router(runs_views.router)
    app.include_router(admin_views.router)
    app.include_router(submit_views.router)
    app.include_router(cost_views.router)
    app.include_router(sweeps_views.router)
    _install_errors(app)
