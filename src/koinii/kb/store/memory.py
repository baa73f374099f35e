"""The in-memory store: nothing outlives the process.

The engine's own nodes are the records, so this store keeps only what the engine does
not: the change log (bounded: the newest `retain` entries) for `changes(since)` tails.
"""

from __future__ import annotations

from collections import deque

from koinii.kb.store import Commit, Loaded, LogEntry


class MemoryStore:
    location = ":memory:"

    def __init__(self, retain: int = 10_000) -> None:
        self._log: deque[LogEntry] = deque(maxlen=retain)
        self._floor = 0

    def load(self) -> Loaded:
        return Loaded([], [], next_handle=1, seq=0, floor=0)

    def commit(self, commit: Commit) -> None:
        if len(self._log) == self._log.maxlen:
            self._floor = self._log[0].seq
        self._log.append(commit.entry)

    def save_next_handle(self, next_handle: int) -> None:
        pass

    def changes(self, since: int, limit: int) -> list[LogEntry]:
        out = []
        for entry in self._log:
            if entry.seq > since:
                out.append(entry)
                if len(out) >= limit:
                    break
        return out

    def floor(self) -> int:
        return self._floor

    def compact(self, keep: int) -> int:
        dropped = max(0, len(self._log) - keep)
        for _ in range(dropped):
            self._floor = self._log.popleft().seq
        return dropped

    def close(self) -> None:
        pass
