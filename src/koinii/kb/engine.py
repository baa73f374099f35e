"""The knowledge base: writes, belief, reads and the feed over one store.

Invariants kept here:
- Every write runs inside one transaction (`_Tx`): checks come before any change, every
  in-memory change is undo-logged, and the write either commits to the store as one
  durable record with the next global `seq` — then its event is published — or is undone
  completely (handles it consumed are still never reused). In a group commit
  (`begin_group`) the writes become durable together, and are published or undone
  together.
- Belief is a function of what is stored, never of arrival order: rules fire over every
  stored sentex whatever its belief (so the justifications are a function of the stored
  set), and belief is the two-stratum least fixed point computed in `_relabel`
  (monotonic support first, then defeat by monotonic clashes, then default support).
- A carried claim is a derivation like a rule's: `(carriesClaim P N)` makes argument N
  of every P sentence, when it is `(quote S)`, a claim S in that sentence's own context,
  justified by the declaration and the sentence — so it lives and dies with the sentence
  (an answer and the claim it makes are one write and one retraction).
- Nothing speaks for another: where `(speechAct P)` is in force, a P sentence names its
  speaker as argument 1, and neither a rule nor a carried claim derives one whose speaker
  is not its own author (the rule's creator, the carrying sentence's speaker) — such a
  firing is not derived, and `violations()` lists it.
- One `RLock` serialises everything, so a KB may be shared between threads; callbacks
  run on the writer's thread and may write (their events follow).
- Work is bounded: inside `budget(seconds)` (the daemon wraps each operation so), every
  loop whose length the input decides ticks the budget (`_spend`, and `index.solve`
  takes it), so an operation past its deadline is refused `budget-exhausted` before
  anything of it is durable.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import gc
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from koinii.errors import Refused
from koinii.kb import checks, values
from koinii.kb.budget import Budget
from koinii.kb.checks import Entry
from koinii.kb.contexts import EVERYTHING, UNIVERSE, Hierarchy
from koinii.kb.feed import Change, Event, Feed, Routed
from koinii.kb.index import Index, key, match, members, same, solve
from koinii.kb.rules import (
    CARRIES_CLAIM,
    EXCEPT,
    GENL_CX,
    IMPLIES,
    NOT_DERIVABLE,
    SENTEX_HANDLE,
    Rule,
    compile_rule,
    literal,
)
from koinii.kb.sentex import (
    DEFAULT,
    MAX_HANDLE,
    MONOTONIC,
    NOT,
    STRENGTHS,
    Justification,
    Node,
    Sentex,
)
from koinii.kb.store import Commit, LogEntry, Store, open_store
from koinii.terms import QUOTE, Sym, Term, Var, brief, is_ground, parse, parse_all, show, variables

_PRINCIPAL: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "koinii_principal", default=None
)
_SQL_MAX = 2**63 - 1  # the largest integer a store column holds
log = logging.getLogger("koinii.kb")
ARITY = Sym("arity")
FUNCTIONAL = Sym("functional")
TARGET_FOLLOWING = Sym("target_following_predicate")
SPEECH_ACT = Sym("speechAct")
WRITE_OPTIONS = frozenset({"strength", "creator", "provenance"})
RESERVED_PROVENANCE = frozenset({"creator", "created", "principal"})


@dataclass(frozen=True)
class Retracted:
    """What a retract removed (counts), and the seq of its write."""

    removed_sentexes: int
    removed_justifications: int
    seq: int | None = None


@dataclass(frozen=True)
class Edited:
    """What an edit did: one handle (or list, for a split rule) per added entry."""

    handles: list[Any]
    removed_sentexes: int
    removed_justifications: int
    seq: int | None = None


class _Tx:
    """One write in progress: its undo log and what it changed (every write makes one,
    so the containers are built here as literals, not by dataclass factories)."""

    __slots__ = (
        "op",
        "undo",
        "added",
        "deleted",
        "touched",
        "new_justs",
        "dead_justs",
        "old_belief",
        "seeds",
        "fire",
        "new_rules",
        "masks",
        "full",
        "limbo",
        "depth",
        "derivations",
        "removed_sentexes",
        "removed_justifications",
        "changes",
        "records",
        "summary",
        "records_result",
    )

    def __init__(self, op: str) -> None:
        self.op = op
        self.undo: list[Callable[[], None]] = []
        self.added: dict[int, Node] = {}  # nodes created in this tx
        self.deleted: dict[int, tuple[Node, str]] = {}  # pre-existing, gone
        self.touched: set[Node] = set()  # pre-existing, rows changed
        self.new_justs: dict[int, Justification] = {}
        self.dead_justs: dict[int, Justification] = {}
        self.old_belief: dict[Node, tuple[bool, bool, bool]] = {}
        self.seeds: set[Node] = set()  # where belief may have changed
        self.fire: list[Node] = []  # new nodes the rules must see
        self.new_rules: list[Node] = []
        self.masks: list[tuple[Node, bool]] = []  # (mask, added?)
        self.full = False  # the hierarchy or a declaration changed: recompute everything
        self.limbo: dict[tuple[str, str, bool], Node] = {}
        self.depth: dict[Node, int] = {}
        self.derivations = 0
        self.removed_sentexes = 0
        self.removed_justifications = 0
        self.changes: tuple[list[Change], list[Change]] = ([], [])  # the belief diff
        self.records: Callable[[Any], Any] | None = None  # a domain write, same transaction
        self.summary: dict[str, Any] | None = None  # its brief, for the change log
        self.records_result: Any = None


class KB:
    """A knowledge base over one store. Open one with `koinii.open_kb`."""

    def __init__(
        self,
        store: Store,
        *,
        max_depth: int = 64,
        max_derivations: int = 100_000,
        query_budget_s: float | None = None,
        write_budget_s: float | None = None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self._store = store
        self._clock = clock or _now  # epoch ms for `created` stamps and the change log
        self._lock = threading.RLock()
        self._index = Index()
        self._hierarchy = Hierarchy()
        self._rules: dict[Node, Rule] = {}
        self._rules_by_literal: dict[tuple[Sym, bool], list[tuple[Node, int]]] = {}
        self._masks: dict[int, list[Node]] = {}  # masked handle -> its mask nodes
        self._carriers: dict[Sym, list[Node]] = {}  # functor -> its carriesClaim declarations
        self._referrers: dict[int, set[Node]] = {}  # handle -> nodes naming it
        self._feed = Feed()
        self._commit_listeners: dict[int, Callable[[int, str], Any]] = {}
        self._tx: _Tx | None = None
        self._group: list[tuple[_Tx, int, Routed | None]] | None = None  # see begin_group
        self._group_seq = 0  # the seq before the open group's first write
        self._closed = False
        self.max_depth = max_depth
        self.max_derivations = max_derivations
        self.query_budget_s = query_budget_s
        self.write_budget_s = write_budget_s
        self._budget: Budget | None = None  # the running operation's (see `budget`)
        self._shipped: frozenset[int] = frozenset()  # see `mark_shipped`
        self._rebuild()

    # ================================================================ lifecycle

    @property
    def location(self) -> str:
        return self._store.location

    @property
    def durability(self) -> dict[str, str]:
        """What a committed write survives: the backend and the setting that decides it,
        as the store read it back from its connection (e.g. SQLite's PRAGMA synchronous)."""
        return dict(self._store.durability)

    def _rebuild(self) -> None:
        """Build indexes and belief from the store's records, in one pass, no re-checks."""
        with _collector_paused(True):
            self._rebuild_from(self._store.load())

    def _rebuild_from(self, loaded: Any) -> None:
        self._next_handle = loaded.next_handle
        self._seq = loaded.seq
        index_link = self._link_quiet
        for row in loaded.sentexes:
            atom = parse(row.text)
            node = Node(
                row.handle,
                atom,
                row.text,
                row.context,
                row.positive,
                row.premise,
                row.strength,
                row.creator,
                row.created,
                row.extra,
            )
            index_link(node)
        by_handle = self._index.by_handle
        top = 0
        for jrow in loaded.justifications:
            j = Justification(
                jrow.id,
                by_handle[jrow.conclusion],
                by_handle[jrow.rule],
                tuple(by_handle[h] for h in jrow.antecedents),
            )
            self._attach(j)
            top = max(top, jrow.id)
        self._next_just = top + 1
        self._relabel(list(by_handle.values()), None)

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                try:
                    self.commit_group()
                finally:
                    self._closed = True
                    self._store.close()

    def __enter__(self) -> KB:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ================================================================ writes

    def assert_(
        self,
        sentence: Term | str,
        context: Any,
        *,
        strength: str = "default",
        creator: str | None = None,
        provenance: dict[str, Any] | None = None,
    ) -> int | list[int]:
        """Store `sentence` in `context`; returns its handle (a list for a split rule).

        Idempotent: a canonically equal sentence in the same context returns the existing
        handle, keeping the stronger strength and merging new provenance fields.
        """
        if strength == "default" and creator is None and provenance is None:
            opts = {}  # the common write: nothing to check
        else:
            opts = {"strength": strength, "creator": creator, "provenance": provenance}
        with self._lock, self._bounded(self.write_budget_s, "the write"):
            tx = self._begin("assert")
            try:
                handles = self._add(tx, sentence, context, opts)
                return self._finish(tx, handles)
            except BaseException:
                self._abort(tx)
                raise

    def retract(self, handle: Any) -> Retracted:
        """Remove an asserted sentex and everything that rested only on it.

        Also tears down, recursively, every stored meta-sentex whose predicate is marked
        `(target_following_predicate P)` and that names a removed sentex. A handle that
        names no stored sentex is refused (`unknown-handle`; `data.issued` tells one that
        was stored once — a retract sent again after it landed — from a typo).
        """
        handle = _handle(handle)
        with self._lock, self._bounded(self.write_budget_s, "the write"):
            tx = self._begin("retract")
            try:
                self._remove(tx, handle)
                seq = self._finish(tx, None, want_seq=True)
                return Retracted(tx.removed_sentexes, tx.removed_justifications, seq)
            except BaseException:
                self._abort(tx)
                raise

    def edit(self, add: Sequence[Any] = (), remove: Sequence[Any] = ()) -> Edited:
        """Adds, then removes, as ONE all-or-nothing write with one settle and one event.

        `add` holds `(sentence, context)` or `(sentence, context, opts)`; a refusal rolls
        the whole batch back and carries `{"rolled_back": True, "in", "index"}`.
        """
        with (
            self._lock,
            self._bounded(self.write_budget_s, "the write"),
            _collector_paused(len(add) >= _LARGE_BATCH),
        ):
            tx = self._begin("edit")
            try:
                handles = self._apply_batch(tx, add, remove)
                seq = self._finish(tx, None, want_seq=True)
                return Edited(handles, tx.removed_sentexes, tx.removed_justifications, seq)
            except Refused as refusal:
                self._abort(tx)
                refusal.data.setdefault("rolled_back", True)
                raise
            except BaseException:
                self._abort(tx)
                raise

    def check(self, sentence: Term | str, context: Any, **opts: Any) -> list[dict[str, Any]]:
        """Dry run of `assert_`: [] when admissible, else the problems. Stores nothing."""
        return self.check_edit(add=[(sentence, context, opts)])

    def check_edit(
        self, add: Sequence[Any] = (), remove: Sequence[Any] = ()
    ) -> list[dict[str, Any]]:
        """Dry run of `edit`: every problem of the batch, judged against the KB as it is."""
        problems: list[dict[str, Any]] = []
        with self._lock, self._bounded(self.write_budget_s, "the dry run"):
            next_handle, next_just = self._next_handle, self._next_just
            tx = self._begin("check")
            try:
                for where, items in (("add", add), ("remove", remove)):
                    for i, item in enumerate(_listed(items, where)):
                        try:
                            if where == "add":
                                self._add_entry(tx, item)
                            else:
                                self._remove(tx, _handle(item), top=True)
                        except Refused as refusal:
                            problems.append(_problem(refusal, where, i))
                if not problems:
                    try:
                        self._settle(tx)
                    except Refused as refusal:
                        problems.append(_problem(refusal, "add", len(add) - 1))
            finally:
                self._undo(tx)
                self._next_handle, self._next_just = next_handle, next_just
        return problems

    def load_text(self, source: Any, context: Any, *, strength: str = "default") -> Edited:
        """Load every sentence of a vocabulary into `context`, atomically.

        `source` is the text itself (a str) or a file (a `pathlib.Path` / PathLike).
        Loading is idempotent: sentences already stored change nothing.
        """
        if isinstance(source, os.PathLike):
            with open(source, encoding="utf-8") as f:
                source = f.read()
        terms = parse_all(source)
        return self.edit(add=[(t, context, {"strength": strength}) for t in terms])

    def mark_shipped(self, handles: Collection[int]) -> None:
        """Make `handles` — the vocabulary that ships, installed on every open — read-only:
        a retraction of one would be acknowledged and then undone by the next open's
        install, so it is refused (`vocabulary-read-only`) instead."""
        with self._lock:
            self._shipped = frozenset(handles)

    def add_provenance(self, handle: Any, fields: dict[str, Any]) -> dict[str, Any] | None:
        """Add provenance fields to a stored sentex (fields it has already are kept)."""
        handle = _handle(handle)
        extra = _provenance(fields)
        with self._lock:
            node = self._index.by_handle.get(handle)
            if node is None:
                return None
            tx = self._begin("provenance")
            try:
                self._merge_provenance(tx, node, None, extra)
                self._finish(tx, None)
            except BaseException:
                self._abort(tx)
                raise
            return node.provenance()

    # ---------------------------------------------------------------- transaction

    def _begin(self, op: str) -> _Tx:
        if self._closed:
            raise Refused("closed", "this knowledge base is closed", {})
        self._refuse_if_lost()
        if self._tx is not None:
            raise Refused(
                "reentrant-write",
                "a write started while another was in progress on this thread",
                {},
            )
        self._tx = _Tx(op)
        return self._tx

    def _finish(self, tx: _Tx, result: Any, want_seq: bool = False) -> Any:
        """Settle belief, commit durably, publish the event; returns `result` (or seq).

        In a group, the store holds the rows and the event waits for `commit_group`,
        routed now, against the hierarchy this write saw.
        """
        self._settle(tx)
        seq = self._commit(tx)
        self._tx = None
        if seq is not None:
            added, removed = tx.changes
            routed = None
            if self._feed and (added or removed):
                routed = self._feed.route(seq, added, removed, self._hierarchy.up)
            if self._group is None:
                self._publish(seq, tx.op, routed)
            else:
                self._group.append((tx, seq, routed))
        return seq if want_seq else result

    def _publish(self, seq: int, op: str, routed: Routed | None) -> None:
        """Tell the watchers and the commit listeners about one durable write."""
        if routed:
            self._feed.deliver(routed)
        for listener in list(self._commit_listeners.values()):
            try:
                listener(seq, op)
            except Exception:
                log.exception("commit listener failed")

    # ---------------------------------------------------------------- group commit

    def begin_group(self) -> None:
        """Let the writes that follow share one durable commit, made by `commit_group`.

        For a server with many concurrent writers (the daemon): a commit costs more than
        the write it makes durable, so writes that arrive together commit together. Each
        write in a group still checks, applies and returns at once, and later reads see
        it; the store holds its rows, and its feed event and commit listeners wait, until
        `commit_group` writes them all in one transaction. So nothing a group wrote — nor
        any read made while the group was open — may be acknowledged before
        `commit_group` returns. What writes the store at once (`transact`, `compact_log`,
        `ensure_schema`) is refused inside a group (`group-open`).
        """
        with self._lock:
            if self._closed:
                raise Refused("closed", "this knowledge base is closed", {})
            if self._group is not None:
                raise Refused("group-open", "a group commit is already open", {})
            self._refuse_if_lost()
            self._store.begin_group()
            self._group = []
            self._group_seq = self._seq

    def commit_group(self) -> int:
        """Make the open group durable, then publish its writes in seq order; returns
        how many writes it held (0 when no group is open).

        If the store cannot commit, every write of the group is undone — in memory as in
        the store, last first — and the store's refusal is raised: none of them happened.
        """
        with self._lock:
            held, self._group = self._group, None
            if held is None:
                return 0
            try:
                self._store.commit_group()
            except BaseException:
                for tx, _, _ in reversed(held):
                    self._undo(tx)
                self._seq = self._group_seq
                with contextlib.suppress(Exception):  # handles it consumed stay consumed
                    self._store.save_next_handle(self._next_handle)
                raise
            for tx, seq, routed in held:
                self._publish(seq, tx.op, routed)
            return len(held)

    # ---------------------------------------------------------------- budgets

    @contextlib.contextmanager
    def budget(self, seconds: float | None, what: str = "the operation", spent: float = 0.0):
        """Bound the work inside the block to `seconds` (None: only the KB's own
        `query_budget_s` / `write_budget_s`): past it, the operation running is refused
        `budget-exhausted` — a write rolled back whole. For a server that must not let
        one request hold everyone (the daemon wraps each operation); yields the Budget."""
        outer = self._budget
        self._budget = None if seconds is None else Budget(seconds, what, spent)
        try:
            yield self._budget
        finally:
            self._budget = outer

    def _bounded(self, seconds: float | None, what: str):
        """This operation's budget: the one in force, else `seconds` (None: unbounded)."""
        if self._budget is not None or seconds is None:
            return contextlib.nullcontext()
        return self.budget(seconds, what)

    def _spend(self) -> None:
        """One unit of work toward the running operation's budget: call it once per turn
        of any loop whose length the input decides (a derivation, a node relabelled)."""
        budget = self._budget
        if budget is not None:
            budget.tick()

    def check_writer(self) -> Refused | None:
        """None while this KB is still its store's writer; else the refusal every write
        now gets (`writer-lost`: a PostgreSQL writer whose connection was lost and that
        could not reconnect as the same writer). Probes the store's connection."""
        with self._lock:
            return None if self._closed else self._store.check_writer()

    def _refuse_if_lost(self) -> None:
        lost = self._store.lost
        if lost is not None:
            raise Refused(lost.kind, lost.message, lost.data)

    def _outside_group(self, what: str) -> None:
        """Refuse what cannot wait in a group: it writes the store itself, at once."""
        if self._group is not None:
            raise Refused(
                "group-open",
                f"{what} cannot happen inside a group commit; commit the group first",
                {"what": what},
            )

    def _abort(self, tx: _Tx) -> None:
        consumed = bool(tx.added) or bool(tx.limbo)
        self._undo(tx)
        if consumed:
            # the refusal being raised matters more than a failure to record the mark
            with contextlib.suppress(Exception):
                self._store.save_next_handle(self._next_handle)

    def _undo(self, tx: _Tx) -> None:
        for step in reversed(tx.undo):
            step()
        for node, (believed, mono, defeated) in tx.old_belief.items():
            node.believed, node.mono, node.defeated = believed, mono, defeated
        self._tx = None

    def _apply_batch(self, tx: _Tx, add: Sequence[Any], remove: Sequence[Any]) -> list[Any]:
        handles = []
        for where, items in (("add", add), ("remove", remove)):
            for i, item in enumerate(_listed(items, where)):
                try:
                    if where == "add":
                        handles.append(self._add_entry(tx, item))
                    else:
                        self._remove(tx, _handle(item), top=True)
                except Refused as refusal:
                    refusal.data.update({"rolled_back": True, "in": where, "index": i})
                    raise
        return handles

    def _add_entry(self, tx: _Tx, item: Any) -> int | list[int]:
        if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
            raise Refused(
                "shape",
                "an added entry is (sentence, context) or (sentence, context, options)",
                {},
            )
        opts = item[2] if len(item) == 3 else {}
        if opts is None:
            opts = {}
        if not isinstance(opts, dict):
            raise Refused("bad-option", "options must be a mapping", {})
        return self._add(tx, item[0], item[1], opts)

    # ---------------------------------------------------------------- adding

    def _add(self, tx: _Tx, sentence: Any, context: Any, opts: dict[str, Any]) -> int | list[int]:
        strength, creator, extra = self._write_options(opts) if opts else (DEFAULT, None, None)
        principal = _PRINCIPAL.get()
        if principal is not None:
            extra = {**(extra or {}), "principal": principal}
        if type(sentence) is str and not sentence.isascii():
            values.check_text("sentence", sentence, nul=True)  # its NULs are stored escaped
        entries = checks.prepare(sentence, context)
        handles = [self._store_entry(tx, e, strength, creator, extra) for e in entries]
        return handles if entries[0].split else handles[0]

    @staticmethod
    def _write_options(opts: dict[str, Any]) -> tuple[int, str | None, dict | None]:
        """(strength, creator, extra provenance) from a write's options, or a refusal."""
        unknown = set(opts) - WRITE_OPTIONS
        if unknown:
            name = sorted(unknown)[0]
            raise Refused(
                "unknown-option",
                f"unknown option {name!r}; known: creator, provenance, strength",
                {"option": name, "known": sorted(WRITE_OPTIONS)},
            )
        strength_name = opts.get("strength") or "default"
        strength = STRENGTHS.get(strength_name) if isinstance(strength_name, str) else None
        if strength is None:
            raise Refused(
                "bad-option",
                f"strength must be 'default' or 'monotonic', not {opts.get('strength')!r}",
                {"option": "strength", "value": str(opts.get("strength"))},
            )
        creator = opts.get("creator")
        if creator is not None:
            if not isinstance(creator, str):
                raise Refused("bad-option", "creator must be a string", {"option": "creator"})
            values.check_text("creator", creator)
        return strength, creator, _provenance(opts.get("provenance"))

    def _store_entry(
        self, tx: _Tx, entry: Entry, strength: int, creator: str | None, extra: dict | None
    ) -> int:
        atom = entry.atom
        if atom[0] is GENL_CX:
            strength = MONOTONIC  # genlCx edges are always held monotonic
        node = self._index.find(entry.text, entry.context, entry.positive)
        if node is not None:
            self._strengthen(tx, node, strength)
            self._merge_provenance(tx, node, creator, extra)
            return node.handle
        self._check_state(tx, entry)
        node = Node(
            self._next_handle,
            atom,
            entry.text,
            entry.context,
            entry.positive,
            True,
            strength,
            creator,
            self._clock(),
            extra,
        )
        self._next_handle += 1
        self._link(tx, node)
        return node.handle

    def _check_state(self, tx: _Tx, entry: Entry) -> None:
        """The checks that read the store: handles, cycles, arity declarations."""
        for handle in entry.handles:
            if handle not in self._index.by_handle:
                raise Refused(
                    "unknown-handle",
                    f"(sentexHandle {handle}) names no stored sentex",
                    {"handle": handle},
                )
        atom = entry.atom
        if atom[0] is GENL_CX and self._hierarchy.would_cycle(atom[1].name, atom[2].name):
            raise Refused(
                "not-well-formed",
                f"{entry.text} would make a cycle: {atom[2].name} already sees {atom[1].name}",
                {"sentence": entry.text},
            )
        if ARITY not in self._index.by_functor:  # the common case: nothing declares arity
            return
        atoms = (
            [atom]
            if entry.rule is None
            else [a for _, a in entry.rule.antecedents] + [entry.rule.consequent[1]]
        )
        for a in atoms:
            declared = self._declared_arity(a[0], entry.context, tx)
            if declared is not None and declared != len(a) - 1:
                raise Refused(
                    "arity",
                    f"{a[0].name} takes {declared} argument(s), not {len(a) - 1}",
                    {"predicate": a[0].name, "declared": declared, "given": len(a) - 1},
                )

    def _strengthen(self, tx: _Tx, node: Node, strength: int) -> None:
        if not node.premise:
            self._set(tx, node, "premise", True)
            self._set(tx, node, "strength", strength)
        elif strength > node.strength:
            self._set(tx, node, "strength", strength)
        else:
            return
        tx.seeds.add(node)

    def _merge_provenance(
        self, tx: _Tx, node: Node, creator: str | None, extra: dict | None
    ) -> None:
        if creator is not None and node.creator is None:
            self._set(tx, node, "creator", creator)
        if extra:
            current = node.extra or {}
            new = {k: v for k, v in extra.items() if k not in current}
            if new:
                self._set(tx, node, "extra", {**current, **new})

    def _set(self, tx: _Tx, node: Node, attr: str, value: Any) -> None:
        old = getattr(node, attr)
        setattr(node, attr, value)
        tx.undo.append(lambda: setattr(node, attr, old))
        if node.handle not in tx.added:
            tx.touched.add(node)

    # ---------------------------------------------------------------- removing

    def _remove(self, tx: _Tx, handle: int, top: bool = True) -> None:
        node = self._index.by_handle.get(handle)
        if node is None:
            if handle in tx.deleted:  # named twice in one edit, or gone with what it rested on
                return
            if handle >= self._next_handle:
                hint = "no sentex has had that handle yet: handles come from assert"
            else:
                hint = "it was retracted or removed earlier, or its write was refused"
            raise Refused(
                "unknown-handle",
                f"no sentex {handle} is stored ({hint}); nothing to retract",
                {"handle": handle, "issued": handle < self._next_handle},
            )
        if handle in self._shipped:
            raise Refused(
                "vocabulary-read-only",
                f"sentex {handle} is shipped vocabulary ({node.context}), reinstalled on every "
                f"open, so it cannot be retracted; to set it aside in a context, mask it "
                f"there: assert (except (sentexHandle {handle})) in that context",
                {"handle": handle, "context": node.context},
            )
        if not node.premise:
            raise Refused(
                "not-a-premise",
                f"sentex {handle} was derived, not asserted; retract what it rests on (see why())",
                {"handle": handle},
            )
        self._set(tx, node, "premise", False)
        if node.justs:
            tx.seeds.add(node)
        else:
            self._delete(tx, node, "retracted")

    def _delete(self, tx: _Tx, first: Node, reason: str) -> None:
        """Remove `first` and, transitively, what rested only on it or follows it."""
        queue = deque([(first, reason)])
        by_handle = self._index.by_handle
        while queue:
            node, why = queue.popleft()
            self._spend()
            if by_handle.get(node.handle) is not node:
                continue
            for j in list(node.justs or ()):
                self._drop_just(tx, j)
            self._unlink(tx, node)
            if node.handle in tx.added:
                del tx.added[node.handle]
            else:
                tx.deleted[node.handle] = (node, why)
            tx.removed_sentexes += 1
            tx.seeds.update(self._index.same_atom(node.text))
            # `uses` holds a justification once per place the node fills in it, so a
            # rule like (and (likes ?x ?y) (likes ?y ?x)) over (likes Cat Cat) lists it
            # twice: drop each justification once
            for j in dict.fromkeys(node.uses or ()):
                self._drop_just(tx, j)
                concl = j.conclusion
                if not concl.premise and not concl.justs:
                    queue.append((concl, "unsupported"))
            for referrer in list(self._referrers.get(node.handle, ())):
                if self._follows_target(referrer, tx):
                    queue.append((referrer, "retracted"))

    def _follows_target(self, node: Node, tx: _Tx) -> bool:
        """Is node's predicate marked target-following where node is stored?"""
        return self._declared(TARGET_FOLLOWING, node.atom[0], node.context, tx) is not None

    # ---------------------------------------------------------------- linking

    def _link_quiet(self, node: Node) -> None:
        """Put a node in every structure that knows stored nodes (no undo, no checks)."""
        self._index.link(node)
        atom = node.atom
        functor = atom[0]
        for handle in _handles_in(atom):
            self._referrers.setdefault(handle, set()).add(node)
        if functor is GENL_CX:
            self._hierarchy.add_edge(atom[1].name, atom[2].name)
        elif functor is EXCEPT:
            self._masks.setdefault(atom[1][1], []).append(node)
        elif functor is IMPLIES:
            rule = compile_rule(atom)
            self._rules[node] = rule
            for i, (positive, pattern) in enumerate(rule.antecedents):
                self._rules_by_literal.setdefault((pattern[0], positive), []).append((node, i))
        elif functor is CARRIES_CLAIM and _carrier_shaped(node):
            self._carriers.setdefault(atom[1], []).append(node)

    def _unlink_quiet(self, node: Node) -> None:
        self._index.unlink(node)
        atom = node.atom
        functor = atom[0]
        for handle in _handles_in(atom):
            refs = self._referrers[handle]
            refs.discard(node)
            if not refs:
                del self._referrers[handle]
        if functor is GENL_CX:
            self._hierarchy.remove_edge(atom[1].name, atom[2].name)
        elif functor is EXCEPT:
            masks = self._masks[atom[1][1]]
            masks.remove(node)
            if not masks:
                del self._masks[atom[1][1]]
        elif node in self._rules:
            rule = self._rules.pop(node)
            for i, (positive, pattern) in enumerate(rule.antecedents):
                entries = self._rules_by_literal[(pattern[0], positive)]
                entries.remove((node, i))
                if not entries:
                    del self._rules_by_literal[(pattern[0], positive)]
        elif functor is CARRIES_CLAIM and _carrier_shaped(node):
            carriers = self._carriers[atom[1]]
            carriers.remove(node)
            if not carriers:
                del self._carriers[atom[1]]

    def _link(self, tx: _Tx, node: Node) -> None:
        self._link_quiet(node)
        tx.undo.append(lambda: self._unlink_quiet(node))
        tx.added[node.handle] = node
        tx.seeds.add(node)
        self._note_structure(tx, node, added=True)

    def _unlink(self, tx: _Tx, node: Node) -> None:
        self._unlink_quiet(node)
        tx.undo.append(lambda: self._link_quiet(node))
        self._note_structure(tx, node, added=False)

    def _note_structure(self, tx: _Tx, node: Node, added: bool) -> None:
        functor = node.atom[0]
        if functor is GENL_CX or (functor is CARRIES_CLAIM and _carrier_shaped(node)):
            tx.full = True
        elif functor is EXCEPT:
            tx.masks.append((node, added))
            target = self._index.by_handle.get(node.atom[1][1])
            if target is not None:
                tx.seeds.add(target)
        elif node in self._rules:
            if added:
                tx.new_rules.append(node)
        elif added:
            tx.fire.append(node)

    def _attach(self, j: Justification) -> None:
        concl = j.conclusion
        if concl.justs is None:
            concl.justs = []
        concl.justs.append(j)
        for support in j.supports():
            if support.uses is None:
                support.uses = []
            support.uses.append(j)

    def _detach(self, j: Justification) -> None:
        concl = j.conclusion
        _remove_last(concl.justs, j)
        if not concl.justs:
            concl.justs = None
        for support in j.supports():
            _remove_last(support.uses, j)
            if not support.uses:
                support.uses = None

    def _add_just(self, tx: _Tx, j: Justification) -> None:
        self._attach(j)
        tx.undo.append(lambda: self._detach(j))
        tx.new_justs[j.id] = j
        tx.seeds.add(j.conclusion)

    def _drop_just(self, tx: _Tx, j: Justification) -> None:
        self._detach(j)
        tx.undo.append(lambda: self._attach(j))
        if tx.new_justs.pop(j.id, None) is None:
            tx.dead_justs[j.id] = j
            tx.removed_justifications += 1
        tx.seeds.add(j.conclusion)

    # ---------------------------------------------------------------- declarations

    def _in_force(self, node: Node, tx: _Tx | None) -> bool:
        # a declaration added earlier in the same write is in force for later entries
        return node.believed or (tx is not None and node.premise and node.handle in tx.added)

    def _declared(self, functor: Sym, subject: Any, context: str, tx: _Tx | None) -> Node | None:
        """A `(functor subject …)` declaration in force and visible at `context`."""
        findex = self._index.by_functor.get(functor)
        bucket = findex.args[0].get(subject) if findex is not None and findex.args else None
        if bucket is None:  # the common case on every write: nothing declared
            return None
        up = self._hierarchy.up(context)
        for node in members(bucket):
            if node.positive and node.context in up and self._in_force(node, tx):
                return node
        return None

    def _declared_arity(self, functor: Sym, context: str, tx: _Tx | None) -> int | None:
        node = self._declared(ARITY, functor, context, tx)
        if node is None or len(node.atom) != 3 or type(node.atom[2]) is not int:
            return None
        return node.atom[2]

    def _functional_predicates(self) -> set[Sym]:
        return {
            n.atom[1]
            for n in self._index.with_functor(FUNCTIONAL)
            if n.believed and n.positive and len(n.atom) == 2 and type(n.atom[1]) is Sym
        }

    # ================================================================ settle: rules + belief

    def _settle(self, tx: _Tx) -> None:
        derives = bool(self._rules) or bool(self._carriers)
        if tx.full:
            if derives:
                self._rederive_all(tx)
            self._relabel(list(self._index.by_handle.values()), tx)
        else:
            if derives and (tx.fire or tx.new_rules):
                self._fire(tx)
            if tx.seeds:
                self._relabel(self._closure(tx.seeds), tx)
        tx.changes = self._changes(tx)

    def _fire(self, tx: _Tx) -> None:
        """Semi-naive forward chaining from the new rules and the new nodes (and the
        claims the new nodes carry)."""
        for rule_node in tx.new_rules:
            if self._index.by_handle.get(rule_node.handle) is not rule_node:
                continue
            rule = self._rules[rule_node]
            for binding, antecedents in list(
                solve(self._index, list(rule.antecedents), {}, _any_node, self._budget)
            ):
                self._conclude(tx, rule_node, rule, binding, antecedents)
        queue = tx.fire
        carriers = self._carriers
        while queue:
            node = queue.pop()
            if self._index.by_handle.get(node.handle) is not node:
                continue
            if carriers and node.atom[0] in carriers:
                for declaration in carriers[node.atom[0]]:
                    self._carry(tx, declaration, node)
            for rule_node, i in list(self._rules_by_literal.get((node.atom[0], node.positive), ())):
                rule = self._rules[rule_node]
                binding = match(rule.antecedents[i][1], node.atom, {})
                if binding is None:
                    continue
                others = [lit for k, lit in enumerate(rule.antecedents) if k != i]
                joined = solve(self._index, others, binding, _any_node, self._budget)
                for full, rest in list(joined):
                    antecedents = rest[:i] + (node,) + rest[i:]
                    self._conclude(tx, rule_node, rule, full, antecedents)

    def _conclude(
        self, tx: _Tx, rule_node: Node, rule: Rule, binding: dict, antecedents: tuple[Node, ...]
    ) -> None:
        self._spend()
        contexts = {rule_node.context, *(a.context for a in antecedents)}
        placements = self._hierarchy.maximal_common_descendants(contexts)
        if not placements:
            return  # reported by violations()
        positive, pattern = rule.consequent
        atom = _substitute(pattern, binding)
        try:
            text = show(atom)
        except Refused as refusal:
            raise Refused(
                "derivation-limit",
                f"a rule derived a sentence past the limits: {refusal.message}",
                {"rule": rule_node.handle},
            ) from None
        if self._speaks_for_another(atom, rule_node.creator, placements, tx):
            return  # reported by violations()
        self._derive(tx, rule_node, atom, positive, text, placements, antecedents)

    def _speaks_for_another(
        self, atom: tuple, author: str | None, placements: Collection[str], tx: _Tx | None
    ) -> bool:
        """Would deriving `atom` put words in another's mouth: is it a speech act (where
        it would be placed) whose speaker is not `author`?"""
        if SPEECH_ACT not in self._index.by_functor or len(atom) < 2:
            return False
        speaker = atom[1]
        if type(speaker) is Sym and author is not None and speaker.name == author:
            return False
        return any(self._declared(SPEECH_ACT, atom[0], ctx, tx) for ctx in placements)

    def _carry(self, tx: _Tx, declaration: Node, node: Node) -> None:
        """The claim `node` carries under `declaration` `(carriesClaim P N)`, if any:
        argument N quoted, derived in node's own context (where the declaration is seen).

        The claim is checked as if its author wrote it — a carried claim is no way
        around the write checks — and a bad one refuses the whole write.
        """
        self._spend()
        position = declaration.atom[2]
        atom = node.atom
        if not node.positive or len(atom) <= position:
            return
        content = atom[position]
        if type(content) is not tuple or content[0] is not QUOTE or len(content) != 2:
            return
        if declaration.context not in self._hierarchy.up(node.context):
            return
        try:
            (entry,) = checks.prepare(content[1], node.context)
            if entry.atom[0] in NOT_DERIVABLE:
                raise Refused(
                    "not-well-formed",
                    f"`{entry.atom[0].name}` is not a claim",
                    {"sentence": entry.text},
                )
            for handle in entry.handles:
                if handle not in self._index.by_handle:
                    raise Refused(
                        "unknown-handle",
                        f"(sentexHandle {handle}) names no stored sentex",
                        {"handle": handle},
                    )
        except (Refused, ValueError) as refusal:
            why = refusal.message if isinstance(refusal, Refused) else "a rule is not a claim"
            kind = refusal.kind if isinstance(refusal, Refused) else "not-well-formed"
            raise Refused(
                kind,
                f"the claim {show(content)} carried by {node.full_text} is refused: {why}; "
                "quote a ground claim such as (quote (usesDatabase ProdCluster PostgreSQL16))",
                {"sentence": node.full_text, "claim": show(content[1])},
            ) from None
        speaker = atom[1] if len(atom) > 1 and type(atom[1]) is Sym else None
        author = speaker.name if speaker is not None else node.creator
        if entry.positive and self._speaks_for_another(entry.atom, author, (node.context,), tx):
            raise Refused(
                "koinii/speaker-mismatch",
                f"{node.full_text} carries {show(content[1])}, which speaks as "
                f"{show(entry.atom[1])}: an answer's claim speaks only for its author",
                {"sentence": node.full_text, "claim": show(content[1])},
            )
        self._derive(
            tx, declaration, entry.atom, entry.positive, entry.text, (node.context,), (node,)
        )

    def _derive(
        self,
        tx: _Tx,
        rule_node: Node,
        atom: tuple,
        positive: bool,
        text: str,
        placements: Collection[str],
        antecedents: tuple[Node, ...],
    ) -> None:
        """Justify `atom` (with `positive`) in each placement by `rule_node` from
        `antecedents`, creating the derived node where none is stored yet."""
        depth = 1 + max((tx.depth.get(a, 0) for a in antecedents), default=0)
        for ctx in placements:
            node = self._index.find(text, ctx, positive)
            if node is None:
                node = tx.limbo.pop((text, ctx, positive), None)
                if node is not None:
                    self._link_quiet(node)
                    tx.undo.append(lambda n=node: self._unlink_quiet(n))
                    tx.fire.append(node)
                else:
                    if depth > self.max_depth:
                        raise Refused(
                            "derivation-limit",
                            f"derivations chained deeper than {self.max_depth} in one write",
                            {"limit": self.max_depth, "rule": rule_node.handle},
                        )
                    node = Node(
                        self._next_handle,
                        atom,
                        text,
                        ctx,
                        positive,
                        False,
                        DEFAULT,
                        None,
                        self._clock(),
                        None,
                    )
                    self._next_handle += 1
                    self._link(tx, node)
                    tx.depth[node] = depth
            elif any(
                j.rule is rule_node and j.antecedents == antecedents for j in node.justs or ()
            ):
                continue
            tx.derivations += 1
            if tx.derivations > self.max_derivations:
                raise Refused(
                    "derivation-limit",
                    f"one write derived more than {self.max_derivations} conclusions",
                    {"limit": self.max_derivations},
                )
            self._add_just(tx, Justification(self._next_just, node, rule_node, antecedents))
            self._next_just += 1

    def _rederive_all(self, tx: _Tx) -> None:
        """After a hierarchy change: recompute every justification from the premises.

        Derived nodes that are derived again keep their handles (they wait in `limbo`);
        those that are not are deleted as unsupported.
        """
        for node in list(self._index.by_handle.values()):
            for j in list(node.justs or ()):
                self._drop_just(tx, j)
        for node in list(self._index.by_handle.values()):
            if not node.premise:
                self._unlink_quiet(node)
                tx.undo.append(lambda n=node: self._link_quiet(n))
                tx.limbo[(node.text, node.context, node.positive)] = node
        tx.fire = [n for n in self._index.by_handle.values() if n not in self._rules]
        tx.new_rules = list(self._rules)
        self._fire(tx)
        for node in tx.limbo.values():
            if node.handle in tx.added:
                del tx.added[node.handle]
            else:
                tx.deleted[node.handle] = (node, "unsupported")
            tx.removed_sentexes += 1
            for referrer in list(self._referrers.get(node.handle, ())):
                if self._follows_target(referrer, tx):
                    self._delete(tx, referrer, "retracted")
        tx.limbo.clear()

    def _closure(self, seeds: Collection[Node]) -> list[Node]:
        """Seeds plus everything whose belief can depend on them."""
        by_handle = self._index.by_handle
        if len(seeds) == 1:  # the common write: one new node nothing rests on yet
            (node,) = seeds
            if not node.uses and node.text not in self._index.two_sided:
                return [node] if by_handle.get(node.handle) is node else []
        seen: set[Node] = set()
        stack = [n for n in seeds if by_handle.get(n.handle) is n]
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            for j in node.uses or ():
                stack.append(j.conclusion)
            if node.text in self._index.two_sided:
                stack.extend(self._index.same_atom(node.text))
        return list(seen)

    def _relabel(self, nodes: list[Node], tx: _Tx | None) -> None:
        """Recompute belief for `nodes` (a set closed under dependence).

        Stratum 1: monotonic support (premises held monotonic, rules and antecedents all
        monotonic). Then defeat: a node without monotonic support is defeated by a
        monotonic contrary that some common context sees unmasked. Stratum 2: support at
        any strength for the undefeated. Least fixed points, so arrival order is moot.
        """
        if len(nodes) == 1 and not nodes[0].justs and nodes[0].text not in self._index.two_sided:
            # the common write: one sentex nothing rests on, with no contrary: no fixed
            # point to find (a region of one has no consequents, or they would be in it)
            node = nodes[0]
            if tx is not None:
                tx.old_belief.setdefault(node, (node.believed, node.mono, node.defeated))
            node.believed = node.premise
            node.mono = node.premise and node.strength == MONOTONIC
            node.defeated = False
            return
        region = set(nodes)
        old = {n: (n.believed, n.mono, n.defeated) for n in nodes}
        if tx is not None:
            for n, flags in old.items():
                tx.old_belief.setdefault(n, flags)
        for n in nodes:
            n.believed = n.mono = n.defeated = False
        masks = self._masks

        def unmasked(j: Justification) -> bool:
            if not masks:
                return True
            ctx = j.conclusion.context
            return not any(self._masked_at(s, ctx) for s in j.supports())

        # stratum 1: monotonic
        self._propagate(
            region,
            [n for n in nodes if n.premise and n.strength == MONOTONIC],
            lambda s: s.mono,
            "mono",
            unmasked,
        )
        # defeat
        for n in nodes:
            if not n.mono and n.text in self._index.two_sided:
                n.defeated = any(
                    other.mono
                    and other.positive is not n.positive
                    and self._clash_visible(n, other)
                    for other in self._index.same_atom(n.text)
                )
        # stratum 2: any strength
        for n in nodes:
            if n.mono:
                n.believed = True
        self._propagate(
            region,
            [n for n in nodes if not n.believed and n.premise and not n.defeated],
            lambda s: s.believed,
            "believed",
            unmasked,
            skip=lambda n: n.defeated,
        )

    def _propagate(self, region, starts, holds, flag, valid, skip=lambda n: False) -> None:
        missing: dict[Justification, int] = {}
        for n in region:
            if getattr(n, flag) or skip(n):
                continue
            for j in n.justs or ():
                count = sum(1 for s in j.supports() if not holds(s))
                missing[j] = count
                if count == 0 and valid(j):
                    starts.append(n)
        queue = deque(starts)
        spend = self._spend
        while queue:
            n = queue.popleft()
            spend()
            if getattr(n, flag) or skip(n):
                continue
            setattr(n, flag, True)
            if flag == "mono":
                n.believed = True
            for j in n.uses or ():
                concl = j.conclusion
                if concl not in region or getattr(concl, flag) or j not in missing:
                    continue
                missing[j] -= 1
                if missing[j] == 0 and valid(j) and not skip(concl):
                    queue.append(concl)

    def _masked_at(self, node: Node, ctx: str) -> bool:
        """Is `node` hidden at `ctx` by a mask stored in a context `ctx` sees?"""
        masks = self._masks.get(node.handle)
        if not masks:
            return False
        up = self._hierarchy.up(ctx)
        return any(m.context in up for m in masks)

    def _clash_visible(self, a: Node, b: Node) -> bool:
        """Does some context see both `a` and `b`, with neither masked there?"""
        hierarchy = self._hierarchy
        plain = not (self._masks.get(a.handle) or self._masks.get(b.handle))
        if plain and (a.context in hierarchy.up(b.context) or b.context in hierarchy.up(a.context)):
            return True
        common = hierarchy.down(a.context) & hierarchy.down(b.context)
        if plain:
            return bool(common)
        return any(not self._masked_at(a, c) and not self._masked_at(b, c) for c in common)

    # ---------------------------------------------------------------- commit

    def _changes(self, tx: _Tx) -> tuple[list[Change], list[Change]]:
        added: list[Change] = []
        removed: list[Change] = []
        for node, (was, _, _) in tx.old_belief.items():
            gone = node.handle in tx.deleted or node.handle not in self._index.by_handle
            if gone:
                continue
            if node.believed and not was:
                added.append(_change(node))
            elif was and not node.believed:
                removed.append(_change(node, "defeated" if node.defeated else "unsupported"))
        for node, why in tx.deleted.values():
            if tx.old_belief.get(node, (node.believed,))[0]:
                removed.append(_change(node, why))
        for mask, was_added in tx.masks:
            target = self._index.by_handle.get(mask.atom[1][1])
            if target is None or not target.believed:
                continue
            if was_added and mask.handle in self._index.by_handle:
                removed.append(_change(target, "excepted", mask.context))
            elif not was_added and mask.handle not in self._index.by_handle:
                added.append(_change(target, None, mask.context))
        if len(added) > 1:
            added.sort(key=_by_handle)
        if len(removed) > 1:
            removed.sort(key=_by_handle)
        return added, removed

    def _commit(self, tx: _Tx) -> int | None:
        """Make the transaction durable; returns its seq, or None if it changed nothing."""
        added, removed = tx.changes
        upserts = list(tx.added.values())
        if tx.touched:
            upserts.extend(
                n for n in tx.touched if n.handle not in tx.deleted and n.handle not in tx.added
            )
        changed = upserts or tx.deleted or tx.new_justs or tx.dead_justs or added or removed
        if not changed and tx.records is None:
            return None
        seq = self._seq + 1
        entry = LogEntry(
            seq,
            tx.op,
            self._clock(),
            [c.public for c in added],
            [c.public for c in removed],
            tx.summary,
        )
        tx.records_result = self._store.commit(
            Commit(
                entry,
                self._next_handle,
                upserts,
                list(tx.deleted),
                list(tx.new_justs.values()),
                list(tx.dead_justs),
                tx.records,
            )
        )
        self._seq = seq
        return seq

    # ================================================================ reads

    def sentex(self, handle: Any) -> Sentex | None:
        handle = _handle(handle)
        with self._lock:
            node = self._index.by_handle.get(handle)
            return None if node is None else Sentex.of(node)

    def provenance(self, handle: Any) -> dict[str, Any] | None:
        handle = _handle(handle)
        with self._lock:
            node = self._index.by_handle.get(handle)
            return None if node is None else node.provenance()

    def believed(self, handle: Any, ctx: Any = None) -> bool:
        """Is the sentex believed (and, given `ctx`, visible and unmasked there)?"""
        handle = _handle(handle)
        with self._lock:
            node = self._index.by_handle.get(handle)
            if node is None or not node.believed:
                return False
            if ctx is None:
                return True
            ctx = checks.context_name(ctx, query=True)
            return node.context in self._hierarchy.up(ctx) and not self._masked_at(node, ctx)

    def why(self, handle: Any) -> dict[str, Any] | None:
        """The justification tree: premises at the leaves, rules and antecedents above."""
        handle = _handle(handle)
        with self._lock:
            node = self._index.by_handle.get(handle)
            return None if node is None else self._why(node, frozenset())

    def _why(self, node: Node, path: frozenset[Node]) -> dict[str, Any]:
        self._spend()
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
        handle = _handle(handle)
        with self._lock:
            node = self._index.by_handle.get(handle)
            if node is None:
                return "retracted" if handle < self._next_handle else "not-stored"
            if not node.believed:
                return "defeated" if node.defeated else "unsupported"
            if ctx is None:
                return "excepted" if self._masks.get(handle) else None
            ctx = checks.context_name(ctx, query=True)
            if node.context not in self._hierarchy.up(ctx):
                return "not-visible"
            return "excepted" if self._masked_at(node, ctx) else None

    def sentexes_matching(self, pattern: Any, ctx: Any) -> list[Sentex]:
        """Believed sentexes stored in exactly `ctx` (a variable: any) unifying with
        `pattern`. No inheritance; `CxEverything` reads every stored one."""
        literals = _goal_literals(pattern)
        if len(literals) != 1:
            raise Refused("shape", "sentexes_matching takes one pattern, not a conjunction", {})
        positive, atom = literals[0]
        ctx_name = checks.context_name(ctx, query=True)
        with self._lock:
            out = []
            everything = ctx_name == EVERYTHING
            anywhere = ctx_name.startswith("?")
            for node in self._index.candidates(atom, {}):
                self._spend()
                if node.positive is not positive or match(atom, node.atom, {}) is None:
                    continue
                if not everything:
                    if not node.believed:
                        continue
                    if not anywhere and node.context != ctx_name:
                        continue
                    if self._masks and self._masked_at(node, node.context):
                        continue
                out.append(Sentex.of(node))
            out.sort(key=lambda s: (s.text, s.context))
            return out

    def query(self, goal: Any, ctx: Any, *, limit: int | None = None) -> list[dict[str, Any]]:
        """Solutions of `goal` (a literal or a list of them, joined on shared variables)
        read at `ctx` through its ancestor set, as binding maps keyed by "?var".

        A variable `ctx` reads everywhere and binds the witness context; `CxEverything`
        reads every stored sentex, believed or not. Results are ordered by content.

        `limit` bounds the work as well as the answer: the search stops at the `limit`-th
        distinct solution, so the answer is the first `limit` solutions the search finds
        (in the order of the index, which is not the order of content), sorted by content
        — not the `limit` smallest. Without a limit every solution is found and sorted.
        """
        literals = _goal_literals(goal)
        ctx_name = checks.context_name(ctx, query=True)
        if limit is not None and (type(limit) is not int or limit < 0):
            raise Refused("bad-option", "limit must be a non-negative integer", {"option": "limit"})
        if limit == 0:
            return []
        with self._lock, self._bounded(self.query_budget_s, "the query"):
            accept = self._acceptor(ctx_name)
            seen: dict[tuple, dict[str, Any]] = {}
            for binding, _ in solve(self._index, literals, {}, accept, self._budget):
                out = {v.text: value for v, value in binding.items()}
                k = tuple((name, key(value)) for name, value in sorted(out.items()))
                if k not in seen:
                    seen[k] = out
                    if limit is not None and len(seen) >= limit:
                        break
            results = list(seen.values())
        if len(results) > 1:
            order = [v.text for _, atom in literals for v in variables(atom)]
            order = list(dict.fromkeys(order + ([ctx_name] if ctx_name.startswith("?") else [])))
            results.sort(key=lambda solution: tuple(show(solution[v]) for v in order))
        return results

    def _acceptor(self, ctx: str) -> Callable[[Node, dict], dict | None]:
        if ctx == EVERYTHING:
            return _any_node
        masks = self._masks
        if ctx.startswith("?"):
            var = Var(ctx)

            def anywhere(node: Node, binding: dict) -> dict | None:
                if not node.believed or (masks and self._masked_at(node, node.context)):
                    return None
                witness = Sym(node.context)
                bound = binding.get(var)
                if bound is None:
                    binding = dict(binding)
                    binding[var] = witness
                    return binding
                return binding if bound is witness else None

            return anywhere
        up = self._hierarchy.up(ctx)

        def at_context(node: Node, binding: dict) -> dict | None:
            if node.believed and node.context in up:
                if masks and self._masked_at(node, ctx):
                    return None
                return binding
            return None

        return at_context

    def argue(self, sentence: Any, ctx: Any) -> str:
        """ "true", "false", "contradiction" (both believed) or "unknown" at `ctx`."""
        positive, atom = _goal_literals(sentence)[0]
        ctx_name = checks.context_name(ctx, query=True)
        text = show(atom)
        if not is_ground(atom):
            raise Refused("not-ground", "argue takes a ground sentence", {"sentence": text})
        with self._lock:
            accept = self._acceptor(ctx_name)
            sides = {n.positive for n in self._index.same_atom(text) if accept(n, {}) is not None}
        if len(sides) == 2:
            return "contradiction"
        if not sides:
            return "unknown"
        return "true" if (positive in sides) else "false"

    def contradictions(self, ctx: Any = None) -> list[dict[str, Any]]:
        """Dilemmas (default vs default) a reader at `ctx` can see (None: all)."""
        return self._clashes(ctx, monotonic=False)

    def conflicts(self, ctx: Any = None) -> list[dict[str, Any]]:
        """Clashes between monotonic sentexes a reader at `ctx` can see (None: all)."""
        return self._clashes(ctx, monotonic=True)

    def _clashes(self, ctx: Any, monotonic: bool) -> list[dict[str, Any]]:
        ctx_name = None if ctx is None else checks.context_name(ctx, query=True)
        with self._lock:
            visible = None if ctx_name is None else self._acceptor(ctx_name)
            groups: list[list[Node]] = []
            for text in sorted(self._index.two_sided):
                self._spend()
                nodes = [
                    n
                    for n in self._index.same_atom(text)
                    if n.believed
                    and n.mono == monotonic
                    and (visible is None or visible(n, {}) is not None)
                ]
                if visible is not None:
                    if {n.positive for n in nodes} == {True, False}:
                        groups.append(sorted(nodes, key=lambda n: n.handle))
                else:
                    groups.extend(self._observed_clashes(nodes))
            for functor in sorted(self._functional_predicates(), key=lambda s: s.name):
                groups.extend(self._functional_clashes(functor, visible, monotonic))
            return [_clash_entry(g) for g in groups]

    def _observed_clashes(self, nodes: list[Node]) -> list[list[Node]]:
        """The clashes among `nodes` that some context observes: at each context that
        sees any of them, the unmasked ones it sees, when both polarities are there;
        only the largest such sets (what one reader sees together is one clash)."""
        seen: set[frozenset[Node]] = set()
        for ctx in set().union(*(self._hierarchy.down(n.context) for n in nodes)):
            at = self._acceptor(ctx)
            group = frozenset(n for n in nodes if at(n, {}) is not None)
            if {n.positive for n in group} == {True, False}:
                seen.add(group)
        largest = [g for g in seen if not any(g < other for other in seen)]
        return sorted(
            (sorted(g, key=lambda n: n.handle) for g in largest),
            key=lambda g: [n.handle for n in g],
        )

    def _functional_clashes(self, functor: Sym, visible, monotonic: bool) -> list[list[Node]]:
        by_prefix: dict[str, list[Node]] = {}
        for n in self._index.with_functor(functor):
            seen = visible is None or visible(n, {}) is not None
            if n.believed and n.positive and len(n.atom) >= 2 and seen:
                by_prefix.setdefault(show(n.atom[:-1]), []).append(n)
        groups = []
        for prefix in sorted(by_prefix):
            nodes = by_prefix[prefix]
            members_: set[Node] = set()
            for a in nodes:
                for b in nodes:
                    self._spend()
                    if (
                        a is not b
                        and not same(a.atom[-1], b.atom[-1])
                        and (a.mono and b.mono) == monotonic
                        and (visible is not None or self._clash_visible(a, b))
                    ):
                        members_.update((a, b))
            if members_:
                groups.append(sorted(members_, key=lambda n: n.handle))
        return groups

    def violations(self) -> list[dict[str, Any]]:
        """Rule firings that derived nothing: no context to place their conclusion in
        (`reason: no-context`), or a speech act whose speaker is not the rule's author
        (`speaks-for-another`)."""
        with self._lock:
            out = []
            for rule_node, rule in self._rules.items():
                for binding, antecedents in solve(
                    self._index, list(rule.antecedents), {}, _any_node, self._budget
                ):
                    contexts = {rule_node.context, *(a.context for a in antecedents)}
                    placements = self._hierarchy.maximal_common_descendants(contexts)
                    positive, pattern = rule.consequent
                    atom = _substitute(pattern, binding)
                    if not placements:
                        reason = "no-context"
                    elif self._speaks_for_another(atom, rule_node.creator, placements, None):
                        reason = "speaks-for-another"
                    else:
                        continue
                    out.append(
                        {
                            "rule": rule_node.handle,
                            "antecedents": [a.handle for a in antecedents],
                            "conclusion": show(atom if positive else (NOT, atom)),
                            "contexts": sorted(contexts),
                            "reason": reason,
                        }
                    )
            out.sort(key=lambda v: (v["rule"], v["antecedents"]))
            return out

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
                "seq": self._seq,
            }

    @property
    def seq(self) -> int:
        """The global log sequence number of the last durable write."""
        return self._seq

    def changes(self, since: int = 0, limit: int = 1000, wait_ms: int = 0) -> dict[str, Any]:
        """The durable change log after global seq `since`: `{entries, seq, too_old}`.

        `too_old` is True when the log was compacted past `since`: resnapshot. With
        `wait_ms`, waits up to that long for a write when there is nothing yet (from
        another thread: this one holds no lock while it waits).
        """
        if type(wait_ms) is not int or not 0 <= wait_ms <= 30_000:
            raise Refused(
                "bad-option", "wait_ms is an integer from 0 to 30000", {"option": "wait_ms"}
            )
        if not wait_ms:
            return self._changes_after(since, limit)
        arrived = threading.Event()
        token = self.on_commit(lambda seq, op: arrived.set())  # before looking: no lost wake
        try:
            reply = self._changes_after(since, limit)
            if reply["entries"] or reply["too_old"] or not arrived.wait(wait_ms / 1000):
                return reply
            return self._changes_after(since, limit)
        finally:
            self.off_commit(token)

    def _changes_after(self, since: int, limit: int) -> dict[str, Any]:
        if type(since) is not int or since < 0:
            raise Refused(
                "bad-cursor", "since must be a non-negative integer seq", {"since": since}
            )
        with self._lock:
            floor = self._store.floor()
            if since < floor:
                return {"entries": [], "seq": self._seq, "too_old": True, "floor": floor}
            if type(limit) is not int or limit < 1:
                raise Refused("bad-option", "limit is a positive integer", {"option": "limit"})
            entries = self._store.changes(min(since, _SQL_MAX), min(limit, 10_000))
            return {
                "entries": [_entry(e) for e in entries],
                "seq": self._seq,
                "too_old": False,
                "floor": floor,
            }

    def compact_log(self, keep: int) -> int:
        """Keep only the newest `keep` change-log entries; returns how many were dropped."""
        if type(keep) is not int or keep < 0:
            raise Refused("bad-option", "keep is a non-negative integer", {"option": "keep"})
        with self._lock:
            self._outside_group("compacting the log")
            return self._store.compact(min(keep, _SQL_MAX))

    # ================================================================ domain records

    def ensure_schema(self, domain: str, migrations: Any) -> None:
        """Create or upgrade a domain's record tables (wraps, sessions) in this store."""
        with self._lock:
            self._outside_group("creating record tables")
            self._store.ensure_schema(domain, migrations)

    def read_records(self, reader: Callable[[Any], Any]) -> Any:
        """`reader(connection)` over the record tables, between writes."""
        with self._lock:
            if self._closed:
                raise Refused("closed", "this knowledge base is closed", {})
            return self._store.read(reader)

    def transact(
        self,
        op: str,
        records: Callable[[Any, list[Any]], Any],
        *,
        add: Sequence[Any] = (),
        remove: Sequence[Any] = (),
        summary: dict[str, Any] | None = None,
    ) -> tuple[Any, Edited]:
        """One durable write of sentexes and domain records together, all or nothing.

        Applies `add`/`remove` like `edit`, then runs `records(connection, handles)` in the
        same store transaction (its SQL commits with the sentexes and the change-log
        entry, or none of it does), and returns `(records' result, Edited)`. The write
        always takes a seq; `summary` is what the change log says it changed.
        """
        with self._lock, self._bounded(self.write_budget_s, "the write"):
            self._outside_group("a domain write")
            tx = self._begin(op)
            try:
                handles = self._apply_batch(tx, add, remove)
                tx.records = lambda connection: records(connection, handles)
                tx.summary = summary
                seq = self._finish(tx, None, want_seq=True)
            except BaseException:
                self._abort(tx)
                raise
            edited = Edited(handles, tx.removed_sentexes, tx.removed_justifications, seq)
            return tx.records_result, edited

    def on_commit(self, listener: Callable[[int, str], Any]) -> int:
        """Call `listener(seq, op)` after every durable write (belief changed or not)."""
        with self._lock:
            token = self._next_listener = getattr(self, "_next_listener", 0) + 1
            self._commit_listeners[token] = listener
            return token

    def off_commit(self, token: int) -> bool:
        with self._lock:
            return self._commit_listeners.pop(token, None) is not None

    # ================================================================ attribution

    @contextlib.contextmanager
    def attributed_to(self, principal: str | None):
        """Writes inside the block record `principal` in provenance.

        For the daemon, which knows who authenticated; a writer's own provenance may not
        name a principal (`reserved-provenance`), so the field cannot be forged.
        """
        token = _PRINCIPAL.set(principal)
        try:
            yield
        finally:
            _PRINCIPAL.reset(token)

    @property
    def principal(self) -> str | None:
        """The principal the writes now running are attributed to (`attributed_to`), if
        any: a domain that keeps its own records (sessions) records it as their owner."""
        return _PRINCIPAL.get()

    # ================================================================ feed

    def watch(
        self,
        callback: Callable[[Event], Any],
        goal: Any = None,
        ctx: Any = None,
        *,
        since: int | None = None,
    ) -> int:
        """Call `callback(event)` after each durable write that changes belief.

        With a goal, only matching changes; with a context, only changes in
        `context_up(ctx)` (a variable ctx watches everywhere and binds the witness); with
        a context and no goal, every change `ctx` sees. Returns a token for `unwatch`.
        With `since` (a global seq), first replays — before any later write can come
        between — the events of the writes after `since`, from the change log, filtered
        the same way (against the hierarchy as it is now): a watcher resumes where it left
        off, with no gap and no repeat. Refused `too-old` when the log no longer holds
        them all (compacted, or more than `MAX_REPLAY` writes behind: resnapshot), and
        `bad-cursor` for a seq past the store's.
        """
        if not callable(callback):
            raise Refused("not-watchable", "the callback must be callable", {})
        literal_ = None
        goal_text = None
        if goal is not None:
            literals = _goal_literals(goal)
            if len(literals) != 1:
                raise Refused("not-watchable", "a standing query watches one literal", {})
            literal_ = literals[0]
            goal_text = show(literal_[1] if literal_[0] else (NOT, literal_[1]))
        ctx_name = None
        if ctx is not None:
            ctx_name = checks.context_name(ctx, query=True)
            if ctx_name == EVERYTHING:
                raise Refused("not-watchable", "CxEverything is not watchable", {})
        with self._lock:
            entries = [] if since is None else self._replayable(since)
            token = self._feed.add(callback, literal_, ctx_name, goal_text)
            if entries:
                self._feed.replay(token, entries, self._hierarchy.up)
            return token

    def _replayable(self, since: Any) -> list[LogEntry]:
        """The change-log entries after `since`, all of them, or a refusal."""
        if type(since) is not int or since < 0:
            raise Refused("bad-cursor", "since must be a non-negative integer seq", {})
        self._outside_group("a replaying watch")
        if since > self._seq:
            raise Refused(
                "bad-cursor",
                f"since {since} is past this store's seq {self._seq}; watch without since",
                {"since": since, "seq": self._seq},
            )
        floor = self._store.floor()
        if since < floor or self._seq - since > MAX_REPLAY:
            raise Refused(
                "too-old",
                f"the change log cannot replay every write after seq {since} (it holds "
                f"those after {floor}, at most {MAX_REPLAY} at once); resnapshot, then watch "
                "without since",
                {"since": since, "floor": floor, "seq": self._seq},
            )
        return self._store.changes(since, MAX_REPLAY) if since < self._seq else []

    def unwatch(self, token: Any) -> bool:
        with self._lock:
            return self._feed.remove(token)

    def watchers(self) -> list[dict[str, Any]]:
        with self._lock:
            return self._feed.describe()


