"""Many session writes in one transaction: `sessions.record_batch` (a recorder's batches).

A batch is a list of events `{verb, fields}`, each one of the writes in writes.py, taken
with the fields its operation takes and authorized as its operation would be. They run
in ONE transaction (writing.BATCH): every event is written or none is, and a refusal
names the event (`data.event`). Events may name the rows earlier events make (ids chosen
by the caller: the `id` fields). One request never does more than MAX_BATCH events'
work: the events are counted before anything else is done with them.
"""

from __future__ import annotations

from typing import Annotated, Any

from koinii.errors import Refused
from koinii.kb import KB
from koinii.operations import REGISTRY as OPERATIONS
from koinii.operations import Caller
from koinii.sessions import checks, schema, writes
from koinii.sessions.access import may_record
from koinii.sessions.checks import refuse
from koinii.sessions.shape import Json, session_operation
from koinii.sessions.writing import BATCH, Batch

# the writes an event may be: every operation writes.py declares, in its order
BATCHED = tuple(
    name.removeprefix("sessions.")
    for name, op in OPERATIONS.items()
    if op.run.__module__ == writes.__name__
)
MAX_BATCH = 1000  # events in one batch
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
        authorize = OPERATIONS[f"sessions.{event['verb']}"].authorize
        try:
            if authorize is not None:
                authorize(kb, caller, given)
        except Refused as refusal:
            raise _in_event(number, event["verb"], refusal) from None


@session_operation(
    "record_batch",
    "many session writes in one transaction, all or nothing; returns their results",
    authorize=writes_batch,
)
def record_batch(
    kb: KB,
    events: Annotated[
        list[dict[str, Any]],
        Json(("array", EVENT_SCHEMA)),
        "writes in order, each {verb, fields} as its own operation takes them",
    ],
) -> list[Any]:
    """Many writes, `[{verb, fields}, …]`, in one transaction: all or none."""
    batch = _events(events)
    schema.ready(kb)

    def records(db: Any) -> list[Any]:
        writing = Batch(db)
        token = BATCH.set(writing)
        try:
            results = []
            for number, (verb, fields) in enumerate(batch):
                try:
                    results.append(OPERATIONS[f"sessions.{verb}"].run(kb, **fields))
                except Refused as refusal:
                    raise _in_event(number, verb, refusal) from None
        finally:
            BATCH.reset(token)
        writing.finish()
        return results

    result, _ = kb.transact(
        "sessions.record_batch", lambda db, handles: records(db), summary={"events": len(batch)}
    )
    return result
