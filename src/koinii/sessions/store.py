"""The session writer: every write to the session tables, and `SessionStore`, its client.

Each write is one wire-capable operation (`sessions.<verb>`), defined once here and run
either directly on a `KB` or by the daemon for a `Client` (operations.py). One call is
one `kb.transact`: its rows and its change-log entry commit together or not at all, and
every check runs before the first row is written, so a refused write (kind
`bad-session`, naming the field) leaves the store exactly as it was.

The lifecycle the writer enforces: a turn starts with attempt 0 `running`; iterations
and blocks are recorded into the turn's latest attempt while it runs; `finish_turn`
closes it; `retry_turn` opens the next attempt of a finished turn; `fork_session` makes a
new state whose chain keeps the first `position` turns of the current one.

Who writes (over the wire, each operation's `authorize`): a session is written only by
the principal that started it — its `owner`, recorded from the daemon's attribution —
and by operators; readers and admins record no sessions (`forbidden`), and an agent
writing another's session is refused `koinii/foreign-session`. Session parents belong
to the principal that created them (issue 37): an agent starts a child session
(`parent_session_id`) only under a session it started itself — the store records one
owner per session and no delegation, so "a session created for it" by a coordinator is
its coordinator's, not its own, and is refused the same way. An import is keyed by its
importer and the source's id (schema.py): the session an import finds, replaces or
attaches to as parent (`parent_external_id`) is always one its importer imported, so
another principal that imports the same source id first makes a session of its own and
changes nothing of this one's.
"""

from __future__ import annotations

import contextvars
import json
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from koinii.errors import Refused
from koinii.identity import REGISTRY
from koinii.kb import KB, open_kb
from koinii.operations import REGISTRY as OPERATIONS
from koinii.operations import Caller, invoker, operation
from koinii.sessions import checks, rows, schema
from koinii.sessions.checks import refuse

FINISHED = ("done", "error", "interrupted")


# --- who may write (over the wire; see docs/security.md) ------------------------------------


def may_record(kb: KB, caller: Caller, fields: dict[str, Any]) -> None:
    """Agents and operators record sessions; a reader only reads them, and an admin
    writes the registry only."""
    if caller.role in ("reader", "admin"):
        raise Refused(
            "forbidden",
            f"a{'n' if caller.role == 'admin' else ''} {caller.role} may not record sessions"
            + (f" (an admin writes {REGISTRY} only)" if caller.role == "admin" else ""),
            {"principal": caller.id, "role": caller.role},
        )


def _owned_by(
    locate: Callable[[Any, dict[str, Any]], tuple[str, Any, int | None]],
    fix: str = "Start a session of your own (an operator may write any)",
):
    """The `authorize` of an operation that writes an existing session (or, for a
    child, names one as its parent): `locate(db, fields)` finds it — (field, value,
    session n or None) — and only its owner or an operator may. A session that cannot be
    found passes: the operation itself refuses it by name (`bad-session`)."""

    def authorize(kb: KB, caller: Caller, fields: dict[str, Any]) -> None:
        may_record(kb, caller, fields)
        if caller.role == "operator":
            return
        schema.ready(kb)

        def owner(db: Any) -> tuple[str, Any, int | None, str | None]:
            field, value, session_n = locate(db, fields)
            if session_n is None:
                return field, value, None, None
            row = db.execute("SELECT owner FROM session WHERE n = ?", (session_n,)).fetchone()
            return field, value, session_n, row[0] if row else None

        field, value, session_n, started_by = kb.read_records(owner)
        if session_n is not None and started_by != caller.id:
            who = f"was started by {started_by}" if started_by else "has no recorded owner"
            raise Refused(
                "koinii/foreign-session",
                f"{caller.id} writes only the sessions it started; the session of {field} "
                f"{value!r} {who}. {fix}",
                {"agent": caller.id, "field": field, "owner": started_by},
            )

    return authorize


def _found(db: Any, sql: str, value: Any) -> Any:
    if not isinstance(value, str):
        return None
    row = db.execute(sql, (value,)).fetchone()
    return row[0] if row else None


def _by_session(db: Any, fields: dict[str, Any]) -> tuple[str, Any, int | None]:
    value = fields.get("session_id")
    return "session_id", value, _found(db, "SELECT n FROM session WHERE id = ?", value)


def _by_turn(db: Any, fields: dict[str, Any]) -> tuple[str, Any, int | None]:
    value = fields.get("turn_id")
    turn_n = _found(db, "SELECT n FROM turn WHERE id = ?", value)
    return "turn_id", value, None if turn_n is None else schema.session_of(turn_n)


def _by_iteration(db: Any, fields: dict[str, Any]) -> tuple[str, Any, int | None]:
    value = fields.get("iteration_id")
    turn_n = _found(
        db,
        "SELECT a.turn_n FROM iteration i JOIN attempt a ON a.n = i.attempt_n WHERE i.id = ?",
        value,
    )
    return "iteration_id", value, None if turn_n is None else schema.session_of(turn_n)


def _by_parent(db: Any, fields: dict[str, Any]) -> tuple[str, Any, int | None]:
    value = fields.get("parent_session_id")
    return "parent_session_id", value, _found(db, "SELECT n FROM session WHERE id = ?", value)


writes_session = _owned_by(_by_session)
writes_turn = _owned_by(_by_turn)
writes_iteration = _owned_by(_by_iteration)
starts_session = _owned_by(
    _by_parent,
    "A child session goes under a session you started: name one of yours as "
    "parent_session_id, or leave it out to start a top-level session",
)


# --- lookups (inside a write's transaction) ------------------------------------------------


