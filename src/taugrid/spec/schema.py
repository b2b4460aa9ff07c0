"""JSON Schema of tau.yaml and the script that writes docs/tau-yaml.md.

Owns the published shape of tau.yaml: ``json_schema()`` is what ``tau run schema``
prints (editors use it for completion), and ``main`` regenerates the Markdown
reference from ``spec.docgen``:

    python -m taugrid.spec.schema --write docs/tau-yaml.md   # regenerate
    python -m taugrid.spec.schema --check docs/tau-yaml.md   # exit 1 when stale
    python -m taugrid.spec.schema                            # print the JSON Schema
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

from taugrid.spec import docgen, models

__all__ = ["SCHEMA_ID", "json_schema", "main", "markdown"]

SCHEMA_ID = "https://taugrid.dev/schemas/tau.yaml/v1.json"


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``TauConfig``, with every field described."""
    schema = models.TauConfig.model_json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **schema,
        "title": "tau.yaml",
        "description": "A TauGrid workload: what to run, on what, where and how.",
    }


def markdown() -> str:
    """The Markdown reference of tau.yaml (docs/tau-yaml.md)."""
    return docgen.render()


def main(argv: list[str] | None = None) -> int:
    """Command line of this module; see the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m taugrid.spec.schema")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", metavar="PATH", help="write the Markdown reference")
    group.add_argument("--check", metavar="PATH", help="fail when PATH is not up to date")
    args = parser.parse_args(argv)
    if args.write:
        pathlib.Path(args.write).write_text(markdown(), encoding="utf-8")
        return 0
    if args.check:
        path = pathlib.Path(args.check)
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != markdown():
            print(f"{path} is stale; run: python -m taugrid.spec.schema --write {path}")
            return 1
        return 0
    print(json.dumps(json_schema(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
