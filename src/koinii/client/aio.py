"""The asyncio client of the daemon: `Client`'s surface, awaited, over httpx.

`aconnect(url, token, timeout=30)` returns an `AsyncClient` whose methods have the names,
arguments and results of `Client`'s (so of `KB`'s), as coroutines: `await
client.assert_(…)`, `await client.seq`. `budget` is a plain `with` block that holds for
the task inside it (a context variable, as `Client`'s holds for a thread), and
`subscribe(goal, ctx)` is an async iterator of events (`koinii.client.asubscribe`).

Layers: method → `koinii.client.protocol` (the request and the reading of its reply, shared with
the blocking client, so both send the same fields and raise the same `Refused` kinds) →
`_Transport` (one `httpx.AsyncClient` and its pool of keep-alive connections). Transport
errors become `Unavailable` in exactly one place (`_Transport.post`), by the blocking
client's rule: a request that met a kept-alive connection the daemon had closed is resent
once (operations are safe to resend, docs/daemon.md); any other failure — a fresh
connection refused or dropped, a timeout — is `Unavailable`, never a result or a
refusal, because whether a write sent that way landed is unknown. A call cancelled by
its task is in the same doubt; reading the write back (or resending it) settles it.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from koinii.client import protocol
from koinii.client.asubscribe import Subscription
from koinii.client.protocol import Call, Context, Endpoint, Entry, Goal, Polled, Sentence, Watching
from koinii.errors import Unavailable
from koinii.kb import Edited, Hit, Retracted, Sentex
from koinii.results import WhyTree
from koinii.terms import Term

__all__ = ["AsyncClient", "aconnect"]

T = TypeVar("T")

# What a kept-alive connection the daemon closed looks like to httpx (as
# RemoteDisconnected, BrokenPipeError and ConnectionResetError do to http.client).
_DROPPED = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)


def aconnect(url: str | None = None, token: str | None = None, timeout: float = 30) -> AsyncClient:
    """An asyncio client of the daemon at `url` (default $KOINII_URL, else
    http://127.0.0.1:7411), with `token` (default $KOINII_TOKEN). No request is made until
    the first call; `async with` (or `await client.aclose()`) closes its connections."""
    return AsyncClient(url, token=token, timeout=timeout)


class _Transport:
    """One httpx pool of keep-alive connections; bytes in, status and bytes out."""

    def __init__(self, where: Endpoint, timeout: float) -> None:
        self.where = where
        self.url = where.url
        self.timeout = timeout
        # trust_env=False: no proxy from the environment, as the blocking client (a
        # proxy is named in the URL's path, see protocol.endpoint)
        self._http = httpx.AsyncClient(headers=dict(where.headers), trust_env=False)
        self._scheme = "https" if where.secure else "http"

    def _url(self, path: str) -> httpx.URL:
        return httpx.URL(scheme=self._scheme, host=self.where.host, port=self.where.port, path=path)

    async def post(self, path: str, payload: bytes, extra_wait: float = 0.0) -> tuple[int, bytes]:
        timeout = httpx.Timeout(self.timeout + extra_wait)
        for attempt in (1, 2):
            fresh = False

            async def trace(event: str, info: dict[str, Any]) -> None:
                nonlocal fresh
                if event.startswith("connection.connect_tcp"):
                    fresh = True  # this request opened its own connection

            try:
                response = await self._http.post(
                    self._url(path), content=payload, timeout=timeout, extensions={"trace": trace}
                )
                return response.status_code, response.content
            except _DROPPED as exc:
                # A kept-alive connection the daemon closed: resend once. Operations are
                # safe to resend (an assert returns the same handle the second time).
                if attempt == 1 and not fresh:
                    continue
                raise Unavailable(
                    f"the daemon at {self.url} dropped the connection: {exc!r}"
                ) from exc
            except httpx.HTTPError as exc:
                raise Unavailable(f"cannot reach the daemon at {self.url}: {exc!r}") from exc
        raise AssertionError("unreachable: the second attempt returns or raises")

    async def get(self, path: str) -> bytes:
        try:
            response = await self._http.get(self._url(path), timeout=self.timeout)
            return response.content
        except httpx.HTTPError as exc:
            raise Unavailable(f"cannot reach the daemon at {self.url}: {exc!r}") from exc

    async def stream(
        self, path: str, payload: bytes, extra_wait: float
    ) -> AsyncIterator[tuple[int, bytes]]:
        """A reply that stays open: its status and whole body when it is not 200 (a
        refusal), else its lines as they come, until it ends."""
        timeout = httpx.Timeout(self.timeout + extra_wait)
        try:
            async with self._http.stream(
                "POST", self._url(path), content=payload, timeout=timeout
            ) as response:
                if response.status_code != 200:
                    yield response.status_code, await response.aread()
                    return
                async for line in response.aiter_lines():
                    yield 200, line.encode("utf-8")
        except httpx.HTTPError as exc:
            raise Unavailable(f"lost the stream from the daemon at {self.url}: {exc!r}") from exc

    async def close(self) -> None:
        await self._http.aclose()


class AsyncClient:
    """A daemon connection with the `KB` read/write surface, for asyncio. Safe to share
    between the tasks of one event loop (not between loops)."""

    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 30):
        where = protocol.endpoint(url, token)
        self._transport = _Transport(where, timeout)
        self.url = where.url
        self._budget: contextvars.ContextVar[int | None] = contextvars.ContextVar(
            f"koinii-budget-{id(self)}", default=None
        )

    @contextlib.contextmanager
    def budget(self, seconds: float | None, what: str = "the operation") -> Iterator[None]:
        """Give this task's requests inside the block `seconds` each (sent as `budget_ms`;
        None: the daemon's default), as `Client.budget` does for a thread."""
        reset = self._budget.set(protocol.budget_ms(seconds))
        try:
            yield None
        finally:
            self._budget.reset(reset)

    async def _run(self, call: Call[T]) -> T:
        """Send one operation and read its reply (both as `koinii.client.protocol` says)."""
        payload, extra_wait = call.request(self._budget.get())
        route = self._transport.where.route(call.op)
        status, raw = await self._transport.post(route, payload, extra_wait)
        return call.outcome(self.url, status, raw)

    async def invoke(self, name: str, /, *, wait_s: float = 0, **fields: Any) -> Any:
        """Run the domain operation `name` (e.g. "wraps.add") on the daemon; `wait_s`
        extends the read timeout for a long poll."""
        return await self._run(protocol.invoke(name, wait_s, fields))

    async def health(self) -> dict[str, Any]:
        return protocol.health(self.url, await self._transport.get(self._transport.where.health))

    async def aclose(self) -> None:
        await self._transport.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- writes ---------------------------------------------------------------------

    async def assert_(
        self,
        sentence: Sentence,
        context: Context,
        *,
        strength: str = "default",
        creator: str | None = None,
        provenance: Mapping[str, Any] | None = None,
    ) -> int | list[int]:
        return await self._run(protocol.assert_(sentence, context, strength, creator, provenance))

    async def retract(self, handle: int) -> Retracted:
        return await self._run(protocol.retract(handle))

    async def edit(self, add: Sequence[Entry] = (), remove: Sequence[int] = ()) -> Edited:
        return await self._run(protocol.edit(add, remove))

    async def check(
        self, sentence: Sentence, context: Context, **opts: Any
    ) -> list[dict[str, Any]]:
        return await self._run(protocol.check(sentence, context, opts))

    async def check_edit(
        self, add: Sequence[Entry] = (), remove: Sequence[int] = ()
    ) -> list[dict[str, Any]]:
        return await self._run(protocol.check_edit(add, remove))

    async def load_text(
        self,
        source: str | os.PathLike[str],
        context: Context,
        *,
        strength: str = "default",
        on_error: str = "refuse",
        format: str = "koinii",
    ) -> Edited:
        return await self._run(protocol.load_text(source, context, strength, on_error, format))

    async def add_provenance(self, handle: int, fields: Mapping[str, Any]) -> dict[str, Any] | None:
        return await self._run(protocol.add_provenance(handle, fields))

    # --- reads ----------------------------------------------------------------------

    async def sentex(self, handle: int) -> Sentex | None:
        return await self._run(protocol.sentex(handle))

    async def provenance(self, handle: int) -> dict[str, Any] | None:
        return await self._run(protocol.provenance(handle))

    async def sentexes_matching(self, pattern: Sentence, ctx: Context) -> list[Sentex]:
        return await self._run(protocol.sentexes_matching(pattern, ctx))

    async def query(
        self, goal: Goal, ctx: Context, *, limit: int | None = None
    ) -> list[dict[str, Term]]:
        return await self._run(protocol.query(goal, ctx, limit))

    async def search(
        self, text: str, ctx: Context, *, limit: int = 10, ranking: str | None = None
    ) -> list[Hit]:
        return await self._run(protocol.search(text, ctx, limit, ranking))

    async def vocabulary(self, ctx: Context) -> list[dict[str, Any]]:
        return await self._run(protocol.vocabulary(ctx))

    async def argue(self, sentence: Sentence, ctx: Context) -> str:
        return await self._run(protocol.argue(sentence, ctx))

    async def believed(self, handle: int, ctx: Context | None = None) -> bool:
        return await self._run(protocol.believed(handle, ctx))

    async def why(self, handle: int) -> WhyTree | None:
        return await self._run(protocol.why(handle))

    async def why_not(self, handle: int, ctx: Context | None = None) -> str | None:
        return await self._run(protocol.why_not(handle, ctx))

    async def contradictions(self, ctx: Context | None = None) -> list[dict[str, Any]]:
        return await self._run(protocol.contradictions(ctx))

    async def conflicts(self, ctx: Context | None = None) -> list[dict[str, Any]]:
        return await self._run(protocol.conflicts(ctx))

    async def violations(self) -> list[dict[str, Any]]:
        return await self._run(protocol.violations())

    async def context_up(self, ctx: Context) -> frozenset[str]:
        return await self._run(protocol.context_up(ctx))

    async def context_down(self, ctx: Context) -> frozenset[str]:
        return await self._run(protocol.context_down(ctx))

    async def sees(self, ctx: Context, other: Context) -> bool:
        return protocol.context_name(other) in await self.context_up(ctx)

    async def stats(self) -> dict[str, Any]:
        return await self._run(protocol.stats())

    @property
    async def seq(self) -> int:
        """`await client.seq`: the seq of the daemon's last write."""
        return (await self.stats())["seq"]

    # --- the wire feed --------------------------------------------------------------

    async def watch(
        self,
        goal: Goal | None = None,
        ctx: Context | None = None,
        max_events: int | None = None,
        *,
        since: int | None = None,
    ) -> Watching:
        """Open a subscription: `{token, cursor: 0, max_events, seq}`; then `poll` it.
        With `since`, it starts with the events of the writes after that seq (resume)."""
        return await self._run(protocol.watch(goal, ctx, max_events, since))

    async def poll(self, token: str, cursor: int, wait_ms: int = 0) -> Polled:
        """Events after `cursor`: `{events: [Event…], cursor, lagged}` (long-polls `wait_ms`)."""
        return await self._run(protocol.poll(token, cursor, wait_ms))

    async def stream(self, token: str, cursor: int = 0) -> AsyncIterator[Polled]:
        """`Client.stream`, as an async iterator: a `Polled` at once, then one for each
        write the subscription matches (or every 15 s, empty), until it is dropped. It
        holds a connection of the pool while it runs; `aclose()` it (or leave `async
        for`) to let it go."""
        call = protocol.stream(token, cursor)
        payload, extra_wait = call.request(None)
        route = self._transport.where.route(call.op)
        async for status, raw in self._transport.stream(route, payload, extra_wait):
            if status != 200:
                call.outcome(self.url, status, raw)  # raises the refusal
            yield protocol.line(self.url, raw)

    async def unwatch(self, token: str) -> bool:
        return await self._run(protocol.unwatch(token))

    async def watchers(self) -> list[dict[str, Any]]:
        return await self._run(protocol.watchers())

    async def compact_log(self, keep: int) -> int:
        return await self._run(protocol.compact_log(keep))

    async def changes(self, since: int = 0, limit: int = 1000, wait_ms: int = 0) -> dict[str, Any]:
        """The durable change log after global seq `since` (survives daemon restarts)."""
        return await self._run(protocol.changes(since, limit, wait_ms))

    def subscribe(
        self,
        goal: Goal | None = None,
        ctx: Context | None = None,
        *,
        since: int | None = None,
        wait_ms: int = 20_000,
        on_lagged: Callable[[int], Any] | None = None,
        on_error: Callable[[BaseException], Any] | None = None,
    ) -> Subscription:
        """The events of the writes that `goal` (None: every write) matches in view of
        `ctx`, as an async iterator that survives daemon restarts and outages
        (`koinii.client.asubscribe`): `async with client.subscribe(…) as events: async for
        event in events: …`. It starts when it opens (`await`, `async with`, or the
        first step of `async for`); with `since`, after that seq instead. `on_error`
        hears of each outage once, `on_lagged` how many events a resnapshot must cover."""
        return Subscription(
            self, goal, ctx, since=since, wait_ms=wait_ms, on_lagged=on_lagged, on_error=on_error
        )
