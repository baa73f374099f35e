"""Reads: sentexes, belief at a context, queries, explanations, the change log.

Invariant: a read never changes the KB; it sees the state between two writes (the lock),
returns snapshots (`Sentex`) and binding maps, never the engine's own nodes, and orders
its results by content, so they do not depend on the order the knowledge arrived in.
"""

from __future__ import annotations

import functools
import gc
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from koinii.errors import Refused
from koinii.kb import checks, collector
from koinii.kb.contexts import EVERYTHING
from koinii.kb.index import accept_all, key, match, same, solve
from koinii.kb.maintenance import masked
from koinii.kb.rules import AND, literal
from koinii.kb.sentex import MAX_HANDLE, Node, Sentex, key_of
from koinii.kb.store import LogEntry
from koinii.results import WhyTree
from koinii.terms import Sym, Var, brief, is_ground, parse, show, variables

if TYPE_CHECKING:
    from koinii.kb.budget import Budget
    from koinii.kb.contexts import Hierarchy
    from koinii.kb.index import Index
    from koinii.kb.ledger import Ledger
    from koinii.kb.rules import Rule
    from koinii.kb.store import Store

_SQL_MAX = 2**63 - 1  # the largest integer a store column holds
MAX_GOAL_LITERALS = 64  # literals a goal list joins, at most


class Goals(Protocol):
    """What reads and watching ask of truth maintenance: whether a goal is held to the
    arity declared where it is read or watched (`Maintenance.check_goal_arity`)."""

    def check_goal_arity(self, literals: list[tuple[bool, tuple]], ctx: str | None) -> None: ...


class Read(Protocol):
    """What reads ask of the KB around them, at each use: the running operation's
    budget (`spend` per turn of a loop the input decides; `bounded`, with the KB's
    `query_budget_s`, yields the budget a query's join ticks), and a commit's wake-up
    (`on_commit` / `off_commit`, for a change-log read that waits). Whether a node is
    masked reads need not ask: given the masks and the hierarchy, they ask
    `maintenance.masked` directly, as maintenance's `masked_at` does."""

    query_budget_s: float | None

    def spend(self) -> None: ...

    def bounded(
        self, seconds: float | None, what: str
    ) -> AbstractContextManager[Budget | None]: ...

    def on_commit(self, listener: Callable[[int, str], Any]) -> int: ...

    def off_commit(self, token: int) -> bool: ...


