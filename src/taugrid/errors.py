"""Root of TauGrid's exception hierarchies.

    TauError                     base; ``message`` says what is wrong, ``hint`` how to fix it
    ├── UserError                the user can fix it (bad tau.yaml, unknown name, quota)
    │   ├── spec.errors.SpecError         tau.yaml / platform.yaml problems (file:line:col)
    │   └── sdk.errors.ApiError(4xx)      the hub refused a request
    └── SystemFault              something outside the user's control
        ├── retryable=True       transient (hub unreachable, Ray not up yet)
        └── retryable=False      permanent (corrupt store, incompatible versions)

Each boundary (hub HTTP, Ray, Kubernetes) defines its subclasses in its own module and
chains the cause (``raise X(...) from exc``). The CLI prints ``message`` and ``hint``
and exits 2 (user) or 1 (system) — never a traceback.
"""

from __future__ import annotations

__all__ = ["SystemFault", "TauError", "UserError"]


class TauError(Exception):
    """Base of every error TauGrid raises on purpose."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


class UserError(TauError):
    """An error the user caused and can fix; exit code 2."""


class SystemFault(TauError):
    """An error outside the user's control; ``retryable`` tells callers whether to retry."""

    def __init__(self, message: str, hint: str = "", *, retryable: bool = False) -> None:
        super().__init__(message, hint)
        self.retryable = retryable
