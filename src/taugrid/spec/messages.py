"""pydantic validation errors → ``Problem`` s that say what, where and how to fix.

Owns the wording of every validation message of every spec file. One function per
family of pydantic error types; ``to_problem`` dispatches on ``error["type"]`` and
places the problem with the ``Document`` positions:

- unknown keys (``extra_forbidden``) point at the key, with a "did you mean";
- missing keys point at the key of the mapping that lacks them;
- everything else points at the offending value;
- ``errors.FieldError`` raised by a model validator points at its own ``loc``.

Messages name the dotted path (``compute.gpus``) and the offending value; hints say
how to write it correctly. Value errors whose text is ``what; how`` are split there.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Callable
from typing import Any

import pydantic

from taugrid.spec import errors, yamlpos

__all__ = ["to_problem"]

_Text = tuple[str, str]  # (message, hint)
_DNS_LABEL_RE = re.compile(r"^\^\[a-z0-9\]\(\[-a-z0-9\]\{0,(\d+)\}\[a-z0-9\]\)\?\$$")


def to_problem(err: Any, doc: yamlpos.Document, model: type[pydantic.BaseModel]) -> errors.Problem:
    """Turn one entry of ``ValidationError.errors()`` into a placed ``Problem``."""
    raw: yamlpos.Path = tuple(err["loc"])
    # pydantic marks errors in a dict key by appending "[key]"; a real key may be named so.
    is_key = len(raw) >= 2 and raw[-1] == "[key]" and raw not in doc.positions
    loc = raw[:-1] if is_key else raw
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, errors.FieldError):
        loc = (*loc, *cause.loc)
    kind = err["type"]
    if kind == "missing":
        message, hint = _missing(loc, model)
        _, located = doc.locate(loc[:-1])
        mark = located.key or located.value
    else:
        found, located = doc.locate(loc)
        # Containers and empty values start after their key; the key is what users look for.
        container = isinstance(doc.value_at(found), dict | list | None)
        on_key = kind == "extra_forbidden" or is_key or container
        mark = (located.key or located.value) if on_key or found != loc else located.value
        message, hint = _describe(err, loc, model, cause, is_key)
    where = yamlpos.format_path(loc)
    return errors.Problem(doc.filename, mark.line, mark.column, message, hint, where)


def _describe(
    err: Any, loc: yamlpos.Path, model: type[pydantic.BaseModel], cause: object, is_key: bool
) -> _Text:
    kind: str = err["type"]
    if kind == "extra_forbidden" and loc:
        return _unknown(loc, model)
    if isinstance(cause, errors.FieldError):
        return cause.message, cause.hint
    where = yamlpos.format_path(loc) or "the top level"
    if kind in ("value_error", "assertion_error"):
        message, hint = _split(str(cause) if cause is not None else err["msg"])
        named = not loc or message.startswith(str(loc[-1])) or where in message
        return (message if named else f"{where}: {message}"), hint
    if is_key:
        where = f"{yamlpos.format_path(loc[:-1])} key"
    key = str(loc[-1]) if loc else "key"
    for prefix, describe in _BY_PREFIX:
        if kind.startswith(prefix):
            return describe(where, key, err)
    return f"{where}: {err['msg']}", ""


def _split(text: str) -> _Text:
    message, _, hint = text.partition("; ")
    return message, hint


def _unknown(loc: yamlpos.Path, model: type[pydantic.BaseModel]) -> _Text:
    key, parent = str(loc[-1]), loc[:-1]
    where = yamlpos.format_path(parent) or "the top level"
    fields = _fields_at(model, parent)
    if not fields:
        return f"unknown key '{key}' in {where}", f"remove '{key}'"
    close = difflib.get_close_matches(key, fields, n=1, cutoff=0.6)
    # "did you mean" is the common typo case; the hint always lists what is allowed.
    message = f"unknown key '{key}' in {where}" + (f"; did you mean '{close[0]}'?" if close else "")
    return message, f"allowed keys in {where}: {', '.join(fields)}"


def _missing(loc: yamlpos.Path, model: type[pydantic.BaseModel]) -> _Text:
    key, parent = str(loc[-1]), loc[:-1]
    where = yamlpos.format_path(parent) or "the top level"
    description = _description_at(model, loc)
    about = f" ({description.rstrip('.')})" if description else ""
    indent = "  " if parent else ""
    return f"missing required key '{key}' in {where}", f"add '{indent}{key}: ...'{about}"


def _show(value: Any) -> str:
    """The offending value as the user wrote it: ``'two'``, ``3``, ``a list``."""
    if isinstance(value, str):
        return repr(value if len(value) <= 60 else value[:57] + "...")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    return yamlpos.describe(value)


def _number(where: str, key: str, err: Any) -> _Text:
    kind = "a whole number" if err["type"].startswith("int") else "a number"
    hint = _NUMBER_HINTS.get(where, f"write e.g. '{key}: 2'")
    return f"{where} must be {kind}, got {_show(err.get('input'))}", hint


_NUMBER_HINTS = {
    "schema_version": "write 'schema_version: 1' (the current version), or leave it out",
}


def _boolean(where: str, key: str, err: Any) -> _Text:
    return f"{where} must be true or false, got {_show(err.get('input'))}", f"write '{key}: true'"


def _string(where: str, key: str, err: Any) -> _Text:
    value = err.get("input")
    if isinstance(value, dict | list) or value is None:
        return f"{where} must be a string, got {_show(value)}", f"write '{key}: some-text'"
    return (
        f"{where} must be a string, got {_show(value)}",
        f"quote it so YAML keeps it as text: '\"{value}\"'",
    )


def _sequence(where: str, key: str, err: Any) -> _Text:
    return (
        f"{where} must be a list, got {_show(err.get('input'))}",
        f"write one item per line under '{key}:' starting with '- ', or '{key}: [a, b]'",
    )


def _mapping(where: str, key: str, err: Any) -> _Text:
    value = err.get("input")
    if value is None:
        return f"{where} is empty", f"indent its keys under '{key}:', or delete the line"
    return (
        f"{where} must be a mapping of keys, got {_show(value)}",
        f"write its keys indented on the lines under '{key}:'",
    )


def _choice(where: str, key: str, err: Any) -> _Text:
    allowed = re.findall(r"'([^']*)'", str((err.get("ctx") or {}).get("expected", "")))
    value = err.get("input")
    message = f"invalid value {_show(value)} for {where}"
    close = difflib.get_close_matches(str(value), allowed, n=1, cutoff=0.6)
    if close:
        message += f"; did you mean '{close[0]}'?"
    return message, f"allowed values: {', '.join(allowed)}"


_BOUNDS = {
    "greater_than_equal": ("ge", "at least"),
    "greater_than": ("gt", "greater than"),
    "less_than_equal": ("le", "at most"),
    "less_than": ("lt", "less than"),
}


def _bound(where: str, key: str, err: Any) -> _Text:
    ctx_key, words = _BOUNDS[err["type"]]
    limit = _show((err.get("ctx") or {}).get(ctx_key))
    return (
        f"{where} must be {words} {limit}, got {_show(err.get('input'))}",
        f"set '{key}' to a value {words} {limit}",
    )


def _length(where: str, key: str, err: Any) -> _Text:
    ctx = err.get("ctx") or {}
    if err["type"] == "string_too_short" and ctx.get("min_length") == 1:
        return f"{where} must not be empty", f"give '{key}' a value or delete the line"
    return f"{where}: {err['msg']}", f"change the length of '{key}'"


def _pattern(where: str, key: str, err: Any) -> _Text:
    pattern = str((err.get("ctx") or {}).get("pattern", ""))
    value = err.get("input")
    label = _DNS_LABEL_RE.match(pattern)
    if label is not None:
        longest = int(label.group(1)) + 2
        return (
            f"{where} {_show(value)} is not a valid name",
            f"use lowercase letters, digits and '-', starting and ending with a letter or "
            f"digit, at most {longest} characters (e.g. 'my-run-1')",
        )
    return f"{where} {_show(value)} is not valid", _PATTERN_HINTS.get(pattern, pattern)


_PATTERN_HINTS = {
    r"^[A-Za-z_][A-Za-z0-9_]*$": "environment variable names use letters, digits and '_' "
    "and do not start with a digit (e.g. HF_TOKEN)",
    r"^[a-z0-9][-a-z0-9_.]*(@[A-Za-z0-9][-A-Za-z0-9_.]*)?$": "write a registry dataset "
    "name, optionally with a version: 'imagenet' or 'imagenet@v2'",
    r"^[\w.]+:[\w.]+$": "write 'module.path:attribute', e.g. 'serve_app:app'",
}

_BY_PREFIX: tuple[tuple[str, Callable[[str, str, Any], _Text]], ...] = (
    ("int_", _number),
    ("float_", _number),
    ("bool_", _boolean),
    ("string_type", _string),
    ("string_unicode", _string),
    ("string_pattern", _pattern),
    ("string_too", _length),
    ("list_type", _sequence),
    ("dict_type", _mapping),
    ("model_", _mapping),
    ("enum", _choice),
    ("literal_error", _choice),
    ("greater_than", _bound),
    ("less_than", _bound),
)


def _unwrap(tp: Any) -> list[Any]:
    """The concrete types inside Optional/Union/Annotated wrappers."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [t for arg in typing.get_args(tp) for t in _unwrap(arg) if t is not type(None)]
    return [tp]


