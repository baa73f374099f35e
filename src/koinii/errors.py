"""Every exception Koinii raises, in one place.

A refusal is not a crash: bad input gets a `Refused` with a stable `kind` (the string
callers and tests branch on), a message a person can act on, and `data` for programs.
The same kind crosses the wire unchanged. Storage and transport errors are translated
into these classes once, at their boundary.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KoiniiError", "Refused", "Unavailable"]


class KoiniiError(Exception):
    """Base class of every error Koinii raises on purpose."""


# --- refusals: bad input or a rule said no; nothing was changed -------------------------


class Refused(KoiniiError):
    """The request was refused by a named rule; the store is unchanged.

    `kind` is stable (`parse`, `naming`, `koinii/speaker-mismatch`, ...), `message` is
    for people, `data` (JSON-friendly) is for programs.
    """

    def __init__(self, kind: str, message: str, data: dict[str, Any] | None = None):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.data = dict(data) if data else {}

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "data": self.data}

    def __reduce__(self):  # keep kind/message/data when pickled across processes
        return (type(self), (self.kind, self.message, self.data))


# --- transport: the daemon could not be reached or did not answer ----------------------


class Unavailable(KoiniiError):
    """The daemon could not be reached, or the connection failed mid-request."""
