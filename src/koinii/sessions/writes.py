"""The session writes: start, record and finish, each one operation (`sessions.<verb>`).

Each is declared by its signature (shape.py): its parameters are the operation's fields,
so the daemon's route, the field checks, a batch's events and `SessionStore`'s method all
take the same names in the same order. One call is one `kb.transact` (writing.py): its
rows and its change-log entry commit together or not at all, and every check runs before
the first row is written, so a refused write (kind `bad-session`, naming the field)
leaves the store exactly as it was. Who may write which session is access.py's.

The lifecycle the writer enforces: a turn starts with attempt 0 `running`; iterations
and blocks are recorded into the turn's latest attempt while it runs; `finish_turn`
closes it; `retry_turn` opens the next attempt of a finished turn; `fork_session` makes a
new state whose chain keeps the first `position` turns of the current one.
"""

from __future__ import annotations

from typing import Annotated, Any

from koinii.kb import KB
from koinii.sessions import checks, rows, schema
from koinii.sessions.access import starts_session, writes_iteration, writes_session, writes_turn
from koinii.sessions.checks import refuse
from koinii.sessions.shape import Json, arguments, session_operation
from koinii.sessions.writing import (
    add_search_text,
    given_id,
    imported,
    latest_attempt,
    retitle,
    row_writer,
    running_attempt,
    session_row,
    turn_row,
    unused_id,
    write,
)

FINISHED = ("done", "error", "interrupted")
NOW = "ISO-8601 (default now)"

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

# Fields several writes take.
Id = Annotated[str | None, "its id, chosen by the caller: a lowercase UUID (default: made)"]
CreatedAt = Annotated[str | None, NOW]
Tokens = dict[str, int]
Cost = Annotated[float | None, Json("any"), "what the round trip cost"]