# ==================================================================== helpers


_LARGE_BATCH = 1000
MAX_REPLAY = 10_000  # change-log entries a resuming watch replays, at most
MAX_GOAL_LITERALS = 64  # literals a goal list joins, at most


@contextlib.contextmanager
def _collector_paused(pause: bool):
    """Pause Python's cyclic garbage collector around a bulk build.

    A large load allocates many long-lived objects, and every full collection rescans all
    of them: about a third of load time. Nothing built here is garbage, so the pause
    costs nothing; the collector resumes (and catches up) afterwards.
    """
    if not pause or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _remove_last(items: list[Any], item: Any) -> None:
    """Remove `item` from `items`, cheaply when it is the last: an undo detaches in the
    reverse order of attaching, and a rule's `uses` can hold thousands of justifications
    (`list.remove` searched from the front made undoing a big write quadratic)."""
    if items[-1] is item:
        items.pop()
    else:
        items.remove(item)


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


def _now() -> int:
    return time.time_ns() // 1_000_000


def _handle(value: Any) -> int:
    if type(value) is not int or not 0 < value <= MAX_HANDLE:
        raise Refused(
            "bad-handle",
            f"a handle is a positive 64-bit integer, not {brief(value)}",
            {"handle": brief(value)},
        )
    return value


def _listed(items: Any, where: str) -> list[Any]:
    if isinstance(items, (str, bytes)) or not isinstance(items, (list, tuple)):
        raise Refused("shape", f"`{where}` must be a list", {"in": where})
    return list(items)


