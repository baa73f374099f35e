"""The daemon's HTTP API: one JSON operation per route, all over one KB (wire.md).

Invariants:
- Every request passes the transport guards first (guards.py): its Host is a name the
  daemon answers to, and its Origin, if any, is the daemon's own.
- The KB is touched only from the event loop's thread, one operation at a time: that is
  the single writer and the total order. Engine operations take microseconds; the only
  waits (long polls, the durable tail) are futures that never block it.
- No request holds the loop past its budget (docs/daemon.md, bounded work): a write runs
  within `Limits.write_budget_s`; a read within `Limits.loop_slice_s` on the loop, and
  if it needs more, to the end of `Limits.query_budget_s` on a forked snapshot
  (`snapshot.Snapshots`) while the loop serves everyone else. `budget_ms` on a request
  lowers its budget, or — for an operator only — raises it.
- Group commit: the writes that arrive together (in one turn of the event loop) share
  one durable commit, made at the end of that turn (`Daemon.join_group`/`flush`); a
  write with no company commits alone at once. No reply leaves while a group it may
  have seen is open: every reply waits for the group commit (`Daemon.durable`), so
  nothing acknowledged — written or read — can be undone.
- Every request body is checked against the operation's field table before the engine
  sees it; the same table generates `/openapi.json`, so the document cannot drift.
- Every refusal leaves as `{"ok": false, "error": {kind, message, data}}` with the status
  the catalogue gives its kind (`koinii.errors.status_of`), whatever its data holds
  (`wire.render` repairs what JSON cannot carry); any other exception is a 500
  `internal-error` with no traceback.
- A daemon whose store is no longer its own (`writer-lost`: a PostgreSQL writer that lost
  its connection and could not come back as the same writer) serves nothing from then
  on — every operation and `/health` answer 503 with that refusal — and exits non-zero.
  It is checked every `WRITER_CHECK_S`, after any refusal that may mean it, and before
  any request when the last check is older than `WRITER_LEASE_S` (a daemon that was
  frozen checks before it answers anything from memory). The daemon leaves the lease in
  the store as it starts (`KB.hold_lease`): a writer that takes the store over while it
  may still be answering writes nothing until the lease has run out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from koinii._version import __version__
from koinii.errors import Refused, status_of
from koinii.identity import reserve_principals
from koinii.kb import KB, semantic
from koinii.operations import Operation, load_domains
from koinii.server import access
from koinii.server.chunks import WRITE_NOW
from koinii.server.guards import Hosts, check_origin
from koinii.server.snapshot import Snapshots
from koinii.server.subscriptions import Stream, Subscriptions
from koinii.server.tokens import OPEN, Caller, TokenTable
from koinii.wire import (
    API,
    RawJSON,
    encode_bindings,
    encode_edited,
    encode_hit,
    encode_retracted,
    encode_sentex,
    render,
)

log = logging.getLogger("koinii.server")


@dataclass
class Limits:
    body_bytes: int = 16 * 1024 * 1024
    # the largest body of an operation that carries no batch (all but edit, check_edit,
    # load_text and the domains'): a sentence or goal is at most terms.MAX_INPUT
    # characters, so anything bigger is refused before it is read or decoded
    small_body_bytes: int = 2 * 1024 * 1024
    query_budget_s: float = 0.5  # a read's budget (the loop's slice, then a snapshot)
    write_budget_s: float = 0.03  # a write's budget, all of it on the loop
    loop_slice_s: float = 0.02  # how long a read may hold the loop before it moves off it
    max_budget_s: float = 600.0  # the most an operator's budget_ms may ask
    max_subscriptions: int = 1024
    subscriptions_per_principal: int = 64  # of those, what one token may hold
    ring: int = 256
    idle_s: float = 300.0
    log_retention: int | None = None  # keep this many change-log entries (None: all)
    header_s: float = 10.0  # a request's line and headers arrive within this
    body_s: float = 60.0  # its body arrives within this, once its headers have
    max_connections: int | None = None  # None: what the descriptor limit leaves
    agent_batch: int = 10_000  # entries one edit of an agent (or arbiter) may add


# The refusals that say the store may no longer be this daemon's (see `Daemon.watch_writer`).
STORE_LOSS = frozenset({"writer-lost", "outcome-unknown"})
# sentexes indexed for search per housekeeping tick, a bounded slice of the loop: ~2 ms
# of FTS5 and, where the semantic extra is installed, 12-40 ms of embedding them (50-150
# µs each); a search catches up the rest itself
SEARCH_CATCH_UP = 250
WRITER_CHECK_S = 0.25
WRITER_LEASE_S = 0.5


# --- the operation table -----------------------------------------------------------------
# name -> (fields {name: (json type, required, description)}, summary). Types are JSON
# Schema types; "term" is a sentence in canonical text; "goal" is a term or a list of them.

_T = "term"
SENTENCE = {"sentence": (_T, True, "a sentence in canonical text, e.g. (usesDatabase A B)")}
CONTEXT = {"context": ("string", True, "a context name, e.g. CxDeploy")}
READ_CONTEXT = {"context": ("string", True, "a context, a variable (?ctx) or CxEverything")}
HANDLE = {"handle": ("integer", True, "a sentex handle")}
BUDGET = {
    "budget_ms": (
        "integer",
        False,
        "this request's time budget in ms (default: the daemon's); more: operators only",
    )
}
WRITE_OPTS = {
    "strength": ("string", False, "default | monotonic"),
    "creator": ("string", False, "who wrote it; an agent may only name itself"),
    "provenance": ("object", False, "extra provenance fields"),
}
ENTRY = {
    "type": "object",
    "required": ["sentence", "context"],
    "properties": {
        "sentence": {"type": "string"},
        "context": {"type": "string"},
        "strength": {"type": "string"},
        "creator": {"type": "string"},
        "provenance": {"type": "object"},
    },
}

OPERATIONS: dict[str, tuple[dict[str, tuple[Any, bool, str]], str]] = {
    "assert": (
        {**SENTENCE, **CONTEXT, **WRITE_OPTS, **BUDGET},
        "store a sentence; returns its handle",
    ),
    "retract": ({**HANDLE, **BUDGET}, "remove a sentex and what rested only on it"),
    "edit": (
        {
            "add": (("array", ENTRY), False, "entries to add"),
            "remove": (("array", {"type": "integer"}), False, "handles to remove"),
            **BUDGET,
        },
        "adds then removes, all or nothing",
    ),
    "check": (
        {**SENTENCE, **CONTEXT, **WRITE_OPTS, **BUDGET},
        "dry run of assert: the problems",
    ),
    "check_edit": (
        {
            "add": (("array", ENTRY), False, "entries to add"),
            "remove": (("array", {"type": "integer"}), False, "handles to remove"),
            **BUDGET,
        },
        "dry run of edit: every problem",
    ),
    "load_text": (
        {
            "text": ("string", True, "vocabulary text: sentences and ; comments"),
            **CONTEXT,
            "strength": ("string", False, "default | monotonic"),
            "on_error": ("string", False, "refuse (all or nothing, the default) | report"),
            "format": ("string", False, "koinii (the default) | kif (SUO-KIF)"),
            **BUDGET,
        },
        "load vocabulary (operator only)",
    ),
    "add_provenance": (
        {**HANDLE, "fields": ("object", True, "fields to add")},
        "add provenance fields to a sentex",
    ),
    "sentex": (HANDLE, "one sentex, or null"),
    "provenance": (HANDLE, "a sentex's provenance, or null"),
    "sentexes_matching": (
        {"pattern": (_T, True, "a pattern"), **READ_CONTEXT, **BUDGET},
        "believed sentexes stored in exactly the context that match",
    ),
    "query": (
        {
            "goal": ("goal", True, "a literal or a list of literals"),
            **READ_CONTEXT,
            "limit": ("integer", False, "stop at this many solutions (bounds the work too)"),
            **BUDGET,
        },
        "solutions through the context's ancestor set, as bindings",
    ),
    "search": (
        {
            "text": ("string", True, "the words to look for, e.g. postgres version"),
            "context": ("string", True, "search what this context sees (or CxEverything)"),
            "limit": ("integer", False, "at most this many hits, 1 to 100 (default 10)"),
            "ranking": (
                "string",
                False,
                "lexical (by words) or hybrid (words and meaning; needs koinii[semantic] "
                "on the daemon); default: hybrid where installed",
            ),
            **BUDGET,
        },
        "ranked search over what the context sees: hits with author, snippet and how matched",
    ),
    "vocabulary": (
        {"context": ("string", True, "the predicates this context sees (or CxEverything)")},
        "the predicates in use, with counts and an example each",
    ),
    "argue": ({**SENTENCE, **READ_CONTEXT}, "true | false | contradiction | unknown"),
    "believed": (
        {**HANDLE, "context": ("string", False, "read at this context")},
        "is the sentex believed",
    ),
    "why": ({**HANDLE, **BUDGET}, "the justification tree"),
    "why_not": (
        {**HANDLE, "context": ("string", False, "read at this context")},
        "why a sentex is not believed",
    ),
    "contradictions": (
        {"context": ("string", False, "clashes this context can see"), **BUDGET},
        "default/default dilemmas",
    ),
    "conflicts": (
        {"context": ("string", False, "clashes this context can see"), **BUDGET},
        "monotonic/monotonic clashes",
    ),
    "violations": (BUDGET, "rule firings with no context to place their conclusion"),
    "compact_log": (
        {"keep": ("integer", True, "change-log entries to keep")},
        "drop older change-log entries (operator only)",
    ),
    "context_up": ({"context": ("string", True, "a context name")}, "what a context sees"),
    "context_down": ({"context": ("string", True, "a context name")}, "what sees a context"),
    "stats": ({}, "counts and the global seq"),
    "watch": (
        {
            "goal": ("goal", False, "a standing query (one literal)"),
            "context": ("string", False, "watch changes in view of this context"),
            "max_events": ("integer", False, "ring size (default 256)"),
            "since": ("integer", False, "resume: replay the events of the writes after it"),
        },
        "open a subscription",
    ),
    "poll": (
        {
            "token": ("string", True, "the subscription token"),
            "cursor": ("integer", True, "events consumed so far"),
            "wait_ms": ("integer", False, "long-poll up to this long (max 30000)"),
        },
        "events after the cursor",
    ),
    "stream": (
        {
            "token": ("string", True, "the subscription token"),
            "cursor": ("integer", True, "events consumed so far"),
        },
        "the events after the cursor as they come: a line of JSON (a poll's reply) at "
        "once, then one per write that matches (or every 15 s: none), until the "
        "subscription is dropped",
    ),
    "unwatch": ({"token": ("string", True, "the subscription token")}, "drop a subscription"),
    "watchers": ({}, "the live subscriptions"),
    "changes": (
        {
            "since": ("integer", True, "a global seq"),
            "limit": ("integer", False, "at most this many entries (max 10000)"),
            "wait_ms": ("integer", False, "long-poll up to this long (max 30000)"),
        },
        "the durable change log after a seq",
    ),
}

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


def _check_fields(op: str, fields: dict[str, tuple[Any, bool, str]], body: Any) -> dict[str, Any]:
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
        if kind in (_T, "string"):
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


def _opts(body: dict[str, Any]) -> dict[str, Any]:
    return {k: body[k] for k in ("strength", "creator", "provenance") if body.get(k) is not None}


def _entries(body: dict[str, Any]) -> list[tuple]:
    out = []
    for i, item in enumerate(body.get("add") or []):
        if not isinstance(item, dict) or not isinstance(item.get("sentence"), str):
            raise Refused(
                "bad-request",
                "each added entry is {sentence, context, strength?, creator?, provenance?}",
                {"in": "add", "index": i},
            )
        extra = sorted(set(item) - {"sentence", "context", "strength", "creator", "provenance"})
        if extra:
            raise Refused(
                "unknown-option",
                f"unknown option {extra[0]!r}",
                {"option": extra[0], "in": "add", "index": i},
            )
        out.append((item["sentence"], item.get("context"), _opts(item)))
    return out


# The writes that open a group commit, or join the open one (see `Daemon.join_group`).
GROUPED = frozenset({"assert", "retract", "edit", "load_text", "add_provenance"})
# The operations whose work the input decides: the writes (and their dry runs) run
# within the write budget; these reads, a slice of the loop and then a snapshot.
BUDGETED_WRITES = GROUPED | {"check", "check_edit"}
SNAPSHOT_READS = frozenset(
    {"query", "sentexes_matching", "why", "contradictions", "conflicts", "violations"}
)


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
        """A read whose work the input decides: a slice of the loop; if it needs more, the
        rest of its budget on a forked snapshot, while the loop serves everyone else."""
        budget = self.budget_for(caller, body, self.limits.query_budget_s)
        slice_s = min(budget, self.limits.loop_slice_s)
        try:
            with self.kb.budget(slice_s, "the read"):
                return handler(caller, body)
        except Refused as refusal:
            if refusal.kind != "budget-exhausted" or budget <= slice_s:
                raise
        self.flush()  # the snapshot must hold only what is durable

        def in_snapshot() -> Any:
            with self.kb.budget(budget, "the read", spent=slice_s):
                return handler(caller, body)

        return await self.snapshots.run(in_snapshot, budget - slice_s)

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

    # --- writes ---------------------------------------------------------------------

    def _guard_adds(self, caller: Caller, entries: list[tuple], batch: bool) -> None:
        """Each entry's access check, counted toward the write's budget: a batch of a
        hundred thousand entries would spend seconds here before the engine's own work
        (and its budget) began. An agent's batch holds at most `Limits.agent_batch`."""
        limit = self.limits.agent_batch
        if batch and caller.is_agent and len(entries) > limit:
            raise Refused(
                "batch-too-large",
                f"an agent's edit adds at most {limit:,} entries, not {len(entries):,}: send "
                "it in parts (an operator loads more at once)",
                {"limit": limit, "entries": len(entries), "rolled_back": True},
            )
        for i, (sentence, context, opts) in enumerate(entries):
            self.kb.spend()
            try:
                access.check_add(self.kb, caller, sentence, context, opts)
            except Refused as refusal:
                if batch:
                    refusal.data.update({"rolled_back": True, "in": "add", "index": i})
                raise

    def _attributed(self, caller: Caller, opts: dict[str, Any]) -> dict[str, Any]:
        if caller.is_agent and opts.get("creator") is None:
            opts = {**opts, "creator": caller.id}
        return opts

    def op_assert(self, caller: Caller, body: dict[str, Any]) -> Any:
        opts = _opts(body)
        if caller.id is None:  # an open daemon: nobody to check or to record
            return self.kb.assert_(body["sentence"], body["context"], **opts)
        self._guard_adds(caller, [(body["sentence"], body["context"], opts)], batch=False)
        with self.kb.attributed_to(caller.id):
            return self.kb.assert_(
                body["sentence"], body["context"], **self._attributed(caller, opts)
            )

    def op_retract(self, caller: Caller, body: dict[str, Any]) -> Any:
        access.check_remove(self.kb, caller, body["handle"])
        return encode_retracted(self.kb.retract(body["handle"]))

    def op_edit(self, caller: Caller, body: dict[str, Any]) -> Any:
        entries = _entries(body)
        self._guard_adds(caller, entries, batch=True)
        removes = body.get("remove") or []
        for i, handle in enumerate(removes):
            try:
                access.check_remove(self.kb, caller, handle)
            except Refused as refusal:
                refusal.data.update({"rolled_back": True, "in": "remove", "index": i})
                raise
        adds = [(s, c, self._attributed(caller, o)) for s, c, o in entries]
        with self.kb.attributed_to(caller.id):
            return encode_edited(self.kb.edit(add=adds, remove=removes))

    def op_check(self, caller: Caller, body: dict[str, Any]) -> Any:
        return self.kb.check(body["sentence"], body["context"], **_opts(body))

    def op_check_edit(self, caller: Caller, body: dict[str, Any]) -> Any:
        return self.kb.check_edit(add=_entries(body), remove=body.get("remove") or [])

    def op_load_text(self, caller: Caller, body: dict[str, Any]) -> Any:
        access.check_operator(caller, "load vocabulary")
        with self.kb.attributed_to(caller.id):
            result = self.kb.load_text(
                body["text"],
                body["context"],
                strength=body.get("strength") or "default",
                on_error=body.get("on_error") or "refuse",
                format=body.get("format") or "koinii",
            )
        return encode_edited(result)

    def op_add_provenance(self, caller: Caller, body: dict[str, Any]) -> Any:
        access.check_remove(self.kb, caller, body["handle"])  # same ownership rule
        return self.kb.add_provenance(body["handle"], body["fields"])

    # --- reads ----------------------------------------------------------------------

    def op_sentex(self, caller: Caller, body: dict[str, Any]) -> Any:
        return encode_sentex(self.kb.sentex(body["handle"]))

    def op_provenance(self, caller: Caller, body: dict[str, Any]) -> Any:
        return self.kb.provenance(body["handle"])

    def op_sentexes_matching(self, caller: Caller, body: dict[str, Any]) -> Any:
        return [
            encode_sentex(s) for s in self.kb.sentexes_matching(body["pattern"], body["context"])
        ]

    def op_query(self, caller: Caller, body: dict[str, Any]) -> Any:
        solutions = self.kb.query(body["goal"], body["context"], limit=body.get("limit"))
        return [encode_bindings(b) for b in solutions]

    def op_search(self, caller: Caller, body: dict[str, Any]) -> Any:
        # The store's index holds what is committed: commit the open group first, so a
        # search sees every write made before it (kb/search.py). Not a snapshot read:
        # the store's connection must not cross a fork.
        self.flush()
        budget = self.budget_for(caller, body, self.limits.query_budget_s)
        with self.kb.budget(budget, "the search"):
            limit = {"limit": body["limit"]} if body.get("limit") is not None else {}
            hits = self.kb.search(
                body["text"], body["context"], ranking=body.get("ranking"), **limit
            )
        return [encode_hit(h) for h in hits]

    def op_vocabulary(self, caller: Caller, body: dict[str, Any]) -> Any:
        return self.kb.vocabulary(body["context"])

    def op_argue(self, caller: Caller, body: dict[str, Any]) -> Any:
        return self.kb.argue(body["sentence"], body["context"])

    def op_believed(self, caller: Caller, body: dict[str, Any]) -> Any:
        return self.kb.believed(body["handle"], body.get("context"))

    def op_why(self, caller: Caller, body: dict[str, Any]) -> Any:
        return self.kb.why(body["handle"])

    def op_why_not(self, caller: Caller, body: dict[str, Any]) -> Any:
        return self.kb.why_not(body["handle"], body.get("context"))

    def op_contradictions(self, caller: Caller, body: dict[str, Any]) -> Any:
        return self.kb.contradictions(body.get("context"))

    def op_conflicts(self, caller: Caller, body: dict[str, Any]) -> Any:
        return self.kb.conflicts(body.get("context"))

    def op_violations(self, caller: Caller, body: dict[str, Any]) -> Any:
        return self.kb.violations()

    def op_context_up(self, caller: Caller, body: dict[str, Any]) -> Any:
        return sorted(self.kb.context_up(body["context"]))

    def op_context_down(self, caller: Caller, body: dict[str, Any]) -> Any:
        return sorted(self.kb.context_down(body["context"]))

    def op_stats(self, caller: Caller, body: dict[str, Any]) -> Any:
        return self.kb.stats()

    def op_compact_log(self, caller: Caller, body: dict[str, Any]) -> Any:
        access.check_operator(caller, "compact the change log")
        self.flush()
        return self.kb.compact_log(body["keep"])

    # --- the wire feed --------------------------------------------------------------

    def op_watch(self, caller: Caller, body: dict[str, Any]) -> Any:
        since = body.get("since")
        if since is not None:
            self.flush()  # replay reads the change log: it must hold every write made
        return self.subs.watch(
            body.get("goal"), body.get("context"), body.get("max_events"), caller, since
        )

    async def op_poll(self, caller: Caller, body: dict[str, Any]) -> Any:
        return await self.subs.poll(body["token"], body["cursor"], body.get("wait_ms"), caller)

    def op_stream(self, caller: Caller, body: dict[str, Any]) -> Any:
        return _StreamReply(self.subs, self.subs.stream(body["token"], body["cursor"], caller))

    def op_unwatch(self, caller: Caller, body: dict[str, Any]) -> Any:
        return self.subs.unwatch(body["token"], caller)

    def op_watchers(self, caller: Caller, body: dict[str, Any]) -> Any:
        return self.subs.describe(caller)

    async def op_changes(self, caller: Caller, body: dict[str, Any]) -> Any:
        return await self.subs.changes(body["since"], body.get("limit"), body.get("wait_ms"))

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

    async def body(self, request: Request, headers: dict[bytes, str], limit: int) -> Any:
        """The JSON body, read from the ASGI messages directly (Starlette's stream is an
        async generator per request), refused past `limit` bytes — before it is decoded,
        and before it is read at all when its declared length is over."""
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
        if not raw:
            return {}
        try:  # UTF-8 only: json.loads would take bytes in UTF-16 or UTF-32 too
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Refused(
                "not-json",
                f"the body is not UTF-8 (byte {exc.start}): send JSON encoded as UTF-8",
                {"offset": exc.start},
            ) from None
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            raise Refused("not-json", "the body is not valid JSON (UTF-8)", {}) from None


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