def _session(db: Any, session_id: Any, field: str = "session_id") -> tuple:
    checks.name(field, session_id, required=True)
    row = db.execute(
        "SELECT n, id, turn_count, turn_seq, modified_at FROM session WHERE id = ?",
        (session_id,),
    ).fetchone()
    if row is None:
        refuse(field, f"no session {session_id!r}")
    return row


def _turn(db: Any, turn_id: Any, field: str = "turn_id") -> tuple:
    checks.name(field, turn_id, required=True)
    row = db.execute("SELECT n, state_n, position FROM turn WHERE id = ?", (turn_id,)).fetchone()
    if row is None:
        refuse(field, f"no turn {turn_id!r}")
    return row


def _latest_attempt(db: Any, turn_n: int) -> tuple:
    return db.execute(
        "SELECT n, version, status, created_at, iteration_count FROM attempt "
        "WHERE turn_n = ? ORDER BY version DESC LIMIT 1",
        (turn_n,),
    ).fetchone()


def _running_attempt(db: Any, turn_id: str, turn_n: int) -> tuple:
    attempt = _latest_attempt(db, turn_n)
    if attempt[2] != "running":
        refuse(
            "turn_id",
            f"turn {turn_id!r} is {attempt[2]}: its latest attempt is finished "
            "(retry_turn opens a new one)",
            status=attempt[2],
        )
    return attempt


def _set_title(db: Any, session_n: int, state_n: int, title: str | None) -> None:
    db.execute("UPDATE state SET title = ? WHERE n = ?", (title, state_n))
    db.execute(
        "UPDATE session SET title = ?, title_fold = ? WHERE n = ?",
        (title, title.casefold() if title else None, session_n),
    )


def _append_search(
    db: Any, turn_n: int, prose: str | None, thinking: str | None, tools: str | None = None
) -> None:
    """Add an iteration's prose, thinking and tool results to its turn's full-text row
    (in a batch, once per turn when the batch ends: each update re-indexes the row)."""
    if not prose and not thinking and not tools:
        return
    batch = _BATCH.get()
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


class _Batch:
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


_BATCH: contextvars.ContextVar[_Batch | None] = contextvars.ContextVar(
    "sessions_batch", default=None
)


def _writer(db: Any) -> rows.RowWriter:
    batch = _BATCH.get()
    return batch.writer if batch is not None else rows.RowWriter(db)


def _write(kb: KB, op: str, records: Callable[[Any], Any], summary: dict[str, Any]) -> Any:
    batch = _BATCH.get()
    if batch is not None:
        return records(batch.db)
    schema.ready(kb)
    result, _ = kb.transact(f"sessions.{op}", lambda db, handles: records(db), summary=summary)
    return result


def _given_id(value: Any) -> str | None:
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


def _unused(db: Any, table: str, given: str | None) -> None:
    if given is not None and db.execute(f"SELECT 1 FROM {table} WHERE id = ?", (given,)).fetchone():
        refuse("id", f"a {table} with id {given!r} exists already")


ID_FIELD = ("string", False, "its id, chosen by the caller: a lowercase UUID (default: made)")


# --- the operations ---------------------------------------------------------------------


def _optional(kind: Any, text: str) -> tuple[Any, bool, str]:
    return (kind, False, text)


def _required(kind: Any, text: str) -> tuple[Any, bool, str]:
    return (kind, True, text)


TOKENS_FIELD = _optional("object", "{input, cached, cache_created, output, reasoning}")
BLOCK_SCHEMA = {
    "type": "object",
    "properties": {
        "tool": {"type": "string"},
        "code": {"type": "string"},
        "result": {"type": "string"},
        "stdout": {"type": "string"},
        "error": {"type": "string"},
        "duration_ms": {"type": "integer", "minimum": 0},
        "timeout": {"type": "boolean"},
    },
    "additionalProperties": False,
}


@operation(
    "sessions.start_session",
    fields={
        "channel": _optional("string", "tui, cli, api, mcp, … (default cli)"),
        "title": _optional("string", "the session's title"),
        "project_id": _optional("string", "the project (e.g. a working directory)"),
        "provider": _optional("string", "the model provider"),
        "model": _optional("string", "the model"),
        "system_prompt": _optional("string", "the system prompt of state 0"),
        "external_id": _optional("string", "the id of the session in another system (unique)"),
        "parent_session_id": _optional(
            "string", "its parent: a child session is hidden from lists"
        ),
        "created_at": _optional("string", "ISO-8601 (default now)"),
        "id": ID_FIELD,
    },
    summary="start a session; returns its id",
    authorize=starts_session,
)
def start_session(
    kb: KB,
    channel: Any = None,
    title: Any = None,
    project_id: Any = None,
    provider: Any = None,
    model: Any = None,
    system_prompt: Any = None,
    external_id: Any = None,
    parent_session_id: Any = None,
    created_at: Any = None,
    id: Any = None,
) -> str:
    session = rows.checked_session(
        "",
        {
            "channel": channel,
            "title": title,
            "project_id": project_id,
            "provider": provider,
            "model": model,
            "system_prompt": system_prompt,
            "created_at": created_at,
        },
    )
    external = checks.name("external_id", external_id)
    session["id"] = _given_id(id)

    owner = kb.principal

    def records(db: Any) -> str:
        _unused(db, "session", session["id"])
        parent_n = None
        if parent_session_id is not None:
            parent_n = _session(db, parent_session_id, "parent_session_id")[0]
        if external is not None and _imported(db, external, owner) is not None:
            refuse("external_id", f"a session of yours with external id {external!r} exists")
        return _writer(db).session(external, session, parent_n, owner)[1]

    return _write(kb, "start_session", records, {"channel": session["channel"]})