def _step(tp: Any, part: str | int) -> Any:
    for candidate in _unwrap(tp):
        origin = typing.get_origin(candidate)
        if isinstance(candidate, type) and issubclass(candidate, pydantic.BaseModel):
            field = candidate.model_fields.get(str(part))
            if field is not None:
                return field.annotation
        elif origin in (list, tuple, set, frozenset) and isinstance(part, int):
            return typing.get_args(candidate)[0]
        elif origin is dict and isinstance(part, str):
            return typing.get_args(candidate)[1]
    return None


def _model_at(model: type[pydantic.BaseModel], path: yamlpos.Path) -> Any:
    current: Any = model
    for part in path:
        current = _step(current, part)
        if current is None:
            return None
    return current


def _fields_at(model: type[pydantic.BaseModel], path: yamlpos.Path) -> list[str]:
    for candidate in _unwrap(_model_at(model, path)):
        if isinstance(candidate, type) and issubclass(candidate, pydantic.BaseModel):
            return list(candidate.model_fields)
    return []


def _description_at(model: type[pydantic.BaseModel], path: yamlpos.Path) -> str:
    if not path:
        return ""
    for candidate in _unwrap(_model_at(model, path[:-1])):
        if isinstance(candidate, type) and issubclass(candidate, pydantic.BaseModel):
            field = candidate.model_fields.get(str(path[-1]))
            if field is not None and field.description:
                return field.description
    return ""
