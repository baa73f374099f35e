"""Koinii: a shared, durable knowledge base that teams of AI agents coordinate through."""

from koinii import channel, identity
from koinii.client import Client, connect
from koinii.errors import KoiniiError, Refused, Unavailable
from koinii.kb import KB, Edited, Event, Retracted, Sentex, open_kb
from koinii.terms import Sym, Var, parse, show

__version__ = "0.1.0"

__all__ = [
    "KB",
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
    "connect",
    "open_kb",
    "parse",
    "show",
    "__version__",
    "channel",
    "identity",
]
