"""The sessions' vectors: what the hybrid session search ranks by meaning (search.py,
`koinii.kb.semantic`).

A session is embedded as its title and its turns' user requests — what the person
asked for, which is what a search for a past session names; replies, thinking and tool
output stay with the lexical bands. A child session's (a sub-agent's) vectors count for
its top-level parent, as the parent's Task result does in the lexical bands.

Invariants:
- The vectors are kept in memory, one set per KB (`for_kb`), and caught up at each
  hybrid search: a session is embedded again exactly when its row's (turn_count,
  modified_at, title) is not the one it was embedded at — every write that changes what
  is embedded (a new turn, a retitle, an import replacing it) changes one of them — and
  a session no longer stored loses its vectors. At most `EMBED_PER_SEARCH` texts are
  embedded per search; the sessions beyond wait for the next one (found by their words
  meanwhile).
- A vector never outlives its row's liveness: replaced vectors are marked dead at once
  and compacted away once they outnumber the living.
"""

from __future__ import annotations

import weakref
from typing import Any

from koinii.kb import semantic
from koinii.sessions.schema import turn_range

EMBED_PER_SEARCH = 2_000  # texts (titles and requests) a search embeds first, at most
TEXT_CHARS = 2_000  # of a request embedded (a pasted log is not what it asks)

_BY_KB: weakref.WeakKeyDictionary[Any, SessionVectors] = weakref.WeakKeyDictionary()


def for_kb(kb: Any) -> SessionVectors:
    """The vectors of `kb`'s sessions (made empty on first use)."""
    vectors = _BY_KB.get(kb)
    if vectors is None:
        vectors = _BY_KB[kb] = SessionVectors()
    return vectors


class SessionVectors:
    """Vectors of titles and requests, each owned by a top-level session (see the module
    docstring). Its owner serialises access (the KB's record reads run one at a time)."""

    def __init__(self) -> None:
        import numpy

        self._np = numpy
        self._owner = numpy.zeros(0, dtype=numpy.int64)  # the top-level session's n
        self._source = numpy.zeros(0, dtype=numpy.int64)  # the embedded session's n
        self._alive = numpy.zeros(0, dtype=bool)
        self._rows = numpy.zeros((0, semantic.DIMENSIONS), dtype=numpy.float32)
        self._texts: list[str] = []
        self._embedded_at: dict[int, tuple[Any, ...]] = {}  # session n → its row's key

    def nearest(self, db: Any, search: str, depth: int | None) -> list[tuple[int, str]]:
        """The top-level sessions closest in meaning to `search` (their best text at
        least `semantic.MIN_SIMILARITY` close), nearest first, at most `depth` (None:
        all): (session n, the text that was closest)."""
        self._catch_up(db)
        np = self._np
        if not self._alive.any():
            return []
        scores = self._rows @ semantic.embed([search])[0]
        close = np.flatnonzero((scores >= semantic.MIN_SIMILARITY) & self._alive)
        best: dict[int, tuple[float, int]] = {}
        for i in close[np.argsort(-scores[close], kind="stable")]:
            owner = int(self._owner[i])
            if owner not in best:
                best[owner] = (float(scores[i]), int(i))
                if len(best) == depth:
                    break
        return [(owner, self._texts[i]) for owner, (_, i) in best.items()]

    def _catch_up(self, db: Any) -> None:
        found = db.execute(
            "SELECT n, parent_session_n, turn_count, modified_at, title FROM session"
        ).fetchall()
        parent = {n: up for n, up, *_ in found}
        stored = {n: (count, modified, title) for n, _, count, modified, title in found}
        gone = [n for n in self._embedded_at if n not in stored]
        changed = [n for n, key in stored.items() if self._embedded_at.get(n) != key]
        self._forget(gone + changed)
        texts: list[str] = []
        owners: list[int] = []
        sources: list[int] = []
        for n in changed:
            if len(texts) >= EMBED_PER_SEARCH:
                break
            owner = n
            while parent.get(owner) is not None:  # a sub-agent's counts for its parent
                owner = parent[owner]
            low, high = turn_range(n)
            requests = db.execute(
                "SELECT request FROM turn_text WHERE n BETWEEN ? AND ? "
                "AND request IS NOT NULL ORDER BY n",
                (low, high),
            ).fetchall()
            title = stored[n][2]
            mine = ([title] if title else []) + [r[:TEXT_CHARS] for (r,) in requests]
            texts.extend(mine)
            owners.extend([owner] * len(mine))
            sources.extend([n] * len(mine))
            self._embedded_at[n] = stored[n]
        if texts:
            self._append(owners, sources, texts)

    def _forget(self, sessions: list[int]) -> None:
        np = self._np
        if not sessions:
            return
        for n in sessions:
            self._embedded_at.pop(n, None)
        self._alive &= ~np.isin(self._source, np.asarray(sessions, dtype=np.int64))
        if (~self._alive).sum() > self._alive.sum():
            keep = np.flatnonzero(self._alive)
            self._owner, self._source = self._owner[keep], self._source[keep]
            self._rows, self._alive = self._rows[keep], self._alive[keep]
            self._texts = [self._texts[i] for i in keep]

    def _append(self, owners: list[int], sources: list[int], texts: list[str]) -> None:
        np = self._np
        self._owner = np.concatenate([self._owner, np.asarray(owners, dtype=np.int64)])
        self._source = np.concatenate([self._source, np.asarray(sources, dtype=np.int64)])
        self._alive = np.concatenate([self._alive, np.ones(len(texts), dtype=bool)])
        self._rows = np.concatenate([self._rows, semantic.embed(texts)])
        self._texts.extend(texts)
