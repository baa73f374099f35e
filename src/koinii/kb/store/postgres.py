"""The PostgreSQL store: when one machine is not enough.

The same records as the SQLite store (sentexes, justifications, the change log, the
domains' record tables) in a PostgreSQL schema, so a team can keep its store in a server
it already operates, replicates and backs up.

Invariants:
- One writer per database schema: the store holds a session-level advisory lock, keyed
  on the database and schema, for as long as it is open. A second opener is refused
  (`store-locked`), or with `standby=True` waits for the lock — which PostgreSQL releases
  the moment the writer's session ends, so a standby takes over when the writer dies.
- One write operation is one PostgreSQL transaction, committed before it is
  acknowledged. Whether a commit survives power loss is the server's synchronous_commit
  (on by default) and fsync; `synchronous="full"` sets synchronous_commit=on for the
  writer's session whatever the server's default.
- The schema is versioned in `koinii_meta.schema_version`; `_MIGRATIONS[i]` takes
  version i to i+1 (a script, or a function of the connection when its rows are
  computed in Python). Domains version their tables in `koinii_schema`, as on SQLite.
- A COMMIT whose reply is lost (the connection dropped) is resolved, never guessed: the
  store reconnects, makes sure the old session is over (so its transaction's fate is
  final), and looks for the commit's last change-log row. Found as written: it landed
  and the write is answered as done; absent: it did not, and the refusal says so; not
  knowable (no connection): `outcome-unknown`, and the store stops being a writer.
- A writer that loses its connection (`check_writer`, or a write) reconnects, retakes the
  writer lock, and checks that the store's last seq is the last one it committed; if any
  of that fails it is no longer the writer (`lost`, kind `writer-lost`): every write is
  refused from then on, and the daemon stops serving. It never writes or answers as the
  writer from a memory the store has moved past.
- Between its checks a daemon answers reads from memory, for a lease (`hold_lease`) whose
  length it leaves in the store with a mark of its own. A writer that takes the lock and
  finds another's mark writes nothing until that long after: the old daemon, frozen or cut
  off, may still be answering, and must not answer from a memory the store moved past.
  A clean close removes the mark (its own, or one whose lease has run out).

The location is a libpq URL; put `options=-csearch_path%3Dteam` in it to use a schema
other than `public`.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from koinii.errors import Refused
from koinii.kb.store import fulltext, no_such_store
from koinii.kb.store.sql import SQLStore

_MIGRATIONS = [
    """
    CREATE TABLE IF NOT EXISTS koinii_meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL);
    CREATE TABLE IF NOT EXISTS sentex (
        handle BIGINT PRIMARY KEY,
        context TEXT NOT NULL,
        positive BOOLEAN NOT NULL,
        text TEXT NOT NULL,
        premise BOOLEAN NOT NULL,
        strength SMALLINT NOT NULL,
        creator TEXT,
        created BIGINT NOT NULL,
        extra TEXT
    );
    CREATE TABLE IF NOT EXISTS justification (
        id BIGINT PRIMARY KEY,
        conclusion BIGINT NOT NULL,
        rule BIGINT NOT NULL,
        antecedents TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS change_log (
        seq BIGINT PRIMARY KEY,
        op TEXT NOT NULL,
        at BIGINT NOT NULL,
        next_handle BIGINT NOT NULL,
        diff TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS koinii_schema (domain TEXT PRIMARY KEY, version INTEGER NOT NULL);
    """,
    # 2: the full-text index over sentexes, backfilled from the rows already stored
    lambda conn: _backfill(conn),
    # 3: the seq that last wrote each row, and the store's own random id (as on SQLite)
    """
    ALTER TABLE sentex ADD COLUMN IF NOT EXISTS written BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE justification ADD COLUMN IF NOT EXISTS written BIGINT NOT NULL DEFAULT 0;
    CREATE INDEX IF NOT EXISTS sentex_written ON sentex (written);
    CREATE INDEX IF NOT EXISTS justification_written ON justification (written);
    INSERT INTO koinii_meta (key, value)
        VALUES ('store_id', floor(random() * 9.0e18)::bigint)
        ON CONFLICT (key) DO NOTHING;
    """,
    # 4: the full-text rows made again: mixed runs of letters and digits (k8s) kept whole
    lambda conn: _reindex(conn),
]

_PLACEHOLDER = re.compile(r"\?")


class PostgresRecords:
    """The connection domain code gets on a PostgreSQL store: `execute` / `executemany`
    with `?` placeholders (as on SQLite), returning cursors with fetchone / fetchall."""

    dialect = "postgres"

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Any = ()) -> Any:
        return self._conn.execute(_PLACEHOLDER.sub("%s", sql.replace("%", "%%")), params)

    def executemany(self, sql: str, rows: Any) -> Any:
        cursor = self._conn.cursor()
        cursor.executemany(_PLACEHOLDER.sub("%s", sql.replace("%", "%%")), list(rows))
        return cursor

    @property
    def raw(self) -> Any:
        """The psycopg connection, for what only PostgreSQL can say."""
        return self._conn

    def close(self) -> None:
        self._conn.close()


class PostgresStore(SQLStore):
    _index_sql = fulltext.POSTGRES_INDEX
    _unindex_sql = fulltext.POSTGRES_UNINDEX

    def __init__(
        self,
        dsn: str,
        *,
        standby: bool = False,
        poll_s: float = 0.5,
        create: bool = True,
        synchronous: str = "normal",
        checkpoint_dir: str | None = None,
    ) -> None:
        import psycopg  # imported here: SQLite users need not install it

        self._errors = (psycopg.Error,)
        self.location = _redact(dsn)
        self._dsn = dsn
        self.lost: Refused | None = None
        self._in_tx = False
        self._holder = secrets.randbits(62)  # this opening's lease mark (`hold_lease`)
        self._marked = False  # a lease mark is in the store (its own, or one it found)
        self._writes_from = 0.0  # time.monotonic() before which nothing is written
        try:
            self._conn = self._connect()
        except psycopg.Error as exc:
            raise Refused(
                "store-error",
                f"cannot connect to {self.location}: {exc}",
                {"location": self.location},
            ) from exc
        self._synchronous = synchronous
        try:
            self._session = self._session_of(self._conn)
            if (
                not create
                and self._conn.execute("SELECT to_regclass('koinii_meta')").fetchone()[0] is None
            ):
                raise no_such_store(self.location)
            locked = self._take_writer_lock(standby, poll_s)
            self._migrate()
            self._wait_out_leases(self._conn, locked)
            self._session_settings(self._conn)
            self.durability = {
                "backend": "postgresql",
                "synchronous_commit": self._conn.execute("SHOW synchronous_commit").fetchone()[0],
                "fsync": self._conn.execute("SHOW fsync").fetchone()[0],
            }
            # A server has no folder beside the store: this machine keeps the checkpoint
            # in its cache, named by the store's id (a standby here takes it over too).
            folder = checkpoint_dir or os.path.join(
                os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "koinii"
            )
            self.checkpoint_path = os.path.join(folder, f"postgresql-{self.identity()}.checkpoint")
        except BaseException:
            self._conn.close()
            raise
        self._records = PostgresRecords(self._conn)

    # --- the writer lock ----------------------------------------------------------------

    def _connect(self) -> Any:
        """A new connection. Unless the location says otherwise, libpq gives up on a
        server that does not answer within seconds (connect, keepalives, unacknowledged
        sends), so a lost network is an error soon, never a writer stuck for minutes."""
        import psycopg
        from psycopg.conninfo import conninfo_to_dict

        given = conninfo_to_dict(self._dsn)
        defaults = {
            "connect_timeout": 2,
            "keepalives": 1,
            "keepalives_idle": 5,
            "keepalives_interval": 2,
            "keepalives_count": 2,
            "tcp_user_timeout": 5000,
            "application_name": "koinii",  # so an operator finds the writer's session
        }
        extra = {k: v for k, v in defaults.items() if k not in given}
        return psycopg.connect(self._dsn, autocommit=True, **extra)

    def _session_settings(self, conn: Any) -> None:
        if self._synchronous == "full":  # whatever the server's default: wait for the flush
            conn.execute("SET synchronous_commit TO on")

    def _try_lock(self, conn: Any) -> bool:
        schema = conn.execute("SELECT current_schema()").fetchone()[0]
        if schema is None:
            raise Refused(
                "store-error",
                f"{self.location} names no schema that exists (check search_path)",
                {"location": self.location},
            )
        key_sql = "hashtext('koinii:' || current_database() || ':' || %s)"
        (locked,) = conn.execute(f"SELECT pg_try_advisory_lock({key_sql})", (schema,)).fetchone()
        return bool(locked)

    def _take_writer_lock(self, standby: bool, poll_s: float) -> float:
        """Take the lock, and return when (time.monotonic())."""
        while True:
            if self._try_lock(self._conn):
                return time.monotonic()
            if not standby:
                raise Refused(
                    "store-locked",
                    f"{self.location} already has a writer (one writer per store: connect to "
                    "its daemon, or start this one with --standby to take over when it stops)",
                    {"location": self.location},
                )
            time.sleep(poll_s)

    # --- the lease -------------------------------------------------------------------

    def _wait_out_leases(self, conn: Any, locked: float) -> None:
        """Having taken the lock at `locked`: if another daemon's lease mark is in the
        store, write nothing until its lease, counted from then, has run out."""
        mark = dict(
            conn.execute(
                "SELECT key, value FROM koinii_meta WHERE key IN ('lease_holder', 'lease_ms')"
            ).fetchall()
        )
        if mark.get("lease_holder", self._holder) != self._holder:
            self._writes_from = locked + mark.get("lease_ms", 0) / 1000
            self._marked = True  # (cleared on a clean close, the lease run out by then)

    def hold_lease(self, seconds: float) -> None:
        with self._translated("marking the lease"), self._transaction():
            self._set_meta({"lease_holder": self._holder, "lease_ms": round(seconds * 1000)})
        self._marked = True

    # --- schema -------------------------------------------------------------------------

    def _migrate(self) -> None:
        with self._conn.transaction():
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS koinii_meta "
                "(key TEXT PRIMARY KEY, value BIGINT NOT NULL)"
            )
            row = self._conn.execute(
                "SELECT value FROM koinii_meta WHERE key = 'schema_version'"
            ).fetchone()
            version = row[0] if row else 0
            for number in range(version, len(_MIGRATIONS)):
                step = _MIGRATIONS[number]
                if callable(step):  # a step that computes its rows in Python
                    step(self._conn)
                else:
                    self._conn.execute(step)
                self._set_meta({"schema_version": number + 1})

    # --- full-text search (fulltext.py) -------------------------------------------------

    def catch_up(self, limit: int | None = None) -> int:
        return 0  # the tsvector is part of the write

    def search(self, words: Sequence[str], limit: int | None) -> list[fulltext.Ranked]:
        with self._translated("the search"):
            return fulltext.postgres_ranked(self._conn, words, limit)

    def snippets(self, words: Sequence[str], handles: Sequence[int]) -> dict[int, str]:
        with self._translated("the search"):
            return fulltext.postgres_snippets(self._conn, words, handles)

    def reader(self) -> fulltext.IndexReader:
        return fulltext.IndexReader(self._reader(), "postgres", self._errors, self.location)

    def records_reader(self) -> PostgresRecords:
        return PostgresRecords(self._reader())

    def _reader(self) -> Any:
        """A connection of its own, for another thread (it reads what is committed)."""
        with self._translated("opening a reader"):
            return self._connect()

    def ensure_schema(self, domain: str, migrations: Any) -> None:
        scripts = migrations["postgres"] if isinstance(migrations, dict) else migrations
        with self._translated("creating the record tables"), self._conn.transaction():
            row = self._conn.execute(
                "SELECT version FROM koinii_schema WHERE domain = %s", (domain,)
            ).fetchone()
            version = row[0] if row else 0
            for number in range(version, len(scripts)):
                self._conn.execute(scripts[number])
                self._conn.execute(
                    "INSERT INTO koinii_schema (domain, version) VALUES (%s, %s) "
                    "ON CONFLICT (domain) DO UPDATE SET version = EXCLUDED.version",
                    (domain, number + 1),
                )

    # --- the dialect ----------------------------------------------------------------

    def _run(self, sql: str, params: Any = ()) -> Any:
        statement = sql.replace("?", "%s")
        try:
            return self._conn.execute(statement, params)
        except self._errors:
            if not self._conn.broken or self._in_tx:
                raise
        # the connection was lost between transactions: reconnect as the writer, once
        self._recover(None)
        if self.lost is not None:
            raise self.lost
        return self._conn.execute(statement, params)

    def _run_many(self, sql: str, rows: Iterable[tuple]) -> None:
        self._conn.cursor().executemany(sql.replace("?", "%s"), rows)

    @contextlib.contextmanager
    def _transaction(self, log: Sequence[tuple] = ()) -> Iterator[None]:
        if self.lost is not None:
            raise self.lost
        if self._writes_from:  # another daemon's lease, taken over (`hold_lease`)
            time.sleep(max(0.0, self._writes_from - time.monotonic()))
            self._writes_from = 0.0
        self._run("BEGIN")  # reconnects first if the connection was lost since
        conn = self._conn
        self._in_tx = True
        try:
            yield
        except BaseException:
            if not conn.broken:
                with contextlib.suppress(*self._errors):
                    conn.execute("ROLLBACK")
            raise
        finally:
            self._in_tx = False
        try:
            conn.execute("COMMIT")
        except self._errors as exc:
            if not conn.broken:
                raise  # the server answered: the commit failed, and nothing of it landed
            self._in_doubt(log, exc)

    # --- a lost connection ----------------------------------------------------------

    def _in_doubt(self, log: Sequence[tuple], exc: Exception) -> None:
        """The COMMIT was sent and its reply lost: return if it landed, else raise."""
        landed = self._recover(log[-1] if log else None)
        if landed is True:
            return
        if landed is False:
            raise Refused(
                "store-error",
                f"the connection to {self.location} dropped during COMMIT, and the commit "
                "did not land (checked after reconnecting): none of it happened; send it again",
                {"location": self.location, "checked": True},
            ) from exc
        raise Refused(
            "outcome-unknown",
            f"the connection to {self.location} dropped during COMMIT and whether the write "
            "landed cannot be known now; read it back (e.g. by handle, or changes since your "
            "last seq) once a writer serves the store again, before sending it again",
            {"location": self.location},
        ) from exc

    def check_writer(self) -> Refused | None:
        if self.lost is None and self._held is None:
            try:
                (held,) = self._conn.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                    "AND pid = pg_backend_pid() AND granted"
                ).fetchone()
            except self._errors:
                held = None
            if held is None or not held:
                self._recover(None)
        return self.lost

    def _recover(self, row: tuple | None) -> bool | None:
        """Reconnect as the writer, or mark the store lost. Returns whether the change-log
        `row` (a commit in doubt) landed, or None when there was none or it is unknowable.

        The old session must be over first: until its backend exits, a COMMIT it received
        may still complete. Then the lock is retaken and the store's last seq must be the
        last this writer committed (or `row`'s, if it landed) — else another writer has
        written, and this one's memory is behind.
        """
        old_session = self._session
        with contextlib.suppress(Exception):
            self._conn.close()
        conn = None
        for pause in (0.0, 0.25, 0.75):  # a restarting server; then give up: lost
            time.sleep(pause)
            try:
                conn = self._connect()
                break
            except self._errors:
                continue
        if conn is None:
            self._lose(f"cannot reconnect to {self.location}")
            return None
        try:
            if not self._session_over(conn, old_session):
                self._lose(f"the old session to {self.location} would not end")
                conn.close()
                return None
            landed = None
            if row is not None:
                found = conn.execute(
                    "SELECT seq, op, at, next_handle, diff FROM change_log WHERE seq = %s",
                    (row[0],),
                ).fetchone()
                landed = found is not None and tuple(found) == tuple(row)
            if not self._try_lock(conn):
                self._lose(f"another writer holds {self.location} now")
                conn.close()
                return landed
            self._wait_out_leases(conn, time.monotonic())
            expected = row[0] if landed else self._last_seq
            top = conn.execute(
                "SELECT GREATEST((SELECT MAX(seq) FROM change_log), "
                "(SELECT value FROM koinii_meta WHERE key = 'seq'))"
            ).fetchone()[0]
            if (top or 0) != expected:
                self._lose(f"{self.location} is at seq {top}, not {expected}: another writer wrote")
                conn.close()
                return landed
            self._session_settings(conn)
            session = self._session_of(conn)
        except self._errors as exc:
            self._lose(f"reconnecting to {self.location} failed: {exc}")
            with contextlib.suppress(Exception):
                conn.close()
            return None
        self._conn, self._session = conn, session
        self._records = PostgresRecords(conn)
        if landed:
            self._last_seq = row[0]
        return landed

    @staticmethod
    def _session_of(conn: Any) -> tuple[int, Any]:
        """The connection's session: its backend's pid and when that backend started —
        a pid alone may be another session's by the time it is looked for again."""
        return conn.execute(
            "SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()"
        ).fetchone()

    @staticmethod
    def _session_over(conn: Any, session: tuple[int, Any], wait_s: float = 3.0) -> bool:
        """End `session` (an old one of this writer) and wait until it is gone."""
        deadline = time.monotonic() + wait_s
        while True:
            alive = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND backend_start = %s",
                session,
            ).fetchone()[0]
            if not alive:
                return True
            if time.monotonic() > deadline:
                return False
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid = %s AND backend_start = %s",
                session,
            )
            time.sleep(0.05)

    def _lose(self, why: str) -> None:
        self.lost = Refused(
            "writer-lost",
            f"this daemon is no longer the writer of {self.location}: {why}; restart it (it "
            "rebuilds from the store), or use the writer that holds it now",
            {"location": self.location},
        )

    def close(self) -> None:
        # Release the writer lock before hanging up: the server drops a closed session's
        # locks only as its backend exits, so a reopen right after close could be refused.
        if not self._conn.broken:
            with contextlib.suppress(*self._errors):
                # stopped cleanly, any lease run out: nothing for the next writer to wait for
                if self._marked and self.lost is None and time.monotonic() >= self._writes_from:
                    self._conn.execute(
                        "DELETE FROM koinii_meta WHERE key IN ('lease_holder', 'lease_ms')"
                    )
                self._conn.execute("SELECT pg_advisory_unlock_all()")
        self._conn.close()


def _backfill(conn: Any) -> None:
    """Create the full-text index and fill it from the sentex rows already stored."""
    conn.execute(fulltext.POSTGRES_SCHEMA)
    stored = conn.cursor()
    stored.execute("SELECT handle, text FROM sentex")

    def run_many(sql: str, rows: list[tuple]) -> None:
        conn.cursor().executemany(sql.replace("?", "%s"), rows)

    fulltext.backfill(stored, run_many, fulltext.POSTGRES_INDEX)


def _reindex(conn: Any) -> None:
    """Make every full-text row again, as `fulltext.document` cuts sentences now."""
    conn.execute("DELETE FROM sentex_words")
    _backfill(conn)


def _redact(dsn: str) -> str:
    """The DSN without its password, for messages."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", dsn)
