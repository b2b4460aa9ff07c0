"""Loading spec files: YAML text → a validated pydantic model, or every problem at once.

Owns the public entry points used by the CLI, the SDK and ``platform`` loaders:

- ``load_model(text, filename, model)`` — the reusable core for any pydantic model;
- ``load_file(path, model)`` — the same from a file (missing/unreadable → SpecError);
- ``read_text(path)`` — a spec file's text: UTF-8, at most ``MAX_SPEC_BYTES`` (1 MiB),
  else a SpecError naming the bad line or the size (checked before any parsing);
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

__all__ = [
    "MAX_SPEC_BYTES",
    "load_file",
    "load_model",
    "load_tau_yaml",
    "parse_tau_yaml",
    "read_text",
]

M = TypeVar("M", bound=pydantic.BaseModel)

_DEFAULT_NAME = "tau.yaml"
MAX_SPEC_BYTES = 2**20
"""Largest spec file read or parsed (1 MiB); a real tau.yaml is a few KiB."""


def load_model(text: str, filename: str, model: type[M]) -> M:
    """Parse ``text`` (the content of ``filename``) and validate it as ``model``.

    Raises ``errors.SpecError`` with every problem found (YAML and validation).
    """
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_SPEC_BYTES:
        raise _too_big(filename, size)
    required = [name for name, field in model.model_fields.items() if field.is_required()]
    doc = yamlpos.parse(text, filename, required)
    try:
        return model.model_validate(doc.value)
    except pydantic.ValidationError as exc:
        problems = [messages.to_problem(e, doc, model) for e in exc.errors(include_url=False)]
        raise errors.SpecError(problems) from None


def read_text(path: str | os.PathLike[str]) -> str:
    """The text of the spec file at ``path``; SpecError if unreadable, too big or not UTF-8."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as handle:
            raw = handle.read(MAX_SPEC_BYTES + 1)
            if len(raw) > MAX_SPEC_BYTES:
                raise _too_big(name, os.fstat(handle.fileno()).st_size)
    except FileNotFoundError:
        raise _file_problem(name, "file not found", _not_found_hint(name)) from None
    except IsADirectoryError:
        raise _file_problem(name, "is a directory, not a file", "pass the YAML file") from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        hint = "check that the file exists and you may read it"
        raise _file_problem(name, f"cannot read the file: {reason}", hint) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(name, raw, exc.start) from None


def load_file(path: str | os.PathLike[str], model: type[M]) -> M:
    """Read the file at ``path`` and ``load_model`` it; unreadable files are SpecErrors."""
    return load_model(read_text(path), os.fspath(path), model)


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
    return f"check the path (relative paths start at {os.getcwd()})"


def _too_big(name: str, size: int) -> errors.SpecError:
    return _file_problem(
        name,
        f"is {size / 2**20:.1f} MiB; spec files may be at most {MAX_SPEC_BYTES // 2**20} MiB",
        "keep data out of the spec: list inputs under data.inputs and ship files with the code",
    )


def _not_utf8(name: str, raw: bytes, start: int) -> errors.SpecError:
    line = raw.count(b"\n", 0, start) + 1
    column = len(raw[raw.rfind(b"\n", 0, start) + 1 : start].decode("utf-8", "replace")) + 1
    message = f"is not UTF-8 text: byte 0x{raw[start]:02x} at line {line}, column {column}"
    hint = "save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8), or remove that character"
    return errors.SpecError([errors.Problem(name, line, column, message, hint)])
