"""Submitting a run from the portal: upload a tau.yaml and a code archive (zip).

The upload is a ``multipart/form-data`` POST (CSRF-checked like every action) parsed
here with the standard library; the files go to the hub through the SDK's ``submit``,
exactly as ``tau run`` sends them. A tau.yaml the hub rejects comes back as the same
form with every problem at its file:line:col, as the CLI prints them.
"""

from __future__ import annotations

import re
import zipfile
from io import BytesIO
from typing import Any

import anyio.to_thread
import fastapi
from fastapi import responses

from taugrid.portal import pages, render, session
from taugrid.sdk.client import client, tenancy

__all__ = ["parse_multipart", "router"]

router = fastapi.APIRouter(prefix="/ui", include_in_schema=False)
MAX_UPLOAD = 100 * 2**20  # the hub's limit on a code archive
_PARAM = re.compile(rb'(\w+)="([^"]*)"')


def parse_multipart(body: bytes, content_type: str) -> dict[str, tuple[str, bytes]]:
    """Fields of a multipart body: name → (filename or "", bytes)."""
    found = re.search(r'boundary="?([^";]+)"?', content_type)
    if not found:
        raise ValueError("the form was not sent as multipart/form-data")
    out: dict[str, tuple[str, bytes]] = {}
    for chunk in body.split(b"--" + found.group(1).encode())[1:]:
        if chunk.startswith(b"--"):
            break
        head, _, data = chunk.partition(b"\r\n\r\n")
        params = dict(_PARAM.findall(head))
        name = params.get(b"name", b"").decode("utf-8", "replace")
        if name:
            filename = params.get(b"filename", b"").decode("utf-8", "replace")
            out[name] = (filename, data.removesuffix(b"\r\n"))
    return out


def _form(request: fastapi.Request, c: client.Client, **extra: Any) -> dict[str, Any]:
    ctx = pages.context(request, c, "submit")
    return {**ctx, "workspaces": [w["name"] for w in tenancy.workspaces(c)], **extra}


@router.get("/submit")
def submit_form(request: fastapi.Request) -> fastapi.Response:
    with session.api(request) as c:
        return render.html("submit.html", **_form(request, c, error="", problems=[]))


def _submit(request: fastapi.Request, fields: dict[str, tuple[str, bytes]]) -> fastapi.Response:
    yaml_name, yaml_bytes = fields.get("tau_yaml", ("", b""))
    code_name, code = fields.get("code", ("", b""))
    workspace = fields.get("workspace", ("", b""))[1].decode() or None
    with session.api(request) as c:

        def again(error: str, problems: list[dict[str, Any]], status: int) -> fastapi.Response:
            ctx = _form(request, c, error=error, problems=problems)
            return render.html("submit.html", status, **ctx)

        if not yaml_bytes.strip():
            return again("choose a tau.yaml file to upload", [], 400)
        if code and not zipfile.is_zipfile(BytesIO(code)):
            return again(f"{code_name} is not a zip archive; zip the code directory", [], 400)
        try:
            text = yaml_bytes.decode("utf-8")
        except UnicodeDecodeError:
            return again(f"{yaml_name} is not UTF-8 text", [], 400)
        try:
            run = c.submit(text, yaml_name or "tau.yaml", code or None, workspace)
        except client.SpecRejected as exc:
            return again(exc.message, list(exc.body.get("problems", [])), 422)
        except client.ApiError as exc:
            return again(f"{exc.message} ({exc.hint})" if exc.hint else exc.message, [], 400)
    return responses.RedirectResponse(f"/ui/runs/{run['id']}", status_code=303)


@router.post("/submit")
async def submit(request: fastapi.Request) -> fastapi.Response:
    if int(request.headers.get("content-length") or 0) > MAX_UPLOAD + 2**20:
        return render.html("error.html", 413, title="Too large", message="upload over 100 MiB")
    fields = parse_multipart(await request.body(), request.headers.get("content-type", ""))
    csrf = {"csrf": fields.get("csrf", ("", b""))[1].decode("utf-8", "replace")}
    session.check_csrf(request, csrf, session.csrf_token(session.token_of(request)))
    return await anyio.to_thread.run_sync(_submit, request, fields)