@operation(
    "sessions.set_title",
    fields={
        "session_id": _required("string", "the session"),
        "title": _required("string", "the new title"),
    },
    summary="retitle a session (its latest state)",
    authorize=writes_session,
)
def set_title(kb: KB, session_id: Any = None, title: Any = None) -> None:
    checks.name("session_id", session_id, required=True)
    new_title = checks.name("title", title, required=True)

    def records(db: Any) -> None:
        session_n = _session(db, session_id)[0]
        _set_title(db, session_n, rows.latest_state(db, session_n)[0], new_title)

    _write(kb, "set_title", records, {"session": session_id})


ATTACHMENT_SCHEMA = {
    "type": "object",
    "properties": {
        "filename": {"type": "string"},
        "media_type": {"type": "string"},
        "size_bytes": {"type": "integer", "minimum": 0},
        "sha256": {"type": "string"},
        "created_at": {"type": "string"},
    },
    "additionalProperties": False,
}


@operation(
    "sessions.start_turn",
    fields={
        "session_id": _required("string", "the session"),
        "user_request": _required("string", "what the user asked"),
        "created_at": _optional("string", "ISO-8601 (default now)"),
        "attachments": (("array", ATTACHMENT_SCHEMA), False, "attachment metadata (no bytes)"),
        "id": ID_FIELD,
    },
    summary="start a turn (attempt 0, running); returns its id",
    authorize=writes_session,
)
def start_turn(
    kb: KB,
    session_id: Any = None,
    user_request: Any = None,
    created_at: Any = None,
    attachments: Any = None,
    id: Any = None,
) -> str:
    checks.name("session_id", session_id, required=True)
    turn_id = _given_id(id)
    request = checks.text("user_request", user_request, required=True)
    created = checks.timestamp("created_at", created_at, default=checks.now())
    files = [
        rows.checked_attachment(f"attachments[{i}]", a, created)
        for i, a in enumerate(checks.listing("attachments", attachments))
    ]
    turn = {
        "id": turn_id,
        "user_request": request,
        "created_at": created,
        "attachments": files,
        "routing": [],
        "attempts": [
            {
                "status": "running",
                "outcome": None,
                "answer": None,
                "error": None,
                "duration_ms": None,
                "tokens": dict.fromkeys(checks.TOKEN_KINDS, 0),
                "cost_usd": None,
                "created_at": created,
                "finished_at": None,
                "iterations": [],
            }
        ],
    }

    def records(db: Any) -> str:
        _unused(db, "turn", turn_id)
        session_n = _session(db, session_id)[0]
        return _writer(db).append_turns(session_n, [turn])[0]

    return _write(kb, "start_turn", records, {"session": session_id})


ITERATION_ARGS = {
    "thinking": _optional("string", "the model's reasoning"),
    "prose": _optional("string", "the assistant's text"),
    "provider": _optional("string", "the provider selected"),
    "model": _optional("string", "the model selected"),
    "actual_provider": _optional("string", "the provider that answered"),
    "actual_model": _optional("string", "the model that answered"),
    "fallback": ("boolean", False, "the answer came from a fallback"),
    "tokens": TOKENS_FIELD,
    "cost_usd": ("any", False, "what the round trip cost"),
    "started_at": _optional("string", "ISO-8601"),
    "duration_ms": _optional("integer", "how long the round trip took"),
    "first_token_ms": _optional("integer", "time to the first token"),
}


@operation(
    "sessions.record_iteration",
    fields={
        "turn_id": _required("string", "the turn (its latest attempt must be running)"),
        **ITERATION_ARGS,
        "blocks": (("array", BLOCK_SCHEMA), False, "blocks executed in this iteration"),
        "id": ID_FIELD,
    },
    summary="record one model round trip of a running turn; returns its id",
    authorize=writes_turn,
)
def record_iteration(kb: KB, turn_id: Any = None, id: Any = None, **fields: Any) -> str:
    checks.known("", fields, rows.ITERATION_FIELDS)
    checks.name("turn_id", turn_id, required=True)
    it = {**rows.checked_iteration("", fields), "id": _given_id(id)}

    def records(db: Any) -> str:
        _unused(db, "iteration", it["id"])
        turn_n = _turn(db, turn_id)[0]
        attempt_n, _, _, _, iterations = _running_attempt(db, turn_id, turn_n)
        iteration_id = _writer(db).iteration(attempt_n, iterations + 1, it)
        tokens = it["tokens"]
        db.execute(
            "UPDATE attempt SET iteration_count = iteration_count + 1, "
            + ", ".join(f"{c} = {c} + ?" for c in schema.TOKEN_COLUMNS)
            + " WHERE n = ?",
            (*(tokens[k] for k in checks.TOKEN_KINDS), attempt_n),
        )
        if it["cost_usd"] is not None:
            db.execute(
                "UPDATE attempt SET cost_usd = coalesce(cost_usd, 0) + ? WHERE n = ?",
                (it["cost_usd"], attempt_n),
            )
        tools = "\n".join(filter(None, map(rows.tool_text, it["blocks"]))) or None
        _append_search(db, turn_n, it["prose"], it["thinking"], tools)
        return iteration_id

    return _write(kb, "record_iteration", records, {"turn": turn_id})


