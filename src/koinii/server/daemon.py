"""The daemon's state and scheduling: one KB, its subscriptions, its access rules, and how
an operation runs on the single writer (docs/daemon.md).

Invariants:
- The KB is touched only from the event loop's thread, one operation at a time: that is
  the single writer and the total order. Engine operations take microseconds; the only
  waits (long polls, the durable tail) are futures that never block it.
- No request holds the loop past its budget (docs/daemon.md, bounded work): a write runs
  within `Limits.write_budget_s`; a read — and a page of the web view — within
  `Limits.loop_slice_s` on the loop, and if it needs more, to the end of
  `Limits.query_budget_s` on a forked snapshot (`snapshot.Snapshots`) while the loop
  serves everyone else; a search asks the store's index on a thread, its other steps on
  the loop, once the index holds every write acknowledged before it; a read of the
  record tables (the sessions', the wraps', each look of a long poll) runs on a thread,
  its statements within the read budget (`searching.Searches`; over the memory store,
  on the loop within the same budget); the roster reads the KB, then the record tables
  (`read_then_records`), within one budget. `budget_ms` on a request lowers its budget,
  or — for an operator only — raises it.
- Group commit: the writes that arrive together (in one turn of the event loop) share
  one durable commit, made at the end of that turn (`Daemon.join_group`/`flush`); a
  write with no company commits alone at once. No reply leaves while a group it may
  have seen is open: every reply waits for the group commit (`Daemon.durable`), so
  nothing acknowledged — written or read — can be undone.
- A daemon whose store is no longer its own (`writer-lost`: a PostgreSQL writer that lost
  its connection and could not come back as the same writer) serves nothing from then
  on and exits non-zero (`Daemon.watch_writer`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Generator
from typing import Any

from starlette.requests import ClientDisconnect, Request

from koinii.errors import Refused
from koinii.identity import reserve_principals
from koinii.kb import KB
from koinii.server import bodies
from koinii.server.guards import Hosts, check_origin
from koinii.server.limits import Limits
from koinii.server.searching import Searches
from koinii.server.snapshot import Snapshots
from koinii.server.subscriptions import Subscriptions
from koinii.server.tokens import OPEN, Caller, TokenTable
from koinii.wire import RawJSON, render

log = logging.getLogger("koinii.server")


class _Group:
    """The open group commit, and how it ended."""

    __slots__ = ("refusal",)

    def __init__(self) -> None:
        self.refusal: Refused | None = None


class Daemon:
    """The operations, bound to one KB, its subscriptions and its access rules."""

    def __init__(
        self, kb: KB, tokens: TokenTable | None, limits: Limits, hosts: Hosts | None = None
    ) -> None:
        self.kb = kb
        self.tokens = tokens
        if tokens is not None:
            reserve_principals(kb, tokens)  # their contexts are theirs before a join
        self.limits = limits
        self.hosts = hosts or Hosts()
        kb.query_budget_s = limits.query_budget_s  # for what runs without a budget of its own
        kb.write_budget_s = limits.write_budget_s  # (the domains' operations)
        self.snapshots = Snapshots()
        self.searches = Searches(kb, self.flush)
        self.subs = Subscriptions(
            kb,
            cap=limits.max_subscriptions,
            quota=limits.subscriptions_per_principal,
            ring=limits.ring,
            idle_s=limits.idle_s,
        )
        self._group: _Group | None = None
        # How many requests the server has in flight (read, not yet answered), when it
        # can tell: `serve` wires in uvicorn's count. None: assume company, always group.
        self.in_flight: Callable[[], int] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None  # set when the app starts
        self.lost: Refused | None = None  # set once the store is no longer this daemon's
        self.checked_at = 0.0  # loop time of the last writer check (see `watch_writer`)
        self.on_lost: Callable[[], None] | None = None  # `serve` stops the server then

    def watch_writer(self) -> None:
        """Stop serving the moment the store is no longer this daemon's: from then on
        every request gets the refusal, and the server is told to exit (non-zero)."""
        if self.lost is not None:
            return
        # The check holds from when its probe was sent, not from when its answer was
        # read: a daemon frozen between the two (a pause, a stopped process) reads an
        # answer as old as the freeze, and must not take it for a fresh one.
        started = self.loop.time() if self.loop is not None else None
        lost = self.kb.check_writer()
        if started is not None:
            self.checked_at = started
        if lost is None:
            return
        self.lost = Refused(lost.kind, lost.message, lost.data)
        log.error("serving nothing more: %s", lost.message)
        self.subs.stop_waiting()
        if self.on_lost is not None:
            self.on_lost()

    def begin_stopping(self) -> None:
        """Start a clean stop; safe from a signal handler, which may interrupt the loop's
        thread mid-operation: the parked waits are woken on the loop, between operations
        (`Subscriptions.stop_waiting`), never from the handler itself."""
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.subs.stop_waiting)

    # --- budgets ----------------------------------------------------------------------

    def budget_for(self, caller: Caller, body: dict[str, Any], default_s: float) -> float:
        """The request's budget: the daemon's default, or the `budget_ms` it asks —
        lower by anyone, higher only by an operator (up to `Limits.max_budget_s`)."""
        asked = body.get("budget_ms")
        if asked is None:
            return default_s
        seconds = asked / 1000
        if not 0 < seconds <= self.limits.max_budget_s:
            raise Refused(
                "bad-option",
                f"budget_ms is from 1 to {int(self.limits.max_budget_s * 1000)}",
                {"option": "budget_ms"},
            )
        if seconds > default_s and caller.role != "operator":
            raise Refused(
                "forbidden",
                f"only an operator may give a request more than the daemon's "
                f"{default_s * 1000:g} ms; narrow the request instead",
                {"option": "budget_ms", "default_ms": default_s * 1000},
            )
        return seconds

    def write(self, handler: Callable, caller: Caller, body: dict[str, Any]) -> Any:
        """A write, within its budget, on the loop (the single writer)."""
        with self.kb.budget(self.budget_for(caller, body, self.limits.write_budget_s), "the write"):
            return handler(caller, body)

    async def read(self, handler: Callable, caller: Caller, body: dict[str, Any]) -> Any:
        """A read whose work the input decides, within the caller's budget (`bounded`)."""
        budget = self.budget_for(caller, body, self.limits.query_budget_s)
        return await self.bounded(lambda: handler(caller, body), budget, "the read")

    async def bounded(
        self,
        work: Callable[[], Any],
        budget_s: float,
        what: str,
        encode: Callable[[Any], bytes] = render,
    ) -> Any:
        """`work()` — a read of the KB — within `budget_s`: a slice of the loop; if it
        needs more, the rest of the budget on a forked snapshot, while the loop serves
        everyone else (refused `budget-exhausted` past it). Its value, or from a
        snapshot, that value as `encode` made it there (default: rendered as JSON, a
        `RawJSON`)."""
        slice_s = min(budget_s, self.limits.loop_slice_s)
        try:
            with self.kb.budget(slice_s, what):
                return work()
        except Refused as refusal:
            if refusal.kind != "budget-exhausted" or budget_s <= slice_s:
                raise
        self.flush()  # the snapshot must hold only what is durable

        def in_snapshot() -> Any:
            with self.kb.budget(budget_s, what, spent=slice_s):
                return work()

        return await self.snapshots.run(in_snapshot, budget_s - slice_s, encode)

    async def in_turns(self, steps: Generator[None, None, Any], budget_s: float, what: str) -> Any:
        """The value of `steps` — a read that yields wherever the loop may be given back
        (each step reads the KB afresh, holding nothing across a yield; the channel's
        moves, read from the store's change log, which no snapshot may touch) — run a
        turn of the loop at a time (`Limits.turn_s`), everyone served between two, within
        `budget_s` of its own turns."""
        loop = asyncio.get_running_loop()
        spent = 0.0  # its own turns' time: not the others' between two
        while True:
            turn = loop.time()
            try:
                with self.kb.budget(budget_s, what, spent=spent) as budget:
                    while loop.time() - turn < self.limits.turn_s:
                        if not budget.remaining():
                            raise budget.exhausted()
                        try:
                            next(steps)
                        except StopIteration as done:
                            return done.value
            finally:
                spent += loop.time() - turn
            await asyncio.sleep(0)

    async def read_records(
        self,
        read: Callable[[], Any],
        budget_s: float,
        prepare: Callable[[KB], None] | None = None,
        spent: float = 0.0,
    ) -> Any:
        """`read()` — a domain's read of its record tables, never of the KB — on a
        thread, through a connection of its own, its statements within what `spent` left
        of `budget_s` (`Searches.records`); `prepare(kb)` first, here on the loop (a
        domain readies its tables: creating them writes the store, which only the loop's
        thread may)."""
        self.flush()  # it reads what is committed
        if prepare is not None:
            prepare(self.kb)
        return await self.searches.records(read, budget_s, spent)

    async def read_then_records(
        self,
        work: Callable[[], Any],
        then: Callable[[Any], Any],
        budget_s: float,
        prepare: Callable[[KB], None] | None = None,
    ) -> Any:
        """`then(work())`: `work()` a read of the KB (`bounded`), `then` of the record
        tables (`read_records`), both within `budget_s`, each given what the other left."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        found = await self.bounded(work, budget_s, "the read")
        if isinstance(found, RawJSON):  # (from a snapshot: as the child rendered it)
            found = json.loads(found)
        return await self.read_records(
            lambda: then(found), budget_s, prepare, spent=loop.time() - started
        )

    # --- group commit -----------------------------------------------------------------

    def join_group(self) -> None:
        """Before a write: join the open group commit, or open one that commits once the
        requests already read in this turn of the event loop have run — unless this
        request is the only one in flight (long polls aside), when the write commits on
        its own: a group of one would only cost it a turn of the loop."""
        if self._group is not None:
            return
        if self.in_flight is not None and self.in_flight() - self.subs.parked <= 1:
            return
        self.kb.begin_group()
        self._group = _Group()
        asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Commit the open group now: at the end of its turn, before an operation that
        cannot join a group, at shutdown."""
        group, self._group = self._group, None
        if group is None:
            return
        try:
            self.kb.commit_group()
        except Refused as refusal:
            group.refusal = refusal
        except Exception:
            log.exception("the group commit failed")
            group.refusal = Refused("internal-error", "the daemon failed; see its log", {})

    async def durable(self) -> None:
        """Wait until nothing this request wrote or read can be undone: until the open
        group commits. Raises its refusal if it could not (every write in it undone).
        Then, if long polls were woken and have not answered yet, let them go first.

        One yield to the loop is enough for each: the group's `flush` was queued when the
        group opened, so it runs before anything that yields after that resumes; a woken
        poll was queued when it was woken. The feed is how the other agents hear of a
        write, and the writer knows what it wrote: answered first, the writer's process
        would wake and take the core the watchers' answers wait for (a quarter off the
        feed's latency, measured on 2 cores).
        """
        group = self._group
        if group is not None:
            await asyncio.sleep(0)
            if group.refusal is not None:
                failed = group.refusal
                raise Refused(failed.kind, failed.message, {**failed.data, "group_commit": True})
        if self.subs.waking:
            await asyncio.sleep(0)

    # --- plumbing ---------------------------------------------------------------------

    def guard(self, headers: dict[bytes, str]) -> None:
        """Refuse a request for a host the daemon does not answer to, or from a page of
        another origin (guards.py)."""
        host = headers.get(b"host")
        self.hosts.check(host)
        check_origin(headers.get(b"origin"), host)

    def caller(self, headers: dict[bytes, str]) -> Caller:
        if self.tokens is None:
            return OPEN
        return self.tokens.caller(headers.get(b"authorization"))

    async def body(
        self, request: Request, headers: dict[bytes, str], limit: int, caps: bodies.Caps
    ) -> Any:
        """The JSON body, read from the ASGI messages directly (Starlette's stream is an
        async generator per request), refused past `limit` bytes — before it is decoded,
        and before it is read at all when its declared length is over — then decoded in
        slices of the loop, its capped arrays counted as they are read (bodies.py)."""
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise Refused("body-too-large", f"the body is over {limit} bytes", {"limit": limit})
        chunks = []
        size = 0
        try:
            async with asyncio.timeout(self.limits.body_s):
                while True:
                    message = await request.receive()
                    if message["type"] != "http.request":
                        raise ClientDisconnect()
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        raise Refused(
                            "body-too-large", f"the body is over {limit} bytes", {"limit": limit}
                        )
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            raise Refused(
                "body-timeout",
                f"the body did not arrive within {self.limits.body_s:g} s of the headers: "
                "send it whole, at once",
                {"limit_s": self.limits.body_s, "received": size},
            ) from None
        raw = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        limits = self.limits
        return await bodies.decode(raw, caps, limits.body_slice_s, limits.body_budget_s)
