"""Adjudication: what happens after agents disagree.

The dispute reads (`koinii.disputes`) say what is disputed; this module owns the policy
they leave out — the clock, the timeout, the sinks — and the ways a dispute ends.

- **Leave open and notify** (the default): `notify_disputes` marks each pending dispute
  notified and calls the sink once; `sweep_stale` marks the ones past the timeout stale.
  Neither changes belief. A dispute is never resolved by trust.
- **An arbiter's ruling** (`rulings.rule`): the upheld side, asserted `monotonic` in the
  arbiter's own context and lifted under the channel, defeats the default side; `why`
  and `who_ruled` explain it; retracting it reopens the dispute.
- **A majority** (`majority.resolve_by_majority`): the ballots cast by their voters are counted
  and the side with strictly more is ruled by `AgentMajority`, through the same
  reversible ruling; a tie rules nothing. A ballot its voter did not cast (derived by a
  rule, stored outside the voter's own context, or written by another principal) never
  counts and never vetoes: it is listed as `ignored`.

This module holds the first and what the three share (the clock, the order of content);
the ruling is `koinii.disputes.rulings`'s, the count `koinii.disputes.majority`'s.
Reasoning on a contested premise, and quarantine, are `koinii.disputes.quarantine`'s.

Invariants (a ruling's own are `rulings`'s):
- Neither leaving open nor notifying changes belief.
- Results are ordered by content (numbers numerically), never by handle, so they do not
  depend on the order the knowledge arrived in.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from koinii import disputes
from koinii.terms import Sym, Var

__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "content_key",
    "notify_disputes",
    "now_ms",
    "opened_at",
    "poll",
    "sweep_stale",
]

DEFAULT_TIMEOUT_MS = 86_400_000  # a day: long enough that a real disagreement is looked at

Clock = Callable[[], int]
Sink = Callable[[dict[str, Any]], Any]


def now_ms() -> int:
    """The wall clock in epoch milliseconds (the engine stamps `created` the same way)."""
    return time.time_ns() // 1_000_000


# --- leave open and notify --------------------------------------------------------------------


def notify_disputes(
    kb: Any, ctx: Any, sink: Sink | None = None, *, clock: Clock = now_ms
) -> list[dict[str, Any]]:
    """Mark every pending dispute `ctx` observes notified, then call `sink(entry)`.

    Fires once per dispute: the stored mark is the deduplication, so a re-run (or another
    process running the same loop) does not push it again. The mark is written before the
    sink is called, so delivery is at most once; a sink that raises stops the run.
    Returns the disputes newly notified. Changes no belief.
    """
    pending = disputes.pending_disputes(kb, ctx)
    for entry in pending:
        disputes.mark_notified(kb, entry["dispute_id"], clock())
        if sink is not None:
            sink(entry)
    return pending


def sweep_stale(
    kb: Any,
    ctx: Any,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    sink: Sink | None = None,
    *,
    clock: Clock = now_ms,
) -> list[dict[str, Any]]:
    """Mark stale (`TimedOut`) every live dispute `ctx` observes that is older than
    `timeout_ms`, calling `sink(entry)` for each. Returns the disputes swept.

    One scan of the clashes per sweep; each dispute is then judged by its own mark and
    age (`opened_at`). A stale dispute is still live: nothing is resolved by age.
    """
    now = clock()
    swept = []
    for entry in disputes.disputes_in(kb, ctx):
        key = entry["dispute_id"]
        if disputes.is_stale(kb, key):
            continue
        opened = opened_at(kb, key)
        if opened is not None and now - opened <= timeout_ms:
            continue
        disputes.mark_stale(kb, key, now, "TimedOut")
        if sink is not None:
            sink(entry)
        swept.append(entry)
    return swept


def poll(
    kb: Any,
    ctx: Any,
    *,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    notify_sink: Sink | None = None,
    stale_sink: Sink | None = None,
    clock: Clock = now_ms,
) -> dict[str, list[dict[str, Any]]]:
    """One tick of the default policy: notify the new disputes, then sweep the old ones."""
    return {
        "notified": notify_disputes(kb, ctx, notify_sink, clock=clock),
        "stale": sweep_stale(kb, ctx, timeout_ms, stale_sink, clock=clock),
    }


def opened_at(kb: Any, key: Iterable[int]) -> int | None:
    """When the dispute arose: the latest `created` stamp across its sides AND everything
    they rest on (rules and premises), or None when nothing is stamped (infinitely old).

    A derived side is as new as the newest thing it rests on: a clash that two fresh
    premises produce through old rules is fresh, whatever the sides' own stamps say.
    """
    handles: set[int] = set()
    for side in disputes.dispute_id(key):
        tree = kb.why(side)
        if tree is not None:
            handles |= _rests_on(tree)
    stamps = []
    for handle in sorted(handles):
        provenance = kb.provenance(handle)
        created = provenance.get("created") if provenance else None
        if type(created) is int:
            stamps.append(created)
    return max(stamps) if stamps else None


def _rests_on(tree: dict[str, Any]) -> set[int]:
    """Every handle in a justification tree: the node, its rules and its antecedents."""
    found = {tree["handle"]}
    for justification in tree.get("justifications", ()):
        found.add(justification["rule"])
        for antecedent in justification["antecedents"]:
            found |= _rests_on(antecedent)
    return found


# --- content order ----------------------------------------------------------------------------

_RANK = {bool: 0, int: 1, float: 1, str: 2, Sym: 3, Var: 4, tuple: 5}


def content_key(term: Any) -> tuple:
    """A sort key that orders terms by content: numbers numerically (9 before 10)."""
    cls = type(term)
    if cls is tuple:
        return (5, tuple(content_key(x) for x in term))
    if cls is Sym or cls is Var:
        return (_RANK[cls], term.name)
    return (_RANK.get(cls, 6), term)