@operation(
    "sessions.record_block",
    fields={
        "iteration_id": _required("string", "the iteration (of a running attempt)"),
        "tool": _optional("string", "the tool called (none: executed code)"),
        "code": _optional("string", "the code or the tool input"),
        "result": _optional("string", "what it returned"),
        "stdout": _optional("string", "what it printed"),
        "error": _optional("string", "the error it raised"),
        "duration_ms": _optional("integer", "how long it ran"),
        "timeout": ("boolean", False, "it hit its time limit"),
        "id": ID_FIELD,
    },
    summary="record one executed block of an iteration; returns its id",
    authorize=writes_iteration,
)
def record_block(kb: KB, iteration_id: Any = None, id: Any = None, **fields: Any) -> str:
    checks.name("iteration_id", iteration_id, required=True)
    checks.known("", fields, rows.BLOCK_FIELDS)
    block = {**rows.checked_block("", fields), "id": _given_id(id)}

    def records(db: Any) -> str:
        _unused(db, "block", block["id"])
        row = db.execute(
            "SELECT i.n, a.turn_n, a.n FROM iteration i JOIN attempt a ON a.n = i.attempt_n "
            "WHERE i.id = ?",
            (iteration_id,),
        ).fetchone()
        if row is None:
            refuse("iteration_id", f"no iteration {iteration_id!r}")
        iteration_n, turn_n, attempt_n = row
        if _latest_attempt(db, turn_n)[0] != attempt_n:
            refuse("iteration_id", "the iteration belongs to an earlier attempt")
        position = db.execute(
            "SELECT coalesce(max(position), 0) + 1 FROM block WHERE iteration_n = ?",
            (iteration_n,),
        ).fetchone()[0]
        block_id = _writer(db).block(iteration_n, position, block)
        _append_search(db, turn_n, None, None, rows.tool_text(block))
        return block_id

    return _write(kb, "record_block", records, {"iteration": iteration_id})


@operation(
    "sessions.finish_turn",
    fields={
        "turn_id": _required("string", "the turn"),
        "status": _required("string", "done | error | interrupted"),
        "outcome": _required("string", "complete | cancelled | error"),
        "answer": _optional("string", "the final answer"),
        "error": _optional("string", "the error, when it failed"),
        "duration_ms": _optional("integer", "default: since the attempt started"),
        "tokens": _optional("object", "totals (default: the iterations' sum)"),
        "cost_usd": ("any", False, "total cost (default: the iterations' sum)"),
        "finished_at": _optional("string", "ISO-8601 (default now)"),
    },
    summary="close the running attempt of a turn",
    authorize=writes_turn,
)
def finish_turn(
    kb: KB,
    turn_id: Any = None,
    status: Any = None,
    outcome: Any = None,
    answer: Any = None,
    error: Any = None,
    duration_ms: Any = None,
    tokens: Any = None,
    cost_usd: Any = None,
    finished_at: Any = None,
) -> None:
    checks.name("turn_id", turn_id, required=True)
    status = checks.choice("status", status, FINISHED)
    outcome = checks.choice("outcome", outcome, checks.OUTCOMES)
    answer = checks.text("answer", answer)
    error = checks.text("error", error)
    duration = checks.count("duration_ms", duration_ms)
    totals = checks.tokens("tokens", tokens) if tokens is not None else None
    cost = checks.money("cost_usd", cost_usd)
    finished = checks.timestamp("finished_at", finished_at, default=checks.now())

    def records(db: Any) -> None:
        turn_n = _turn(db, turn_id)[0]
        attempt_n, _, _, started, _ = _running_attempt(db, turn_id, turn_n)
        elapsed = duration if duration is not None else checks.millis_between(started, finished)
        db.execute(
            "UPDATE attempt SET status = ?, outcome = ?, answer = ?, error = ?, "
            "duration_ms = ?, finished_at = ?, cost_usd = coalesce(?, cost_usd) WHERE n = ?",
            (status, outcome, answer, error, elapsed, finished, cost, attempt_n),
        )
        if totals is not None:
            db.execute(
                "UPDATE attempt SET "
                + ", ".join(f"{c} = ?" for c in schema.TOKEN_COLUMNS)
                + " WHERE n = ?",
                (*(totals[k] for k in checks.TOKEN_KINDS), attempt_n),
            )

    _write(kb, "finish_turn", records, {"turn": turn_id, "status": status})


@operation(
    "sessions.retry_turn",
    fields={
        "turn_id": _required("string", "a finished turn"),
        "created_at": _optional("string", "ISO-8601 (default now)"),
    },
    summary="open the next attempt of a finished turn; returns its number",
    authorize=writes_turn,
)
def retry_turn(kb: KB, turn_id: Any = None, created_at: Any = None) -> int:
    checks.name("turn_id", turn_id, required=True)
    created = checks.timestamp("created_at", created_at, default=checks.now())

    def records(db: Any) -> int:
        turn_n = _turn(db, turn_id)[0]
        latest = _latest_attempt(db, turn_n)
        if latest[2] == "running":
            refuse("turn_id", f"turn {turn_id!r} is still running: finish it before a retry")
        version = latest[1] + 1
        _writer(db).insert(
            "attempt",
            {"turn_n": turn_n, "version": version, "status": "running", "created_at": created},
        )
        return version

    return _write(kb, "retry_turn", records, {"turn": turn_id})


