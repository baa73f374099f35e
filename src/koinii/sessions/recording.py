"""Live recording, batched: `SessionRecorder` buffers session writes and sends them as
one `sessions.record_batch` — one transaction, and through a daemon one round trip —
instead of one durable write per event.

Invariant (what a recorder's answer means): a method returns at once, with the id of
the row it will write (the recorder names rows itself, uuid4, and stamps the event's
time when it is recorded, not when it is sent), and the event is BUFFERED, not yet
durable. It is durable once `flush()` has returned. `flush()` runs when `batch_events`
events are buffered, when the oldest buffered event is older than `max_delay_s` at the
next call, before `retry_turn` and `fork_session` (whose answers the store computes),
and on `close()` — also on leaving a `with` block, even by an exception. A flush that
fails raises, and the events it carried leave the buffer: on a refusal none of them was
written (a batch is all or nothing, and the refusal names the event: `data.event`);
when the daemon could not be reached (`Unavailable`), they may or may not have been.
Nothing is reported durable that is not.
"""

from __future__ import annotations

import json
import time
from typing import Any

from koinii.kb import KB
from koinii.sessions import checks
from koinii.sessions.rows import new_id

BATCH_EVENTS = 200  # events per batch (a daemon's body limit is 16 MiB: see BATCH_BYTES)
BATCH_BYTES = 4 * 1024 * 1024  # about this much JSON per batch, over the wire
MAX_DELAY_S = 1.0  # a buffered event is sent at the next call after this long


class SessionRecorder:
    """Records sessions like `SessionStore`, buffered (module docstring): ids come back at
    once; events are durable after `flush()`, which `close()` and `with` run too."""

    def __init__(
        self,
        store: Any,
        *,
        batch_events: int = BATCH_EVENTS,
        max_delay_s: float = MAX_DELAY_S,
    ) -> None:
        if type(batch_events) is not int or batch_events < 1:
            raise ValueError("batch_events is a positive integer")
        self.store = store
        self.batch_events = batch_events
        self.max_delay_s = max_delay_s
        self._events: list[dict[str, Any]] = []
        self._oldest: float | None = None
        self._bytes = 0
        self._measure = not isinstance(store.source, KB)  # over the wire: mind the body size

    # --- the buffer ------------------------------------------------------------------------

    @property
    def buffered(self) -> int:
        """How many recorded events are not yet durable."""
        return len(self._events)

    def flush(self) -> list[Any]:
        """Write every buffered event, in one transaction; returns their results in order.
        When it returns, they are durable; when it raises, see the module docstring."""
        events, self._events, self._oldest, self._bytes = self._events, [], None, 0
        if not events:
            return []
        return self.store.call("record_batch", events=events)

    def close(self) -> None:
        """Flush what is buffered. The store stays open (it is the caller's)."""
        self.flush()

    def __enter__(self) -> SessionRecorder:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.flush()

    def _add(self, verb: str, fields: dict[str, Any]) -> None:
        given = {key: value for key, value in fields.items() if value is not None}
        self._events.append({"verb": verb, "fields": given})
        if self._oldest is None:
            self._oldest = time.monotonic()
        if self._measure:
            self._bytes += len(json.dumps(given, ensure_ascii=False, default=str))
        if (
            len(self._events) >= self.batch_events
            or self._bytes >= BATCH_BYTES
            or time.monotonic() - self._oldest >= self.max_delay_s
        ):
            self.flush()

    # --- the writes (SessionStore's, buffered) ------------------------------------------------

    def start_session(self, *, created_at: str | None = None, **fields: Any) -> str:
        """`SessionStore.start_session`; returns the id the session will have."""
        session_id = new_id()
        self._add(
            "start_session", {**fields, "id": session_id, "created_at": created_at or checks.now()}
        )
        return session_id

    def set_title(self, session_id: str, title: str) -> None:
        self._add("set_title", {"session_id": session_id, "title": title})

    def start_turn(
        self, session_id: str, user_request: str, *, created_at: str | None = None, **fields: Any
    ) -> str:
        turn_id = new_id()
        self._add(
            "start_turn",
            {
                **fields,
                "id": turn_id,
                "session_id": session_id,
                "user_request": user_request,
                "created_at": created_at or checks.now(),
            },
        )
        return turn_id

    def record_iteration(self, turn_id: str, **fields: Any) -> str:
        iteration_id = new_id()
        self._add("record_iteration", {**fields, "id": iteration_id, "turn_id": turn_id})
        return iteration_id

    def record_block(self, iteration_id: str, **fields: Any) -> str:
        block_id = new_id()
        self._add("record_block", {**fields, "id": block_id, "iteration_id": iteration_id})
        return block_id

    def finish_turn(
        self,
        turn_id: str,
        status: str,
        outcome: str,
        answer: str | None = None,
        error: str | None = None,
        *,
        finished_at: str | None = None,
        **fields: Any,
    ) -> None:
        self._add(
            "finish_turn",
            {
                **fields,
                "turn_id": turn_id,
                "status": status,
                "outcome": outcome,
                "answer": answer,
                "error": error,
                "finished_at": finished_at or checks.now(),
            },
        )

    def record_routing(
        self, session_id: str, kind: str, *, created_at: str | None = None, **fields: Any
    ) -> None:
        self._add(
            "record_routing",
            {
                **fields,
                "session_id": session_id,
                "kind": kind,
                "created_at": created_at or checks.now(),
            },
        )

    def add_attachment(self, turn_id: str, *, created_at: str | None = None, **fields: Any) -> None:
        self._add(
            "add_attachment",
            {**fields, "turn_id": turn_id, "created_at": created_at or checks.now()},
        )

    def retry_turn(self, turn_id: str, *, created_at: str | None = None) -> int:
        """Flushes, then retries (durable when it returns): the attempt's number."""
        self.flush()
        return self.store.retry_turn(turn_id, created_at=created_at)

    def fork_session(self, session_id: str, **fields: Any) -> int:
        """Flushes, then forks (durable when it returns): the new state's version."""
        self.flush()
        return self.store.fork_session(session_id, **fields)
