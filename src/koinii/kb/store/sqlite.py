"""The SQLite store: the embedded default, one file, one writer.

Invariants:
- One writer per file: an exclusive `flock` on `<file>.lock` is taken at open and held
  until close (the kernel drops it if the process dies, so a crashed writer never leaves
  the file locked). A second opener is refused with `store-locked`. The file is named
  by its resolved path, so a symlink to a held store (or a path with `..`) finds the
  same lock.
- One write operation is one SQLite transaction (rows + its change-log entry), in WAL
  mode. With `synchronous="normal"` (the default) a committed write survives the death of
  the process (kill -9) but not the loss of power (the WAL is synced only at checkpoints);
  `synchronous="full"` also survives power loss, at the cost of an fsync per commit.
- The schema is versioned by `PRAGMA user_version`; `_MIGRATIONS[i]` takes version i to i+1
  (a script, or a function of the connection when its rows are computed in Python).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import urllib.parse
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from koinii.errors import Refused
from koinii.kb.store import SQLiteRecords, fulltext, migrate_records, no_such_store
from koinii.kb.store.sql import SQLStore

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
    # 3: the full-text rows of sentexes, backfilled from the rows already stored
    fulltext.sqlite_backfill,
    # 4: the FTS5 index over them (filled at the first search)
    fulltext.sqlite_fts,
    # 5: the seq that last wrote each row, and the store's own id (kb/checkpoint.py)
    lambda db: _written_and_identity(db),
    # 6: the full-text rows made again: mixed runs of letters and digits (k8s) kept whole
    fulltext.sqlite_reindex,
]


def _written_and_identity(db: sqlite3.Connection) -> None:
    """Each sentex and justification row records the seq of the write that last wrote it,
    so a checkpoint's tail is found by an index; the store gets a random id, which a
    checkpoint names. (Idempotent: a store set back to an older schema keeps its rows.)"""
    for table in ("sentex", "justification"):
        columns = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if "written" not in columns:
            db.execute(f"ALTER TABLE {table} ADD COLUMN written INTEGER NOT NULL DEFAULT 0")
        db.execute(f"CREATE INDEX IF NOT EXISTS {table}_written ON {table} (written)")
    db.execute(
        "INSERT OR IGNORE INTO koinii_meta (key, value) "
        "VALUES ('store_id', random() & 9223372036854775807)"
    )


_LEVELS = {0: "off", 1: "normal", 2: "full", 3: "extra"}  # PRAGMA synchronous's answers


class SQLiteStore(SQLStore):
    _index_sql = fulltext.SQLITE_INDEX  # FTS5 itself catches up at search (see `search`)
    _errors = (sqlite3.Error,)
    _flag = int  # see SQLStore._flag
    _BEGIN = "BEGIN IMMEDIATE"  # take the write lock now, not at the first write

    def __init__(self, path: str, *, synchronous: str = "normal", create: bool = True) -> None:
        self.location = os.path.realpath(path)
        self.checkpoint_path = self.location + ".checkpoint"  # kb/checkpoint.py
        if not create and not os.path.isfile(self.location):
            raise no_such_store(str(path))
        self._lock_file = _take_writer_lock(self.location)
        try:
            self._db = sqlite3.connect(
                self.location, isolation_level=None, check_same_thread=False, factory=SQLiteRecords
            )
            self._records = self._db  # domain code runs its SQL on the same connection
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous.upper()}")
            level = self._db.execute("PRAGMA synchronous").fetchone()[0]
            mode = self._db.execute("PRAGMA journal_mode").fetchone()[0]
            self.durability = {
                "backend": "sqlite",
                "journal_mode": mode,
                "synchronous": _LEVELS.get(level, str(level)),
            }
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
                step = _MIGRATIONS[number]
                if callable(step):  # a step that computes its rows in Python
                    step(self._db)
                else:
                    for statement in step.split(";"):
                        if statement.strip():
                            self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version={number + 1}")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    # --- the dialect ----------------------------------------------------------------

    def _run(self, sql: str, params: Any = ()) -> Any:
        return self._db.execute(sql, params)

    def _run_many(self, sql: str, rows: Iterable[tuple]) -> None:
        self._db.executemany(sql, rows)

    @contextlib.contextmanager
    def _transaction(self, log: Sequence[tuple] = ()) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # --- full-text search (fulltext.py) ---------------------------------------------

    _fts_top: int | None = None  # koinii_meta.fts_top, once read (fulltext's invariant)

    def _fts_mark(self) -> int:
        if self._fts_top is None:
            self._fts_top = self._meta("fts_top", 0)
        return self._fts_top

    def _unindex(self, deletes: list[tuple[int]]) -> None:
        top = self._fts_mark()
        added = [d for d in deletes if d[0] <= top]  # the rest never reached FTS5
        if added:
            self._run_many(fulltext.SQLITE_UNINDEX[0], added)
        self._run_many(fulltext.DELETE_WORDS, deletes)

    def catch_up(self, limit: int | None = None) -> int:
        with self._translated("indexing for search"):
            top = self._fts_mark()
            if self._db.execute(fulltext.SQLITE_BEHIND, (top,)).fetchone() is None:
                return 0
            with self._transaction():
                top, added = fulltext.sqlite_catch_up(self._db, top, limit)
            self._fts_top = top  # only once it is committed: deletes trust the mark
            return added

    def search(self, words: Sequence[str], limit: int | None) -> list[fulltext.Ranked]:
        with self._translated("the search"):
            return fulltext.sqlite_ranked(self._db, words, limit)

    def snippets(self, words: Sequence[str], handles: Sequence[int]) -> dict[int, str]:
        with self._translated("the search"):
            return fulltext.sqlite_snippets(self._db, words, handles)

    def reader(self) -> fulltext.IndexReader:
        return fulltext.IndexReader(self._read_only(), "sqlite", self._errors, self.location)

    def records_reader(self) -> SQLiteRecords:
        return self._read_only(SQLiteRecords)

    def _read_only(self, factory: type = sqlite3.Connection) -> Any:
        """A read-only connection of its own, for another thread (it reads what is
        committed: WAL lets it read beside the writer)."""
        uri = f"file:{urllib.parse.quote(self.location)}?mode=ro"
        with self._translated("opening a reader"):
            return sqlite3.connect(
                uri, uri=True, isolation_level=None, check_same_thread=False, factory=factory
            )

    def ensure_schema(self, domain: str, migrations: Any) -> None:
        with self._translated("creating the record tables"):
            migrate_records(self._db, domain, migrations)

    def close(self) -> None:
        try:
            self._db.close()
        finally:
            self._lock_file.close()


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