def _provenance(fields: Any) -> dict[str, Any] | None:
    if fields is None:
        return None
    if not isinstance(fields, dict) or not all(isinstance(k, str) for k in fields):
        raise Refused(
            "bad-option", "provenance is a mapping with string keys", {"option": "provenance"}
        )
    reserved = sorted(set(fields) & RESERVED_PROVENANCE)
    if reserved:
        raise Refused(
            "reserved-provenance",
            f"provenance field {reserved[0]!r} is set by Koinii, not by a writer",
            {"field": reserved[0]},
        )
    values.check("provenance", fields)
    try:
        json.dumps(fields)
    except (TypeError, ValueError):
        raise Refused(
            "bad-option", "provenance values must be JSON values", {"option": "provenance"}
        ) from None
    return dict(fields) or None


def _problem(refusal: Refused, where: str, index: int) -> dict[str, Any]:
    return {"kind": refusal.kind, "message": refusal.message, "in": where, "index": index}


def _any_node(node: Node, binding: dict) -> dict:
    return binding


def _handles_in(atom: tuple) -> list[int]:
    """The handles `atom` names (a quotation names none: its content is data)."""
    out = []
    for arg in atom[1:]:
        if type(arg) is tuple:
            if arg[0] is SENTEX_HANDLE and len(arg) == 2 and type(arg[1]) is int:
                out.append(arg[1])
            elif arg[0] is not QUOTE:
                out.extend(_handles_in(arg))
    return out


