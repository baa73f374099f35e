"""Inside a session write's transaction: the lookups, the search text, the batch.

Every write runs `write(kb, verb, records, summary)`: `records(db)` does its reads and
its rows in one `kb.transact` — or, inside a `record_batch`, in the batch's one
transaction (`BATCH`), with one row writer across the events and the search text each
turn gains written once at the end (each update of a turn's full-text row re-indexes it).
The lookups refuse what they cannot find by name (`bad-session`), so a write that names
a missing row changes nothing.
"""

from __future__ import annotations

import contextvars
import json
import uuid
from collections.abc import Callable
from typing import Any

from koinii.kb import KB
from koinii.sessions import checks, rows, schema
from koinii.sessions.checks import refuse


def session_row(db: Any, session_id: Any, field: str = "session_id") -> tuple:
    checks.name(field, session_id, required=True)
    row = db.execute(
        "SELECT n, id, turn_count, turn_seq, modified_at FROM session WHERE id = ?",
        (session_id,),
    ).fetchone()
    if row is None:
        refuse(field, f"no session {session_id!r}")
    return row


def turn_row(db: Any, turn_id: Any, field: str = "turn_id") -> tuple:
    checks.name(field, turn_id, required=True)
    row = db.execute("SELECT n, state_n, position FROM turn WHERE id = ?", (turn_id,)).fetchone()
    if row is None:
        refuse(field, f"no turn {turn_id!r}")
    return row


def latest_attempt(db: Any, turn_n: int) -> tuple:
    return db.execute(
        "SELECT n, version, status, created_at, iteration_count FROM attempt "
        "WHERE turn_n = ? ORDER BY version DESC LIMIT 1",
        (turn_n,),
    ).fetchone()


def running_attempt(db: Any, turn_id: str, turn_n: int) -> tuple:
    attempt = latest_attempt(db, turn_n)
    if attempt[2] != "running":
        refuse(
            "turn_id",
            f"turn {turn_id!r} is {attempt[2]}: its latest attempt is finished "
            "(retry_turn opens a new one)",
            status=attempt[2],
        )
    return attempt


def retitle(db: Any, session_n: int, state_n: int, title: str | None) -> None:
    db.execute("UPDATE state SET title = ? WHERE n = ?", (title, state_n))
    db.execute(
        "UPDATE session SET title = ?, title_fold = ? WHERE n = ?",
        (title, title.casefold() if title else None, session_n),
    )


def add_search_text(
    db: Any, turn_n: int, prose: str | None, thinking: str | None, tools: str | None = None
) -> None:
    """Add an iteration's prose, thinking and tool results to its turn's full-text row
    (in a batch, once per turn when the batch ends: each update re-indexes the row)."""
    if not prose and not thinking and not tools:
        return
    batch = BATCH.get()
    if batch is not None:
        pending = batch.search.setdefault(turn_n, [None, None, None])
        for number, text in enumerate((prose, thinking, tools)):
            pending[number] = _joined(pending[number], text)
        return
    _update_search(db, turn_n, prose, thinking, tools)


def _update_search(
    db: Any, turn_n: int, prose: str | None, thinking: str | None, tools: str | None
) -> None:
    reply, thought, returned = db.execute(
        "SELECT reply, thinking, tools FROM turn_text WHERE n = ?", (turn_n,)
    ).fetchone()
    db.execute(
        "UPDATE turn_text SET reply = ?, thinking = ?, tools = ? WHERE n = ?",
        (_joined(reply, prose), _joined(thought, thinking), _joined(returned, tools), turn_n),
    )


def _joined(old: str | None, new: str | None) -> str | None:
    if not new:
        return old
    return f"{old}\n{new}" if old else new


class Batch:
    """The transaction every event of a `record_batch` writes in: its connection, one row
    writer (its row numbers counted up across the events) and the search text the
    events add, per turn, written once at the end."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.writer = rows.RowWriter(db)
        self.search: dict[int, list[str | None]] = {}

    def finish(self) -> None:
        for turn_n, (prose, thinking, tools) in self.search.items():
            _update_search(self.db, turn_n, prose, thinking, tools)


BATCH: contextvars.ContextVar[Batch | None] = contextvars.ContextVar("sessions_batch", default=None)


def row_writer(db: Any) -> rows.RowWriter:
    batch = BATCH.get()
    return batch.writer if batch is not None else rows.RowWriter(db)


def write(kb: KB, op: str, records: Callable[[Any], Any], summary: dict[str, Any]) -> Any:
    batch = BATCH.get()
    if batch is not None:
        return records(batch.db)
    schema.ready(kb)
    result, _ = kb.transact(f"sessions.{op}", lambda db, handles: records(db), summary=summary)
    return result


def given_id(value: Any) -> str | None:
    """An id the caller chose for a new row (a batching recorder names rows before they
    are written): a lowercase UUID."""
    given = checks.name("id", value)
    if given is None:
        return None
    try:
        well_formed = str(uuid.UUID(given)) == given
    except ValueError:
        well_formed = False
    if not well_formed:
        refuse("id", "is a lowercase UUID, e.g. str(uuid.uuid4()) (or leave it out)")
    return given


def unused_id(db: Any, table: str, given: str | None) -> None:
    if given is not None and db.execute(f"SELECT 1 FROM {table} WHERE id = ?", (given,)).fetchone():
        refuse("id", f"a {table} with id {given!r} exists already")


def imported(
    db: Any, external_id: str, owner: str | None
) -> tuple[int, str, dict[str, Any], int | None] | None:
    """The session `owner` imported as `external_id` (None: in-process or an open
    daemon): (n, id, its import provenance, its parent's n)."""
    row = db.execute(
        "SELECT n, id, meta, parent_session_n FROM session "
        "WHERE coalesce(owner, '') = ? AND external_id = ?",
        (owner or "", external_id),
    ).fetchone()
    if row is None:
        return None
    try:
        meta = json.loads(row[2]) if row[2] else {}
    except ValueError:
        meta = {}  # unreadable provenance: the next import redoes the session
    return row[0], row[1], meta if isinstance(meta, dict) else {}, row[3]
