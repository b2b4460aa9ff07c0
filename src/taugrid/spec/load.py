"""Loading spec files: YAML text → a validated pydantic model, or every problem at once.

Owns the public entry points used by the CLI, the SDK and ``platform`` loaders:

- ``load_model(text, filename, model)`` — the reusable core for any pydantic model;
- ``load_file(path, model)`` — the same from a file (missing/unreadable → SpecError);
- ``parse_tau_yaml`` / ``load_tau_yaml`` — the two above for ``TauConfig``.

Invariant: these functions return a model or raise ``errors.SpecError`` (a
``UserError``) listing *all* problems with ``file:line:column``; no other exception
escapes for any input text. YAML positions come from ``spec.yamlpos``; the wording of
validation problems from ``spec.messages``.
"""

from __future__ import annotations

import os
from typing import TypeVar

import pydantic

from taugrid.spec import errors, messages, models, yamlpos

__all__ = ["load_file", "load_model", "load_tau_yaml", "parse_tau_yaml"]

M = TypeVar("M", bound=pydantic.BaseModel)

_DEFAULT_NAME = "tau.yaml"


def load_model(text: str, filename: str, model: type[M]) -> M:
    """Parse ``text`` (the content of ``filename``) and validate it as ``model``.

    Raises ``errors.SpecError`` with every problem found (YAML and validation).
    """
    required = [name for name, field in model.model_fields.items() if field.is_required()]
    doc = yamlpos.parse(text, filename, required)
    try:
        return model.model_validate(doc.value)
    except pydantic.ValidationError as exc:
        problems = [messages.to_problem(e, doc, model) for e in exc.errors(include_url=False)]
        raise errors.SpecError(problems) from None


def load_file(path: str | os.PathLike[str], model: type[M]) -> M:
    """Read the file at ``path`` and ``load_model`` it; unreadable files are SpecErrors."""
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise _file_problem(name, "file not found", _not_found_hint(name)) from None
    except IsADirectoryError:
        raise _file_problem(name, "is a directory, not a file", "pass the YAML file") from None
    except UnicodeDecodeError as exc:
        hint = f"save it as UTF-8 (bad byte at offset {exc.start})"
        raise _file_problem(name, "is not UTF-8 text", hint) from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        hint = "check that the file exists and you may read it"
        raise _file_problem(name, f"cannot read the file: {reason}", hint) from None
    return load_model(text, name, model)


def parse_tau_yaml(text: str, filename: str = _DEFAULT_NAME) -> models.TauConfig:
    """Parse tau.yaml ``text`` into a ``TauConfig`` (raises ``errors.SpecError``)."""
    return load_model(text, filename, models.TauConfig)


def load_tau_yaml(path: str | os.PathLike[str]) -> models.TauConfig:
    """Load the tau.yaml at ``path`` into a ``TauConfig`` (raises ``errors.SpecError``)."""
    return load_file(path, models.TauConfig)


def _file_problem(name: str, message: str, hint: str) -> errors.SpecError:
    return errors.SpecError([errors.Problem(name, 1, 1, message, hint)])


def _not_found_hint(name: str) -> str:
    if os.path.basename(name) == _DEFAULT_NAME:
        return "run from the directory that holds tau.yaml, or pass its path with -c FILE"
    return "check the path, or pass the right file with -c FILE"