def _reply(result: Any) -> Response:
    if type(result) is _StreamReply:
        return result  # type: ignore[return-value]  (an ASGI reply of its own)
    if type(result) is RawJSON:
        return Response(b'{"ok":true,"result":' + result + b"}", media_type="application/json")
    return _Reply({"ok": True, "result": result})


def _refusal(refusal: Refused) -> Response:
    return _Reply({"ok": False, "error": refusal.to_dict()}, status_code=status_of(refusal.kind))


_READ_HEADERS = frozenset({b"authorization", b"content-length", b"host", b"origin"})


def _headers(request: Request) -> dict[bytes, str]:
    """The headers the daemon reads, in one pass over the raw list (Starlette's `Headers`
    decodes and rescans the list for every lookup); the first of a repeated one counts."""
    found: dict[bytes, str] = {}
    for name, value in request.scope["headers"]:
        if name in _READ_HEADERS and name not in found:
            found[name] = value.decode("latin-1")
    return found


def _endpoint(daemon: Daemon, op: str) -> Callable[[Request], Awaitable[Response]]:
    handler = getattr(daemon, "op_" + op)
    fields = OPERATIONS[op][0]
    if asyncio.iscoroutinefunction(handler):
        return _serve(daemon, op, fields, handler)

    if op in SNAPSHOT_READS:

        async def read(caller: Caller, body: dict[str, Any]) -> Any:
            return await daemon.read(handler, caller, body)

        return _serve(daemon, op, fields, read)

    grouped = op in GROUPED
    budgeted = op in BUDGETED_WRITES

    async def run(caller: Caller, body: dict[str, Any]) -> Any:
        if grouped:
            daemon.join_group()
        if budgeted:
            return daemon.write(handler, caller, body)
        return handler(caller, body)

    return _serve(daemon, op, fields, run)