def _carrier_shaped(node: Node) -> bool:
    """`(carriesClaim P N)`: a predicate and a positive argument position."""
    atom = node.atom
    return (
        node.positive
        and len(atom) == 3
        and type(atom[1]) is Sym
        and type(atom[2]) is int
        and atom[2] >= 1
    )


def _substitute(pattern: Any, binding: dict) -> Any:
    cls = type(pattern)
    if cls is Var:
        return binding[pattern]
    if cls is tuple:
        if pattern[0] is QUOTE:
            return pattern
        return tuple([_substitute(x, binding) for x in pattern])
    return pattern


@functools.lru_cache(maxsize=4096)
def _parse_goal(text: str) -> tuple:
    return _literals_of(parse(text))


def _goal_literals(goal: Any) -> list[tuple[bool, tuple]]:
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
            out.extend(_goal_literals(part))
        if not out:
            raise Refused("shape", "an empty goal", {})
        return out
    return list(_literals_of(goal))


def _literals_of(term: Any) -> tuple:
    if type(term) is not tuple:
        raise Refused("shape", "a goal is a sentence such as (usesDatabase ?x Postgres)", {})
    show(term)
    if term[0] is Sym("and"):
        return tuple(lit for part in term[1:] for lit in _literals_of(part))
    return (literal(term, "a goal"),)


