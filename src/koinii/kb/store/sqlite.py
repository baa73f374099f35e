"""The SQLite store: the embedded default, one file, one writer.

Invariants:
- One writer per file: an exclusive `flock` on `<file>.lock` is taken at open and held
  until close (the kernel drops it if the process dies, so a crashed writer never leaves
  the file locked). A second opener is refused with `store-locked`.
- One write operation is one SQLite transaction (rows + its change-log entry), in WAL
  mode. With `synchronous="normal"` (the default) a committed write survives the death of
  the process (kill -9); `synchronous="full"` also survives power loss, at the cost of an
  fsync per write.
- The schema is versioned by `PRAGMA user_version`; `_MIGRATIONS[i]` takes version i to i+1.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
from typing import Any

from koinii.errors import Refused
from koinii.kb.store import (
    Commit,
    JustificationRow,
    Loaded,
    LogEntry,
    SentexRow,
    SQLiteRecords,
    migrate_records,
)

_MIGRATIONS = [
    """
    CREATE TABLE koinii_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
    CREATE TABLE sentex (
        handle INTEGER PRIMARY KEY,
        context TEXT NOT NULL,
        positive INTEGER NOT NULL,
        text TEXT NOT NULL,
        premise INTEGER NOT NULL,
        strength INTEGER NOT NULL,
        creator TEXT,
        created INTEGER NOT NULL,
        extra TEXT
    );
    CREATE TABLE justification (
        id INTEGER PRIMARY KEY,
        conclusion INTEGER NOT NULL,
        rule INTEGER NOT NULL,
        antecedents TEXT NOT NULL
    );
    CREATE TABLE change_log (
        seq INTEGER PRIMARY KEY,
        op TEXT NOT NULL,
        at INTEGER NOT NULL,
        next_handle INTEGER NOT NULL,
        diff TEXT NOT NULL
    );
    """,
    # 2: the domains' schema versions live beside the core's
    """
    CREATE TABLE IF NOT EXISTS koinii_schema (domain TEXT PRIMARY KEY, version INTEGER NOT NULL);
    """,
]

_UPSERT = (
    "INSERT OR REPLACE INTO sentex "
    "(handle, context, positive, text, premise, strength, creator, created, extra) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


class SQLiteStore:
    def __init__(self, path: str, *, synchronous: str = "normal") -> None:
        if synchronous not in ("normal", "full"):
            raise Refused(
                "bad-option",
                f"synchronous must be 'normal' or 'full', not {synchronous!r}",
                {"option": "synchronous", "value": synchronous},
            )
        self.location = os.path.abspath(path)
        self._lock_file = _take_writer_lock(self.location)
        try:
            self._db = sqlite3.connect(
                self.location, isolation_level=None, check_same_thread=False, factory=SQLiteRecords
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous.upper()}")
            self._migrate()
        except sqlite3.Error as exc:
            self._lock_file.close()
            raise Refused(
                "store-error", f"cannot open {self.location}: {exc}", {"location": path}
            ) from exc
        except BaseException:
            self._lock_file.close()
            raise

    # --- schema -------------------------------------------------------------------

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > len(_MIGRATIONS):
            raise Refused(
                "store-error",
                f"{self.location} was written by a newer Koinii (schema {version})",
                {"schema": version},
            )
        for number in range(version, len(_MIGRATIONS)):
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for statement in _MIGRATIONS[number].split(";"):
                    if statement.strip():
                        self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version={number + 1}")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    # --- reading ------------------------------------------------------------------

    def _meta(self, key: str, default: int) -> int:
        row = self._db.execute("SELECT value FROM koinii_meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def load(self) -> Loaded:
        db = self._db
        last = db.execute(
            "SELECT seq, next_handle FROM change_log ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        top = db.execute("SELECT MAX(handle) FROM sentex").fetchone()[0] or 0
        next_handle = max(self._meta("next_handle", 1), last[1] if last else 1, top + 1)
        seq = max(self._meta("seq", 0), last[0] if last else 0)
        sentexes = [
            SentexRow(h, c, bool(p), t, bool(pr), s, cr, cd, json.loads(x) if x else None)
            for h, c, p, t, pr, s, cr, cd, x in db.execute(
                "SELECT handle, context, positive, text, premise, strength, creator, "
                "created, extra FROM sentex ORDER BY handle"
            )
        ]
        justifications = [
            JustificationRow(i, c, r, tuple(json.loads(a)))
            for i, c, r, a in db.execute(
                "SELECT id, conclusion, rule, antecedents FROM justification ORDER BY id"
            )
        ]
        return Loaded(sentexes, justifications, next_handle, seq, self.floor())

    def changes(self, since: int, limit: int) -> list[LogEntry]:
        rows = self._db.execute(
            "SELECT seq, op, at, diff FROM change_log WHERE seq > ? ORDER BY seq LIMIT ?",
            (since, limit),
        ).fetchall()
        out = []
        for seq, op, at, diff in rows:
            decoded = json.loads(diff)
            out.append(
                LogEntry(seq, op, at, decoded["added"], decoded["removed"], decoded.get("records"))
            )
        return out

    def floor(self) -> int:
        return self._meta("log_floor", 0)

    # --- writing ------------------------------------------------------------------

    def commit(self, commit: Commit) -> Any:
        db = self._db
        entry = commit.entry
        result = None
        try:
            db.execute("BEGIN")
            try:
                if commit.upserts:
                    db.executemany(
                        _UPSERT,
                        [
                            (
                                n.handle,
                                n.context,
                                n.positive,
                                n.text,
                                n.premise,
                                n.strength,
                                n.creator,
                                n.created,
                                json.dumps(n.extra) if n.extra else None,
                            )
                            for n in commit.upserts
                        ],
                    )
                if commit.deletes:
                    db.executemany(
                        "DELETE FROM sentex WHERE handle = ?", [(h,) for h in commit.deletes]
                    )
                if commit.new_justifications:
                    db.executemany(
                        "INSERT INTO justification (id, conclusion, rule, antecedents) "
                        "VALUES (?, ?, ?, ?)",
                        [
                            (
                                j.id,
                                j.conclusion.handle,
                                j.rule.handle,
                                json.dumps([a.handle for a in j.antecedents]),
                            )
                            for j in commit.new_justifications
                        ],
                    )
                if commit.dropped_justifications:
                    db.executemany(
                        "DELETE FROM justification WHERE id = ?",
                        [(i,) for i in commit.dropped_justifications],
                    )
                if commit.records is not None:
                    result = commit.records(db)
                diff: dict[str, Any] = {"added": entry.added, "removed": entry.removed}
                if entry.records is not None:
                    diff["records"] = entry.records
                db.execute(
                    "INSERT INTO change_log (seq, op, at, next_handle, diff) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (entry.seq, entry.op, entry.at, commit.next_handle, json.dumps(diff)),
                )
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise Refused(
                "store-error", f"the write could not be stored: {exc}", {"location": self.location}
            ) from exc
        return result

    def ensure_schema(self, domain: str, migrations: list[str]) -> None:
        migrate_records(self._db, domain, migrations)

    def read(self, reader):
        try:
            return reader(self._db)
        except sqlite3.Error as exc:
            raise Refused(
                "store-error", f"a read failed: {exc}", {"location": self.location}
            ) from exc

    def _set_meta(self, values: dict[str, int]) -> None:
        self._db.executemany(
            "INSERT OR REPLACE INTO koinii_meta (key, value) VALUES (?, ?)", values.items()
        )

    def save_next_handle(self, next_handle: int) -> None:
        with _transaction(self._db):
            self._set_meta({"next_handle": next_handle})

    def compact(self, keep: int) -> int:
        with _transaction(self._db):
            row = self._db.execute(
                "SELECT seq, next_handle FROM change_log ORDER BY seq DESC LIMIT 1 OFFSET ?",
                (keep,),
            ).fetchone()
            if row is None:
                return 0
            last = self._db.execute("SELECT MAX(seq), MAX(next_handle) FROM change_log").fetchone()
            dropped = self._db.execute("DELETE FROM change_log WHERE seq <= ?", (row[0],)).rowcount
            self._set_meta(
                {
                    "log_floor": row[0],
                    "seq": max(self._meta("seq", 0), last[0]),
                    "next_handle": max(self._meta("next_handle", 1), last[1]),
                }
            )
            return dropped

    # --- moving a store (koinii migrate) -------------------------------------------

    def is_empty(self) -> bool:
        db = self._db
        return not (
            db.execute("SELECT 1 FROM sentex LIMIT 1").fetchone()
            or db.execute("SELECT 1 FROM change_log LIMIT 1").fetchone()
        )

    def export_log(self) -> list[tuple]:
        return self._db.execute(
            "SELECT seq, op, at, next_handle, diff FROM change_log ORDER BY seq"
        ).fetchall()

    def import_core(self, loaded: Loaded, log: list[tuple], meta: dict[str, int]) -> None:
        with _transaction(self._db):
            self._db.executemany(
                _UPSERT,
                [
                    (
                        r.handle,
                        r.context,
                        r.positive,
                        r.text,
                        r.premise,
                        r.strength,
                        r.creator,
                        r.created,
                        json.dumps(r.extra) if r.extra else None,
                    )
                    for r in loaded.sentexes
                ],
            )
            self._db.executemany(
                "INSERT INTO justification (id, conclusion, rule, antecedents) VALUES (?, ?, ?, ?)",
                [
                    (j.id, j.conclusion, j.rule, json.dumps(list(j.antecedents)))
                    for j in loaded.justifications
                ],
            )
            self._db.executemany(
                "INSERT INTO change_log (seq, op, at, next_handle, diff) VALUES (?, ?, ?, ?, ?)",
                log,
            )
            self._set_meta(meta)

    def import_rows(self, table: str, columns: list[str], rows: list[tuple]) -> None:
        names = ", ".join(columns)
        marks = ", ".join("?" for _ in columns)
        with _transaction(self._db):
            self._db.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", rows)

    def close(self) -> None:
        try:
            self._db.close()
        finally:
            self._lock_file.close()


class _transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: Any, *rest: Any) -> None:
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")


def _take_writer_lock(location: str):
    # held open (not a `with` block) for as long as the store is open: closing it unlocks
    lock_file = open(location + ".lock", "a+")  # noqa: SIM115
    try:
        fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock_file.close()
        raise Refused(
            "store-locked",
            f"{location} is already open for writing by another process "
            "(one writer per store: connect to its daemon instead)",
            {"location": location},
        ) from None
    return lock_file
