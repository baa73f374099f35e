"""One session's rows, read table by table, and the target that names a session.

`SessionRows` reads each table of a session the first time a section of `read_session`
asks for it, so a table that cannot be read breaks only the sections that need it.
Rows come back as plain dicts with the public names (ids, never internal row numbers).

A target names a session when, trimmed and stripped of a leading `vis_session_id#`
marker (any case), it is a session's id, the id the session had where it was imported
from (a transcript's own session id, or its whole external id `claude-code:<id>`), or a
prefix of exactly one id. Ids are lowercase uuid4 text, so a store id or prefix is
compared in lowercase; an external id exactly as it was imported.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Any

from koinii.sessions import checks, schema

MARKER = re.compile(r"^\s*vis_session_id#", re.IGNORECASE)
REQUEST_PREVIEW = 200  # characters of a request in `last_turn`
IMPORTED_FROM = ("claude-code", "codex")  # the importers' sources: `source:id` external ids

_SESSION = (
    "SELECT n, id, channel, title, turn_count, created_at, modified_at, provider, model, "
    "project_id, external_id, parent_session_n, meta FROM session"
)
_SESSION_KEYS = (
    "n",
    "id",
    "channel",
    "title",
    "turn_count",
    "created_at",
    "modified_at",
    "provider",
    "model",
    "project_id",
    "external_id",
    "parent_session_n",
    "meta",
)


def normalized_target(target: Any) -> str | None:
    """The id (or prefix) a target names, or None when it names nothing."""
    if isinstance(target, dict):  # a row from list_sessions / get_session
        target = target.get("id")
    if not isinstance(target, str):
        return None
    text = MARKER.sub("", target).strip().lower()
    return text or None


def resolve(db: Any, target: Any, reader: str | None = None) -> dict[str, Any] | None:
    """The session a target names: its exact id; else the session imported from it (the
    transcript's own session id, or the whole `source:id` external id); else the one id
    it prefixes. Several principals may import one source id (each import is its
    importer's: schema.py): the `reader`'s own import is the one named, else the first."""
    key = normalized_target(target)
    if key is None:
        return None
    row = db.execute(f"{_SESSION} WHERE id = ?", (key,)).fetchone()
    if row is None:
        given = MARKER.sub("", target if isinstance(target, str) else key).strip()
        names = (given, *(f"{source}:{given}" for source in IMPORTED_FROM))
        marks = ", ".join("?" for _ in names)
        row = db.execute(
            f"{_SESSION} WHERE external_id IN ({marks}) "
            "ORDER BY CASE WHEN owner = ? THEN 0 ELSE 1 END, n LIMIT 1",
            (*names, reader),
        ).fetchone()
    if row is None:
        upper = key[:-1] + chr(ord(key[-1]) + 1)
        found = db.execute(f"{_SESSION} WHERE id >= ? AND id < ? LIMIT 2", (key, upper)).fetchall()
        if len(found) != 1:
            return None  # unknown, or ambiguous
        row = found[0]
    return dict(zip(_SESSION_KEYS, row))


def tokens_of(row: dict[str, Any]) -> dict[str, int]:
    return {kind: int(row[f"{kind}_tokens"]) for kind in checks.TOKEN_KINDS}


class SessionRows:
    """The rows of one resolved session; each table is read on first use."""

    def __init__(self, db: Any, session: dict[str, Any]) -> None:
        self.db = db
        self.session = session
        self.low, self.high = schema.turn_range(session["n"])

    def _all(self, sql: str, params: tuple) -> list[dict[str, Any]]:
        cursor = self.db.execute(sql, params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor]

    def _sorted(self, sql: str, order: tuple[str, str]) -> list[dict[str, Any]]:
        """Rows of the session's turn range, sorted here: the join order (CROSS JOIN, from
        the session's attempts outward) is what keeps the read to this session's rows."""
        rows = self._all(sql, (self.low, self.high))
        rows.sort(key=lambda row: (row[order[0]], row[order[1]]))
        return rows

    @cached_property
    def states(self) -> list[dict[str, Any]]:
        """Oldest first; each with `parent_state_id`."""
        states = self._all(
            "SELECT n, id, version, parent_state_n, fork_position, title, system_prompt, "
            "provider, model, created_at FROM state WHERE session_n = ? ORDER BY version",
            (self.session["n"],),
        )
        ids = {s["n"]: s["id"] for s in states}
        for state in states:
            state["parent_state_id"] = ids.get(state["parent_state_n"])
        return states

    @cached_property
    def turns(self) -> list[dict[str, Any]]:
        """Every turn ever started in the session, in the order they were started."""
        return self._all(
            "SELECT n, id, state_n, position, user_request, created_at FROM turn "
            "WHERE n BETWEEN ? AND ? ORDER BY n",
            (self.low, self.high),
        )

    @cached_property
    def chain(self) -> list[dict[str, Any]]:
        """The turns of the active chain (root state → latest), in position order."""
        limit_of: dict[int, float] = {}
        by_n = {s["n"]: s for s in self.states}
        state = self.states[-1] if self.states else None
        limit: float = float("inf")
        while state is not None:
            limit_of[state["n"]] = limit
            if state["fork_position"] is not None:
                limit = min(limit, state["fork_position"])
            state = by_n.get(state["parent_state_n"])
        chosen = [
            t
            for t in self.turns
            if t["state_n"] in limit_of and t["position"] <= limit_of[t["state_n"]]
        ]
        chosen.sort(key=lambda t: t["position"])
        return chosen

    @cached_property
    def attempts(self) -> dict[int, list[dict[str, Any]]]:
        """turn n → its attempts, oldest first."""
        out: dict[int, list[dict[str, Any]]] = {}
        for row in self._all(
            "SELECT * FROM attempt WHERE turn_n BETWEEN ? AND ? ORDER BY turn_n, version",
            (self.low, self.high),
        ):
            out.setdefault(row["turn_n"], []).append(row)
        return out

    @cached_property
    def iterations(self) -> dict[int, list[dict[str, Any]]]:
        """attempt n → its iterations, in position order."""
        out: dict[int, list[dict[str, Any]]] = {}
        for row in self._sorted(
            "SELECT i.* FROM attempt a CROSS JOIN iteration i "
            "WHERE a.turn_n BETWEEN ? AND ? AND i.attempt_n = a.n",
            ("attempt_n", "position"),
        ):
            out.setdefault(row["attempt_n"], []).append(row)
        return out

    @cached_property
    def blocks(self) -> dict[int, list[dict[str, Any]]]:
        """iteration n → its blocks, in position order."""
        out: dict[int, list[dict[str, Any]]] = {}
        for row in self._sorted(
            "SELECT b.* FROM attempt a CROSS JOIN iteration i CROSS JOIN block b "
            "WHERE a.turn_n BETWEEN ? AND ? AND i.attempt_n = a.n AND b.iteration_n = i.n",
            ("iteration_n", "position"),
        ):
            out.setdefault(row["iteration_n"], []).append(row)
        return out

    @cached_property
    def routing(self) -> list[dict[str, Any]]:
        rows = self._all(
            "SELECT * FROM routing_event WHERE session_n = ? ORDER BY created_at, n",
            (self.session["n"],),
        )
        ids = {t["n"]: t["id"] for t in self.turns} if rows else {}
        for row in rows:
            row["turn_id"] = ids.get(row["turn_n"])
        return rows

    @cached_property
    def attachments(self) -> dict[int, list[dict[str, Any]]]:
        out: dict[int, list[dict[str, Any]]] = {}
        for row in self._all(
            "SELECT * FROM attachment WHERE turn_n BETWEEN ? AND ? ORDER BY n",
            (self.low, self.high),
        ):
            out.setdefault(row["turn_n"], []).append(row)
        return out

    @cached_property
    def children(self) -> list[dict[str, Any]]:
        """The session's child sessions (sub-agents), oldest first."""
        return self._all(
            "SELECT id, channel, title, external_id, turn_count, created_at, modified_at, meta "
            "FROM session WHERE parent_session_n = ? ORDER BY created_at, n",
            (self.session["n"],),
        )

    @cached_property
    def parent_id(self) -> str | None:
        if self.session["parent_session_n"] is None:
            return None
        row = self.db.execute(
            "SELECT id FROM session WHERE n = ?", (self.session["parent_session_n"],)
        ).fetchone()
        return row[0] if row else None

    def latest_attempt(self, turn: dict[str, Any]) -> dict[str, Any] | None:
        attempts = self.attempts.get(turn["n"])
        return attempts[-1] if attempts else None
