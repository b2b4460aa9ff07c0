"""Submitting from the portal: upload tau.yaml + a zip; bad tau.yaml → file:line errors."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

from taugrid.portal import submit_views
from tests.hub import tenancy_builders as tb
from tests.hub.harness import HubServer
from tests.portal.conftest import follow, login, shot


def _zip(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return buf.getvalue()


def upload(page: Any, yaml_text: str, code: bytes | None) -> None:
    """Submit ``yaml_text`` (and a zip of code) through the portal's Submit page."""
    follow(page, "nav >> text=Submit")
    yaml_file = {"name": "tau.yaml", "mimeType": "text/yaml", "buffer": yaml_text.encode()}
    page.set_input_files("#tau_yaml", files=[yaml_file])
    if code is not None:
        zip_file = {"name": "code.zip", "mimeType": "application/zip", "buffer": code}
        page.set_input_files("#code", files=[zip_file])
    follow(page, "form.submit button[type=submit]")


def test_invalid_tau_yaml_shows_file_line_errors(hub: HubServer, page: Any) -> None:
    login(page, hub.url, hub.admin_token)
    bad = tb.tau_yaml("bad-run").replace("gpus: 1", "gpus: lots")
    upload(page, bad, None)
    problems = page.inner_text("ul.problems")
    line = next(i for i, ln in enumerate(bad.splitlines(), 1) if "gpus: lots" in ln)
    assert f"tau.yaml:{line}:" in problems and "gpus" in problems
    shot(page, "submit-errors")
    with hub.http() as admin:
        assert tb.ok(admin.get("/v1/runs")) == []  # nothing was submitted


def test_upload_submits_the_run_with_its_code(hub: HubServer, page: Any) -> None:
    login(page, hub.url, hub.admin_token)
    code = _zip({"train.py": "print('hello from the portal')\n"})
    upload(page, tb.tau_yaml("from-portal"), code)
    assert "/ui/runs/from-portal-" in page.url
    assert "from-portal" in page.inner_text("h1")
    run_id = page.url.rsplit("/", 1)[-1]
    with hub.http() as admin:
        run = tb.ok(admin.get(f"/v1/runs/{run_id}"))
    stored = next(Path(run["record_dir"]).rglob("code.zip"))
    assert stored.read_bytes() == code


def test_upload_of_a_non_zip_archive_is_explained(hub: HubServer, page: Any) -> None:
    login(page, hub.url, hub.admin_token)
    upload(page, tb.tau_yaml("no-zip"), b"not a zip")
    assert "is not a zip archive" in page.inner_text("main")


def test_parse_multipart_keeps_binary_bytes() -> None:
    blob = bytes(range(256)) * 4 + b"\r\n--x\r\n"
    body = (
        b'--BOUND\r\nContent-Disposition: form-data; name="code"; filename="c.zip"\r\n'
        b"Content-Type: application/zip\r\n\r\n" + blob + b"\r\n--BOUND\r\n"
        b'Content-Disposition: form-data; name="csrf"\r\n\r\nabc\r\n--BOUND--\r\n'
    )
    fields = submit_views.parse_multipart(body, "multipart/form-data; boundary=BOUND")
    assert fields["code"] == ("c.zip", blob)
    assert fields["csrf"] == ("", b"abc")
