"""The operation registry: every capability the daemon serves, declared once.

Each operation is declared with `@operation` beside the code it runs: its JSON fields
(which the daemon checks and the OpenAPI document describes), its summary, its access rule,
and how the daemon schedules it. Two kinds of code run them:
- a domain's operation (moves, conversation reads, wraps, sessions) runs on a `KB`:
  in-process, `invoker(kb)(name, **fields)` calls it directly; over the wire,
  `invoker(client)` is `client.invoke`, which POSTs to the daemon, and the daemon serves it
  at `POST /v1/<domain>/<name>`. So a domain class written against `invoker(source)` runs
  the same over either medium, and never imports the transport;
- an engine verb (assert, query, watch, ...) runs on the daemon (`on="daemon"`,
  `koinii.server.verbs`): it is the `KB` method of the same name with the daemon's access
  checks, attribution and subscriptions around it; in one process the `KB` method is it.

The daemon builds its routes, field checks, scheduling, body limits and OpenAPI document
from this one table; the clients' methods and the MCP tools are checked against it
(tests/test_parity.py).

Invariant: every operation's arguments and result are JSON values (terms as text).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from koinii.kb import KB

# The domain modules whose operations the daemon serves (imported by the daemon).
DOMAIN_MODULES: tuple[str, ...] = (
    "koinii.channel.moves",
    "koinii.channel.conversation",
    "koinii.channel.belief",
    "koinii.backups",
    "koinii.channel.roster",
    "koinii.channel.history",
    "koinii.wraps",
    "koinii.sessions",
)


@dataclass(frozen=True)
class Caller:
    """Who invokes an operation over the wire: principal id (None when open) and role."""

    id: str | None
    role: str

    @property
    def is_agent(self) -> bool:
        """An agent, or an arbiter (an agent that may also rule)."""
        return self.role in ("agent", "arbiter")


IN_PROCESS = Caller(None, "operator")  # in one process there is no boundary to enforce


@dataclass(frozen=True)
class Operation:
    name: str  # "<domain>.<verb>", e.g. "wraps.add"
    run: Callable[..., Any]  # run(kb, **fields) -> JSON value
    fields: dict[str, tuple[Any, bool, str]]  # name -> (JSON type, required, description)
    summary: str
    authorize: Callable[[KB, Caller, dict[str, Any]], None] | None = None
    # A long poll (a `records_read`): the daemon re-runs the operation after each write
    # until its result is non-empty or this many seconds (the field's value) have passed.
    wait_field: str | None = None
    # The daemon passes the authenticated `caller` to `run` (in one process: None), for
    # an operation whose rules depend on the caller's role beyond `authorize`.
    takes_caller: bool = False
    # How the daemon schedules it (one of SCHEDULES; what each means is said there).
    schedule: str = "write"
    # What runs it: "kb" (a domain's `run(kb, **fields)`) or "daemon" (an engine verb's
    # `run(daemon, caller, body)`, served only by the daemon).
    on: str = "kb"
    # The body may be large (`Limits.body_bytes`: a batch, records) or not
    # (`Limits.small_body_bytes`: a sentence or a goal, refused bigger before it is read).
    large_body: bool = True
    # A reader is refused before its body is read: the operation only ever writes.
    writes: bool = False
    # Run on the daemon's loop before an operation that leaves it (`records_read`):
    # `prepare(kb)` readies its tables, which writes the store, as only the loop may.
    prepare: Callable[[KB], None] | None = None
    # `read_then_records`: the part that reads the record tables, `then(kb, value)` of
    # what `run` read from the KB (in one process, run right after it).
    then: Callable[[KB, Any], Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def route(self) -> str:
        return self.name.replace(".", "/")


# How the daemon runs an operation (docs/daemon.md, bounded work):
SCHEDULES = {
    # on the event loop, at once: answers from memory in microseconds
    "loop": "on the loop, at once",
    # a slice of the loop; if it needs more, the rest of the read budget on a forked
    # snapshot while the loop serves everyone else (nothing it does may write)
    "read": "a slice of the loop, then a snapshot",
    # on the loop within the caller's budget, after the open group commits (a dry run, a
    # search of the committed index)
    "budgeted": "on the loop within its budget",
    # a search: once the index holds every write acknowledged before it, its asks of
    # the index on a thread (a connection of their own: none may cross a fork), the
    # steps between on the loop, within the read budget (server/searching.py)
    "search": "the index's asks on a thread, the rest on the loop, within the read budget",
    # a domain's read of its record tables only (the session reads), never of the KB's
    # sentexes: on a thread, through a connection of its own, its statements within the
    # read budget (server/searching.py); with a `wait_field`, a long poll whose read runs
    # so after each write (`wraps.wait`)
    "records_read": "on a thread, the record tables through a connection of its own, "
    "within the read budget",
    # a read of the KB (`run`: as a "read"), then of the record tables (`then`: as a
    # "records_read"), within one read budget (`conversation.roster`)
    "read_then_records": "a read of the KB, then of the record tables on a thread, "
    "within one read budget",
    # a domain's write: the open group commits first (its records are written at once)
    "write": "on the loop, after the open group commits",
    # an engine write: joins the open group commit, within the write budget
    "grouped_write": "on the loop, in a group commit, within the write budget",
    # waits for a future (a long poll of the feed), never holding the loop
    "long_poll": "awaits the feed, never holding the loop",
    # a reply that stays open (the feed's stream)
    "stream": "a reply that stays open",
}

REGISTRY: dict[str, Operation] = {}


def operation(
    name: str,
    fields: dict[str, tuple[Any, bool, str]],
    summary: str,
    *,
    authorize: Callable[[KB, Caller, dict[str, Any]], None] | None = None,
    wait_field: str | None = None,
    takes_caller: bool = False,
    schedule: str = "write",
    on: str = "kb",
    large_body: bool = True,
    writes: bool = False,
    prepare: Callable[[KB], None] | None = None,
    then: Callable[[KB, Any], Any] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register `run` as the operation `name` (`run(kb, **fields)`, or for an engine
    verb, `run(daemon, caller, body)`)."""
    if schedule not in SCHEDULES:
        raise ValueError(f"{name}: schedule is one of {sorted(SCHEDULES)}, not {schedule!r}")
    if wait_field is not None and schedule != "records_read":
        raise ValueError(f"{name}: a long poll (`wait_field`) is a records_read")
    if (then is None) != (schedule != "read_then_records"):
        raise ValueError(f"{name}: `then` goes with schedule read_then_records, and only")
    if name in REGISTRY:
        raise ValueError(f"{name} is declared twice: one declaration per operation")

    def register(run: Callable[..., Any]) -> Callable[..., Any]:
        REGISTRY[name] = Operation(
            name,
            run,
            fields,
            summary,
            authorize,
            wait_field,
            takes_caller,
            schedule,
            on,
            large_body,
            writes,
            prepare,
            then,
        )
        return run

    return register


