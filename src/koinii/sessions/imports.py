"""Importing a whole session, in parts: `sessions.import_part`, and the client's loop.

An import is keyed by its importer and the source's id (`external_id`): the session an
import finds, replaces or attaches to as parent (`parent_external_id`) is always one its
importer imported, so another principal that imports the same source id first makes a
session of its own and changes nothing of this one's. Part 0 carries the session's
fields and a fingerprint of its source: the same fingerprint as a complete earlier
import writes nothing (`unchanged`), another replaces the contents under the same id.
Later parts append turns; `done` marks the import complete. A part holds at most
MAX_PART_TURNS turns, counted before one is checked.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Annotated, Any

from koinii.kb import KB
from koinii.sessions import checks, rows, schema
from koinii.sessions.access import may_record
from koinii.sessions.checks import refuse
from koinii.sessions.shape import session_operation
from koinii.sessions.writing import imported, write

MAX_PART_TURNS = 1000  # turns in one import part


@session_operation(
    "import_part",
    "import a session in parts: {session_id, status, parent_session_id}",
    authorize=may_record,
)
def import_part(
    kb: KB,
    external_id: Annotated[str, "the source's session id (the idempotency key)"],
    part: Annotated[int, "0 for the first part, then 1, 2, …"],
    session: Annotated[
        dict[str, Any] | None,
        "part 0: the session's fields and fingerprint; `parent_external_id` makes it a "
        "child of that imported session, `forks` declares kept branches (their fork "
        "positions: states 0, 1, … before the live one)",
    ] = None,
    turns: Annotated[list[dict[str, Any]] | None, "whole turns, in order"] = None,
    done: Annotated[bool, "the last part: the session is complete"] = False,
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
            lambda db: (imported(db, external, owner), _parent(db, fields, owner))
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
        found = imported(db, external, owner)
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

    return write(
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


def _parent(db: Any, fields: dict[str, Any], owner: str | None) -> tuple[int, str] | None:
    """(n, id) of the session an imported child belongs to (`parent_external_id`), when its
    importer imported that session; until it does, the child is a session of its own (a
    later import of the child, once the parent is in, attaches it). Another principal's
    import of that id is never the parent: nobody attaches a session under another's."""
    if fields["parent_external_id"] is None:
        return None
    found = imported(db, fields["parent_external_id"], owner)
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


def send_import(
    call: Callable[..., Any],
    external_id: str,
    session: dict[str, Any],
    turns: Iterable[dict[str, Any]],
    part_turns: int,
    part_bytes: int | None,
) -> dict[str, Any]:
    """Import one whole session through `call` (`SessionStore.call`), streaming `turns`
    in parts of at most `part_turns` turns and about `part_bytes` of JSON (None: no
    limit); `SessionStore.import_session` says what it returns."""
    parts = _parts(iter(turns), part_turns, part_bytes)
    batch = next(parts, [])
    more = next(parts, None)
    first = call(
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
        call("import_part", external_id=external_id, part=number, turns=batch, done=more is None)
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