def _domain_endpoint(daemon: Daemon, op: Operation) -> Callable[[Request], Awaitable[Response]]:
    if op.schedule == "read":  # a slice of the loop, then the rest on a snapshot

        def handler(caller: Caller, body: dict[str, Any]) -> Any:
            return op.run(daemon.kb, **body)

        async def read(caller: Caller, body: dict[str, Any]) -> Any:
            if op.authorize is not None:
                op.authorize(daemon.kb, caller, body)
            return await daemon.read(handler, caller, body)

        return _serve(daemon, op.name, op.fields, read)

    # A domain operation writes its records at once, which cannot happen inside a group
    # commit (`group-open`): each run starts with the open group committed.
    async def run(caller: Caller, body: dict[str, Any]) -> Any:
        daemon.flush()
        if op.authorize is not None:
            op.authorize(daemon.kb, caller, body)
        if op.wait_field is None:
            with daemon.kb.attributed_to(caller.id):
                if op.takes_caller:
                    return op.run(daemon.kb, caller=caller, **body)
                return op.run(daemon.kb, **body)
        # a long poll: re-run after each write until there is something, or time is up
        wait = body.get(op.wait_field) or 0
        if not isinstance(wait, (int, float)) or isinstance(wait, bool) or not 0 <= wait <= 30:
            raise Refused(
                "bad-option",
                f"{op.wait_field} is a number of seconds from 0 to 30",
                {"option": op.wait_field},
            )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        quick = {**body, op.wait_field: 0}
        result = op.run(daemon.kb, **quick)
        while not result and loop.time() < deadline and not daemon.subs.stopping:
            await daemon.subs.next_commit(deadline - loop.time())
            daemon.flush()
            result = op.run(daemon.kb, **quick)
        return result

    return _serve(daemon, op.name, op.fields, run)