def _by_handle(change: Change) -> int:
    return change.public["handle"]


def _change(node: Node, reason: str | None = None, hidden_in: str | None = None) -> Change:
    public: dict[str, Any] = {
        "handle": node.handle,
        "sentence": node.full_text,
        "context": node.context,
    }
    if reason is not None:
        public["reason"] = reason
    if hidden_in is not None:
        public["hidden_in"] = hidden_in
    return Change(public, node.positive, node.atom, node.context, hidden_in)


def _clash_entry(nodes: list[Node]) -> dict[str, Any]:
    sides = sorted(
        (
            {
                "handle": n.handle,
                "sentence": n.full_text,
                "context": n.context,
                "strength": n.effective_strength(),
            }
            for n in nodes
        ),
        key=lambda s: (s["sentence"], s["context"]),
    )
    return {"handles": sorted(n.handle for n in nodes), "sides": sides}


def open_kb(location: Any = None, **options: Any) -> KB:
    """Open a knowledge base: None → in memory, a path → SQLite, `postgresql://…`.

    Options: `synchronous` ("normal"/"full", SQLite), `standby` (PostgreSQL: wait to take
    over from the current writer instead of refusing), `create` (default True; False
    refuses `no-such-store` where no store exists yet), `max_depth`, `max_derivations`,
    `query_budget_s`, `write_budget_s` (seconds an operation may run; None: unbounded),
    `clock` (a function returning epoch ms, for `created` stamps).
    The shipped vocabulary (CxCore) is loaded into a new store; loading is idempotent.
    """
    from koinii.kb.vocab import install

    engine_opts = {
        k: options.pop(k)
        for k in ("max_depth", "max_derivations", "query_budget_s", "write_budget_s", "clock")
        if k in options
    }
    if location is not None and isinstance(location, os.PathLike):
        location = os.fspath(location)
    store = open_store(location, **options)
    try:
        kb = KB(store, **engine_opts)
        install(kb)
    except BaseException:
        store.close()
        raise
    return kb


__all__ = ["KB", "open_kb", "Retracted", "Edited", "Event", "Sentex", "UNIVERSE"]