@operation(
    "sessions.fork_session",
    fields={
        "session_id": _required("string", "the session"),
        "position": _optional("integer", "keep the first N turns of the chain (default: all)"),
        "title": _optional("string", "the new state's title (default: the current one)"),
        "system_prompt": _optional("string", "default: the current one"),
        "provider": _optional("string", "default: the current one"),
        "model": _optional("string", "default: the current one"),
        "created_at": _optional("string", "ISO-8601 (default now)"),
    },
    summary="fork a new state of a session; returns its version",
    authorize=writes_session,
)
def fork_session(
    kb: KB,
    session_id: Any = None,
    position: Any = None,
    title: Any = None,
    system_prompt: Any = None,
    provider: Any = None,
    model: Any = None,
    created_at: Any = None,
) -> int:
    checks.name("session_id", session_id, required=True)
    keep = checks.count("position", position)
    given = {
        "title": checks.name("title", title),
        "system_prompt": checks.text("system_prompt", system_prompt),
        "provider": checks.name("provider", provider),
        "model": checks.name("model", model),
    }
    created = checks.timestamp("created_at", created_at, default=checks.now())

    def records(db: Any) -> int:
        session_n, _, turn_count, _, _ = _session(db, session_id)
        if keep is not None and keep > turn_count:
            refuse("position", f"the session has {turn_count} turns on its chain", turns=turn_count)
        at = turn_count if keep is None else keep
        state_n, version, *current = rows.latest_state(db, session_n)
        fields = {
            key: given[key] if given[key] is not None else old
            for key, old in zip(("title", "system_prompt", "provider", "model"), current)
        }
        new_state = _writer(db).state(session_n, version + 1, state_n, at, fields, created)
        _set_title(db, session_n, new_state, fields["title"])
        db.execute("UPDATE session SET turn_count = ? WHERE n = ?", (at, session_n))
        return version + 1

    return _write(kb, "fork_session", records, {"session": session_id})


@operation(
    "sessions.record_routing",
    fields={
        "session_id": _required("string", "the session"),
        "kind": _required("string", "fallback | retry | error"),
        "turn_id": _optional("string", "the turn it happened in"),
        "provider": _optional("string", "the provider routed away from"),
        "model": _optional("string", "the model routed away from"),
        "to_provider": _optional("string", "the provider routed to"),
        "to_model": _optional("string", "the model routed to"),
        "reason": _optional("string", "why (the provider's error)"),
        "created_at": _optional("string", "ISO-8601 (default now)"),
    },
    summary="record a provider fallback, retry or error",
    authorize=writes_session,
)
def record_routing(kb: KB, session_id: Any = None, turn_id: Any = None, **fields: Any) -> None:
    checks.name("session_id", session_id, required=True)
    checks.known("", fields, rows.ROUTING_FIELDS)
    event = rows.checked_routing("", fields, checks.now())

    def records(db: Any) -> None:
        session_n = _session(db, session_id)[0]
        turn_n = None
        if turn_id is not None:
            turn_n = _turn(db, turn_id)[0]
            if schema.session_of(turn_n) != session_n:
                refuse("turn_id", "the turn belongs to another session")
        _writer(db).routing(session_n, turn_n, event)

    _write(kb, "record_routing", records, {"session": session_id, "kind": event["kind"]})


@operation(
    "sessions.add_attachment",
    fields={
        "turn_id": _required("string", "the turn"),
        "filename": _optional("string", "the file's name"),
        "media_type": _optional("string", "its media type, e.g. image/png"),
        "size_bytes": _optional("integer", "its size"),
        "sha256": _optional("string", "its SHA-256, 64 lowercase hex digits"),
        "created_at": _optional("string", "ISO-8601 (default now)"),
    },
    summary="record an attachment's metadata (never its bytes); returns its id",
    authorize=writes_turn,
)
def add_attachment(kb: KB, turn_id: Any = None, **fields: Any) -> str:
    checks.name("turn_id", turn_id, required=True)
    checks.known("", fields, rows.ATTACHMENT_FIELDS)
    attachment = rows.checked_attachment("", fields, checks.now())

    def records(db: Any) -> str:
        return _writer(db).attachment(_turn(db, turn_id)[0], attachment)

    return _write(kb, "add_attachment", records, {"turn": turn_id})


# --- batches: many writes, one transaction ---------------------------------------------

BATCHED = (
    "start_session",
    "set_title",
    "start_turn",
    "record_iteration",
    "record_block",
    "finish_turn",
    "retry_turn",
    "fork_session",
    "record_routing",
    "add_attachment",
)
MAX_BATCH = 1000  # events in one batch
MAX_PART_TURNS = 1000  # turns in one import part
EVENT_SCHEMA = {
    "type": "object",
    "properties": {"verb": {"type": "string", "enum": list(BATCHED)}, "fields": {"type": "object"}},
    "required": ["verb"],
    "additionalProperties": False,
}


def _batch_size(events: Any) -> list[Any]:
    """A batch's events, counted before anything else is done with them (their checks,
    their authorization): one request never does more than MAX_BATCH events' work."""
    listed = checks.listing("events", events)
    if not listed:
        refuse("events", "is empty: a batch holds at least one event")
    if len(listed) > MAX_BATCH:
        refuse(
            "events",
            f"holds {len(listed):,} events, over the limit of {MAX_BATCH:,} a batch holds: "
            "send them in several batches (a SessionRecorder does)",
            limit=MAX_BATCH,
        )
    return listed


def _events(events: Any) -> list[tuple[str, dict[str, Any]]]:
    listed = _batch_size(events)
    out = []
    for number, event in enumerate(listed):
        given = checks.Given(f"events[{number}]", event, ("verb", "fields"))
        verb = given.choice("verb", BATCHED)
        fields = given.mapping("fields")
        checks.known(given.path("fields"), fields, OPERATIONS[f"sessions.{verb}"].fields)
        out.append((verb, fields))
    return out