# The operations that carry a batch take bodies up to `Limits.body_bytes`; every other,
# up to `Limits.small_body_bytes` (domain operations carry records: the large limit).
BATCHES = frozenset({"edit", "check_edit", "load_text"})


# The operations a reader is refused before its body is read (a write is never a
# reader's, so its body is not worth reading, however large).
READER_REFUSED = GROUPED | {"check_edit"}


def _serve(daemon: Daemon, op: str, fields, run) -> Callable[[Request], Awaitable[Response]]:
    large = op in BATCHES or op not in OPERATIONS
    limit = daemon.limits.body_bytes if large else daemon.limits.small_body_bytes
    writes = op in READER_REFUSED or op.startswith("moves.")

    async def endpoint(request: Request) -> Response:
        if daemon.loop is not None and daemon.loop.time() - daemon.checked_at > WRITER_LEASE_S:
            daemon.watch_writer()
        if daemon.lost is not None:
            return _refusal(daemon.lost)
        try:
            headers = _headers(request)
            daemon.guard(headers)
            caller = daemon.caller(headers)
            if writes and caller.role == "reader":
                raise Refused(
                    "forbidden",
                    f"a reader may not write ({op}): its token reads only; ask an operator "
                    "for an agent token to write",
                    {"principal": caller.id, "operation": op},
                )
            body = _check_fields(op, fields, await daemon.body(request, headers, limit))
            result = await run(caller, body)
            await daemon.durable()
            return _reply(result)
        except Refused as refusal:
            if refusal.kind in STORE_LOSS or refusal.kind == "store-error":
                daemon.watch_writer()
            return _refusal(refusal)
        except Exception:
            log.exception("internal error in %s", op)
            return _refusal(Refused("internal-error", "the daemon failed; see its log", {}))

    return endpoint