@session_operation("start_session", "start a session; returns its id", authorize=starts_session)
def start_session(
    kb: KB,
    *,
    channel: Annotated[str, "tui, cli, api, mcp, … (default cli)"] = "cli",
    title: Annotated[str | None, "the session's title"] = None,
    project_id: Annotated[str | None, "the project (e.g. a working directory)"] = None,
    provider: Annotated[str | None, "the model provider"] = None,
    model: Annotated[str | None, "the model"] = None,
    system_prompt: Annotated[str | None, "the system prompt of state 0"] = None,
    external_id: Annotated[str | None, "the id of the session in another system (unique)"] = None,
    parent_session_id: Annotated[
        str | None, "its parent: a child session is hidden from lists"
    ] = None,
    created_at: CreatedAt = None,
    id: Id = None,
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
    session["id"] = given_id(id)

    owner = kb.principal

    def records(db: Any) -> str:
        unused_id(db, "session", session["id"])
        parent_n = None
        if parent_session_id is not None:
            parent_n = session_row(db, parent_session_id, "parent_session_id")[0]
        if external is not None and imported(db, external, owner) is not None:
            refuse("external_id", f"a session of yours with external id {external!r} exists")
        return row_writer(db).session(external, session, parent_n, owner)[1]

    return write(kb, "start_session", records, {"channel": session["channel"]})


@session_operation("set_title", "retitle a session (its latest state)", authorize=writes_session)
def set_title(
    kb: KB,
    session_id: Annotated[str, "the session"],
    title: Annotated[str, "the new title"],
) -> None:
    checks.name("session_id", session_id, required=True)
    new_title = checks.name("title", title, required=True)

    def records(db: Any) -> None:
        session_n = session_row(db, session_id)[0]
        retitle(db, session_n, rows.latest_state(db, session_n)[0], new_title)

    write(kb, "set_title", records, {"session": session_id})


@session_operation(
    "start_turn",
    "start a turn (attempt 0, running); returns its id",
    authorize=writes_session,
)
def start_turn(
    kb: KB,
    session_id: Annotated[str, "the session"],
    user_request: Annotated[str, "what the user asked"],
    *,
    created_at: CreatedAt = None,
    attachments: Annotated[
        list[dict[str, Any]] | None,
        Json(("array", ATTACHMENT_SCHEMA)),
        "attachment metadata (no bytes)",
    ] = None,
    id: Id = None,
) -> str:
    checks.name("session_id", session_id, required=True)
    turn_id = given_id(id)
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
        unused_id(db, "turn", turn_id)
        session_n = session_row(db, session_id)[0]
        return row_writer(db).append_turns(session_n, [turn])[0]

    return write(kb, "start_turn", records, {"session": session_id})


@session_operation(
    "record_iteration",
    "record one model round trip of a running turn; returns its id",
    authorize=writes_turn,
)
def record_iteration(
    kb: KB,
    turn_id: Annotated[str, "the turn (its latest attempt must be running)"],
    *,
    thinking: Annotated[str | None, "the model's reasoning"] = None,
    prose: Annotated[str | None, "the assistant's text"] = None,
    provider: Annotated[str | None, "the provider selected"] = None,
    model: Annotated[str | None, "the model selected"] = None,
    actual_provider: Annotated[str | None, "the provider that answered"] = None,
    actual_model: Annotated[str | None, "the model that answered"] = None,
    fallback: Annotated[bool, "the answer came from a fallback"] = False,
    tokens: Annotated[Tokens | None, "{input, cached, cache_created, output, reasoning}"] = None,
    cost_usd: Cost = None,
    started_at: Annotated[str | None, "ISO-8601"] = None,
    duration_ms: Annotated[int | None, "how long the round trip took"] = None,
    first_token_ms: Annotated[int | None, "time to the first token"] = None,
    blocks: Annotated[
        list[dict[str, Any]] | None,
        Json(("array", BLOCK_SCHEMA)),
        "blocks executed in this iteration",
    ] = None,
    id: Id = None,
) -> str:
    checks.name("turn_id", turn_id, required=True)
    given = arguments(locals(), rows.ITERATION_FIELDS)
    it = {**rows.checked_iteration("", given), "id": given_id(id)}

    def records(db: Any) -> str:
        unused_id(db, "iteration", it["id"])
        turn_n = turn_row(db, turn_id)[0]
        attempt_n, _, _, _, iterations = running_attempt(db, turn_id, turn_n)
        iteration_id = row_writer(db).iteration(attempt_n, iterations + 1, it)
        spent = it["tokens"]
        db.execute(
            "UPDATE attempt SET iteration_count = iteration_count + 1, "
            + ", ".join(f"{c} = {c} + ?" for c in schema.TOKEN_COLUMNS)
            + " WHERE n = ?",
            (*(spent[k] for k in checks.TOKEN_KINDS), attempt_n),
        )
        if it["cost_usd"] is not None:
            db.execute(
                "UPDATE attempt SET cost_usd = coalesce(cost_usd, 0) + ? WHERE n = ?",
                (it["cost_usd"], attempt_n),
            )
        tools = "\n".join(filter(None, map(rows.tool_text, it["blocks"]))) or None
        add_search_text(db, turn_n, it["prose"], it["thinking"], tools)
        return iteration_id

    return write(kb, "record_iteration", records, {"turn": turn_id})


@session_operation(
    "record_block",
    "record one executed block of an iteration; returns its id",
    authorize=writes_iteration,
)
def record_block(
    kb: KB,
    iteration_id: Annotated[str, "the iteration (of a running attempt)"],
    *,
    tool: Annotated[str | None, "the tool called (none: executed code)"] = None,
    code: Annotated[str | None, "the code or the tool input"] = None,
    result: Annotated[str | None, "what it returned"] = None,
    stdout: Annotated[str | None, "what it printed"] = None,
    error: Annotated[str | None, "the error it raised"] = None,
    duration_ms: Annotated[int | None, "how long it ran"] = None,
    timeout: Annotated[bool, "it hit its time limit"] = False,
    id: Id = None,
) -> str:
    checks.name("iteration_id", iteration_id, required=True)
    given = arguments(locals(), rows.BLOCK_FIELDS)
    block = {**rows.checked_block("", given), "id": given_id(id)}

    def records(db: Any) -> str:
        unused_id(db, "block", block["id"])
        row = db.execute(
            "SELECT i.n, a.turn_n, a.n FROM iteration i JOIN attempt a ON a.n = i.attempt_n "
            "WHERE i.id = ?",
            (iteration_id,),
        ).fetchone()
        if row is None:
            refuse("iteration_id", f"no iteration {iteration_id!r}")
        iteration_n, turn_n, attempt_n = row
        if latest_attempt(db, turn_n)[0] != attempt_n:
            refuse("iteration_id", "the iteration belongs to an earlier attempt")
        position = db.execute(
            "SELECT coalesce(max(position), 0) + 1 FROM block WHERE iteration_n = ?",
            (iteration_n,),
        ).fetchone()[0]
        block_id = row_writer(db).block(iteration_n, position, block)
        add_search_text(db, turn_n, None, None, rows.tool_text(block))
        return block_id

    return write(kb, "record_block", records, {"iteration": iteration_id})


@session_operation("finish_turn", "close the running attempt of a turn", authorize=writes_turn)
def finish_turn(
    kb: KB,
    turn_id: Annotated[str, "the turn"],
    status: Annotated[str, "done | error | interrupted"],
    outcome: Annotated[str, "complete | cancelled | error"],
    answer: Annotated[str | None, "the final answer"] = None,
    error: Annotated[str | None, "the error, when it failed"] = None,
    *,
    duration_ms: Annotated[int | None, "default: since the attempt started"] = None,
    tokens: Annotated[Tokens | None, "totals (default: the iterations' sum)"] = None,
    cost_usd: Annotated[
        float | None, Json("any"), "total cost (default: the iterations' sum)"
    ] = None,
    finished_at: CreatedAt = None,
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
        turn_n = turn_row(db, turn_id)[0]
        attempt_n, _, _, started, _ = running_attempt(db, turn_id, turn_n)
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

    write(kb, "finish_turn", records, {"turn": turn_id, "status": status})


@session_operation(
    "retry_turn",
    "open the next attempt of a finished turn; returns its number",
    authorize=writes_turn,
)
def retry_turn(
    kb: KB, turn_id: Annotated[str, "a finished turn"], *, created_at: CreatedAt = None
) -> int:
    checks.name("turn_id", turn_id, required=True)
    created = checks.timestamp("created_at", created_at, default=checks.now())

    def records(db: Any) -> int:
        turn_n = turn_row(db, turn_id)[0]
        latest = latest_attempt(db, turn_n)
        if latest[2] == "running":
            refuse("turn_id", f"turn {turn_id!r} is still running: finish it before a retry")
        version = latest[1] + 1
        row_writer(db).insert(
            "attempt",
            {"turn_n": turn_n, "version": version, "status": "running", "created_at": created},
        )
        return version

    return write(kb, "retry_turn", records, {"turn": turn_id})


@session_operation(
    "fork_session", "fork a new state of a session; returns its version", authorize=writes_session
)
def fork_session(
    kb: KB,
    session_id: Annotated[str, "the session"],
    *,
    position: Annotated[int | None, "keep the first N turns of the chain (default: all)"] = None,
    title: Annotated[str | None, "the new state's title (default: the current one)"] = None,
    system_prompt: Annotated[str | None, "default: the current one"] = None,
    provider: Annotated[str | None, "default: the current one"] = None,
    model: Annotated[str | None, "default: the current one"] = None,
    created_at: CreatedAt = None,
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
        session_n, _, turn_count, _, _ = session_row(db, session_id)
        if keep is not None and keep > turn_count:
            refuse("position", f"the session has {turn_count} turns on its chain", turns=turn_count)
        at = turn_count if keep is None else keep
        state_n, version, *current = rows.latest_state(db, session_n)
        fields = {
            key: given[key] if given[key] is not None else old
            for key, old in zip(("title", "system_prompt", "provider", "model"), current)
        }
        new_state = row_writer(db).state(session_n, version + 1, state_n, at, fields, created)
        retitle(db, session_n, new_state, fields["title"])
        db.execute("UPDATE session SET turn_count = ? WHERE n = ?", (at, session_n))
        return version + 1

    return write(kb, "fork_session", records, {"session": session_id})


@session_operation(
    "record_routing", "record a provider fallback, retry or error", authorize=writes_session
)
def record_routing(
    kb: KB,
    session_id: Annotated[str, "the session"],
    kind: Annotated[str, "fallback | retry | error"],
    *,
    turn_id: Annotated[str | None, "the turn it happened in"] = None,
    provider: Annotated[str | None, "the provider routed away from"] = None,
    model: Annotated[str | None, "the model routed away from"] = None,
    to_provider: Annotated[str | None, "the provider routed to"] = None,
    to_model: Annotated[str | None, "the model routed to"] = None,
    reason: Annotated[str | None, "why (the provider's error)"] = None,
    created_at: CreatedAt = None,
) -> None:
    checks.name("session_id", session_id, required=True)
    given = arguments(locals(), rows.ROUTING_FIELDS)
    event = rows.checked_routing("", given, checks.now())

    def records(db: Any) -> None:
        session_n = session_row(db, session_id)[0]
        turn_n = None
        if turn_id is not None:
            turn_n = turn_row(db, turn_id)[0]
            if schema.session_of(turn_n) != session_n:
                refuse("turn_id", "the turn belongs to another session")
        row_writer(db).routing(session_n, turn_n, event)

    write(kb, "record_routing", records, {"session": session_id, "kind": event["kind"]})


@session_operation(
    "add_attachment",
    "record an attachment's metadata (never its bytes); returns its id",
    authorize=writes_turn,
)
def add_attachment(
    kb: KB,
    turn_id: Annotated[str, "the turn"],
    *,
    filename: Annotated[str | None, "the file's name"] = None,
    media_type: Annotated[str | None, "its media type, e.g. image/png"] = None,
    size_bytes: Annotated[int | None, "its size"] = None,
    sha256: Annotated[str | None, "its SHA-256, 64 lowercase hex digits"] = None,
    created_at: CreatedAt = None,
) -> str:
    checks.name("turn_id", turn_id, required=True)
    given = arguments(locals(), rows.ATTACHMENT_FIELDS)
    attachment = rows.checked_attachment("", given, checks.now())

    def records(db: Any) -> str:
        return row_writer(db).attachment(turn_row(db, turn_id)[0], attachment)

    return write(kb, "add_attachment", records, {"turn": turn_id})
