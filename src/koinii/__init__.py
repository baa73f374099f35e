"""Koinii: a shared, durable knowledge base that teams of AI agents coordinate through."""

from typing import TYPE_CHECKING, Any

from koinii import channel, identity
from koinii.client import Client, connect
from koinii.errors import KoiniiError, Refused, Unavailable
from koinii.kb import KB, Edited, Event, Retracted, Sentex, open_kb
from koinii.terms import Sym, Var, parse, show

if TYPE_CHECKING:
    from koinii.aclient import AsyncClient, aconnect

__version__ = "0.1.0"

__all__ = [
    "KB",
    "AsyncClient",
    "Client",
    "Edited",
    "Event",
    "KoiniiError",
    "Refused",
    "Retracted",
    "Sentex",
    "Sym",
    "Unavailable",
    "Var",
    "aconnect",
    "connect",
    "open_kb",
    "parse",
    "show",
    "__version__",
    "channel",
    "identity",
]


def __getattr__(name: str) -> Any:
    """The asyncio client, imported on first use: it loads httpx, which costs every
    blocking program (the CLI, a script) a fifth of a second it does not need."""
    if name in ("AsyncClient", "aconnect"):
        from koinii import aclient

        return getattr(aclient, name)
    raise AttributeError(f"module 'koinii' has no attribute {name!r}")