def build_app(
    kb: KB,
    tokens: TokenTable | None = None,
    limits: Limits | None = None,
    hosts: Hosts | None = None,
) -> Starlette:
    """The ASGI application over `kb` (opened by the caller, closed at shutdown),
    answering to `hosts` (default: the loopback names)."""
    daemon = Daemon(kb, tokens, limits or Limits(), hosts)
    durability = kb.durability
    opened = kb.opened  # from a checkpoint or from the rows, and how long it took
    ranking = semantic.ranking_of(None)  # the searches' default (the model loads when used)

    def guarded(page: Callable[[], Response]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                daemon.guard(_headers(request))
            except Refused as refusal:
                return _refusal(refusal)
            return page()

        return endpoint

    def health_page() -> Response:
        if daemon.loop is not None and daemon.loop.time() - daemon.checked_at > WRITER_LEASE_S:
            daemon.watch_writer()
        if daemon.lost is not None:
            return JSONResponse(
                {"ok": False, "error": daemon.lost.to_dict(), "seq": kb.seq}, status_code=503
            )
        return JSONResponse(
            {
                "ok": True,
                "version": __version__,
                "seq": kb.seq,
                "durability": durability,
                "ranking": ranking,
                "parked": daemon.subs.parked,
                "opened": opened,
            }
        )

    health = guarded(health_page)
    openapi = guarded(lambda: JSONResponse(openapi_document()))

    async def not_found(request: Request, exc: Exception) -> Response:
        return _refusal(Refused("not-found", f"no route {request.url.path}", {}))

    async def wrong_method(request: Request, exc: Exception) -> Response:
        """A route that exists, asked with a method it does not take: 405, naming the
        methods it does take (an unknown operation under /v1 is still 404)."""
        path = request.url.path
        if path.startswith(API + "/") and path[len(API) + 1 :] not in endpoints:
            return await not_found(request, exc)
        allowed = (getattr(exc, "headers", None) or {}).get("Allow", "")
        how = (
            f"an operation is POST {path} with a JSON body"
            if path.startswith(API + "/")
            else f"this route takes {allowed}"
        )
        refusal = Refused(
            "method-not-allowed",
            f"{request.method} {path}: {how} (GET /api lists every operation)",
            {"method": request.method, "allowed": [m for m in allowed.split(", ") if m]},
        )
        response = _refusal(refusal)
        response.headers["Allow"] = allowed
        return response

    async def housekeeping() -> None:
        # The embedding model (where installed) loads in a thread: loaded by the first
        # embedding, on the loop, it would hold every request for a third of a second
        # or more. Until it is in, what is written waits to be indexed (a search
        # catches up itself).
        model = asyncio.create_task(asyncio.to_thread(semantic.load))
        while True:
            await asyncio.sleep(max(0.05, min(10.0, daemon.limits.idle_s / 10)))
            for token in daemon.subs.reap():
                log.info("reaped idle subscription %s", token)
            if daemon.limits.log_retention is not None:
                daemon.flush()
                kb.compact_log(daemon.limits.log_retention)
            if model.done():
                kb.index_for_search(limit=SEARCH_CATCH_UP)  # a bounded slice of the loop
            try:  # when due, and no group open: a forked child writes it, the loop goes on
                kb.keep_checkpoint()
            except Exception:  # the rows are the truth: a restart rebuilds from them
                log.exception("could not write the checkpoint")

    async def watch_writer() -> None:
        while daemon.lost is None:
            await asyncio.sleep(WRITER_CHECK_S)
            daemon.watch_writer()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        daemon.loop = asyncio.get_running_loop()
        tasks = [asyncio.create_task(housekeeping()), asyncio.create_task(watch_writer())]
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            daemon.flush()
            daemon.subs.close()
            daemon.snapshots.close()
            kb.close()

    # Every operation is one entry in a dict, found in one lookup: a router matching the
    # path against each route's pattern in turn cost more than the engine's write.
    endpoints = {op: _endpoint(daemon, op) for op in OPERATIONS}
    endpoints.update({op.route: _domain_endpoint(daemon, op) for op in load_domains().values()})

    async def operation(request: Request) -> Response:
        endpoint = endpoints.get(request.path_params["name"])
        if endpoint is None:
            return _refusal(Refused("not-found", f"no route {request.url.path}", {}))
        return await endpoint(request)

    from koinii.server import web  # the web view (docs/web.md); it imports this module

    routes = [  # the operations first: every write matches there, at the first try
        Route(API + "/{name:path}", operation, methods=["POST"]),
        Route("/health", health, methods=["GET"]),
        Route("/openapi.json", openapi),
        *web.routes(daemon),
    ]
    app = Starlette(
        routes=routes, lifespan=lifespan, exception_handlers={404: not_found, 405: wrong_method}
    )
    app.state.daemon = daemon
    return app


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 description of every route, generated from `OPERATIONS`."""
    error = {
        "type": "object",
        "required": ["ok", "error"],
        "properties": {
            "ok": {"const": False},
            "error": {
                "type": "object",
                "required": ["kind", "message", "data"],
                "properties": {
                    "kind": {"type": "string"},
                    "message": {"type": "string"},
                    "data": {"type": "object"},
                },
            },
        },
    }
    ok = {
        "type": "object",
        "required": ["ok", "result"],
        "properties": {"ok": {"const": True}, "result": {}},
    }

    def schema_of(kind: Any) -> dict[str, Any]:
        if isinstance(kind, tuple):
            return {"type": "array", "items": kind[1]}
        if kind == _T:
            return {"type": "string"}
        if kind == "any":
            return {}
        if kind == "handle":
            return {"type": "integer", "minimum": 1}
        if kind == "goal":
            return {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
        return {"type": kind}

    def responses() -> dict[str, Any]:
        out = {"200": {"description": "done", "content": {"application/json": {"schema": ok}}}}
        for status, what in (
            ("400", "refused by a rule"),
            ("401", "missing, wrong or malformed token"),
            ("403", "outside the caller's scope, a foreign Origin, or a Host not served"),
            ("405", "a method other than POST"),
            ("408", "the body did not arrive in time"),
            ("413", "body too large"),
            ("500", "internal error"),
        ):
            out[status] = {"description": what, "content": {"application/json": {"schema": error}}}
        return out

    paths: dict[str, Any] = {
        "/health": {
            "get": {
                "summary": "liveness, version and seq (no token needed)",
                "security": [],
                "responses": {
                    "200": {
                        "description": "alive",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                },
            }
        }
    }
    tables = [(f"{API}/{op}", op, fields, summary) for op, (fields, summary) in OPERATIONS.items()]
    tables += [(f"{API}/{o.route}", o.name, o.fields, o.summary) for o in load_domains().values()]
    for path, op, fields, summary in tables:
        properties = {
            name: {**schema_of(kind), "description": text}
            for name, (kind, _, text) in fields.items()
        }
        required = [name for name, (_, req, _) in fields.items() if req]
        body_schema: dict[str, Any] = {
            "type": "object",
            "properties": properties,
            "additionalProperties": False,
        }
        if required:
            body_schema["required"] = required
        answers = responses()
        if op == "stream":  # the one reply that stays open: a poll's reply per line
            answers["200"] = {
                "description": "a poll's reply per line, as the events come",
                "content": {"application/x-ndjson": {"schema": {"type": "object"}}},
            }
        paths[path] = {
            "post": {
                "operationId": op,
                "summary": summary,
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": body_schema}},
                },
                "responses": answers,
            }
        }
    return {
        "openapi": "3.1.0",
        "info": {"title": "Koinii daemon", "version": __version__},
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
        "paths": paths,
    }
