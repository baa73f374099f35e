"""Domain operations: one definition, run in-process on a KB or over the wire.

A domain (wraps, sessions) defines each operation once with `@operation`: its JSON
fields, its access rule for the daemon, and the function that runs it on a `KB`. Then:
- in-process, `invoker(kb)(name, **fields)` calls the function directly;
- over the wire, `invoker(client)` is `client.invoke`, which POSTs to the daemon, and
  the daemon serves every registered operation at `POST /v1/<domain>/<name>` after
  checking its fields (the same table generates the OpenAPI document) and its access rule.

So a domain class written against `invoker(source)` runs the same over either medium,
and never imports the transport.

Invariant: every operation's arguments and result are JSON values (terms as text).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from koinii.kb import KB

# The domain modules whose operations the daemon serves (imported by the daemon).
DOMAIN_MODULES: tuple[str, ...] = (
    "koinii.moves",
    "koinii.conversation",
    "koinii.roster",
    "koinii.history",
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
    # A long poll: the daemon re-runs the operation after each write until its result is
    # non-empty or this many seconds (the field's value) have passed.
    wait_field: str | None = None
    # The daemon passes the authenticated `caller` to `run` (in one process: None), for
    # an operation whose rules depend on the caller's role beyond `authorize`.
    takes_caller: bool = False
    # How the daemon schedules it: "write" (on the loop, within the write budget; the
    # default) or "read" (a slice of the loop, then the rest of the read budget on a
    # forked snapshot, so a long read never holds everyone; nothing it does may write).
    schedule: str = "write"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def route(self) -> str:
        return self.name.replace(".", "/")


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
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register `run(kb, **fields)` as the operation `name`."""
    if schedule not in ("read", "write"):
        raise ValueError(f"{name}: schedule is read or write, not {schedule!r}")

    def register(run: Callable[..., Any]) -> Callable[..., Any]:
        REGISTRY[name] = Operation(
            name, run, fields, summary, authorize, wait_field, takes_caller, schedule
        )
        return run

    return register


def invoker(source: Any) -> Callable[..., Any]:
    """`call(name, **fields)` for a KB (direct) or a Client (over the wire)."""
    if isinstance(source, KB):

        def call(name: str, /, **fields: Any) -> Any:
            found = REGISTRY.get(name) or load_domains()[name]
            return found.run(source, **fields)

        return call

    def remote(name: str, /, **fields: Any) -> Any:
        # a long poll's seconds extend the client's read timeout
        wait_field = REGISTRY[name].wait_field if name in REGISTRY else None
        wait = fields.get(wait_field) if wait_field else None
        return source.invoke(name, wait_s=wait if isinstance(wait, (int, float)) else 0, **fields)

    return remote


def load_domains() -> dict[str, Operation]:
    """Import every domain module (registering its operations); returns the registry."""
    for module in DOMAIN_MODULES:
        importlib.import_module(module)
    return REGISTRY
