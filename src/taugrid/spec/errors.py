"""Errors of spec files (tau.yaml, platform.yaml): problems with a file position.

Owns the vocabulary every loader of a YAML spec reports in:

    UserError (taugrid.errors)
    └── SpecError            one or more ``Problem`` s of one file; never raised empty

    ValueError
    └── FieldError           raised *inside* a pydantic validator to point the loader at
                             the most relevant key (``loc``, relative to the model)

A ``Problem`` is a value: file, 1-based line and column, a message saying what is
wrong and a hint saying how to fix it. ``SpecError`` formats as one
``file:line:col: error: message`` line per problem, each followed by its hint, in
file order, so every problem of a file is reported at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from taugrid import errors

__all__ = ["FieldError", "Problem", "SpecError"]


@dataclasses.dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong in a spec file, at 1-based ``line``/``column``.

    ``path`` is the dotted key path (``compute.gpus``, ``data.inputs[0].dataset``) or
    ``""`` when the problem is not about one key (syntax errors, empty file).
    """

    file: str
    line: int
    column: int
    message: str
    hint: str = ""
    path: str = ""

    def format(self) -> str:
        """``file:line:col: error: message`` and, when there is one, ``  hint: ...``."""
        head = f"{self.file}:{self.line}:{self.column}: error: {self.message}"
        return f"{head}\n  hint: {self.hint}" if self.hint else head

    def to_dict(self) -> dict[str, str | int]:
        """A JSON-ready mapping (the ``-o json`` shape of the CLI)."""
        return dataclasses.asdict(self)


class SpecError(errors.UserError):
    """A spec file is invalid; ``problems`` lists every problem found, in file order."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        found = sorted(set(problems), key=lambda p: (p.file, p.line, p.column, p.message))
        if not found:
            raise ValueError("SpecError needs at least one problem")
        self.problems: list[Problem] = found
        # message carries every problem so a generic "print message + hint" handler
        # still shows all of them; the hints are part of each problem's lines.
        super().__init__("\n".join(p.format() for p in found))

    @property
    def file(self) -> str:
        """The file of the first problem (all problems of one load share it)."""
        return self.problems[0].file


class FieldError(ValueError):
    """Raised in a model validator to say which key a cross-field problem is about.

    ``loc`` is relative to the model whose validator raises it, e.g. ``("min_replicas",)``
    in ``Autoscaling`` or ``("execution", "launcher")`` in ``TauConfig``. The loader
    points the problem at that key; ``hint`` becomes the problem's hint.
    """

    def __init__(self, message: str, *, loc: Sequence[str | int] = (), hint: str = "") -> None:
        super().__init__(f"{message}; {hint}" if hint else message)
        self.message = message
        self.hint = hint
        self.loc: tuple[str | int, ...] = tuple(loc)
