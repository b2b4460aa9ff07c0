"""YAML text → plain Python values plus the file position of every key and value.

Owns the YAML side of spec loading (``spec.load`` owns the pydantic side). The text
is *composed* with ruamel.yaml (safe, YAML 1.2) into nodes that carry marks, then
walked into plain ``dict``/``list``/scalar values while every path is recorded:

    path      a tuple of keys and list indexes, ``("data", "inputs", 0, "dataset")``
    Located   the 1-based ``Mark`` of the key (``None`` for list items and the root)
              and of the value at that path

Everything that is wrong with the YAML itself — syntax, tabs in indentation, duplicate
keys, non-scalar keys, unknown tags, recursive aliases, an empty file, a top level
that is not a mapping — becomes a ``Problem``; ``parse`` raises one ``SpecError``
with all of them. Merge keys (``<<: *base``) are honoured, explicit keys win.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from typing import Any

from ruamel import yaml as _ryaml
from ruamel.yaml import error as _yerror
from ruamel.yaml import nodes as _ynodes

from taugrid.spec import errors

__all__ = ["Document", "Located", "Mark", "Path", "format_path", "key_lines", "parse"]

Path = tuple[str | int, ...]

_MAX_NODES = 200_000
_MAX_TAB_PROBLEMS = 10
_MERGE_TAG = "tag:yaml.org,2002:merge"
_PLAIN_TAGS = frozenset({"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"})
_TAG_HINT = "remove the tag; spec files take plain strings, numbers, lists and mappings"


@dataclasses.dataclass(frozen=True)
class Mark:
    """A 1-based position in the file."""

    line: int
    column: int


@dataclasses.dataclass(frozen=True)
class Located:
    """Where the key (if any) and the value at one path are."""

    key: Mark | None
    value: Mark


@dataclasses.dataclass(frozen=True)
class Document:
    """A parsed file: its plain value and the position of every path in it."""

    filename: str
    value: Any
    positions: dict[Path, Located]

    def locate(self, path: Path) -> tuple[Path, Located]:
        """The longest prefix of ``path`` present in the file and where it is."""
        for end in range(len(path), -1, -1):
            found = self.positions.get(path[:end])
            if found is not None:
                return path[:end], found
        return (), Located(None, Mark(1, 1))

    def value_at(self, path: Path) -> Any:
        """The plain value at ``path``, or ``None`` when the file has nothing there."""
        current = self.value
        for part in path:
            try:
                current = current[part]
            except (KeyError, IndexError, TypeError):
                return None
        return current


def format_path(path: Path) -> str:
    """``("data", "inputs", 0, "dataset")`` → ``data.inputs[0].dataset``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _mark(m: Any) -> Mark:
    return Mark(int(m.line) + 1, int(m.column) + 1)


class _TooLarge(Exception):
    """The node walk exceeded ``_MAX_NODES`` (an alias bomb or a huge file)."""


