"""Durable storage behind the engine: what a store must do, and how to open one.

Invariant: the records a store holds are the truth. The engine keeps indexes and belief
in memory and rebuilds them from `load()` on open; `commit()` makes one write operation
durable — its sentex and justification rows and its change-log entry — atomically, or
raises and changes nothing. A store is opened by one writer at a time.

Implementations: `MemoryStore` (nothing outlives the process), `SQLiteStore` (the
embedded default). PostgreSQL is one more implementation of the same `Store`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from koinii.kb.sentex import Justification, Node


@dataclass
class SentexRow:
    handle: int
    context: str
    positive: bool
    text: str
    premise: bool
    strength: int
    creator: str | None
    created: int
    extra: dict[str, Any] | None


@dataclass
class JustificationRow:
    id: int
    conclusion: int
    rule: int
    antecedents: tuple[int, ...]


@dataclass
class LogEntry:
    """One durable write in the change log: its global seq and belief diff."""

    seq: int
    op: str
    at: int  # epoch ms
    added: list[dict[str, Any]]
    removed: list[dict[str, Any]]


@dataclass
class Loaded:
    """Everything `load()` returns; the engine rebuilds itself from it."""

    sentexes: Iterable[SentexRow]
    justifications: Iterable[JustificationRow]
    next_handle: int  # the handle high-water mark: handles below it are never reused
    seq: int
    floor: int  # the change log holds every entry with seq > floor


@dataclass
class Commit:
    """One write operation's durable effect."""

    entry: LogEntry
    next_handle: int
    upserts: list[Node] = field(default_factory=list)
    deletes: list[int] = field(default_factory=list)
    new_justifications: list[Justification] = field(default_factory=list)
    dropped_justifications: list[int] = field(default_factory=list)


class Store(Protocol):
    location: str

    def load(self) -> Loaded: ...

    def commit(self, commit: Commit) -> None: ...

    def save_next_handle(self, next_handle: int) -> None:
        """Persist the handle high-water mark after a rolled-back write."""

    def changes(self, since: int, limit: int) -> list[LogEntry]:
        """Log entries with seq > since, oldest first (at most `limit`)."""

    def floor(self) -> int:
        """Entries at or below this seq were compacted away."""

    def compact(self, keep: int) -> int:
        """Drop all but the newest `keep` log entries; returns how many were dropped."""

    def close(self) -> None: ...


def open_store(location: str | None, *, synchronous: str = "normal") -> Store:
    """None → memory; `postgresql://…` → PostgreSQL; anything else → an SQLite file."""
    if location is None or location == ":memory:":
        from koinii.kb.store.memory import MemoryStore

        return MemoryStore()
    location = str(location)
    if location.startswith(("postgresql://", "postgres://")):
        from koinii.errors import Refused

        raise Refused(
            "unsupported-store",
            "PostgreSQL stores are not available in this version",
            {"location": location},
        )
    from koinii.kb.store.sqlite import SQLiteStore

    return SQLiteStore(location, synchronous=synchronous)


def row_of(node: Node) -> SentexRow:
    return SentexRow(
        node.handle,
        node.context,
        node.positive,
        node.text,
        node.premise,
        node.strength,
        node.creator,
        node.created,
        node.extra,
    )
