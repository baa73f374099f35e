"""Where the wrap queue and the coordinator registry live: record tables in the KB's store.

The tables sit in the same database as the sentexes (an SQLite file, a PostgreSQL
schema, or the in-memory SQLite of `open_kb(None)`), so a wrap is written by the same
single writer, inside the same transaction as the memory entries it names, with an
entry in the same change log.

Invariants:
- Every write goes through `write` (one `KB.transact`: one seq, all or nothing) and every
  read through `read` (between writes, under the KB's lock); both bring the tables up to
  date first, once per KB.
- A write that finds nothing to change raises `Unchanged` inside its records function:
  the transaction rolls back and takes no seq, so an idempotent call (marking a wrap
  processed twice, touching an unknown id) leaves the change log as it was.
- The unprocessed reads are served by partial indexes over `processed = 0`: the cost of a
  read follows what it returns, not how many wraps were ever filed (nothing is deleted).
"""

from __future__ import annotations

import json
import sqlite3
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from koinii.errors import Refused
from koinii.kb import KB, Edited
from koinii.kb.store import register_records

DOMAIN = "wraps"
# The tables, written once for both stores: {int} is a 64-bit integer, {key} text that
# compares bytewise (ids and project paths: the hierarchy read is a byte range, and must
# not depend on a PostgreSQL server's default collation).
_TABLES = """
CREATE TABLE wrap_notification (
    wrap_id {key} PRIMARY KEY,
    agent_id {key},
    session_id {key},
    project_id {key},
    parent_session_id {key},
    depth {int},
    created_ids TEXT NOT NULL,
    stats TEXT NOT NULL,
    processed {int} NOT NULL,
    processed_seq {int},
    created_at {int} NOT NULL
);
CREATE INDEX wrap_unprocessed
    ON wrap_notification (created_at, wrap_id) WHERE processed = 0;
CREATE INDEX wrap_unprocessed_by_session
    ON wrap_notification (parent_session_id, created_at, wrap_id) WHERE processed = 0;
CREATE INDEX wrap_unprocessed_by_project
    ON wrap_notification (project_id, created_at, wrap_id) WHERE processed = 0;
CREATE TABLE wrap_coordinator (
    coordinator_id {key} PRIMARY KEY,
    project_id {key} NOT NULL,
    pid {int},
    session_id {key} NOT NULL UNIQUE,
    status TEXT NOT NULL,
    registered_at {int} NOT NULL,
    heartbeat_at {int} NOT NULL
);
CREATE INDEX wrap_coordinator_by_project ON wrap_coordinator (project_id);
"""
MIGRATIONS = {
    "sqlite": [_TABLES.format(int="INTEGER", key="TEXT")],
    "postgres": [_TABLES.format(int="BIGINT", key='TEXT COLLATE "C"')],
}
TABLES = ("wrap_notification", "wrap_coordinator")  # what `koinii migrate` copies

WRAP_COLUMNS = (
    "wrap_id, agent_id, session_id, project_id, parent_session_id, depth, "
    "created_ids, stats, processed, created_at"
)
COORDINATOR_COLUMNS = (
    "coordinator_id, project_id, pid, session_id, status, registered_at, heartbeat_at"
)

# The connection records functions and readers get: an sqlite3 connection, or the
# PostgreSQL store's wrapper; both take `?` placeholders and return rows as tuples.
Records = Any

_ready: weakref.WeakSet[KB] = weakref.WeakSet()


class Unchanged(Exception):  # control flow inside a write: never escapes `write`
    """Raised by a records function that finds nothing to write: roll back, return `result`."""

    def __init__(self, result: Any) -> None:
        super().__init__("nothing to write")
        self.result = result


def ensure(kb: KB) -> None:
    """Bring the record tables up to date (once per open KB)."""
    if kb not in _ready:
        kb.ensure_schema(DOMAIN, MIGRATIONS)
        _ready.add(kb)


def read(kb: KB, reader: Callable[[Records], Any]) -> Any:
    """`reader(connection)` between writes (SQL both stores accept, `?` placeholders).

    SQLite errors become `store-error` here; the PostgreSQL store's read does not
    translate its errors, and this module does not import its driver.
    """
    ensure(kb)
    try:
        return kb.read_records(reader)
    except sqlite3.Error as exc:
        raise Refused(
            "store-error", f"the wrap tables could not be read: {exc}", {"location": kb.location}
        ) from exc


def write(
    kb: KB,
    op: str,
    records: Callable[[Records, list[Any]], Any],
    *,
    add: Sequence[Any] = (),
    summary: dict[str, Any] | None = None,
) -> tuple[Any, Edited | None]:
    """One durable write: `add`'s sentexes and `records`' SQL together, or nothing.

    Returns `(records' result, Edited)`, or `(result, None)` when `records` raised
    `Unchanged(result)` and nothing was written.
    """
    ensure(kb)
    try:
        return kb.transact(op, records, add=add, summary=summary)
    except Unchanged as nothing:
        return nothing.result, None


def next_seq(kb: KB) -> int:
    """The seq the write in progress will take (call only inside a records function).

    Records run inside `KB.transact`, under the KB's lock, and the write's change-log
    entry takes the next global seq: so it is known before the commit and can be stored.
    """
    return kb.seq + 1


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def wrap_of(row: Sequence[Any]) -> dict[str, Any]:
    """A `wrap_notification` row (WRAP_COLUMNS order) as the wrap dict of wraps.md §1."""
    wrap_id, agent, session, project, parent, depth, created, stats, processed, at = row
    return {
        "wrap_id": wrap_id,
        "agent_id": agent,
        "session_id": session,
        "project_id": project,
        "parent_session_id": parent,
        "depth": depth,
        "created_ids": json.loads(created),
        "stats": json.loads(stats),
        "processed": bool(processed),
        "created_at": at,
    }


def coordinator_of(row: Sequence[Any]) -> dict[str, Any]:
    """A `wrap_coordinator` row (COORDINATOR_COLUMNS order) as a dict."""
    return dict(zip(COORDINATOR_COLUMNS.split(", "), row, strict=True))


register_records(DOMAIN, MIGRATIONS, TABLES)