class _Walker:
    """Turns a composed node tree into plain values, recording positions and problems."""

    def __init__(self, filename: str, constructor: Any) -> None:
        self.filename = filename
        self.constructor = constructor
        self.positions: dict[Path, Located] = {}
        self.problems: list[errors.Problem] = []
        self.count = 0
        self.active: set[int] = set()

    def problem(self, mark: Mark, message: str, hint: str, path: Path = ()) -> None:
        self.problems.append(
            errors.Problem(self.filename, mark.line, mark.column, message, hint, format_path(path))
        )

    def value(self, node: _ynodes.Node, path: Path, key: Mark | None) -> Any:
        self.count += 1
        if self.count > _MAX_NODES:
            raise _TooLarge
        here = _mark(node.start_mark)
        self.positions[path] = Located(key, here)
        if id(node) in self.active:
            self.problem(here, "recursive YAML alias", "an alias may not refer to itself", path)
            return None
        if str(node.tag) not in _PLAIN_TAGS and not isinstance(node, _ynodes.ScalarNode):
            self.problem(here, f"unsupported YAML tag '{node.tag}'", _TAG_HINT, path)
            return None
        self.active.add(id(node))
        try:
            if isinstance(node, _ynodes.MappingNode):
                return self.mapping(node, path)
            if isinstance(node, _ynodes.SequenceNode):
                return [self.value(item, (*path, i), None) for i, item in enumerate(node.value)]
            return self.scalar(node, path)
        finally:
            self.active.discard(id(node))

    def scalar(self, node: _ynodes.Node, path: Path) -> Any:
        try:
            return self.constructor.construct_object(node, deep=True)
        except _yerror.YAMLError:
            tag = str(node.tag)
            self.problem(
                _mark(node.start_mark),
                f"unsupported YAML tag '{tag}'",
                _TAG_HINT,
                path,
            )
            return None
        except (ValueError, IndexError, OverflowError):
            # ruamel's int/float constructors raise these for an explicit tag on text
            # that is not a number of that kind (`!!int ""`, `!!float .`).
            tag = str(node.tag).rsplit(":", 1)[-1]
            self.problem(
                _mark(node.start_mark),
                f"{node.value!r} is not a valid {tag}",
                f"write a plain {tag} without the '!!{tag}' tag, or quote the value as text",
                path,
            )
            return None

    def mapping(self, node: _ynodes.MappingNode, path: Path) -> dict[str, Any]:
        out: dict[str, Any] = {}
        first: dict[str, Mark] = {}
        merged: list[tuple[_ynodes.Node, _ynodes.Node]] = []
        for key_node, value_node in node.value:
            if str(key_node.tag) == _MERGE_TAG:
                merged.extend(self.merge_pairs(value_node, path))
                continue
            name = self.key(key_node, path)
            if name is None:
                continue
            key_mark = _mark(key_node.start_mark)
            if name in first:
                self.duplicate(name, key_mark, first[name], path)
                continue
            first[name] = key_mark
            out[name] = self.value(value_node, (*path, name), key_mark)
        for key_node, value_node in merged:
            name = self.key(key_node, path)
            if name is not None and name not in out:
                out[name] = self.value(value_node, (*path, name), _mark(key_node.start_mark))
        return out

    def key(self, node: _ynodes.Node, path: Path) -> str | None:
        if isinstance(node, _ynodes.ScalarNode):
            return str(node.value)
        self.problem(
            _mark(node.start_mark),
            f"a key in {format_path(path) or 'the top level'} is a list or mapping",
            "keys must be plain words such as 'gpus'; check for a stray '?', '[' or '{'",
            path,
        )
        return None

    def duplicate(self, name: str, here: Mark, first: Mark, path: Path) -> None:
        where = format_path(path) or "the top level"
        self.problem(
            here,
            f"duplicate key '{name}' in {where} (first defined at line {first.line})",
            "remove one of them; YAML keeps only one value per key",
            (*path, name),
        )

    def merge_pairs(self, node: _ynodes.Node, path: Path) -> list[Any]:
        sources = node.value if isinstance(node, _ynodes.SequenceNode) else [node]
        pairs: list[Any] = []
        for source in sources:
            if isinstance(source, _ynodes.MappingNode):
                pairs.extend(p for p in source.value if str(p[0].tag) != _MERGE_TAG)
            else:
                self.problem(
                    _mark(source.start_mark),
                    "a merge key '<<' needs a mapping (or a list of mappings)",
                    "write '<<: *anchor' where the anchor names a mapping",
                    path,
                )
        return pairs


def _tab_problems(text: str, filename: str) -> list[errors.Problem]:
    found: list[errors.Problem] = []
    # YAML's line breaks only: str.splitlines also splits on \v, \f, \x1c-\x1e, \x85 and
    # \u2028/9, which would number lines past the file's end.
    for number, line in enumerate(re.split(r"\r\n|\r|\n", text), start=1):
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        if "\t" in indent:
            found.append(
                errors.Problem(
                    filename,
                    number,
                    indent.index("\t") + 1,
                    "tab character in indentation",
                    "YAML indentation must use spaces; replace the tab with spaces",
                )
            )
    return found[:_MAX_TAB_PROBLEMS]