def _in_event(number: int, verb: str, refusal: Refused) -> Refused:
    """A refusal of one event, naming the event: the batch wrote nothing."""
    return Refused(
        refusal.kind,
        f"event {number} ({verb}): {refusal.message}; nothing of the batch was written",
        {**refusal.data, "event": number},
    )


def writes_batch(kb: KB, caller: Caller, fields: dict[str, Any]) -> None:
    """Each event as its own operation would be authorized (an event that names rows an
    earlier event of the batch makes passes here, and is checked as it is written)."""
    may_record(kb, caller, fields)
    events = _batch_size(fields.get("events"))
    for number, event in enumerate(events):
        if not isinstance(event, dict) or event.get("verb") not in BATCHED:
            continue  # refused by the operation, by name
        given = event.get("fields") if isinstance(event.get("fields"), dict) else {}
        try:
            _AUTHORIZE[event["verb"]](kb, caller, given)
        except Refused as refusal:
            raise _in_event(number, event["verb"], refusal) from None


@operation(
    "sessions.record_batch",
    fields={
        "events": (
            ("array", EVENT_SCHEMA),
            True,
            "writes in order, each {verb, fields} as its own operation takes them",
        ),
    },
    summary="many session writes in one transaction, all or nothing; returns their results",
    authorize=writes_batch,
)
def record_batch(kb: KB, events: Any = None) -> list[Any]:
    """Run each event as its operation (`verb`) would, in ONE transaction: every event is
    written or none is, and a refusal names the event (`data.event`). Events may name the
    rows earlier events make (ids chosen by the caller: the `id` fields)."""
    batch = _events(events)
    schema.ready(kb)

    def records(db: Any) -> list[Any]:
        writing = _Batch(db)
        token = _BATCH.set(writing)
        try:
            results = []
            for number, (verb, fields) in enumerate(batch):
                try:
                    results.append(_RUN[verb](kb, **fields))
                except Refused as refusal:
                    raise _in_event(number, verb, refusal) from None
        finally:
            _BATCH.reset(token)
        writing.finish()
        return results

    result, _ = kb.transact(
        "sessions.record_batch", lambda db, handles: records(db), summary={"events": len(batch)}
    )
    return result


@operation(
    "sessions.import_part",
    fields={
        "external_id": _required("string", "the source's session id (the idempotency key)"),
        "part": _required("integer", "0 for the first part, then 1, 2, …"),
        "session": _optional(
            "object",
            "part 0: the session's fields and fingerprint; `parent_external_id` makes it a "
            "child of that imported session, `forks` declares kept branches (their fork "
            "positions: states 0, 1, … before the live one)",
        ),
        "turns": (("array", {"type": "object"}), False, "whole turns, in order"),
        "done": ("boolean", False, "the last part: the session is complete"),
    },
    summary="import a session in parts: {session_id, status, parent_session_id}",
    authorize=may_record,
)
def import_part(
    kb: KB,
    external_id: Any = None,
    part: Any = None,
    session: Any = None,
    turns: Any = None,
    done: Any = None,
) -> dict[str, Any]:
    """Part 0 creates the session, or finds it: `unchanged` (same fingerprint, complete:
    nothing is written and the importer stops) or `replaced` (its contents are dropped
    and written again, keeping its id). Later parts append turns; `done` marks it complete."""
    external = checks.name("external_id", external_id, required=True)
    number = checks.count("part", part)
    if number is None:
        refuse("part", "is required")
    fields = rows.checked_session("session", session) if number == 0 else None
    if number > 0 and session is not None:
        refuse("session", "is given with part 0 only")
    created = fields["created_at"] if fields else checks.now()
    _part_size(turns)
    checked = [
        rows.checked_turn(f"turns[{i}]", turn, created)
        for i, turn in enumerate(checks.listing("turns", turns))
    ]
    finished = checks.flag("done", done)
    schema.ready(kb)
    owner = kb.principal  # an import finds only its importer's sessions (module docstring)
    if number == 0 and fields["fingerprint"] is not None:
        found = kb.read_records(
            lambda db: (_imported(db, external, owner), _parent(db, fields, owner))
        )
        if (
            found[0]
            and found[0][2].get("complete")
            and found[0][2].get("fingerprint") == fields["fingerprint"]
            and found[0][3] == (found[1] and found[1][0])  # a child whose parent came: attach
        ):
            parent = found[1] and found[1][1]
            return {"session_id": found[0][1], "status": "unchanged", "parent_session_id": parent}

    def records(db: Any) -> dict[str, Any]:
        writer = rows.RowWriter(db)
        found = _imported(db, external, owner)
        parent = None
        if number == 0:
            parent = _parent(db, fields, owner)
            parent_n = parent and parent[0]
            fields["meta"] = {
                **fields["meta"],
                "fingerprint": fields["fingerprint"],
                "complete": finished,
            }
            if fields["parent_external_id"] is not None:
                fields["meta"]["parent_external_id"] = fields["parent_external_id"]
            if found is None:
                session_n, session_id, _ = writer.session(external, fields, parent_n, owner=owner)
                status = "new"
            else:
                session_n, session_id, meta, _ = found
                _replace(writer, session_n, fields, parent_n, meta.get(rows.STORED_MS))
                status = "replaced"
        else:
            if found is None:
                refuse("external_id", f"no session imported as {external!r} (send part 0 first)")
            session_n, session_id, meta, _ = found
            if meta.get("complete"):
                refuse("part", "the import of this session is already complete")
            status = "appended"
            if finished:
                db.execute(
                    "UPDATE session SET meta = ? WHERE n = ?",
                    (json.dumps({**meta, "complete": True}, ensure_ascii=False), session_n),
                )
        writer.append_turns(session_n, checked)
        return {
            "session_id": session_id,
            "status": status,
            "parent_session_id": parent and parent[1],
        }

    return _write(
        kb, "import_part", records, {"external_id": external, "part": number, "turns": len(checked)}
    )


