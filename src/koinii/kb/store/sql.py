"""What the SQLite and PostgreSQL stores share: the same tables, the same statements.

`SQLStore` holds every read and write of the engine's records, written once with `?`
placeholders; a subclass supplies the connection and its dialect — how to run a
statement (`_run`, `_run_many`), how to open a transaction (`_transaction`), which driver
errors to translate (`_errors`) — and everything that truly differs: opening, the writer
lock, the schema migrations, the full-text search. Invariant: one `commit` is one
transaction holding the sentex and justification rows, the sentexes' full-text rows
(`fulltext`), the domain records and the change-log entry, or nothing;
one `commit_group` is one transaction holding every write of the group, or nothing.
What is loaded back always serves: provenance an older version stored with a value JSON
cannot carry is repaired as it is read (`_extra`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from koinii.errors import Refused
from koinii.kb import values
from koinii.kb.store import (
    Commit,
    JustificationRow,
    Loaded,
    LogEntry,
    SentexRow,
    Tail,
    decoded_entry,
    encoded_diff,
    fulltext,
)

log = logging.getLogger("koinii.store")

# `written` is the seq of the write that last wrote the row (a group's: its last write's),
# by which a checkpoint taken at a seq finds what was written after it (kb/checkpoint.py).
UPSERT_SENTEX = (
    "INSERT INTO sentex (handle, context, positive, text, premise, strength, creator, created, "
    "extra, written) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (handle) DO UPDATE SET "
    "premise = excluded.premise, strength = excluded.strength, creator = excluded.creator, "
    "extra = excluded.extra, written = excluded.written"
)
INSERT_JUSTIFICATION = (
    "INSERT INTO justification (id, conclusion, rule, antecedents, written) VALUES (?, ?, ?, ?, ?)"
)
SENTEX_COLUMNS = "handle, context, positive, text, premise, strength, creator, created, extra"
INSERT_CHANGE = "INSERT INTO change_log (seq, op, at, next_handle, diff) VALUES (?, ?, ?, ?, ?)"
SET_META = (
    "INSERT INTO koinii_meta (key, value) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)


class SQLStore:
    location: str
    _errors: tuple[type[BaseException], ...] = ()
    _records: Any  # the connection domain code gets (see `read` and `Commit.records`)
    # How a boolean column is bound: SQLite stores 0/1, and its driver sends a bool
    # through a slow adapter lookup, so its store binds int; PostgreSQL's takes a bool.
    _flag: Callable[[bool], Any] = bool

    # --- the dialect (a subclass fills these in) -------------------------------------

    def _run(self, sql: str, params: Any = ()) -> Any:
        raise NotImplementedError

    def _run_many(self, sql: str, rows: Iterable[tuple]) -> None:
        """Run `sql` once per row, as the rows come (a generator is never made a list)."""
        raise NotImplementedError

    def _transaction(self, log: Sequence[tuple] = ()) -> contextlib.AbstractContextManager[Any]:
        """One transaction; `log` holds the change-log rows it writes, by which a store
        whose COMMIT reply can be lost (PostgreSQL) tells afterwards whether it landed."""
        raise NotImplementedError

    @contextlib.contextmanager
    def _translated(self, what: str) -> Iterator[None]:
        """Driver errors become one named refusal, here at the store's boundary."""
        try:
            yield
        except self._errors as exc:
            raise Refused(
                "store-error", f"{what} failed: {exc}", {"location": self.location}
            ) from exc

    # --- reading ------------------------------------------------------------------

    def _meta(self, key: str, default: int) -> int:
        row = self._run("SELECT value FROM koinii_meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def head(self) -> tuple[int, int]:
        last = self._run(
            "SELECT seq, next_handle FROM change_log ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        top = self._run("SELECT MAX(handle) FROM sentex").fetchone()[0] or 0
        next_handle = max(self._meta("next_handle", 1), last[1] if last else 1, top + 1)
        seq = max(self._meta("seq", 0), last[0] if last else 0)
        self._last_seq = seq
        return next_handle, seq

    def load(self) -> Loaded:
        next_handle, seq = self.head()
        return Loaded(
            self._sentex_rows("", ()),
            self._justification_rows("", ()),
            next_handle,
            seq,
            self.floor(),
        )

    def _sentex_rows(self, where: str, params: tuple) -> list[SentexRow]:
        return [
            SentexRow(h, c, bool(p), t, bool(pr), s, cr, cd, _extra(h, x) if x else None)
            for h, c, p, t, pr, s, cr, cd, x in self._run(
                f"SELECT {SENTEX_COLUMNS} FROM sentex {where} ORDER BY handle", params
            ).fetchall()
        ]

    def _justification_rows(self, where: str, params: tuple) -> list[JustificationRow]:
        return [
            JustificationRow(i, c, r, tuple(json.loads(a)))
            for i, c, r, a in self._run(
                f"SELECT id, conclusion, rule, antecedents FROM justification {where} ORDER BY id",
                params,
            ).fetchall()
        ]

    # --- what a checkpoint needs (kb/checkpoint.py) ---------------------------------

    def identity(self) -> int:
        return self._meta("store_id", 0)

    def mark(self, seq: int) -> int | None:
        row = self._run(
            "SELECT at, next_handle, diff FROM change_log WHERE seq = ?", (seq,)
        ).fetchone()
        if row is None:
            return None
        at, next_handle, diff = row
        digest = hashlib.blake2b(f"{at} {next_handle} {diff}".encode(), digest_size=8)
        return int.from_bytes(digest.digest(), "big") >> 1  # fits a signed 64-bit column

    def tail(self, seq: int) -> Tail:
        with self._translated("reading the rows written since the checkpoint"):
            count = "SELECT count(*) FROM {} WHERE written <= ?"
            return Tail(
                self._sentex_rows("WHERE written > ?", (seq,)),
                self._justification_rows("WHERE written > ?", (seq,)),
                self._run(count.format("sentex"), (seq,)).fetchone()[0],
                self._run(count.format("justification"), (seq,)).fetchone()[0],
            )

    def handles_written_upto(self, seq: int) -> set[int]:
        with self._translated("reading the rows written before the checkpoint"):
            rows = self._run("SELECT handle FROM sentex WHERE written <= ?", (seq,))
            return {handle for (handle,) in rows}

    def justifications_written_upto(self, seq: int) -> set[int]:
        with self._translated("reading the rows written before the checkpoint"):
            rows = self._run("SELECT id FROM justification WHERE written <= ?", (seq,))
            return {id for (id,) in rows}

    def changes(self, since: int, limit: int) -> list[LogEntry]:
        with self._translated("reading the change log"):
            rows = self._run(
                "SELECT seq, op, at, diff FROM change_log WHERE seq > ? ORDER BY seq LIMIT ?",
                (since, limit),
            ).fetchall()
        return [decoded_entry(seq, op, at, diff) for seq, op, at, diff in rows]

    def floor(self) -> int:
        with self._translated("reading the change log"):
            return self._meta("log_floor", 0)

    def log_point(self, seq: int | None = None, at: int | None = None) -> dict[str, int] | None:
        with self._translated("reading the change log"):
            if seq is not None:
                sql, params = "SELECT seq, at, next_handle FROM change_log WHERE seq = ?", (seq,)
            else:
                sql = (
                    "SELECT seq, at, next_handle FROM change_log WHERE at <= ? "
                    "ORDER BY seq DESC LIMIT 1"
                )
                params = (at,)
            row = self._run(sql, params).fetchone()
        return None if row is None else {"seq": row[0], "at": row[1], "next_handle": row[2]}

    def read(self, reader: Callable[[Any], Any]) -> Any:
        with self._translated("a read"):
            return reader(self._records)

    # --- writing ------------------------------------------------------------------

    def commit(self, commit: Commit) -> Any:
        if self._held is not None:  # in a group: the rows wait for its commit
            self._held.append(commit)
            return None
        log = [_log_row(commit)]
        with self._translated("the write"), self._transaction(log):
            self._write_rows([commit], log)
            result = commit.records(self._records) if commit.records is not None else None
        self._last_seq = commit.entry.seq
        return result

    # Group commit: inside a group, `commit` only holds each write's rows; `commit_group`
    # writes them all in one transaction, a few batched statements, and one COMMIT — one
    # WAL append (SQLite) or one fsync (PostgreSQL) for the whole group.
    _held: list[Commit] | None = None  # the open group's writes, oldest first
    _held_mark: int | None = None  # a handle mark saved while the group was open
    _last_seq = 0  # the seq of the last write this store committed (or loaded)
    # The full-text index (fulltext.py): the dialect's statements, and the highest handle
    # indexed (None: not read from the store yet).
    _index_sql: tuple[str, ...] = ()
    _unindex_sql: tuple[str, ...] = ()
    _indexed_top: int | None = None
    lost = None  # see Store.lost: a store on a local file never loses its writer lock

    def begin_group(self) -> None:
        self._held = []

    def commit_group(self) -> None:
        held, mark = self._held or [], self._held_mark
        self._held = self._held_mark = None
        if not held and mark is None:
            return
        log = [_log_row(c) for c in held]
        with self._translated("the group commit"), self._transaction(log):
            self._write_rows(held, log)
            if mark is not None:
                self._set_meta({"next_handle": mark})
        if held:
            self._last_seq = held[-1].entry.seq

    def _write_rows(self, commits: list[Commit], log: list[tuple]) -> None:
        """The sentex, justification and change-log rows (`log`) of `commits`, in one
        transaction.

        Rows are grouped by statement, not by write: a sentex upserted by several writes
        takes its latest state, and deletes follow upserts — handles and justification
        ids are never reused, so nothing deleted comes back later in the same group.
        The big batches are generators, not lists: the driver binds a row at a time, so
        a write deriving a closure (SUMO's inheritance axiom: 180,000 sentexes, 900,000
        justifications) never holds its rows as tuples and JSON beside its nodes — as
        lists they were 130 MB of the write's peak over SQLite.
        """
        written = commits[-1].entry.seq
        if len(commits) == 1:
            upserts, texts = commits[0].upserts, commits[0].texts
        else:
            latest = {n.handle: n for c in commits for n in c.upserts}
            upserts = list(latest.values())
            texts = {h: t for c in commits for h, t in c.texts.items()}
        flag = self._flag
        if len(upserts) == 1:  # the common write: one statement, not a batch
            node = upserts[0]
            self._run(UPSERT_SENTEX, _sentex_params(node, flag, written, texts.get(node.handle)))
        elif upserts:
            self._run_many(
                UPSERT_SENTEX,
                (_sentex_params(n, flag, written, texts.get(n.handle)) for n in upserts),
            )
        self._index(upserts)  # the full-text rows of the new sentexes, in the same transaction
        deletes = [(h,) for c in commits for h in c.deletes]
        if deletes:
            self._run_many("DELETE FROM sentex WHERE handle = ?", deletes)
            self._unindex(deletes)
        if any(c.new_justifications for c in commits):
            self._run_many(
                INSERT_JUSTIFICATION,
                (
                    (
                        j.id,
                        j.conclusion.handle,
                        j.rule.handle,
                        _handles([a.handle for a in j.antecedents]),
                        written,
                    )
                    for c in commits
                    for j in c.new_justifications
                ),
            )
        dropped = [(i,) for c in commits for i in c.dropped_justifications]
        if dropped:
            self._run_many("DELETE FROM justification WHERE id = ?", dropped)
        if len(log) == 1:
            self._run(INSERT_CHANGE, log[0])
        else:
            self._run_many(INSERT_CHANGE, log)

    def _unindex(self, deletes: list[tuple[int]]) -> None:
        """Take the deleted sentexes out of the full-text index, in the same transaction."""
        for statement in self._unindex_sql:
            self._run_many(statement, deletes)

    def _index(self, nodes: Sequence[Any]) -> None:
        """Write the full-text rows of the `nodes` not indexed yet (fulltext's invariant)."""
        if self._indexed_top is None:
            self._indexed_top = self._run(fulltext.TOP).fetchone()[0]
        new, top = fulltext.fresh(nodes, self._indexed_top)
        if not new:
            return
        row = fulltext.row
        for statement in self._index_sql:
            if len(new) == 1:
                self._run(statement, row(new[0].handle, new[0].atom))
            else:
                self._run_many(statement, (row(n.handle, n.atom) for n in new))
        # Raised even if this transaction then rolls back: those handles are never used
        # again, and every sentex written later is above them.
        self._indexed_top = top

    def hold_lease(self, seconds: float) -> None:
        """Nothing to mark: a store on a local file never loses its writer lock."""

    def check_writer(self) -> Any:
        """None while this store is still its store's writer (see Store.check_writer)."""
        return self.lost

    def _set_meta(self, values: dict[str, int]) -> None:
        self._run_many(SET_META, list(values.items()))

    def save_next_handle(self, next_handle: int) -> None:
        if self._held is not None:
            self._held_mark = next_handle
            return
        with self._translated("saving the handle mark"), self._transaction():
            self._set_meta({"next_handle": next_handle})

    def compact(self, keep: int) -> int:
        with self._translated("compacting the log"), self._transaction():
            row = self._run(
                "SELECT seq FROM change_log ORDER BY seq DESC LIMIT 1 OFFSET ?", (keep,)
            ).fetchone()
            if row is None:
                return 0
            last = self._run("SELECT MAX(seq), MAX(next_handle) FROM change_log").fetchone()
            dropped = self._run("DELETE FROM change_log WHERE seq <= ?", (row[0],)).rowcount
            self._set_meta(
                {
                    "log_floor": row[0],
                    "seq": max(self._meta("seq", 0), last[0]),
                    "next_handle": max(self._meta("next_handle", 1), last[1]),
                }
            )
            return dropped

    # --- moving a store (koinii migrate) -----------------------------------------

    def is_empty(self) -> bool:
        return not (
            self._run("SELECT 1 FROM sentex LIMIT 1").fetchone()
            or self._run("SELECT 1 FROM change_log LIMIT 1").fetchone()
        )

    def export_log(self) -> list[tuple]:
        return [
            tuple(row)
            for row in self._run(
                "SELECT seq, op, at, next_handle, diff FROM change_log ORDER BY seq"
            ).fetchall()
        ]

    def import_core(self, loaded: Loaded, log: list[tuple], meta: dict[str, int]) -> None:
        with self._translated("the import"), self._transaction():
            self._run_many(
                UPSERT_SENTEX, [_sentex_params(r, self._flag, 0) for r in loaded.sentexes]
            )
            rows = fulltext.rows_of_text((r.handle, r.text) for r in loaded.sentexes)
            for statement in self._index_sql:
                self._run_many(statement, rows)
            self._indexed_top = None  # read afresh at the next write
            self._run_many(
                INSERT_JUSTIFICATION,
                [
                    (j.id, j.conclusion, j.rule, _handles(j.antecedents), 0)
                    for j in loaded.justifications
                ],
            )
            self._run_many(INSERT_CHANGE, log)
            self._set_meta(meta)

    def import_rows(self, table: str, columns: list[str], rows: list[tuple]) -> None:
        names = ", ".join(columns)
        marks = ", ".join("?" for _ in columns)
        with self._translated("the import"), self._transaction():
            self._run_many(f"INSERT INTO {table} ({names}) VALUES ({marks})", rows)


def _extra(handle: int, text: str) -> dict[str, Any]:
    """A sentex's stored provenance fields, made servable if an older version stored a
    value that JSON cannot carry (NaN, a lone surrogate, a NUL: `values.repaired`); the
    repaired fields are what the engine holds, and the row is rewritten at its next write."""
    extra = json.loads(text)
    if "NaN" in text or "Infinity" in text or "\\u" in text:
        extra, changed = values.repaired(extra)
        if changed:
            log.warning("sentex %s: provenance held a value JSON cannot carry; repaired", handle)
    return extra


def _log_row(commit: Commit) -> tuple:
    entry = commit.entry
    return (entry.seq, entry.op, entry.at, commit.next_handle, encoded_diff(entry).decode())


def _handles(handles: Sequence[int]) -> str:
    """A justification's antecedent handles as its column keeps them: the JSON list
    `json.dumps` writes, made directly (a closure writes a million: a fifth of the time)."""
    return "[" + ", ".join([str(h) for h in handles]) + "]"


def _sentex_params(
    row: Any, flag: Callable[[bool], Any], written: int, text: str | None = None
) -> tuple:
    """The sentex columns of a Node or a SentexRow (its `text` given, if known), in
    UPSERT_SENTEX's order."""
    return (
        row.handle,
        row.context,
        flag(row.positive),
        row.text if text is None else text,
        flag(row.premise),
        row.strength,
        row.creator,
        row.created,
        json.dumps(row.extra) if row.extra else None,
        written,
    )