_SYNTAX_HINTS = (
    ("found character '\\t'", "YAML indentation must use spaces; replace the tab with spaces"),
    ("mapping values are not allowed", "quote a value that contains ': ', or fix the indentation"),
    ("could not find expected ':'", "each line is 'key: value'; check the ':' and indentation"),
    ("expected a single document", "a spec file holds one document; remove the extra '---'"),
    ("undefined alias", "define the anchor ('&name') before using the alias ('*name')"),
    ("found duplicate anchor", "give each anchor ('&name') a different name"),
    ("while scanning a quoted scalar", "close the quote that opens here"),
    ("special characters are not allowed", "remove control characters from the file"),
)


def _syntax_problem(exc: _yerror.YAMLError, text: str, filename: str) -> list[errors.Problem]:
    tabs = _tab_problems(text, filename)
    if tabs:
        return tabs
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = _mark(mark) if mark is not None else Mark(1, 1)
    what = str(getattr(exc, "problem", None) or exc).strip().splitlines()[0]
    context = str(getattr(exc, "context", None) or "")
    full = f"{context} {what} {exc}"
    hint = next((h for key, h in _SYNTAX_HINTS if key in full), "")
    opened = getattr(exc, "context_mark", None)
    if not hint and "flow" in context and opened is not None:
        start = _mark(opened)
        hint = f"close the '[' or '{{' opened at line {start.line}, column {start.column}"
    hint = hint or "check the indentation and quoting on this line and the one above"
    return [errors.Problem(filename, where.line, where.column, f"invalid YAML: {what}", hint)]


def _compose(text: str, filename: str) -> tuple[Any, Any]:
    loader = _ryaml.YAML(typ="safe", pure=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return loader.compose(text), loader.constructor
    except _yerror.YAMLError as exc:
        raise errors.SpecError(_syntax_problem(exc, text, filename)) from None
    except RecursionError:
        problem = errors.Problem(
            filename, 1, 1, "the YAML is nested too deeply", "flatten the nested lists/mappings"
        )
        raise errors.SpecError([problem]) from None


def parse(text: str, filename: str, required: list[str] | None = None) -> Document:
    """Parse ``text`` into a ``Document`` whose value is a mapping, or raise ``SpecError``.

    ``required`` names the top-level keys the caller needs; they only shape the hint of
    an empty file.
    """
    node, constructor = _compose(text, filename)
    start = "' and '".join(required or []) or "key"
    if node is None or (isinstance(node, _ynodes.ScalarNode) and str(node.value).strip() == ""):
        problem = errors.Problem(
            filename, 1, 1, "the file is empty", f"write one 'key: value' per line: '{start}'"
        )
        raise errors.SpecError([problem])
    walker = _Walker(filename, constructor)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = walker.value(node, (), None)
    except _TooLarge:
        walker.problem(Mark(1, 1), "the file expands to too many values", "use fewer aliases")
        raise errors.SpecError(walker.problems) from None
    except RecursionError:
        walker.problem(Mark(1, 1), "the YAML is nested too deeply", "flatten the structure")
        raise errors.SpecError(walker.problems) from None
    if not isinstance(value, dict):
        here = _mark(node.start_mark)
        walker.problem(
            here,
            f"the top level must be a mapping of 'key: value' lines, not {describe(value)}",
            f"start the file with '{start}: ...'",
        )
    if walker.problems:
        raise errors.SpecError(walker.problems)
    return Document(filename, value, walker.positions)


def describe(value: Any) -> str:
    """A short English description of a YAML value's kind, for messages."""
    if value is None:
        return "an empty value"
    if isinstance(value, bool):
        return f"the boolean {'true' if value else 'false'}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        shown = value if len(value) <= 60 else value[:57] + "..."
        return f"the string '{shown}'"
    return f"a {type(value).__name__} ({str(value)[:40]})"


def key_lines(text: str, filename: str) -> dict[str, int]:
    """Dotted key (``compute.gpus``, ``data.inputs[0]``) → 1-based line of the key."""
    doc = parse(text, filename)
    return {
        format_path(path): (loc.key or loc.value).line
        for path, loc in doc.positions.items()
        if path
    }