class Reads:
    """Every read of the KB (see the module docstring): an object of its own, which `KB`
    holds and delegates to (engine.py).

    It keeps no state. What it reads is given to it, and it changes none of it: the KB's
    lock, the store (its change log), the stored nodes' index, the hierarchy, the masks
    and the rules (maintenance's, bound again only while the KB opens: this object is
    made after), the ledger (the seq, the next handle, whether a group is open: writes'),
    truth maintenance for a goal's declared arity (`Goals`), and the KB itself for what
    only it answers (`Read`)."""

    __slots__ = (
        "_kb",
        "_goals",
        "_lock",
        "_store",
        "_index",
        "_hierarchy",
        "_masks",
        "_rules",
        "_ledger",
    )

    def __init__(
        self,
        kb: Read,
        *,
        goals: Goals,
        lock: threading.RLock,
        store: Store,
        index: Index,
        hierarchy: Hierarchy,
        masks: dict[int, list[Node]],
        rules: dict[Node, Rule],
        ledger: Ledger,
    ) -> None:
        self._kb = kb
        self._goals = goals
        self._lock = lock
        self._store = store
        self._index = index
        self._hierarchy = hierarchy
        self._masks = masks
        self._rules = rules
        self._ledger = ledger

    def sentex(self, handle: Any) -> Sentex | None:
        """The sentex stored under `handle`, as a snapshot; None when none is stored."""
        handle = checked_handle(handle)
        with self._lock:
            node = self._index.by_handle.get(handle)
            return None if node is None else Sentex.of(node)

    def provenance(self, handle: Any) -> dict[str, Any] | None:
        """The provenance the sentex `handle` was stored with; None when none is stored."""
        handle = checked_handle(handle)
        with self._lock:
            node = self._index.by_handle.get(handle)
            return None if node is None else node.provenance()

    def believed(self, handle: Any, ctx: Any = None) -> bool:
        """Is the sentex believed (and, given `ctx`, visible and unmasked there)?"""
        handle = checked_handle(handle)
        with self._lock:
            node = self._index.by_handle.get(handle)
            if node is None or not node.believed:
                return False
            if ctx is None:
                return True
            ctx = checks.context_name(ctx, query=True)
            return node.context in self._hierarchy.up(ctx) and not self._masked(node, ctx)

    def why(self, handle: Any) -> WhyTree | None:
        """The justification tree: premises at the leaves, rules and antecedents above."""
        handle = checked_handle(handle)
        with self._lock:
            node = self._index.by_handle.get(handle)
            return None if node is None else self._why(node, frozenset())

    def _why(self, node: Node, path: frozenset[Node]) -> dict[str, Any]:
        self._kb.spend()
        tree: dict[str, Any] = {
            "handle": node.handle,
            "sentence": node.full_text,
            "context": node.context,
            "believed": node.believed,
            "premise": node.premise,
        }
        if node in path:
            tree["cycle"] = True
            return tree
        path = path | {node}
        tree["justifications"] = [
            {
                "rule": j.rule.handle,
                "rule_sentence": j.rule.full_text,
                "antecedents": [self._why(a, path) for a in j.antecedents],
            }
            for j in sorted(node.justs or (), key=lambda j: j.id)
        ]
        return tree

    def why_not(self, handle: Any, ctx: Any = None) -> str | None:
        """Why a sentex is not believed: retracted, defeated, unsupported, excepted,
        not-visible (at `ctx`) or not-stored; None when it is believed."""
        handle = checked_handle(handle)
        if ctx is not None:  # a bad context is refused whatever the sentex's state
            ctx = checks.context_name(ctx, query=True)
        with self._lock:
            node = self._index.by_handle.get(handle)
            if node is None:
                return "retracted" if handle < self._ledger.next_handle else "not-stored"
            if not node.believed:
                return "defeated" if node.defeated else "unsupported"
            if ctx is None:
                return "excepted" if self._masks.get(handle) else None
            if node.context not in self._hierarchy.up(ctx):
                return "not-visible"
            return "excepted" if self._masked(node, ctx) else None

    def sentexes_matching(self, pattern: Any, ctx: Any) -> list[Sentex]:
        """Believed sentexes stored in exactly `ctx` (a variable: any) unifying with
        `pattern`. No inheritance; `CxEverything` reads every stored one."""
        literals = goal_literals(pattern)
        if len(literals) != 1:
            raise Refused("shape", "sentexes_matching takes one pattern, not a conjunction", {})
        positive, atom = literals[0]
        ctx_name = checks.context_name(ctx, query=True)
        with self._lock:
            self._goals.check_goal_arity(literals, ctx_name)
            out = []
            everything = ctx_name == EVERYTHING
            anywhere = ctx_name.startswith("?")
            for node in self._index.candidates(atom, {}):
                self._kb.spend()
                if node.positive is not positive or match(atom, node.atom, {}) is None:
                    continue
                if not everything:
                    if not node.believed:
                        continue
                    if not anywhere and node.context != ctx_name:
                        continue
                    if self._masks and self._masked(node, node.context):
                        continue
                out.append(Sentex.of(node))
            out.sort(key=lambda s: (s.text, s.context))
            return out

    def query(self, goal: Any, ctx: Any, *, limit: int | None = None) -> list[dict[str, Any]]:
        """The solutions of `goal` at `ctx`, as binding maps keyed by "?var", ordered by
        content (`KB.query` says the rest): a variable `ctx` binds each solution's
        witness context, and the search stops at the `limit`-th distinct solution, so
        a limited answer is the first ones the index order finds, not the smallest."""
        literals = goal_literals(goal)
        ctx_name = checks.context_name(ctx, query=True)
        if limit is not None and (type(limit) is not int or limit < 0):
            raise Refused("bad-option", "limit must be a non-negative integer", {"option": "limit"})
        if limit == 0:
            return []
        paused = False  # the collector, once the answer is big (collector.READ_PAUSE_FROM)
        try:
            kb = self._kb
            with self._lock, kb.bounded(kb.query_budget_s, "the query") as budget:
                self._goals.check_goal_arity(literals, ctx_name)
                admit, accept = self._sight(ctx_name)
                seen: dict[tuple, dict[str, Any]] = {}
                bound: list[Var] | None = None
                for binding, _ in solve(self._index, literals, {}, accept, budget, admit):
                    if bound is None:  # every solution binds the same variables: key by them
                        bound = list(binding)
                    k = tuple([key(binding[v]) for v in bound])
                    if k not in seen:
                        seen[k] = {v.text: value for v, value in binding.items()}
                        if len(seen) == collector.READ_PAUSE_FROM and gc.isenabled():
                            gc.disable()
                            paused = True
                        if limit is not None and len(seen) >= limit:
                            break
                results = list(seen.values())
            if len(results) > 1:
                order = [v.text for _, atom in literals for v in variables(atom)]
                order = list(
                    dict.fromkeys(order + ([ctx_name] if ctx_name.startswith("?") else []))
                )
                results.sort(key=lambda solution: tuple([_text(solution[v]) for v in order]))
        finally:
            if paused:
                gc.enable()
        return results

    def _masked(self, node: Node, ctx: str) -> bool:
        """Is `node` hidden at `ctx` by a mask (maintenance's `masked`, over its masks)?"""
        return masked(self._masks, self._hierarchy, node, ctx)

    def acceptor(self, ctx: str) -> Callable[[Node, dict], dict | None]:
        """What a read at `ctx` sees, as one test: `accept(node, binding)` returns the
        binding to go on with (a variable context bound to its witness), or None."""
        admit, accept = self._sight(ctx)
        if admit is None:
            return accept

        def admitted(node: Node, binding: dict) -> dict | None:
            return accept(node, binding) if admit(node) else None

        return admitted

    def _sight(
        self, ctx: str
    ) -> tuple[Callable[[Node], bool] | None, Callable[[Node, dict], dict | None]]:
        """What a read at `ctx` sees, in the two parts `solve` takes: `admit(node)` looks
        at the node alone (believed, visible, unmasked; None: every node), `accept` binds a
        variable context to the node's (`accept_all` for a named one)."""
        if ctx == EVERYTHING:
            return None, accept_all
        masks, hierarchy = self._masks, self._hierarchy
        if ctx.startswith("?"):
            var = Var(ctx)

            def believed_unmasked(node: Node) -> bool:
                return node.believed and not (
                    masks and masked(masks, hierarchy, node, node.context)
                )

            def witnessed(node: Node, binding: dict) -> dict | None:
                witness = Sym(node.context)
                bound = binding.get(var)
                if bound is None:
                    binding = dict(binding)
                    binding[var] = witness
                    return binding
                return binding if bound is witness else None

            return believed_unmasked, witnessed
        up = self._hierarchy.up(ctx)

        def at_context(node: Node) -> bool:
            return (
                node.believed
                and node.context in up
                and not (masks and masked(masks, hierarchy, node, ctx))
            )

        return at_context, accept_all

    def argue(self, sentence: Any, ctx: Any) -> str:
        """ "true", "false", "contradiction" (both believed) or "unknown" at `ctx`."""
        positive, atom = goal_literals(sentence)[0]
        ctx_name = checks.context_name(ctx, query=True)
        text = show(atom)
        if not is_ground(atom):
            raise Refused("not-ground", "argue takes a ground sentence", {"sentence": text})
        with self._lock:
            accept = self.acceptor(ctx_name)
            found = self._index.same_atom(atom, key_of(atom, text))
            sides = {n.positive for n in found if accept(n, {}) is not None}
        if len(sides) == 2:
            return "contradiction"
        if not sides:
            return "unknown"
        return "true" if (positive in sides) else "false"

    def context_up(self, ctx: Any) -> frozenset[str]:
        """`ctx` and every context it sees, CxUniverse included."""
        name = checks.context_name(ctx)
        with self._lock:
            return self._hierarchy.up(name)

    def context_down(self, ctx: Any) -> frozenset[str]:
        """`ctx` and every context that sees it."""
        name = checks.context_name(ctx)
        with self._lock:
            return self._hierarchy.down(name)

    def sees(self, ctx: Any, other: Any) -> bool:
        """Whether `ctx` sees `other`: it is among `context_up(ctx)`."""
        return checks.context_name(other) in self.context_up(ctx)

    def context_counts(self) -> dict[str, int]:
        """Every context the KB knows (stored in, or named by the hierarchy), with how
        many sentexes are stored in exactly it, believed or not."""
        with self._lock:
            return {**dict.fromkeys(self._hierarchy.known(), 0), **self._index.per_context}

    def sentexes_in(self, ctx: Any, *, after: int = 0, limit: int = 100) -> list[Sentex]:
        """The sentexes stored in exactly `ctx`, believed or not, by handle: the first
        `limit` after the handle `after` (a page; the next starts after its last)."""
        name = checks.context_name(ctx)
        if type(after) is not int or type(limit) is not int or after < 0 or limit < 1:
            raise Refused("bad-option", "after is a handle (0 for the first page), limit >= 1", {})
        with self._lock:
            found = sorted(
                h for h, n in self._index.by_handle.items() if h > after and n.context == name
            )
            return [Sentex.of(self._index.by_handle[h]) for h in found[:limit]]

    def stats(self) -> dict[str, Any]:
        """How many sentexes (believed, premises, derived), rules, justifications and
        contexts the KB holds, and the seq of its last durable write."""
        with self._lock:
            nodes = self._index.by_handle.values()
            believed = sum(1 for n in nodes if n.believed)
            premises = sum(1 for n in nodes if n.premise)
            justifications = sum(len(n.justs) for n in nodes if n.justs)
            contexts = set(self._index.per_context) | self._hierarchy.known()
            return {
                "sentexes": len(self._index.by_handle),
                "believed": believed,
                "premises": premises,
                "derived": len(self._index.by_handle) - premises,
                "rules": len(self._rules),
                "justifications": justifications,
                "contexts": len(contexts),
                "seq": self._ledger.seq,
            }

    def changes(self, since: int = 0, limit: int = 1000, wait_ms: int = 0) -> dict[str, Any]:
        """The change log after `since` (`KB.changes` says the reply); with `wait_ms`, a
        commit listener wakes the wait, made before the log is looked at, so a write
        between the two is not missed, and no lock is held while it waits."""
        if type(wait_ms) is not int or not 0 <= wait_ms <= 30_000:
            raise Refused(
                "bad-option", "wait_ms is an integer from 0 to 30000", {"option": "wait_ms"}
            )
        if not wait_ms:
            return self._changes_after(since, limit)
        arrived = threading.Event()
        token = self._kb.on_commit(lambda seq, op: arrived.set())  # before looking: no lost wake
        try:
            reply = self._changes_after(since, limit)
            if reply["entries"] or reply["too_old"] or not arrived.wait(wait_ms / 1000):
                return reply
            return self._changes_after(since, limit)
        finally:
            self._kb.off_commit(token)

    def _changes_after(self, since: int, limit: int) -> dict[str, Any]:
        if type(since) is not int or since < 0:
            raise Refused(
                "bad-cursor", "since must be a non-negative integer seq", {"since": since}
            )
        with self._lock:
            floor = self._store.floor()
            if since < floor:
                return {"entries": [], "seq": self._ledger.seq, "too_old": True, "floor": floor}
            if type(limit) is not int or limit < 1:
                raise Refused("bad-option", "limit is a positive integer", {"option": "limit"})
            entries = self._store.changes(min(since, _SQL_MAX), min(limit, 10_000))
            return {
                "entries": [_entry(e) for e in entries],
                "seq": self._ledger.seq,
                "too_old": False,
                "floor": floor,
            }

    def log_point(self, seq: int | None = None, at: int | None = None) -> dict[str, int] | None:
        """`{seq, at, next_handle}` of the write at `seq`, or of the last one made at or
        before epoch-ms `at` (Store.log_point); seq 0, before any write, while the log
        starts there. None when the log does not hold it (compacted, or not yet written)."""
        with self._lock:
            if seq == 0 and self._store.floor() == 0:
                return {"seq": 0, "at": 0, "next_handle": 1}
            if seq is not None and seq > self._ledger.seq:
                return None
            return self._store.log_point(
                None if seq is None else min(seq, _SQL_MAX),
                None if at is None else min(at, _SQL_MAX),
            )

    def compact_log(self, keep: int) -> int:
        """Keep only the newest `keep` change-log entries; returns how many were dropped."""
        if type(keep) is not int or keep < 0:
            raise Refused("bad-option", "keep is a non-negative integer", {"option": "keep"})
        with self._lock:
            self._ledger.refuse_inside_group("compacting the log")
            return self._store.compact(min(keep, _SQL_MAX))


