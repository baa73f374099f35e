"""Koinii: a shared, durable knowledge base that teams of AI agents coordinate through.

The root package only re-exports, and lazily: `koinii.KB` imports `koinii.kb` on first
use, `koinii.connect` the HTTP client, `koinii.AsyncClient` httpx. So `import koinii.kb`
loads the engine and nothing above it, and no module inside the package imports this one
(each imports from the module that owns the name; tests/test_layers.py checks both). The
imports under TYPE_CHECKING are the same names for type checkers and editors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from koinii import _moved
from koinii._lazy import reexport
from koinii._version import __version__

if TYPE_CHECKING:
    from koinii import channel, identity
    from koinii.client.aio import AsyncClient, aconnect
    from koinii.client.sync import Client, connect
    from koinii.errors import KoiniiError, Refused, Unavailable
    from koinii.kb import KB, Edited, Event, Retracted, Sentex, open_kb
    from koinii.terms import Sym, Var, parse, show

_moved.install()

# Each re-exported name -> the module that owns it (a module re-exported as itself).
_OWNERS = {
    "KB": "koinii.kb",
    "Edited": "koinii.kb",
    "Event": "koinii.kb",
    "Retracted": "koinii.kb",
    "Sentex": "koinii.kb",
    "open_kb": "koinii.kb",
    "AsyncClient": "koinii.client.aio",
    "aconnect": "koinii.client.aio",
    "Client": "koinii.client.sync",
    "connect": "koinii.client.sync",
    "KoiniiError": "koinii.errors",
    "Refused": "koinii.errors",
    "Unavailable": "koinii.errors",
    "Sym": "koinii.terms",
    "Var": "koinii.terms",
    "parse": "koinii.terms",
    "show": "koinii.terms",
    "channel": "koinii.channel",
    "identity": "koinii.identity",
}

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


__getattr__, __dir__ = reexport("koinii", _OWNERS, globals())
