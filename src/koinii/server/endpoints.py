"""An operation as an HTTP endpoint: the request's guards, caller, body and fields
checked in that order, the operation run as its scheduling class says, the reply written
when what it saw is durable (wire.md, docs/daemon.md).

Invariants:
- Every request passes the transport guards first (guards.py): its Host is a name the
  daemon answers to, and its Origin, if any, is the daemon's own.
- A reader's write is refused before its body is read; every body is refused past its
  operation's limit before it is decoded, and checked against the operation's fields
  before the operation sees it (the same fields make `/openapi.json`, so it cannot drift).
- Every refusal leaves as `{"ok": false, "error": {kind, message, data}}` with the status
  the catalogue gives its kind (`koinii.errors.status_of`), whatever its data holds
  (`wire.render` repairs what JSON cannot carry); any other exception is a 500
  `internal-error` with no traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from koinii.errors import Refused, status_of
from koinii.operations import Operation
from koinii.server import bodies
from koinii.server.chunks import WRITE_NOW
from koinii.server.daemon import Daemon
from koinii.server.limits import STORE_LOSS, WRITER_LEASE_S
from koinii.server.subscriptions import Stream, Subscriptions
from koinii.server.tokens import Caller
from koinii.wire import RawJSON, render

log = logging.getLogger("koinii.server")

Endpoint = Callable[[Request], Awaitable[Response]]
Runner = Callable[[Caller, dict[str, Any]], Awaitable[Any]]


_JSON_TYPES = {
    "string": str,
    "integer": int,
    "object": dict,
    "boolean": bool,
}


# A field of the wrong type is refused with the kind the engine uses for the same mistake.
_TYPE_REFUSAL = {
    "handle": "bad-handle",
    "cursor": "bad-cursor",
    "since": "bad-cursor",
    "wait_ms": "bad-option",
    "limit": "bad-option",
    "before": "bad-option",
    "state": "bad-option",
    "max_events": "bad-option",
    "keep": "bad-option",
    "budget_ms": "bad-option",
    "stance": "koinii/no-such-stance",
    "reason": "bad-option",
}


def check_fields(op: str, fields: dict[str, tuple[Any, bool, str]], body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise Refused("bad-request", "the body must be a JSON object", {"operation": op})
    if not body.keys() <= fields.keys():
        unknown = sorted(set(body) - set(fields))
        raise Refused(
            "unknown-option",
            f"{op} takes no field {unknown[0]!r}",
            {"option": unknown[0], "known": sorted(fields)},
        )
    for name, (kind, required, _) in fields.items():
        if name not in body or body[name] is None:
            if required:
                raise Refused("bad-request", f"{op} needs the field {name!r}", {"field": name})
            continue
        value = body[name]
        if kind in ("term", "string"):
            ok = isinstance(value, str)
        elif kind == "goal":
            ok = isinstance(value, str) or (
                isinstance(value, list) and all(isinstance(v, str) for v in value)
            )
        elif isinstance(kind, tuple):
            ok = isinstance(value, list)
        elif kind == "any":
            ok = True
        elif kind in ("integer", "handle"):
            ok = type(value) is int
        elif kind == "number":
            ok = type(value) in (int, float)
        else:
            ok = isinstance(value, _JSON_TYPES[kind])
        if not ok:
            raise Refused(
                "bad-handle" if kind == "handle" else _TYPE_REFUSAL.get(name, "bad-request"),
                f"{op}: the field {name!r} has the wrong type",
                {"field": name, "expected": kind if isinstance(kind, str) else "array"},
            )
    return body


class _Reply(JSONResponse):
    """A JSONResponse whose encoder is made once: `json.dumps` with options, which
    JSONResponse calls, builds a new encoder for every reply."""

    def render(self, content: Any) -> bytes:
        return render(content)


class _StreamReply:
    """A reply that stays open (the `stream` operation): its lines written as they come,
    as NDJSON, until they end — or the client goes, which ends them too: its wait is
    released at once, not at the next event (uvicorn drops writes to a closed
    connection without a word, so the disconnect is listened for). Most lines are not
    sent here: the feed writes them in its pass, by the connection's `WRITE_NOW`."""

    HEADERS = [(b"content-type", b"application/x-ndjson"), (b"cache-control", b"no-store")]

    def __init__(self, subs: Subscriptions, stream: Stream) -> None:
        self.subs = subs
        self.stream = stream

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.HEADERS})
        write_now = scope.get("extensions", {}).get(WRITE_NOW)
        lines = self.subs.lines(self.stream, write_now)
        writing = asyncio.ensure_future(self._write(lines, send))
        listening = asyncio.ensure_future(_disconnect(receive))
        try:
            await asyncio.wait({writing, listening}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (writing, listening):
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await writing

    @staticmethod
    async def _write(lines: AsyncIterator[bytes], send: Any) -> None:
        async for line in lines:
            await send({"type": "http.response.body", "body": line, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _disconnect(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def reply(result: Any) -> Response:
    if type(result) is _StreamReply:
        return result  # type: ignore[return-value]  (an ASGI reply of its own)
    if type(result) is RawJSON:
        return Response(b'{"ok":true,"result":' + result + b"}", media_type="application/json")
    return _Reply({"ok": True, "result": result})


def refusal_reply(refusal: Refused) -> Response:
    return _Reply({"ok": False, "error": refusal.to_dict()}, status_code=status_of(refusal.kind))


_READ_HEADERS = frozenset({b"authorization", b"content-length", b"host", b"origin"})


def read_headers(request: Request) -> dict[bytes, str]:
    """The headers the daemon reads, in one pass over the raw list (Starlette's `Headers`
    decodes and rescans the list for every lookup); the first of a repeated one counts."""
    found: dict[bytes, str] = {}
    for name, value in request.scope["headers"]:
        if name in _READ_HEADERS and name not in found:
            found[name] = value.decode("latin-1")
    return found


def endpoint(daemon: Daemon, op: Operation) -> Endpoint:
    """`op` served over HTTP, scheduled as its declaration says."""
    return _serve(daemon, op, _runner(daemon, op))


def _handler(daemon: Daemon, op: Operation) -> Callable[[Caller, dict[str, Any]], Any]:
    """The operation as `handler(caller, body)`: an engine verb as declared; a domain's
    operation run on the KB, attributed to the caller (and given it, if it asks)."""
    if op.on == "daemon":
        return lambda caller, body: op.run(daemon, caller, body)

    def run(caller: Caller, body: dict[str, Any]) -> Any:
        with daemon.kb.attributed_to(caller.id):
            if op.takes_caller:
                return op.run(daemon.kb, caller=caller, **body)
            return op.run(daemon.kb, **body)

    return run


def _authorized(daemon: Daemon, op: Operation, caller: Caller, body: dict[str, Any]) -> None:
    if op.authorize is not None:
        op.authorize(daemon.kb, caller, body)


def _runner(daemon: Daemon, op: Operation) -> Runner:
    handler = _handler(daemon, op)
    schedule = op.schedule

    if schedule in ("long_poll", "stream"):  # the verbs of the feed (server/verbs.py)

        async def feed(caller: Caller, body: dict[str, Any]) -> Any:
            result = handler(caller, body)
            if schedule == "stream":
                return _StreamReply(daemon.subs, result)
            return await result

        return feed

    if schedule == "read":  # a slice of the loop, then the rest on a snapshot

        async def read(caller: Caller, body: dict[str, Any]) -> Any:
            _authorized(daemon, op, caller, body)
            return await daemon.read(handler, caller, body)

        return read

    if schedule == "search":  # its asks of the index on a thread (searching.py)

        async def search(caller: Caller, body: dict[str, Any]) -> Any:
            _authorized(daemon, op, caller, body)
            return await handler(caller, body)

        return search

    if schedule == "records_read" and op.wait_field is not None:
        return _records_poll(daemon, op, handler)

    if schedule == "records_read":  # on a thread, the record tables through its own

        async def records_read(caller: Caller, body: dict[str, Any]) -> Any:
            _authorized(daemon, op, caller, body)
            budget = daemon.budget_for(caller, body, daemon.limits.query_budget_s)

            def read() -> RawJSON:  # rendered there too: a long session is megabytes
                return _rendered(handler(caller, body))

            return await daemon.read_records(read, budget, op.prepare)

        return records_read

    if schedule == "read_then_records":  # the KB's part as a read, then the records'
        then = op.then
        assert then is not None

        async def read_then_records(caller: Caller, body: dict[str, Any]) -> Any:
            _authorized(daemon, op, caller, body)
            budget = daemon.budget_for(caller, body, daemon.limits.query_budget_s)

            def kb_part() -> Any:
                return handler(caller, body)

            def records(found: Any) -> RawJSON:  # rendered on the thread too
                return _rendered(then(daemon.kb, found))

            return await daemon.read_then_records(kb_part, records, budget, op.prepare)

        return read_then_records

    if schedule == "grouped_write" or schedule == "budgeted":
        grouped = schedule == "grouped_write"

        async def budgeted(caller: Caller, body: dict[str, Any]) -> Any:
            _authorized(daemon, op, caller, body)
            if grouped:
                daemon.join_group()
            return daemon.write(handler, caller, body)

        return budgeted

    if schedule == "loop":

        async def at_once(caller: Caller, body: dict[str, Any]) -> Any:
            _authorized(daemon, op, caller, body)
            return handler(caller, body)

        return at_once

    # A domain's write writes its records at once, which cannot happen inside a group
    # commit (`group-open`): each run starts with the open group committed.
    async def write(caller: Caller, body: dict[str, Any]) -> Any:
        daemon.flush()
        _authorized(daemon, op, caller, body)
        result = handler(caller, body)
        # an async operation (store.backup) does its long part off the loop
        return await result if inspect.isawaitable(result) else result

    return write


def _rendered(found: Any) -> RawJSON:
    """`found` rendered as JSON off the loop, a list an item at a time: the encoder holds
    the interpreter's lock for as long as one call of it runs — a quarter of a second
    of everyone's time for 300 wraps of 10,000 ids in one — and the loop, on its
    thread, may take it back between two."""
    if type(found) is not list:
        return RawJSON(render(found))
    return RawJSON(b"[" + b",".join([render(item) for item in found]) + b"]")


def _wait_of(op: Operation, body: dict[str, Any]) -> float:
    """A long poll's seconds, from 0 to 30."""
    wait = body.get(op.wait_field) or 0
    if not isinstance(wait, (int, float)) or isinstance(wait, bool) or not 0 <= wait <= 30:
        raise Refused(
            "bad-option",
            f"{op.wait_field} is a number of seconds from 0 to 30",
            {"option": op.wait_field},
        )
    return wait


def _records_poll(daemon: Daemon, op: Operation, handler: Callable) -> Runner:
    """A long poll whose read is a `records_read`: on a thread, within the read budget
    (each time afresh), after each write until it finds something or time is up; the
    loop only waits between two (`wraps.wait`: it read every matching wrap, each with
    its ids, on the loop, again after every write anyone made)."""

    async def records_poll(caller: Caller, body: dict[str, Any]) -> Any:
        _authorized(daemon, op, caller, body)
        wait = _wait_of(op, body)
        budget = daemon.budget_for(caller, body, daemon.limits.query_budget_s)
        quick = {**body, op.wait_field: 0}

        def read() -> RawJSON | None:  # rendered there too; None: nothing yet
            found = handler(caller, quick)
            return _rendered(found) if found else None

        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            seen = daemon.kb.seq
            found = await daemon.read_records(read, budget, op.prepare)
            if found is not None or loop.time() >= deadline or daemon.subs.stopping:
                return found if found is not None else []
            if daemon.kb.seq == seen:  # (a write while it read: it looks again at once)
                await daemon.subs.next_commit(deadline - loop.time())

    return records_poll


def _serve(daemon: Daemon, op: Operation, run: Runner) -> Endpoint:
    name, fields = op.name, op.fields
    limit = daemon.limits.body_bytes if op.large_body else daemon.limits.small_body_bytes

    async def serve(request: Request) -> Response:
        if daemon.loop is not None and daemon.loop.time() - daemon.checked_at > WRITER_LEASE_S:
            daemon.watch_writer()
        if daemon.lost is not None:
            return refusal_reply(daemon.lost)
        try:
            headers = read_headers(request)
            daemon.guard(headers)
            caller = daemon.caller(headers)
            if op.writes and caller.role == "reader":
                raise Refused(
                    "forbidden",
                    f"a reader may not write ({name}): its token reads only; ask an "
                    "operator for an agent token to write",
                    {"principal": caller.id, "operation": name},
                )
            caps = bodies.caps_for(name, caller.is_agent, daemon.limits.agent_batch)
            body = check_fields(name, fields, await daemon.body(request, headers, limit, caps))
            result = await run(caller, body)
            await daemon.durable()
            return reply(result)
        except Refused as refusal:
            if refusal.kind in STORE_LOSS or refusal.kind == "store-error":
                daemon.watch_writer()
            return refusal_reply(refusal)
        except Exception:
            log.exception("internal error in %s", name)
            return refusal_reply(Refused("internal-error", "the daemon failed; see its log", {}))

    return serve
