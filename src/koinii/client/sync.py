"""The Python client of the daemon: the `KB` surface, over HTTP, blocking.

`connect(url, token, timeout=30)` returns a `Client` whose read/write methods have the
same names, signatures and results as `KB` (terms come back as terms, sentexes as
`Sentex`), plus the wire feed: `watch`, `poll`, `stream`, `unwatch`, `watchers`,
`changes`. The
URL and token default to $KOINII_URL and $KOINII_TOKEN, as the CLI's do; a URL's path is
kept (a daemon behind a path-prefix proxy). For asyncio, `koinii.aconnect` is the same
surface, awaited (`koinii.client.aio`).

Layers: method → `koinii.client.protocol` (the request and the reading of its reply, shared
with the async client) → `_Transport` (a keep-alive `http.client` connection per
thread). Transport errors become `Unavailable` in exactly one place (`_Transport.post`);
refusals come back as `Refused` with the daemon's kind, message and data. The stdlib
client is used because it measured ~4x faster per round trip than httpx on loopback
(docs/daemon.md), and a round trip is the cost of every move.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar

from koinii.client import protocol
from koinii.client.protocol import Call, Context, Endpoint, Entry, Goal, Polled, Sentence, Watching
from koinii.errors import Unavailable
from koinii.kb import Edited, Hit, Retracted, Sentex
from koinii.results import WhyTree
from koinii.terms import Term

__all__ = ["Client", "connect"]

T = TypeVar("T")


def connect(url: str | None = None, token: str | None = None, timeout: float = 30) -> Client:
    """A client of the daemon at `url` (default $KOINII_URL, else http://127.0.0.1:7411),
    with `token` (default $KOINII_TOKEN). No request is made until the first call."""
    return Client(url, token=token, timeout=timeout)


class _Transport:
    """One keep-alive connection per thread; bytes in, status and bytes out."""

    def __init__(self, where: Endpoint, timeout: float) -> None:
        self.where = where
        self.url = where.url
        self.timeout = timeout
        self._headers = dict(where.headers)
        self._local = threading.local()

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            secure = self.where.secure
            factory = http.client.HTTPSConnection if secure else http.client.HTTPConnection
            conn = factory(self.where.host, self.where.port, timeout=timeout)
            self._local.conn = conn
        if conn.timeout != timeout:  # a socket's timeout is set by a system call: only anew
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def post(self, path: str, payload: bytes, extra_wait: float = 0.0) -> tuple[int, bytes]:
        timeout = self.timeout + extra_wait
        for attempt in (1, 2):
            conn = self._connection(timeout)
            reused = conn.sock is not None
            try:
                conn.request("POST", path, payload, self._headers)
                response = conn.getresponse()
                return response.status, response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                self._drop()
                # A kept-alive connection the daemon closed: resend once. Operations are
                # safe to resend (an assert returns the same handle the second time).
                if attempt == 1 and reused:
                    continue
                raise Unavailable(
                    f"the daemon at {self.url} dropped the connection: {exc}"
                ) from exc
            except (OSError, http.client.HTTPException) as exc:
                self._drop()
                raise Unavailable(f"cannot reach the daemon at {self.url}: {exc}") from exc
        raise AssertionError("unreachable: the second attempt returns or raises")

    def get(self, path: str) -> bytes:
        conn = self._connection(self.timeout)
        try:
            conn.request("GET", path, headers=self._headers)
            return conn.getresponse().read()
        except (OSError, http.client.HTTPException) as exc:
            self._drop()
            raise Unavailable(f"cannot reach the daemon at {self.url}: {exc}") from exc

    def stream(self, path: str, payload: bytes, extra_wait: float) -> Iterator[tuple[int, bytes]]:
        """A reply that stays open, on a connection of its own (the thread's stays free
        for the rest): its status and whole body when it is not 200 (a refusal), else
        its lines as they come, until it ends."""
        secure = self.where.secure
        factory = http.client.HTTPSConnection if secure else http.client.HTTPConnection
        conn = factory(self.where.host, self.where.port, timeout=self.timeout + extra_wait)
        try:
            conn.request("POST", path, payload, self._headers)
            response = conn.getresponse()
            if response.status != 200:
                yield response.status, response.read()
                return
            while line := response.readline():
                yield 200, line
        except (OSError, http.client.HTTPException) as exc:
            raise Unavailable(f"lost the stream from the daemon at {self.url}: {exc}") from exc
        finally:
            conn.close()

    def close(self) -> None:
        self._drop()


class Client:
    """A daemon connection with the `KB` read/write surface. Thread-safe."""

    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 30):
        where = protocol.endpoint(url, token)
        self._transport = _Transport(where, timeout)
        self.url = where.url
        self._local = threading.local()  # this thread's budget (see `budget`)

    @contextlib.contextmanager
    def budget(self, seconds: float | None, what: str = "the operation") -> Iterator[None]:
        """Give this thread's requests inside the block `seconds` each (sent as
        `budget_ms`; None: the daemon's default), as `KB.budget` does in-process. Lower
        than the daemon's default, anyone; higher, an operator only (`forbidden`)."""
        outer = getattr(self._local, "budget_ms", None)
        self._local.budget_ms = protocol.budget_ms(seconds)
        try:
            yield None
        finally:
            self._local.budget_ms = outer

    def _run(self, call: Call[T]) -> T:
        """Send one operation and read its reply (both as `koinii.client.protocol` says)."""
        payload, extra_wait = call.request(getattr(self._local, "budget_ms", None))
        route = self._transport.where.route(call.op)
        status, raw = self._transport.post(route, payload, extra_wait)
        return call.outcome(self.url, status, raw)

    def invoke(self, name: str, /, *, wait_s: float = 0, **fields: Any) -> Any:
        """Run the domain operation `name` (e.g. "wraps.add") on the daemon; `wait_s`
        extends the read timeout for a long poll."""
        return self._run(protocol.invoke(name, wait_s, fields))

    def health(self) -> dict[str, Any]:
        return protocol.health(self.url, self._transport.get(self._transport.where.health))

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writes ---------------------------------------------------------------------

    def assert_(
        self,
        sentence: Sentence,
        context: Context,
        *,
        strength: str = "default",
        creator: str | None = None,
        provenance: Mapping[str, Any] | None = None,
    ) -> int | list[int]:
        return self._run(protocol.assert_(sentence, context, strength, creator, provenance))

    def retract(self, handle: int) -> Retracted:
        return self._run(protocol.retract(handle))

    def edit(self, add: Sequence[Entry] = (), remove: Sequence[int] = ()) -> Edited:
        return self._run(protocol.edit(add, remove))

    def check(self, sentence: Sentence, context: Context, **opts: Any) -> list[dict[str, Any]]:
        return self._run(protocol.check(sentence, context, opts))

    def check_edit(
        self, add: Sequence[Entry] = (), remove: Sequence[int] = ()
    ) -> list[dict[str, Any]]:
        return self._run(protocol.check_edit(add, remove))

    def load_text(
        self,
        source: str | os.PathLike[str],
        context: Context,
        *,
        strength: str = "default",
        on_error: str = "refuse",
        format: str = "koinii",
    ) -> Edited:
        return self._run(protocol.load_text(source, context, strength, on_error, format))

    def add_provenance(self, handle: int, fields: Mapping[str, Any]) -> dict[str, Any] | None:
        return self._run(protocol.add_provenance(handle, fields))

    # --- reads ----------------------------------------------------------------------

    def sentex(self, handle: int) -> Sentex | None:
        return self._run(protocol.sentex(handle))

    def provenance(self, handle: int) -> dict[str, Any] | None:
        return self._run(protocol.provenance(handle))

    def sentexes_matching(self, pattern: Sentence, ctx: Context) -> list[Sentex]:
        return self._run(protocol.sentexes_matching(pattern, ctx))

    def query(self, goal: Goal, ctx: Context, *, limit: int | None = None) -> list[dict[str, Term]]:
        return self._run(protocol.query(goal, ctx, limit))

    def search(
        self, text: str, ctx: Context, *, limit: int = 10, ranking: str | None = None
    ) -> list[Hit]:
        return self._run(protocol.search(text, ctx, limit, ranking))

    def vocabulary(self, ctx: Context) -> list[dict[str, Any]]:
        return self._run(protocol.vocabulary(ctx))

    def argue(self, sentence: Sentence, ctx: Context) -> str:
        return self._run(protocol.argue(sentence, ctx))

    def believed(self, handle: int, ctx: Context | None = None) -> bool:
        return self._run(protocol.believed(handle, ctx))

    def why(self, handle: int) -> WhyTree | None:
        return self._run(protocol.why(handle))

    def why_not(self, handle: int, ctx: Context | None = None) -> str | None:
        return self._run(protocol.why_not(handle, ctx))

    def contradictions(self, ctx: Context | None = None) -> list[dict[str, Any]]:
        return self._run(protocol.contradictions(ctx))

    def conflicts(self, ctx: Context | None = None) -> list[dict[str, Any]]:
        return self._run(protocol.conflicts(ctx))

    def violations(self) -> list[dict[str, Any]]:
        return self._run(protocol.violations())

    def context_up(self, ctx: Context) -> frozenset[str]:
        return self._run(protocol.context_up(ctx))

    def context_down(self, ctx: Context) -> frozenset[str]:
        return self._run(protocol.context_down(ctx))

    def sees(self, ctx: Context, other: Context) -> bool:
        return protocol.context_name(other) in self.context_up(ctx)

    def stats(self) -> dict[str, Any]:
        return self._run(protocol.stats())

    @property
    def seq(self) -> int:
        return self.stats()["seq"]

    # --- the wire feed --------------------------------------------------------------

    def watch(
        self,
        goal: Goal | None = None,
        ctx: Context | None = None,
        max_events: int | None = None,
        *,
        since: int | None = None,
    ) -> Watching:
        """Open a subscription: `{token, cursor: 0, max_events, seq}`; then `poll` it.
        With `since`, it starts with the events of the writes after that seq (resume)."""
        return self._run(protocol.watch(goal, ctx, max_events, since))

    def poll(self, token: str, cursor: int, wait_ms: int = 0) -> Polled:
        """Events after `cursor`: `{events: [Event…], cursor, lagged}` (long-polls `wait_ms`)."""
        return self._run(protocol.poll(token, cursor, wait_ms))

    def stream(self, token: str, cursor: int = 0) -> Iterator[Polled]:
        """The subscription's events as they come: a `Polled` at once (the events after
        `cursor`, if any), then one for each write it matches — or every 15 s, with no
        events: the daemon is there — until the subscription is dropped (unwatched,
        reaped, the daemon stopping), when the iterator ends. No request per event, as
        `poll` makes: the lowest latency, and the least work for many watchers. It holds
        a connection of its own while it runs; close it (`.close()`, or leave the `for`)
        to let it go. Refusals (a foreign or unknown token, a bad cursor) come at the
        first step; a lost connection is `Unavailable`."""
        call = protocol.stream(token, cursor)
        payload, extra_wait = call.request(None)
        route = self._transport.where.route(call.op)
        for status, raw in self._transport.stream(route, payload, extra_wait):
            if status != 200:
                call.outcome(self.url, status, raw)  # raises the refusal
            yield protocol.line(self.url, raw)

    def unwatch(self, token: str) -> bool:
        return self._run(protocol.unwatch(token))

    def watchers(self) -> list[dict[str, Any]]:
        return self._run(protocol.watchers())

    def compact_log(self, keep: int) -> int:
        return self._run(protocol.compact_log(keep))

    def changes(self, since: int = 0, limit: int = 1000, wait_ms: int = 0) -> dict[str, Any]:
        """The durable change log after global seq `since` (survives daemon restarts)."""
        return self._run(protocol.changes(since, limit, wait_ms))