def _entry(entry: LogEntry) -> dict[str, Any]:
    out = {
        "seq": entry.seq,
        "op": entry.op,
        "at": entry.at,
        "added": entry.added,
        "removed": entry.removed,
    }
    if entry.records is not None:
        out["records"] = entry.records
    return out


def checked_handle(value: Any) -> int:
    if type(value) is not int or not 0 < value <= MAX_HANDLE:
        raise Refused(
            "bad-handle",
            f"a handle is a positive 64-bit integer, not {brief(value)}",
            {"handle": brief(value)},
        )
    return value


def _text(value: Any) -> str:
    """`show(value)` for a value bound by a stored sentex (so valid), a symbol's without a
    call: a large result is sorted on one text per row and variable."""
    return value.name if type(value) is Sym else show(value)


@functools.lru_cache(maxsize=4096)
def _parse_goal(text: str) -> tuple:
    return _literals_of(parse(text))


# A goal given as a term, checked once and kept like a text goal's parse: checking it
# (`show` walks it) was a quarter of a point query. Only a flat goal of symbols,
# variables, strings, integers and booleans is kept: hashing a nested tuple recurses with
# no depth check, a foreign item's hash may fail, and -0.0 == 0.0 though the two are two
# sentences. Python's equality calls 1 and true equal, so a kept goal with a number or a
# boolean in it is used only for a term `same` as it, type for type; between symbols,
# variables and strings equality is already exact.
_TERM_GOALS: dict[tuple, tuple[tuple, tuple]] = {}
_KEPT_ITEMS = frozenset({Sym, Var, str, int, bool})
_EXACT_ITEMS = frozenset({Sym, Var, str})
MAX_KEPT_GOALS = 4096


