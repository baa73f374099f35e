"""Durable storage behind the engine: what a store must do, and how to open one.

Invariant: the records a store holds are the truth. The engine keeps indexes and belief
in memory and rebuilds them from `load()` on open; `commit()` makes one write operation
durable — its sentex and justification rows and its change-log entry — atomically, or
raises and changes nothing. A store is opened by one writer at a time.

Implementations: `MemoryStore` (nothing outlives the process), `SQLiteStore` (the
embedded default). PostgreSQL is one more implementation of the same `Store`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from koinii.errors import Refused
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
    # each change's public dict (feed.py, `Event`) — or, in an entry being committed, the
    # engine's `Change`s and added `Node`s, each encoded as its dict (`encoded_diff`)
    added: list[Any]
    removed: list[Any]
    records: dict[str, Any] | None = None  # what a domain write changed, in brief


def encoded_diff(entry: LogEntry) -> bytes:
    """What a log entry changed — added, removed, and a domain write's records — as the
    stores keep it: JSON, UTF-8 (read back by `decoded_entry`; a SQL store's column takes
    it decoded, the memory store encodes an entry as it is read). A SQL store encodes
    every write, so orjson (a tenth of json.dumps' time); a kept entry costs its text, not
    a dict per change."""
    diff: dict[str, Any] = {"added": entry.added, "removed": entry.removed}
    if entry.records is not None:
        diff["records"] = entry.records
    return orjson.dumps(diff, default=_public, option=orjson.OPT_NON_STR_KEYS)


def _public(change: Any) -> dict[str, Any]:
    """A change that is not a dict yet: its dict, made as it is encoded and dropped after
    (a write's quarter of a million changes are never all dicts at once)."""
    try:
        return change.public
    except AttributeError:
        raise TypeError(f"{type(change).__name__} is not a change") from None


def decoded_entry(seq: int, op: str, at: int, diff: str | bytes) -> LogEntry:
    """The log entry kept as `encoded_diff` made it. Read by orjson (a replay reads ten
    thousand at once, on the writer's thread) — or, where orjson refuses one, by json,
    which takes the NaN and the big integers of a store written by hand, as every
    other read of a stored value does."""
    try:
        decoded = orjson.loads(diff)
    except orjson.JSONDecodeError:
        decoded = json.loads(diff)
    return LogEntry(seq, op, at, decoded["added"], decoded["removed"], decoded.get("records"))


@dataclass
class Tail:
    """What a store holds that a checkpoint taken at a seq does not (kb/checkpoint.py):
    the rows written after it (new or changed), and how many rows written at or before
    it are still stored (fewer than the checkpoint holds: some were deleted since)."""

    sentexes: list[SentexRow]
    justifications: list[JustificationRow]
    sentexes_before: int
    justifications_before: int


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
    # A domain write (wraps, sessions): runs inside the same transaction, on the store's
    # record tables; its return value is commit()'s. Raising rolls everything back.
    records: Callable[[Any], Any] | None = None
    # the canonical atom texts the write has shown already, by handle (a Node keeps only
    # its atom): a row's text is taken from here where it is, else shown
    texts: dict[int, str] = field(default_factory=dict)


class Store(Protocol):
    location: str
    # What a committed write survives, as the store reads it back from its connection:
    # {"backend": …, and the setting that decides it} (docs/daemon.md, durability).
    durability: dict[str, str]

    def load(self) -> Loaded: ...

    def commit(self, commit: Commit) -> Any: ...

    def begin_group(self) -> None:
        """Hold the commits that follow (never with `records`) until `commit_group`."""

    def commit_group(self) -> None:
        """Make every held commit durable at once, or raise and keep none of them."""

    def ensure_schema(self, domain: str, migrations: Any) -> None:
        """Bring a domain's record tables up to date: a list of SQL scripts, or
        `{"sqlite": [...], "postgres": [...]}` per dialect."""

    def read(self, reader: Callable[[Any], Any]) -> Any:
        """Run `reader(connection)` against the record tables (reads only)."""

    def search(self, words: Sequence[str], limit: int | None) -> list[tuple[int, float, Any]]:
        """(handle, score, snippet) of the sentexes whose text holds any of `words`, best
        first (higher scores better), at most `limit`; with None, every match and no
        snippets (None: ask `snippets`). See `fulltext`."""

    def snippets(self, words: Sequence[str], handles: Sequence[int]) -> dict[int, str]:
        """A short window of each sentex's indexed text around `words`, matches in [ ]."""

    def catch_up(self, limit: int | None = None) -> int:
        """Bring the search structure up to date with the index rows (at most `limit`
        of them); returns how many it added. A search's caller does it first."""

    def reader(self) -> Any:
        """A `fulltext.IndexReader`: `search` and `snippets` through a connection of its
        own, for another thread (None: this store answers only on its own, in memory)."""

    def records_reader(self) -> Any:
        """A read-only connection of its own to the record tables, as `read` passes
        them (closed by the caller), for another thread; None as for `reader`."""

    # Where this store's checkpoint lives (kb/checkpoint.py); None: it keeps none, and
    # the six methods below are never called.
    checkpoint_path: str | None

    def head(self) -> tuple[int, int]:
        """(next_handle, seq): the handle high-water mark and the last durable seq."""

    def identity(self) -> int:
        """The random id the store was given when it was made: a checkpoint names it."""

    def mark(self, seq: int) -> int | None:
        """A fingerprint of the change-log entry at `seq` (None: there is none), which
        tells one history from another that reached the same seq."""

    def tail(self, seq: int) -> Tail:
        """The rows written after `seq`, and the counts of those written at or before it."""

    def handles_written_upto(self, seq: int) -> set[int]:
        """The handles of the stored sentexes last written at or before `seq`."""

    def justifications_written_upto(self, seq: int) -> set[int]:
        """The ids of the stored justifications written at or before `seq`."""

    def save_next_handle(self, next_handle: int) -> None:
        """Persist the handle high-water mark after a rolled-back write."""

    def changes(self, since: int, limit: int) -> list[LogEntry]:
        """Log entries with seq > since, oldest first (at most `limit`)."""

    def floor(self) -> int:
        """Entries at or below this seq were compacted away."""

    def log_point(self, seq: int | None = None, at: int | None = None) -> dict[str, int] | None:
        """The logged write at `seq` (or the last one made at or before epoch-ms `at`):
        `{seq, at, next_handle}` — the handle mark then, by which a read as of that seq
        tells what existed (history.py); None when the log does not hold it."""

    def compact(self, keep: int) -> int:
        """Drop all but the newest `keep` log entries; returns how many were dropped."""

    def export_log(self) -> list[tuple]:
        """Every change-log row `(seq, op, at, next_handle, diff)`, oldest first."""

    def import_core(self, loaded: Loaded, log: list[tuple], meta: dict[str, int]) -> None:
        """Fill an empty store with another store's records, handles and seqs kept."""

    def import_rows(self, table: str, columns: list[str], rows: list[tuple]) -> None:
        """Insert rows of a domain table (for moving a store)."""

    def is_empty(self) -> bool:
        """No sentex and no change-log entry yet."""

    # Not None once the store is no longer its store's writer, or cannot tell whether a
    # commit landed: the refusal (`writer-lost`, `outcome-unknown`) every write then gets.
    lost: Any

    def hold_lease(self, seconds: float) -> None:
        """Mark the store as served by a daemon that answers from memory for up to
        `seconds` after it last made sure it is the writer (PostgreSQL; nothing to do where
        the writer lock cannot pass to another process while this one lives). A writer that
        takes the lock while another's mark is there writes nothing until `seconds` after:
        that daemon may be frozen or cut off, and still answering. A clean close clears it."""

    def check_writer(self) -> Any:
        """Make sure this store is still the writer (PostgreSQL: the connection is alive
        and holds the writer lock, else reconnect, retake the lock and check that the
        store holds exactly what this writer committed); returns `lost` (None: fine)."""

    def close(self) -> None: ...


# How hard a commit presses on the disk (docs/daemon.md, durability): "normal" survives
# the death of the process, "full" also the loss of power.
SYNCHRONOUS = ["normal", "full"]


def open_store(
    location: str | None,
    *,
    synchronous: str = "normal",
    standby: bool = False,
    create: bool = True,
    checkpoint_dir: str | None = None,
) -> Store:
    """None → memory; `postgresql://…` → PostgreSQL; anything else → an SQLite file.

    `synchronous`: "normal" (survives kill -9) or "full" (survives power loss too: SQLite
    syncs the WAL at every commit; PostgreSQL's session runs synchronous_commit=on).
    `standby` (PostgreSQL): wait for the writer lock instead of refusing `store-locked`.
    `create=False`: refuse (`no-such-store`) a location that holds no store yet, instead
    of making an empty one — for what only reads, where a typo must not look like an
    empty store.
    `checkpoint_dir` (PostgreSQL): the folder where this machine keeps the store's
    checkpoint (kb/checkpoint.py; default `$XDG_CACHE_HOME/koinii`, else
    `~/.cache/koinii`). An SQLite store keeps its checkpoint beside its file.
    """
    if synchronous not in SYNCHRONOUS:
        raise Refused(
            "bad-option",
            f"synchronous must be 'normal' or 'full', not {synchronous!r}",
            {"option": "synchronous", "value": str(synchronous)[:40], "known": SYNCHRONOUS},
        )
    if location is None or location == ":memory:":
        from koinii.kb.store.memory import MemoryStore

        return MemoryStore()
    location = str(location)
    if location.startswith(("postgresql://", "postgres://")):
        from koinii.kb.store.postgres import PostgresStore

        return PostgresStore(
            location,
            standby=standby,
            create=create,
            synchronous=synchronous,
            checkpoint_dir=checkpoint_dir,
        )
    from koinii.kb.store.sqlite import SQLiteStore

    return SQLiteStore(location, synchronous=synchronous, create=create)


def no_such_store(location: str) -> Refused:
    return Refused(
        "no-such-store",
        f"there is no store at {location}: check the location (a new store is made by "
        f"what writes to it, e.g. koinii serve --db {location})",
        {"location": location},
    )


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


class SQLiteRecords(sqlite3.Connection):
    """The connection domain code gets on an SQLite store: a plain sqlite3 connection that
    says which SQL dialect it speaks (domains keep to SQL both stores accept, and branch on
    `dialect` only where they must, e.g. full-text search)."""

    dialect = "sqlite"


# Domains (wraps, sessions) register their record tables here when imported, so tools that
# move a whole store (koinii migrate) know what to create and copy.
RECORD_SCHEMAS: dict[str, tuple[Any, tuple[str, ...]]] = {}


def register_records(domain: str, migrations: Any, tables: tuple[str, ...]) -> None:
    """Declare a domain's migrations and the tables that hold its records (in copy order)."""
    RECORD_SCHEMAS[domain] = (migrations, tuple(tables))


SCHEMA_TABLE = (
    "CREATE TABLE IF NOT EXISTS koinii_schema (domain TEXT PRIMARY KEY, version INTEGER NOT NULL)"
)


def migrate_records(db: sqlite3.Connection, domain: str, migrations: Any) -> None:
    """Apply a domain's missing migrations to an SQLite connection, each atomically.

    `migrations` is a list of SQL scripts, or `{"sqlite": [...], "postgres": [...]}` when
    the two stores need different SQL (full-text search, say).
    """
    if isinstance(migrations, dict):
        migrations = migrations["sqlite"]
    db.execute(SCHEMA_TABLE)
    row = db.execute("SELECT version FROM koinii_schema WHERE domain = ?", (domain,)).fetchone()
    version = row[0] if row else 0
    for number in range(version, len(migrations)):
        db.execute("BEGIN IMMEDIATE")
        try:
            for statement in _statements(migrations[number]):
                db.execute(statement)
            db.execute(
                "INSERT OR REPLACE INTO koinii_schema (domain, version) VALUES (?, ?)",
                (domain, number + 1),
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise


def _statements(script: str) -> list[str]:
    """Split a migration script into statements (sqlite3.complete_statement knows
    where a trigger body ends, so a `;` inside one does not split it)."""
    out, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            if current.strip():
                out.append(current.strip())
            current = ""
    if current.strip():
        out.append(current.strip())
    return out