def invoker(source: Any) -> Callable[..., Any]:
    """`call(name, **fields)` for a KB (direct) or a Client (over the wire)."""
    if isinstance(source, KB):

        def call(name: str, /, **fields: Any) -> Any:
            found = REGISTRY.get(name) or _load_domain_of(name)
            if found.on != "kb":
                raise ValueError(f"{name} is an engine verb: in one process, call kb.{name}")
            result = found.run(source, **fields)
            if found.then is not None:  # (what the daemon runs as two reads)
                result = found.then(source, result)
            if inspect.iscoroutine(result):  # one the daemon runs off its loop: to its end
                import asyncio  # (here only: a command's start-up need not import it)

                return asyncio.run(result)
            return result

        return call

    def remote(name: str, /, **fields: Any) -> Any:
        # a long poll's seconds extend the client's read timeout
        wait_field = REGISTRY[name].wait_field if name in REGISTRY else None
        wait = fields.get(wait_field) if wait_field else None
        return source.invoke(name, wait_s=wait if isinstance(wait, (int, float)) else 0, **fields)

    return remote


def _load_domain_of(name: str) -> Operation:
    """The operation `name`, its domain module imported first (`moves.claim`: koinii.channel.moves)
    — in one process a command needs one domain, not all eight (a CLI command's start-up)
    — else every domain module."""
    module = f"koinii.{name.partition('.')[0]}"
    if module in DOMAIN_MODULES:
        importlib.import_module(module)
        if name in REGISTRY:
            return REGISTRY[name]
    return load_domains()[name]


def load_domains() -> dict[str, Operation]:
    """Import every domain module (registering its operations); returns the registry."""
    for module in DOMAIN_MODULES:
        importlib.import_module(module)
    return REGISTRY