def _term_literals(goal: tuple) -> tuple:
    items = set(map(type, goal))
    if not items <= _KEPT_ITEMS:
        return _literals_of(goal)
    kept = _TERM_GOALS.get(goal)
    if kept is not None and (kept[0] is goal or items <= _EXACT_ITEMS or same(kept[0], goal)):
        return kept[1]
    literals = _literals_of(goal)
    if len(_TERM_GOALS) >= MAX_KEPT_GOALS:
        _TERM_GOALS.clear()
    _TERM_GOALS[goal] = (goal, literals)
    return literals


def goal_literals(goal: Any) -> list[tuple[bool, tuple]]:
    """A goal as literals: text or a term (an `and` is a conjunction) or a list of them."""
    if isinstance(goal, str):
        return list(_parse_goal(goal))
    if isinstance(goal, list):
        if len(goal) > MAX_GOAL_LITERALS:
            raise Refused(
                "shape",
                f"a goal of {len(goal)} literals; a goal joins at most {MAX_GOAL_LITERALS}",
                {"limit": MAX_GOAL_LITERALS},
            )
        out: list[tuple[bool, tuple]] = []
        for part in goal:
            out.extend(goal_literals(part))
        if not out:
            raise Refused("shape", "an empty goal", {})
        return out
    if type(goal) is tuple:
        return list(_term_literals(goal))
    return list(_literals_of(goal))


def _literals_of(term: Any) -> tuple:
    if type(term) is not tuple:
        raise Refused("shape", "a goal is a sentence such as (usesDatabase ?x Postgres)", {})
    show(term)
    if term[0] is AND:
        return tuple(lit for part in term[1:] for lit in _literals_of(part))
    return (literal(term, "a goal"),)
