"""The in-memory store: nothing outlives the process.

The engine's own nodes are the records, so this store keeps only what the engine does
not: the change log for `changes(since)` tails (bounded: the newest `retain` entries, and
at most `retain_changes` changes in all but for the newest entry), and the domain record
tables (wraps, sessions) in an in-memory SQLite database, so the
domains run the same SQL whatever the store.

The full-text index is the SQLite store's own (`fulltext`: the same FTS5 table, words and
ranking) in that in-memory database, so a search answers alike on every store. Nothing
here is durable, so it is kept lazily: a commit only notes the sentexes it added (the
nodes, in handle order: a list entry each) and deleted, and the next search indexes
them first. Invariant: after `_catch_up`, the index holds exactly the stored sentexes.
Handles are never reused and only grow, so a deleted handle above the last search's is
one noted since and never indexed: it is struck from the notes (`_struck`), not
unindexed; the notes are swept of the struck when those grow to half of them.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections import deque
from collections.abc import Sequence
from typing import Any

import orjson

from koinii.errors import Refused
from koinii.kb.store import (
    Commit,
    Loaded,
    LogEntry,
    SQLiteRecords,
    decoded_entry,
    encoded_diff,
    fulltext,
    migrate_records,
)


class MemoryStore:
    location = ":memory:"
    durability = {"backend": "memory"}  # nothing survives the process
    lost = None  # nothing to lose: the process is the store
    checkpoint_path = None  # nothing to open again

    def check_writer(self) -> None:
        return None

    def hold_lease(self, seconds: float) -> None:
        pass

    def __init__(self, retain: int = 10_000, retain_changes: int = 10_000) -> None:
        self._log: deque[tuple[LogEntry, int]] = deque()  # (entry, how many changes)
        self._retain, self._retain_changes = retain, retain_changes
        self._logged = 0  # changes the log holds
        self._floor = 0
        self._marks: dict[int, tuple[int, int]] = {}  # seq -> (at, next_handle), as logged
        self._records = sqlite3.connect(
            ":memory:", isolation_level=None, check_same_thread=False, factory=SQLiteRecords
        )
        self._unindexed: list[Any] = []  # the nodes added since the last search
        self._struck: set[int] = set()  # of those, the handles deleted since
        self._unindexed_deletes: list[tuple[int]] = []  # indexed before, deleted since
        self._indexed = False  # the index tables exist (made at the first search)
        self._noted_top = 0  # the highest handle noted for the index
        self._indexed_top = 0  # the highest handle noted before the last search

    def load(self) -> Loaded:
        return Loaded([], [], next_handle=1, seq=0, floor=0)

    def commit(self, commit: Commit) -> Any:
        result = None
        if commit.records is not None:
            self._records.execute("BEGIN")
            try:
                result = commit.records(self._records)
                self._records.execute("COMMIT")
            except BaseException:
                self._records.execute("ROLLBACK")
                raise
        top = self._noted_top
        self._unindexed.extend(node for node in commit.upserts if node.handle > top)  # once
        # every stored node made before this commit has a handle below `next_handle`,
        # and is noted now or was before (not read off the notes: a commit's cost must
        # not grow with the nodes noted since the last search)
        self._noted_top = commit.next_handle - 1
        for handle in commit.deletes:
            if handle > self._indexed_top:
                self._struck.add(handle)
            else:
                self._unindexed_deletes.append((handle,))
        if len(self._struck) > 1024 and 2 * len(self._struck) > len(self._unindexed):
            self._unindexed = [n for n in self._unindexed if n.handle not in self._struck]
            self._struck = set()
        entry = commit.entry
        if entry.records is not None:  # (the caller's dict: kept as it was, as JSON keeps it)
            records = orjson.loads(orjson.dumps(entry.records, option=orjson.OPT_NON_STR_KEYS))
            entry = dataclasses.replace(entry, records=records)
        changes = len(entry.added) + len(entry.removed)
        self._log.append((entry, changes))
        self._marks[entry.seq] = (entry.at, commit.next_handle)
        self._logged += changes
        self._compact(self._retain, self._retain_changes)
        return result

    # Nothing here is durable, so a group commit has nothing to do.
    def begin_group(self) -> None:
        pass

    def commit_group(self) -> None:
        pass

    def ensure_schema(self, domain: str, migrations: list[str]) -> None:
        migrate_records(self._records, domain, migrations)

    def read(self, reader):
        try:
            return reader(self._records)
        except sqlite3.Error as exc:
            raise Refused(
                "store-error", f"a read failed: {exc}", {"location": self.location}
            ) from exc

    # --- full-text search: the SQLite store's, kept lazily (see the module docstring) ---

    def catch_up(self, limit: int | None = None) -> int:
        """Index what the writes since the last search noted (all of it: in memory it
        is cheap, and there is no transaction per commit to spare)."""
        noted = len(self._unindexed) - len(self._struck)
        self._catch_up()
        return noted

    def _catch_up(self) -> None:
        db = self._records
        db.execute("BEGIN")
        try:
            if not self._indexed:
                fulltext.sqlite_create(db)
            if self._unindexed_deletes:  # each was added to FTS5 at an earlier search
                for statement in fulltext.SQLITE_UNINDEX:
                    db.executemany(statement, self._unindexed_deletes)
            struck = self._struck
            rows = [
                fulltext.row(n.handle, n.atom) for n in self._unindexed if n.handle not in struck
            ]
            if rows:
                db.executemany(fulltext.INSERT_WORDS, rows)
                db.executemany(fulltext.SQLITE_FTS_ADD, rows)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self._indexed = True
        self._indexed_top = self._noted_top
        self._unindexed, self._struck = [], set()
        self._unindexed_deletes = []

    def search(self, words: Sequence[str], limit: int | None) -> list[fulltext.Ranked]:
        self._catch_up()
        return fulltext.sqlite_ranked(self._records, words, limit)

    def snippets(self, words: Sequence[str], handles: Sequence[int]) -> dict[int, str]:
        return fulltext.sqlite_snippets(self._records, words, handles)

    def reader(self) -> None:
        return None  # its index is one connection's own memory

    def records_reader(self) -> None:
        return None  # so are its records

    def save_next_handle(self, next_handle: int) -> None:
        pass

    def changes(self, since: int, limit: int) -> list[LogEntry]:
        out = []
        for entry, _ in self._log:
            if entry.seq > since:
                out.append(decoded_entry(entry.seq, entry.op, entry.at, encoded_diff(entry)))
                if len(out) >= limit:
                    break
        return out

    def floor(self) -> int:
        return self._floor

    def log_point(self, seq: int | None = None, at: int | None = None) -> dict[str, int] | None:
        if seq is None:
            seq = max(
                (s for s, (when, _) in self._marks.items() if when <= (at or 0)), default=None
            )
        if seq is None or seq not in self._marks:
            return None
        when, next_handle = self._marks[seq]
        return {"seq": seq, "at": when, "next_handle": next_handle}

    def compact(self, keep: int) -> int:
        return self._compact(keep, None)

    def _compact(self, keep: int, changes: int | None) -> int:
        """Drop the oldest entries past the newest `keep`, and (but for the newest one)
        past `changes` changes in all; returns how many went."""
        log, dropped = self._log, 0
        while len(log) > keep or (changes is not None and self._logged > changes and len(log) > 1):
            entry, count = log.popleft()
            self._marks.pop(entry.seq, None)
            self._floor, self._logged, dropped = entry.seq, self._logged - count, dropped + 1
        return dropped

    def close(self) -> None:
        self._records.close()
