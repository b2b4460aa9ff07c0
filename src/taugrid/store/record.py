"""The evidence record on disk: ``<data_root>/<workspace>/runs/<run-id>/`` (DESIGN §2).

Owns the layout and every write the hub makes into it: ``run.json`` (rewritten as the
run progresses), ``tau.yaml`` (as submitted), ``rendered/``, ``logs/`` (appended from
agent log chunks), ``events.jsonl`` (append-only), ``FENCE`` (the authoritative
attempt's fencing token, read by the in-job SDK before it commits checkpoints or
artifacts) and ``COMPLETE`` (written last). The job itself writes ``metrics/``,
``checkpoints/`` and ``artifacts/`` through ``taugrid.sdk.injob``.

``resolve_inside`` is the only way to turn a user-supplied relative path into a file
of the record: it rejects anything that escapes the run directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from taugrid.errors import UserError

__all__ = ["RunRecord", "resolve_inside"]

SUBDIRS = ("rendered", "logs", "metrics", "checkpoints", "artifacts")


def resolve_inside(root: Path, rel: str) -> Path:
    """``root/rel`` if it stays inside ``root`` (after resolving links), else UserError."""
    if "\x00" in rel or len(rel) > 4096 or any(len(part) > 255 for part in rel.split("/")):
        # NUL and over-long names make the OS calls below raise instead of answering.
        raise UserError(
            "not a valid path in a run's record (NUL byte or over-long name)",
            "use a path relative to the run directory, as listed by: tau run get NAME --list",
        )
    base = root.resolve()
    target = (base / rel.lstrip("/")).resolve()
    if target != base and base not in target.parents:
        raise UserError(
            f"path '{rel}' is outside the run's record", "use a path relative to the run directory"
        )
    return target


def _atomic_write(path: Path, data: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(data)
    os.replace(tmp, path)


class RunRecord:
    """One run's record directory."""

    def __init__(self, data_root: Path, workspace: str, run_id: str) -> None:
        self.dir = data_root / workspace / "runs" / run_id

    def create(self, tau_yaml: str) -> None:
        for sub in SUBDIRS:
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        _atomic_write(self.dir / "tau.yaml", tau_yaml)

    def write_json(self, name: str, doc: dict[str, Any]) -> None:
        _atomic_write(self.dir / name, json.dumps(doc, indent=2, sort_keys=True, default=str))

    def write_rendered(self, name: str, text: str) -> None:
        (self.dir / "rendered").mkdir(parents=True, exist_ok=True)
        _atomic_write(self.dir / "rendered" / name, text)

    def write_events(self, events: list[dict[str, Any]]) -> None:
        """Rewrite ``events.jsonl`` (every lifecycle event, in order) from the store."""
        _atomic_write(
            self.dir / "events.jsonl", "".join(json.dumps(e, default=str) + "\n" for e in events)
        )

    def append_log(self, name: str, chunk: str) -> None:
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        with (self.dir / "logs" / name).open("a") as fh:
            fh.write(chunk)

    def set_fence(self, token: int) -> None:
        _atomic_write(self.dir / "FENCE", str(token))

    def complete(self) -> None:
        _atomic_write(self.dir / "COMPLETE", "")

    def is_complete(self) -> bool:
        return (self.dir / "COMPLETE").exists()

    def read_log(self, name: str = "driver.log") -> str:
        p = self.dir / "logs" / name
        return p.read_text(errors="replace") if p.exists() else ""

    def files(self, sub: str = "") -> list[dict[str, Any]]:
        """Files under the record (or a subdirectory), relative paths with sizes."""
        root = resolve_inside(self.dir, sub) if sub else self.dir
        if not root.exists():
            return []
        base = self.dir.resolve()
        out = []
        for p in sorted(root.rglob("*")):
            # A link that leads out of the record is not listed (fetching it is refused).
            if (
                p.is_file()
                and base in p.resolve().parents
                and not any(part.startswith(".") for part in p.relative_to(self.dir).parts)
            ):
                out.append({"path": str(p.relative_to(self.dir)), "size": p.stat().st_size})
        return out

    def missing_outputs(self, outputs: list[dict[str, Any]]) -> list[str]:
        """Declared required outputs that do not exist under ``artifacts/``."""
        art = self.dir / "artifacts"
        return [
            o["path"] for o in outputs if o.get("required", True) and not (art / o["path"]).exists()
        ]
