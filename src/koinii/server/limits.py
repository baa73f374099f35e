"""The daemon's limits: what one request may take, and how often the daemon looks after
itself. Every limit a request can meet is refused by name with the limit in its data
(docs/daemon.md, docs/security.md)."""

from __future__ import annotations

from dataclasses import dataclass


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
    # how long a read in turns (the channel page's moves, Daemon.in_turns) holds the loop
    # at a time: while N of them read, a request that needs k passes of the loop waits
    # k * N turns
    turn_s: float = 0.005
    max_budget_s: float = 600.0  # the most an operator's budget_ms may ask
    max_subscriptions: int = 1024
    subscriptions_per_principal: int = 64  # of those, what one token may hold
    ring: int = 256
    idle_s: float = 300.0
    log_retention: int | None = None  # keep this many change-log entries (None: all)
    header_s: float = 10.0  # a request's line and headers arrive within this
    body_s: float = 60.0  # its body arrives within this, once its headers have
    max_connections: int | None = None  # None: what the descriptor limit leaves
    agent_batch: int = 10_000  # entries one edit of an agent (or arbiter) may add (or remove)
    body_slice_s: float = 0.005  # how long decoding a body may hold the loop at a time
    body_budget_s: float = 2.0  # the loop's time decoding one body may take in all


# The refusals that say the store may no longer be this daemon's (see `Daemon.watch_writer`).
STORE_LOSS = frozenset({"writer-lost", "outcome-unknown"})
WRITER_CHECK_S = 0.25
WRITER_LEASE_S = 0.5
