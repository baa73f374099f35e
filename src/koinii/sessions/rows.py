"""The rows of a session and how they are written: checked input in, INSERTs out.

The writer's operations (store.py) and the bulk paths (imports, the benchmark) share
these functions, so a turn is written the same way whichever door it came in by.
`checked_*` turn untrusted input (Python values or JSON) into the exact shapes the
`insert_*` functions take, refusing any bad field by its path before a row is written;
`insert_*` run inside a write's transaction and trust their input.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from koinii.kb import values
from koinii.sessions import checks, schema
from koinii.sessions.checks import refuse


def new_id() -> str:
    return str(uuid.uuid4())


def latest_state(db: Any, session_n: int) -> tuple:
    return db.execute(
        "SELECT n, version, title, system_prompt, provider, model FROM state "
        "WHERE session_n = ? ORDER BY version DESC LIMIT 1",
        (session_n,),
    ).fetchone()


# --- validated shapes of nested input --------------------------------------------------

ROUTING_KINDS = ("fallback", "retry", "error")
MAX_META = 64 * 1024  # bytes of JSON an importer may attach to a session


BLOCK_FIELDS = ("tool", "code", "result", "stdout", "error", "duration_ms", "timeout")
ITERATION_FIELDS = (
    "thinking",
    "prose",
    "provider",
    "model",
    "actual_provider",
    "actual_model",
    "fallback",
    "tokens",
    "cost_usd",
    "started_at",
    "duration_ms",
    "first_token_ms",
    "blocks",
)
ATTACHMENT_FIELDS = ("filename", "media_type", "size_bytes", "sha256", "created_at")
ROUTING_FIELDS = ("kind", "provider", "model", "to_provider", "to_model", "reason", "created_at")
ATTEMPT_FIELDS = (
    "status",
    "outcome",
    "answer",
    "error",
    "duration_ms",
    "tokens",
    "cost_usd",
    "created_at",
    "finished_at",
    "iterations",
)
TURN_FIELDS = ("user_request", "created_at", "attachments", "attempts", "routing", "state")
SESSION_FIELDS = (
    "channel",
    "title",
    "project_id",
    "provider",
    "model",
    "system_prompt",
    "created_at",
    "meta",
    "fingerprint",
    "parent_external_id",
    "forks",
)
MAX_FORKS = 10_000  # kept branches an imported session may declare


def checked_block(field: str, value: Any) -> dict[str, Any]:
    given = checks.Given(field, value, BLOCK_FIELDS)
    return {
        "tool": given.name("tool"),
        "code": given.text("code"),
        "result": given.text("result"),
        "stdout": given.text("stdout"),
        "error": given.text("error"),
        "duration_ms": given.count("duration_ms"),
        "timeout": given.flag("timeout"),
    }


def checked_iteration(field: str, value: Any) -> dict[str, Any]:
    given = checks.Given(field, value, ITERATION_FIELDS)
    return {
        "thinking": given.text("thinking"),
        "prose": given.text("prose"),
        "provider": given.name("provider"),
        "model": given.name("model"),
        "actual_provider": given.name("actual_provider"),
        "actual_model": given.name("actual_model"),
        "fallback": given.flag("fallback"),
        "tokens": given.tokens("tokens"),
        "cost_usd": given.money("cost_usd"),
        "started_at": given.timestamp("started_at"),
        "duration_ms": given.count("duration_ms"),
        "first_token_ms": given.count("first_token_ms"),
        "blocks": [checked_block(path, block) for path, block in given.each("blocks")],
    }


def checked_attachment(field: str, value: Any, default_time: str) -> dict[str, Any]:
    given = checks.Given(field, value, ATTACHMENT_FIELDS)
    digest = given.name("sha256")
    if digest is not None and (
        len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest)
    ):
        refuse(given.path("sha256"), "must be 64 lowercase hex digits")
    return {
        "filename": given.name("filename"),
        "media_type": given.name("media_type"),
        "size_bytes": given.count("size_bytes"),
        "sha256": digest,
        "created_at": given.timestamp("created_at", default=default_time),
    }


def checked_routing(field: str, value: Any, default_time: str) -> dict[str, Any]:
    given = checks.Given(field, value, ROUTING_FIELDS)
    return {
        "kind": given.choice("kind", ROUTING_KINDS),
        "provider": given.name("provider"),
        "model": given.name("model"),
        "to_provider": given.name("to_provider"),
        "to_model": given.name("to_model"),
        "reason": given.text("reason", limit=checks.MAX_NAME * 16),
        "created_at": given.timestamp("created_at", default=default_time),
    }


def checked_attempt(field: str, value: Any, default_time: str) -> dict[str, Any]:
    given = checks.Given(field, value, ATTEMPT_FIELDS)
    iterations = [checked_iteration(path, it) for path, it in given.each("iterations")]
    status = given.choice("status", checks.STATUSES, default="done")
    outcome = None
    if given.get("outcome") is not None or status != "running":
        outcome = given.choice("outcome", checks.OUTCOMES, default=_outcome_of(status))
    tokens = given.tokens("tokens") if given.get("tokens") is not None else None
    cost = given.money("cost_usd")
    return {
        "status": status,
        "outcome": outcome,
        "answer": given.text("answer"),
        "error": given.text("error"),
        "duration_ms": given.count("duration_ms"),
        "tokens": tokens if tokens is not None else _summed_tokens(iterations),
        "cost_usd": cost if cost is not None else _summed_cost(iterations),
        "created_at": given.timestamp("created_at", default=default_time),
        "finished_at": given.timestamp("finished_at"),
        "iterations": iterations,
    }


def checked_turn(field: str, value: Any, default_time: str) -> dict[str, Any]:
    given = checks.Given(field, value, TURN_FIELDS)
    created = given.timestamp("created_at", default=default_time)
    attempts = [checked_attempt(path, a, created) for path, a in given.each("attempts")]
    if not attempts:
        refuse(given.path("attempts"), "a turn has at least one attempt")
    return {
        "user_request": given.text("user_request", required=True),
        "state": given.count("state"),
        "created_at": created,
        "attempts": attempts,
        "attachments": [
            checked_attachment(path, a, created) for path, a in given.each("attachments")
        ],
        "routing": [checked_routing(path, r, created) for path, r in given.each("routing")],
    }


STORED_MS = "stored_ms"  # meta: when the row was first written, by the writer's clock


def stamped(meta: dict[str, Any] | None, stored_ms: Any = None) -> dict[str, Any]:
    """A session's meta with STORED_MS set by the writer — now, or the `stored_ms` a
    replaced row had — never by the caller: it says which came first, a session or a
    wrap naming it (wraps/access.py `check_coordinator_session`), and a caller's clock
    (or `created_at`, which an import takes from its transcript) could be set back."""
    out = {key: value for key, value in (meta or {}).items() if key != STORED_MS}
    out[STORED_MS] = stored_ms if type(stored_ms) is int else time.time_ns() // 1_000_000
    return out


def checked_session(field: str, value: Any) -> dict[str, Any]:
    given = checks.Given(field, value, SESSION_FIELDS)
    meta = values.check(given.path("meta"), given.mapping("meta"))
    try:
        encoded = json.dumps(meta, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        refuse(given.path("meta"), "must be plain JSON")
    if len(encoded) > MAX_META:
        refuse(given.path("meta"), f"is larger than {MAX_META} bytes as JSON")
    forks = [checks.count(path, fork) for path, fork in given.each("forks")]
    if len(forks) > MAX_FORKS:
        refuse(given.path("forks"), f"declares more than {MAX_FORKS} kept branches")
    if None in forks:
        refuse(given.path("forks"), "holds fork positions: integers >= 0")
    return {
        "channel": given.name("channel") or "cli",
        "title": given.name("title"),
        "project_id": given.name("project_id"),
        "provider": given.name("provider"),
        "model": given.name("model"),
        "system_prompt": given.text("system_prompt"),
        "created_at": given.timestamp("created_at", default=checks.now()),
        "meta": meta,
        "fingerprint": given.name("fingerprint"),
        "parent_external_id": given.name("parent_external_id"),
        "forks": forks,
    }


def _outcome_of(status: str) -> str:
    return {"done": "complete", "interrupted": "cancelled", "error": "error"}.get(status, "error")


def _summed_tokens(iterations: list[dict[str, Any]]) -> dict[str, int]:
    return {k: sum(it["tokens"][k] for it in iterations) for k in checks.TOKEN_KINDS}


def _summed_cost(iterations: list[dict[str, Any]]) -> float | None:
    costs = [it["cost_usd"] for it in iterations if it["cost_usd"] is not None]
    return sum(costs) if costs else None


# --- row writers (inside a transaction; their input is already checked) ----------------


class RowWriter:
    """The writes of one transaction. It numbers new rows itself (schema.next_n, read
    once per table, then counted up): the single writer is the only one inserting."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self._next: dict[str, int] = {}
        self._sql: dict[tuple[str, tuple[str, ...]], str] = {}

    def insert(self, table: str, values: dict[str, Any]) -> int:
        """INSERT one row; returns its number `n` (given in `values`, or the next one)."""
        if "n" not in values:
            if table not in self._next:
                self._next[table] = schema.next_n(self.db, table)
            values = {"n": self._next[table], **values}
            self._next[table] += 1
        key = (table, tuple(values))
        sql = self._sql.get(key)
        if sql is None:
            sql = self._sql[key] = (
                f"INSERT INTO {table} ({', '.join(values)}) "
                f"VALUES ({', '.join('?' for _ in values)})"
            )
        self.db.execute(sql, tuple(values.values()))
        return values["n"]

    def block(self, iteration_n: int, position: int, block: dict[str, Any]) -> str:
        block_id = block.get("id") or new_id()  # a recorder names its rows itself
        self.insert(
            "block",
            {
                **block,
                "id": block_id,
                "iteration_n": iteration_n,
                "position": position,
                "timeout": int(block["timeout"]),
            },
        )
        return block_id

    def iteration(self, attempt_n: int, position: int, it: dict[str, Any]) -> str:
        iteration_id = it.get("id") or new_id()
        values = {k: v for k, v in it.items() if k not in ("tokens", "blocks", "id")}
        iteration_n = self.insert(
            "iteration",
            {
                "id": iteration_id,
                "attempt_n": attempt_n,
                "position": position,
                **values,
                "fallback": int(it["fallback"]),
                **_token_columns(it["tokens"]),
            },
        )
        for number, block in enumerate(it["blocks"], 1):
            self.block(iteration_n, number, block)
        return iteration_id

    def attempt(self, turn_n: int, version: int, attempt: dict[str, Any]) -> int:
        values = {k: v for k, v in attempt.items() if k not in ("tokens", "iterations")}
        attempt_n = self.insert(
            "attempt",
            {
                "turn_n": turn_n,
                "version": version,
                **values,
                "iteration_count": len(attempt["iterations"]),
                **_token_columns(attempt["tokens"]),
            },
        )
        for number, it in enumerate(attempt["iterations"], 1):
            self.iteration(attempt_n, number, it)
        return attempt_n

    def attachment(self, turn_n: int, attachment: dict[str, Any]) -> str:
        attachment_id = new_id()
        self.insert("attachment", {"id": attachment_id, "turn_n": turn_n, **attachment})
        return attachment_id

    def routing(self, session_n: int, turn_n: int | None, event: dict[str, Any]) -> None:
        self.insert("routing_event", {"session_n": session_n, "turn_n": turn_n, **event})

    def turn(
        self, session_n: int, state_n: int, ordinal: int, position: int, turn: dict[str, Any]
    ) -> str:
        """A whole turn: attempts, iterations, blocks, attachments, routing, search text."""
        turn_n = (session_n << schema.TURN_BITS) | ordinal
        turn_id = turn.get("id") or new_id()
        self.insert(
            "turn",
            {
                "n": turn_n,
                "id": turn_id,
                "state_n": state_n,
                "position": position,
                "user_request": turn["user_request"],
                "created_at": turn["created_at"],
            },
        )
        prose, thinking, tools = [], [], []
        for version, attempt in enumerate(turn["attempts"]):
            self.attempt(turn_n, version, attempt)
            for it in attempt["iterations"]:
                if it["prose"]:
                    prose.append(it["prose"])
                if it["thinking"]:
                    thinking.append(it["thinking"])
                tools.extend(filter(None, map(tool_text, it["blocks"])))
        for attachment in turn["attachments"]:
            self.attachment(turn_n, attachment)
        for event in turn["routing"]:
            self.routing(session_n, turn_n, event)
        self.insert(
            "turn_text",
            {
                "n": turn_n,
                "request": turn["user_request"],
                "reply": "\n".join(prose) or None,
                "thinking": "\n".join(thinking) or None,
                "tools": "\n".join(tools) or None,
            },
        )
        return turn_id

    def session(
        self,
        external_id: str | None,
        session: dict[str, Any],
        parent_n: int | None = None,
        owner: str | None = None,
    ) -> tuple[int, str, int]:
        """A new session with its state 0, started by `owner`: (n, id, state n)."""
        session_id = session.get("id") or new_id()
        title = session["title"]
        session_n = self.insert(
            "session",
            {
                "id": session_id,
                "channel": session["channel"],
                "external_id": external_id,
                "title": title,
                "title_fold": title.casefold() if title else None,
                "project_id": session["project_id"],
                "provider": session["provider"],
                "model": session["model"],
                "created_at": session["created_at"],
                "modified_at": session["created_at"],
                "parent_session_n": parent_n,
                "meta": json.dumps(stamped(session["meta"]), ensure_ascii=False),
                "owner": owner,
            },
        )
        state_n = self.states(session_n, session, session.get("forks") or [])
        return session_n, session_id, state_n

    def states(self, session_n: int, fields: dict[str, Any], forks: list[int]) -> int:
        """The states of a new (or replaced) session: with no forks, state 0; with the fork
        positions of kept branches (an import's rewinds), a state per branch — versions 0,
        1, … in the order given, each a child of the live state forked at its position —
        and the live state last (the latest: current). Returns the live state's n."""
        at = fields["created_at"]
        live = self.state(session_n, len(forks), None, None, fields, at)
        for version, position in enumerate(forks):
            self.state(session_n, version, live, position, fields, at)
        return live

    def state(
        self,
        session_n: int,
        version: int,
        parent_n: int | None,
        fork_position: int | None,
        fields: dict[str, Any],
        created_at: str,
    ) -> int:
        return self.insert(
            "state",
            {
                "id": new_id(),
                "session_n": session_n,
                "version": version,
                "parent_state_n": parent_n,
                "fork_position": fork_position,
                "title": fields["title"],
                "system_prompt": fields["system_prompt"],
                "provider": fields["provider"],
                "model": fields["model"],
                "created_at": created_at,
            },
        )

    def delete_contents(self, session_n: int) -> None:
        """Every turn, attempt, iteration, block, attachment, routing event and state of a
        session (its row stays, so its id does too)."""
        db = self.db
        low, high = schema.turn_range(session_n)
        attempts = "SELECT n FROM attempt WHERE turn_n BETWEEN ? AND ?"
        db.execute(
            "DELETE FROM block WHERE iteration_n IN "
            f"(SELECT n FROM iteration WHERE attempt_n IN ({attempts}))",
            (low, high),
        )
        db.execute(f"DELETE FROM iteration WHERE attempt_n IN ({attempts})", (low, high))
        for table, column in (("attempt", "turn_n"), ("attachment", "turn_n"), ("turn", "n")):
            db.execute(f"DELETE FROM {table} WHERE {column} BETWEEN ? AND ?", (low, high))
        db.execute("DELETE FROM turn_text WHERE n BETWEEN ? AND ?", (low, high))
        db.execute("DELETE FROM routing_event WHERE session_n = ?", (session_n,))
        db.execute("DELETE FROM state WHERE session_n = ?", (session_n,))

    def append_turns(self, session_n: int, turns: list[dict[str, Any]]) -> list[str]:
        """Append checked turns to a session, in order; their ids. A turn goes to the
        current state, or to the state whose version it names (`state`: an imported
        branch), after the turns that state holds."""
        count, seq, modified = self.db.execute(
            "SELECT turn_count, turn_seq, modified_at FROM session WHERE n = ?", (session_n,)
        ).fetchone()
        if seq + len(turns) > schema.TURN_MASK:
            refuse("turns", f"a session holds at most {schema.TURN_MASK} turns")
        state_n, current = latest_state(self.db, session_n)[:2]
        branches: dict[int, list[int]] = {}  # version → [state n, the last position on it]
        ids = []
        for turn in turns:
            seq += 1
            version = turn.get("state")
            if version is None or version == current:
                count += 1
                ids.append(self.turn(session_n, state_n, seq, count, turn))
            else:
                branch = branches.get(version) or self._branch(session_n, version, branches)
                branch[1] += 1
                ids.append(self.turn(session_n, branch[0], seq, branch[1], turn))
            modified = max(modified, turn["created_at"])
        self.db.execute(
            "UPDATE session SET turn_count = ?, turn_seq = ?, modified_at = ? WHERE n = ?",
            (count, seq, modified, session_n),
        )
        return ids

    def _branch(self, session_n: int, version: int, branches: dict[int, list[int]]) -> list[int]:
        """[state n, the last position on it] of an earlier state the turns are appended
        to (refused when the session has no such state)."""
        row = self.db.execute(
            "SELECT n, fork_position FROM state WHERE session_n = ? AND version = ?",
            (session_n, version),
        ).fetchone()
        if row is None:
            refuse("turns", f"names state {version}, which the session does not have")
        last = self.db.execute(
            "SELECT max(position) FROM turn WHERE n BETWEEN ? AND ? AND state_n = ?",
            (*schema.turn_range(session_n), row[0]),
        ).fetchone()[0]
        branches[version] = [row[0], last if last is not None else row[1] or 0]
        return branches[version]


def tool_text(block: dict[str, Any]) -> str | None:
    """What a block's tool gave back, as the search indexes it (the `tools` band): its
    result, its output when that says more, and its error."""
    parts = [block.get("result"), block.get("stdout"), block.get("error")]
    if parts[1] is not None and parts[0] is not None and parts[1] in parts[0]:
        parts[1] = None
    return "\n".join(p for p in parts if p) or None


def _json(value: dict[str, Any]) -> str | None:
    return json.dumps(value, ensure_ascii=False) if value else None


def _token_columns(tokens: dict[str, int]) -> dict[str, int]:
    return {f"{kind}_tokens": tokens[kind] for kind in checks.TOKEN_KINDS}
