"""`SessionStore`: the session writer's client, over a `KB`, a `Client` or a path.

Each method is one operation (`sessions.<verb>`), run directly on a `KB` or by the daemon
for a `Client` (operations.invoker): one durable write; bad input raises `Refused`
(`bad-session`) and changes nothing. The methods are made from the operations' own
functions (shape.py), so each takes exactly its operation's fields, in its order, with
its defaults. The writer is split by concern: who may write which session (access.py),
the writes (writes.py, inside a transaction by writing.py), batches (batches.py) and
imports (imports.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from koinii.kb import KB, open_kb
from koinii.operations import invoker
from koinii.sessions import access, batches, imports, schema, writes
from koinii.sessions.shape import client_method


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

    record_batch = client_method(batches.record_batch)
    start_session = client_method(writes.start_session)
    set_title = client_method(writes.set_title)
    start_turn = client_method(writes.start_turn)
    record_iteration = client_method(writes.record_iteration)
    record_block = client_method(writes.record_block)
    finish_turn = client_method(writes.finish_turn)
    retry_turn = client_method(writes.retry_turn)
    fork_session = client_method(writes.fork_session)
    record_routing = client_method(writes.record_routing)
    add_attachment = client_method(writes.add_attachment)

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
        measured = None if isinstance(self.source, KB) else part_bytes
        return imports.send_import(self.call, external_id, session, turns, part_turns, measured)


# The writer's other names lived here until issue 43 split it: `from
# koinii.sessions.store import MAX_BATCH` (or `may_record`, `start_turn`, …) keeps working
# for one release, answered by the module that owns the name now.
_MOVED_TO = (writes, batches, imports, access)


def __getattr__(name: str) -> Any:
    for module in _MOVED_TO:
        if not name.startswith("_") and hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