def _part_size(turns: Any) -> None:
    """An import part holds at most MAX_PART_TURNS turns, counted before one is checked
    (`import_session` sends 200 a part)."""
    count = len(turns) if isinstance(turns, (list, tuple)) else 0
    if count > MAX_PART_TURNS:
        refuse(
            "turns",
            f"holds {count:,} turns, over the limit of {MAX_PART_TURNS:,} an import part "
            "holds: send them in several parts (SessionStore.import_session does)",
            limit=MAX_PART_TURNS,
        )


def _imported(
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


def _parent(db: Any, fields: dict[str, Any], owner: str | None) -> tuple[int, str] | None:
    """(n, id) of the session an imported child belongs to (`parent_external_id`), when its
    importer imported that session; until it does, the child is a session of its own (a
    later import of the child, once the parent is in, attaches it). Another principal's
    import of that id is never the parent: nobody attaches a session under another's."""
    if fields["parent_external_id"] is None:
        return None
    found = _imported(db, fields["parent_external_id"], owner)
    return (found[0], found[1]) if found else None


def _replace(
    writer: rows.RowWriter,
    session_n: int,
    fields: dict[str, Any],
    parent_n: int | None,
    stored_ms: Any,
) -> None:
    """Drop an imported session's contents and take the new fields, keeping its id (and
    when it was first stored)."""
    writer.delete_contents(session_n)
    title = fields["title"]
    writer.db.execute(
        "UPDATE session SET channel = ?, title = ?, title_fold = ?, project_id = ?, provider = ?, "
        "model = ?, created_at = ?, modified_at = ?, turn_count = 0, turn_seq = 0, meta = ?, "
        "parent_session_n = ? WHERE n = ?",
        (
            fields["channel"],
            title,
            title.casefold() if title else None,
            fields["project_id"],
            fields["provider"],
            fields["model"],
            fields["created_at"],
            fields["created_at"],
            json.dumps(rows.stamped(fields["meta"], stored_ms), ensure_ascii=False),
            parent_n,
            session_n,
        ),
    )
    writer.states(session_n, fields, fields["forks"])


_RUN: dict[str, Callable[..., Any]] = {
    "start_session": start_session,
    "set_title": set_title,
    "start_turn": start_turn,
    "record_iteration": record_iteration,
    "record_block": record_block,
    "finish_turn": finish_turn,
    "retry_turn": retry_turn,
    "fork_session": fork_session,
    "record_routing": record_routing,
    "add_attachment": add_attachment,
}
_AUTHORIZE = {
    "start_session": starts_session,
    "set_title": writes_session,
    "start_turn": writes_session,
    "record_iteration": writes_turn,
    "record_block": writes_iteration,
    "finish_turn": writes_turn,
    "retry_turn": writes_turn,
    "fork_session": writes_session,
    "record_routing": writes_session,
    "add_attachment": writes_turn,
}  # each batched verb's `authorize`


# --- the client -------------------------------------------------------------------------


class SessionStore:
    """The session writer over a `KB`, a `Client`, or a path (opened, and closed by
    `close()`). Every method is one durable write; bad input raises `Refused`
    (`bad-session`) and changes nothing."""

    def __init__(self, source: Any) -> None:
        self._owned = None
        if isinstance(source, (str, os.PathLike)):
            source = self._owned = open_kb(source)
        self.source = source
        self._call = invoker(source)
        if isinstance(source, KB):
            schema.ready(source)

    def close(self) -> None:
        """Close the store this object opened from a path (a given KB or Client stays open)."""
        if self._owned is not None:
            self._owned.close()
            self._owned = None

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def call(self, verb: str, /, **fields: Any) -> Any:
        """Run the operation `sessions.<verb>` (directly, or on the daemon)."""
        return self._call(f"sessions.{verb}", **fields)

    def recorder(self, **options: Any) -> Any:
        """A `SessionRecorder` on this store: the same writes, buffered and sent in batches
        (one transaction each); durable after its `flush()` (recording.py)."""
        from koinii.sessions.recording import SessionRecorder

        return SessionRecorder(self, **options)

    def record_batch(self, events: list[dict[str, Any]]) -> list[Any]:
        """Many writes, `[{verb, fields}, …]`, in one transaction: all or none."""
        return self.call("record_batch", events=events)

    def start_session(
        self,
        *,
        channel: str = "cli",
        title: str | None = None,
        project_id: str | None = None,
        provider: str | None = None,
        model: str | None = None,
        system_prompt: str | None = None,
        external_id: str | None = None,
        parent_session_id: str | None = None,
        created_at: str | None = None,
    ) -> str:
        return self.call(
            "start_session",
            channel=channel,
            title=title,
            project_id=project_id,
            provider=provider,
            model=model,
            system_prompt=system_prompt,
            external_id=external_id,
            parent_session_id=parent_session_id,
            created_at=created_at,
        )

    def set_title(self, session_id: str, title: str) -> None:
        self.call("set_title", session_id=session_id, title=title)

    def start_turn(
        self,
        session_id: str,
        user_request: str,
        *,
        created_at: str | None = None,
        attachments: list[dict[str, Any]] | None = None,
    ) -> str:
        return self.call(
            "start_turn",
            session_id=session_id,
            user_request=user_request,
            created_at=created_at,
            attachments=attachments,
        )

    def record_iteration(
        self,
        turn_id: str,
        *,
        thinking: str | None = None,
        prose: str | None = None,
        provider: str | None = None,
        model: str | None = None,
        actual_provider: str | None = None,
        actual_model: str | None = None,
        fallback: bool = False,
        tokens: dict[str, int] | None = None,
        cost_usd: float | None = None,
        started_at: str | None = None,
        duration_ms: int | None = None,
        first_token_ms: int | None = None,
        blocks: list[dict[str, Any]] | None = None,
    ) -> str:
        return self.call(
            "record_iteration",
            turn_id=turn_id,
            thinking=thinking,
            prose=prose,
            provider=provider,
            model=model,
            actual_provider=actual_provider,
            actual_model=actual_model,
            fallback=fallback,
            tokens=tokens,
            cost_usd=cost_usd,
            started_at=started_at,
            duration_ms=duration_ms,
            first_token_ms=first_token_ms,
            blocks=blocks,
        )

    def record_block(
        self,
        iteration_id: str,
        *,
        tool: str | None = None,
        code: str | None = None,
        result: str | None = None,
        stdout: str | None = None,
        error: str | None = None,
        duration_ms: int | None = None,
        timeout: bool = False,
    ) -> str:
        return self.call(
            "record_block",
            iteration_id=iteration_id,
            tool=tool,
            code=code,
            result=result,
            stdout=stdout,
            error=error,
            duration_ms=duration_ms,
            timeout=timeout,
        )

    def finish_turn(
        self,
        turn_id: str,
        status: str,
        outcome: str,
        answer: str | None = None,
        error: str | None = None,
        *,
        duration_ms: int | None = None,
        tokens: dict[str, int] | None = None,
        cost_usd: float | None = None,
        finished_at: str | None = None,
    ) -> None:
        self.call(
            "finish_turn",
            turn_id=turn_id,
            status=status,
            outcome=outcome,
            answer=answer,
            error=error,
            duration_ms=duration_ms,
            tokens=tokens,
            cost_usd=cost_usd,
            finished_at=finished_at,
        )

    def retry_turn(self, turn_id: str, *, created_at: str | None = None) -> int:
        return self.call("retry_turn", turn_id=turn_id, created_at=created_at)

    def fork_session(
        self,
        session_id: str,
        *,
        position: int | None = None,
        title: str | None = None,
        system_prompt: str | None = None,
        provider: str | None = None,
        model: str | None = None,
        created_at: str | None = None,
    ) -> int:
        return self.call(
            "fork_session",
            session_id=session_id,
            position=position,
            title=title,
            system_prompt=system_prompt,
            provider=provider,
            model=model,
            created_at=created_at,
        )

    def record_routing(
        self,
        session_id: str,
        kind: str,
        *,
        turn_id: str | None = None,
        provider: str | None = None,
        model: str | None = None,
        to_provider: str | None = None,
        to_model: str | None = None,
        reason: str | None = None,
        created_at: str | None = None,
    ) -> None:
        self.call(
            "record_routing",
            session_id=session_id,
            kind=kind,
            turn_id=turn_id,
            provider=provider,
            model=model,
            to_provider=to_provider,
            to_model=to_model,
            reason=reason,
            created_at=created_at,
        )

    def add_attachment(
        self,
        turn_id: str,
        *,
        filename: str | None = None,
        media_type: str | None = None,
        size_bytes: int | None = None,
        sha256: str | None = None,
        created_at: str | None = None,
    ) -> str:
        return self.call(
            "add_attachment",
            turn_id=turn_id,
            filename=filename,
            media_type=media_type,
            size_bytes=size_bytes,
            sha256=sha256,
            created_at=created_at,
        )

    def import_session(
        self,
        external_id: str,
        session: dict[str, Any],
        turns: Iterable[dict[str, Any]],
        *,
        part_turns: int = 200,
        part_bytes: int = 4 * 1024 * 1024,
    ) -> dict[str, Any]:
        """Import one whole session, streaming `turns` in parts.

        Idempotent by `external_id`: with the same `session["fingerprint"]` as a complete
        earlier import, nothing is written (`status: unchanged`) and `turns` is not read;
        a different fingerprint replaces the earlier contents under the same id. A part
        holds at most `part_turns` turns and, over the wire, about `part_bytes` of JSON
        (the daemon's body limit is 16 MiB). Returns `{session_id, status, turns}`.
        """
        measure = not isinstance(self.source, KB)
        parts = _parts(iter(turns), part_turns, part_bytes if measure else None)
        batch = next(parts, [])
        more = next(parts, None)
        first = self.call(
            "import_part",
            external_id=external_id,
            part=0,
            session=session,
            turns=batch,
            done=more is None,
        )
        if first["status"] == "unchanged":
            return {**first, "turns": None}
        total, number = len(batch), 1
        while more is not None:
            batch, more = more, next(parts, None)
            self.call(
                "import_part", external_id=external_id, part=number, turns=batch, done=more is None
            )
            total += len(batch)
            number += 1
        return {**first, "turns": total}


def _parts(stream: Iterator[Any], most: int, bytes_: int | None) -> Iterator[list[Any]]:
    """Consecutive lists of at most `most` items (and about `bytes_` of JSON, if given)."""
    batch: list[Any] = []
    size = 0
    for item in stream:
        batch.append(item)
        if bytes_ is not None:
            size += len(json.dumps(item, ensure_ascii=False))
        if len(batch) >= most or (bytes_ is not None and size >= bytes_):
            yield batch
            batch, size = [], 0
    if batch:
        yield batch
