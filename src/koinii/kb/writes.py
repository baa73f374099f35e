"""Writes: transactions and commit.

One concept: the write path, from checks to a durable commit or a whole undo; it is long
because every way in (assert, edit, load, check) shares one transaction.

Invariant: every write runs inside one `Transaction`: checks come before any change,
every in-memory change is undo-logged, and the write either commits to the store as one
durable record with the next global `seq` — then its event is published — or is undone
completely (handles it consumed are still never reused). In a group commit
(`begin_group`) the writes become durable together, and are published or undone
together. What the write path counts and holds between writes — the write in progress,
the open group, the seq, the handle and justification counters — is its ledger's
(ledger.py), which only this part changes.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from koinii.errors import Refused
from koinii.kb import checks, collector, values
from koinii.kb.checks import Entry
from koinii.kb.feed import Change, Routed
from koinii.kb.kif import read_sentences
from koinii.kb.ledger import Ledger
from koinii.kb.maintenance import ARITY
from koinii.kb.reads import checked_handle
from koinii.kb.rules import GENL_CX, IMPLIES
from koinii.kb.sentex import (
    DEFAULT,
    MONOTONIC,
    STRENGTHS,
    Justification,
    Node,
)
from koinii.kb.store import Commit, LogEntry
from koinii.terms import Term, parse_all

if TYPE_CHECKING:
    import threading

    from koinii.kb.budget import Budget
    from koinii.kb.checkpoint import Checkpoints
    from koinii.kb.maintenance import Maintenance
    from koinii.kb.store import Store
    from koinii.kb.watching import Watching

_PRINCIPAL: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "koinii_principal", default=None
)
WRITE_OPTIONS = frozenset({"strength", "creator", "provenance"})
FORMATS = frozenset({"koinii", "kif"})  # what load_text reads
RESERVED_PROVENANCE = frozenset({"creator", "created", "principal"})
log = logging.getLogger("koinii.kb")


@dataclass(frozen=True)
class Retracted:
    """What a retract removed (counts), and the seq of its write."""

    removed_sentexes: int
    removed_justifications: int
    seq: int | None = None


@dataclass(frozen=True)
class Edited:
    """What an edit did: one handle (or list, for a split rule) per added entry."""

    handles: list[int | list[int]]  # a list where a rule was split in several
    removed_sentexes: int
    removed_justifications: int
    seq: int | None = None
    # what `load_text(on_error="report")` did not load: {line, column, kind, message}
    problems: list[dict[str, Any]] = field(default_factory=list)


class Transaction:
    """One write in progress: its undo log and what it changed (every write makes one,
    so the containers are built here as literals, not by dataclass factories)."""

    __slots__ = (
        "op",
        "now",
        "undo",
        "added",
        "deleted",
        "touched",
        "first_just",
        "next_handle",
        "next_just",
        "new_justs",
        "dropped",
        "dead_justs",
        "old_belief",
        "seeds",
        "unfounded",
        "fire",
        "new_rules",
        "masks",
        "full",
        "edges",
        "limbo",
        "texts",
        "depth",
        "concluded",
        "derivations",
        "fired",
        "removed_sentexes",
        "removed_justifications",
        "changes",
        "records",
        "summary",
        "records_result",
    )

    def __init__(self, op: str, now: int, next_handle: int, next_just: int) -> None:
        self.op = op
        self.now = now  # epoch ms: the `created` stamp of what this write stores
        self.first_just = next_just  # the id of the first justification it makes
        # the ids it gives out, taken from the ledger and given back to it at the end (so
        # a derivation takes one as an increment, not a call: ledger.py)
        self.next_handle = next_handle
        self.next_just = next_just
        # the undo log: (function, *arguments) steps, run last first to undo the write
        self.undo: list[tuple[Any, ...]] = []
        self.added: dict[int, Node] = {}  # nodes created in this tx (and still stored)
        self.deleted: dict[int, tuple[Node, str]] = {}  # pre-existing, gone
        self.touched: set[Node] = set()  # pre-existing, rows changed
        self.new_justs: list[Justification] = []  # attached, in order
        self.dropped: set[int] = set()  # ids of new justifications detached again
        self.dead_justs: dict[int, Justification] = {}  # pre-existing, detached
        self.old_belief: dict[Node, tuple[bool, bool, bool]] = {}
        # where belief may have changed, besides what it made and what it justified
        self.seeds: set[Node] = set()
        self.unfounded: list[Node] = []  # derived nodes that lost a support but not all
        self.fire: dict[Node, None] = {}  # new nodes a rule reads, waiting (an ordered set)
        self.new_rules: list[Node] = []
        self.masks: list[tuple[Node, bool]] = []  # (mask, added?)
        self.full = False  # a claim-carrying declaration changed: recompute everything
        self.edges: list[tuple[str, str]] = []  # genlCx edges added or removed: (sub, super)
        self.limbo: dict[tuple[Any, str, bool], Node] = {}  # by (key, context, polarity)
        # canonical atom texts by handle, of what this write has shown (a sentence it
        # checked, a removal's change): a node keeps only its atom, and the stored row
        # takes the text from here (an added node's change shows its own: sentex.py)
        self.texts: dict[int, str] = {}
        self.depth: Any = None  # firing.py's `Depths`, made by the first derivation
        self.concluded: dict[Any, Node] = {}  # by key: the nodes this write derived (firing.py)
        self.derivations = 0
        self.fired: dict[Node, int] = {}  # firings made by each rule in this write
        self.removed_sentexes = 0
        self.removed_justifications = 0
        self.changes: tuple[list[Change | Node], list[Change]] = ([], [])  # the belief diff
        self.records: Callable[[Any], Any] | None = None  # a domain write, same transaction
        self.summary: dict[str, Any] | None = None  # its brief, for the change log
        self.records_result: Any = None

    def text(self, node: Node) -> str:
        """`node.text`, shown once per write."""
        text = self.texts.get(node.handle)
        if text is None:
            text = self.texts[node.handle] = node.text
        return text


class Writer(Protocol):
    """What writes ask of the KB around them, at each write: the budget it runs under
    (`bounded`, with the KB's `write_budget_s`: a caller may change it on an open KB),
    and whether the store is still this KB's to write (`refuse_if_lost`)."""

    write_budget_s: float | None

    def bounded(
        self, seconds: float | None, what: str
    ) -> contextlib.AbstractContextManager[Budget | None]: ...

    def refuse_if_lost(self) -> None: ...


class Writes:
    """Every write the KB makes, each one transaction (see the module docstring): an
    object of its own, which `KB` makes before it opens (the open sets its ledger's
    counters) and delegates to (engine.py).

    Its state is its own: the ledger (ledger.py: the write in progress, the open group,
    the seq, the handle and justification counters; public, for the others to read and
    to ask — an open sets the counters through `restart` and `issued` —, never to
    bind), the shipped handles (`shipped`, which the search reads), the commit
    listeners, and whether the KB is closed (`close`). What it reads is given to it,
    and it changes none of it but through its owner's public methods: the KB's lock,
    the store, the clock, truth maintenance (each entry linked, each write settled),
    the running operation's budget (`running`), the watching and the checkpoints —
    asked for at each write (`watching`, `checkpoints`: made after it, as they read its
    ledger) —, and the KB through `Writer`."""

    __slots__ = (
        "_kb",
        "_lock",
        "_store",
        "_clock",
        "_maintenance",
        "_running",
        "_watching",
        "_checkpoints",
        "ledger",
        "shipped",
        "_commit_listeners",
        "_next_listener",
        "_closed",
    )

    def __init__(
        self,
        kb: Writer,
        *,
        lock: threading.RLock,
        store: Store,
        clock: Callable[[], int],
        maintenance: Maintenance,
        running: Callable[[], Budget | None],
        watching: Callable[[], Watching],
        checkpoints: Callable[[], Checkpoints],
    ) -> None:
        self._kb = kb
        self._lock = lock
        self._store = store
        self._clock = clock  # epoch ms for `created` stamps and the change log
        self._maintenance = maintenance
        self._running = running  # the running operation's budget, or None
        self._watching = watching
        self._checkpoints = checkpoints
        self.ledger = Ledger()  # the write in progress, the group, the counters
        self.shipped: frozenset[int] = frozenset()  # see `mark_shipped`
        self._commit_listeners: dict[int, Callable[[int, str], Any]] = {}
        self._next_listener = 0  # the last token `on_commit` gave
        self._closed = False

    def close(self) -> None:
        """Refuse every write from now on (`closed`): the KB is closing (engine.py),
        after its last group was committed."""
        self._closed = True

    def _bounded(self, what: str) -> contextlib.AbstractContextManager[Budget | None]:
        """The budget a write runs under: the one in force, or the KB's `write_budget_s`."""
        return self._kb.bounded(self._kb.write_budget_s, what)

    def on_commit(self, listener: Callable[[int, str], Any]) -> int:
        """Call `listener(seq, op)` after every durable write (belief changed or not)."""
        with self._lock:
            token = self._next_listener = self._next_listener + 1
            self._commit_listeners[token] = listener
            return token

    def off_commit(self, token: int) -> bool:
        """Stop the listener `token`; whether it was one."""
        with self._lock:
            return self._commit_listeners.pop(token, None) is not None

    def assert_(
        self,
        sentence: Term | str,
        context: Any,
        *,
        strength: str = "default",
        creator: str | None = None,
        provenance: dict[str, Any] | None = None,
    ) -> int | list[int]:
        """Store `sentence` in `context`; its handle (`KB.assert_` says the rest)."""
        if strength == "default" and creator is None and provenance is None:
            opts = {}  # the common write: nothing to check
        else:
            opts = {"strength": strength, "creator": creator, "provenance": provenance}
        with self._lock, self._bounded("the write"), collector.paused():
            tx = self._begin("assert")
            try:
                handles = self._add(tx, sentence, context, opts)
                return self._finish(tx, handles)
            except BaseException:
                self._abort(tx)
                raise

    def retract(self, handle: Any) -> Retracted:
        """Remove an asserted sentex and what rested only on it (`KB.retract` says the rest)."""
        handle = checked_handle(handle)
        with self._lock, self._bounded("the write"), collector.paused():
            tx = self._begin("retract")
            try:
                self._remove(tx, handle)
                seq = self._finish(tx, None, want_seq=True)
                return Retracted(tx.removed_sentexes, tx.removed_justifications, seq)
            except BaseException:
                self._abort(tx)
                raise

    def edit(self, add: Sequence[Any] = (), remove: Sequence[Any] = ()) -> Edited:
        """Adds, then removes, as one all-or-nothing write (`KB.edit` says the rest)."""
        with (
            self._lock,
            self._bounded("the write"),
            collector.paused(),
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
        with self._lock, self._bounded("the dry run"), collector.paused():
            tx = self._begin("check")
            budget = self._running()
            try:
                for where, items in (("add", add), ("remove", remove)):
                    for i, item in enumerate(_listed(items, where)):
                        try:
                            if budget is not None:
                                budget.tick()  # (a batch too big for one write is told so)
                            if where == "add":
                                self._add_entry(tx, item)
                            else:
                                self._remove(tx, checked_handle(item), top=True)
                        except Refused as refusal:
                            problems.append(refusal.as_problem(where, i))
                            if refusal.kind == "budget-exhausted":  # the rest is not judged
                                return problems
                if not problems:
                    try:
                        self._maintenance.settle(tx)
                    except Refused as refusal:
                        problems.append(refusal.as_problem("add", len(add) - 1))
            finally:
                self._undo(tx)
                self.ledger.end(tx, keep_ids=False)  # a dry run hands its ids back
        return problems

    def load_text(
        self,
        source: Any,
        context: Any,
        *,
        strength: str = "default",
        on_error: str = "refuse",
        format: str = "koinii",
    ) -> Edited:
        """Load every sentence of a file or text into `context` (`KB.load_text` says the rest)."""
        if on_error not in ("refuse", "report"):
            raise Refused(
                "bad-option",
                f"on_error is 'refuse' (all or nothing) or 'report', not {on_error!r}",
                {"option": "on_error", "known": ["refuse", "report"]},
            )
        if not isinstance(format, str) or format not in FORMATS:
            raise Refused(
                "bad-option",
                f"format is 'koinii' (Koinii's sentences) or 'kif' (SUO-KIF), not {format!r}",
                {"option": "format", "known": sorted(FORMATS)},
            )
        if isinstance(source, os.PathLike):
            with open(source, encoding="utf-8") as f:
                source = f.read()
        opts = {"strength": strength}
        if on_error == "refuse" and format == "koinii":
            return self.edit(add=[(t, context, opts) for t in parse_all(source)])
        problems: list[dict[str, Any]] = []
        read = read_sentences(source, format == "kif", problems)
        if on_error == "refuse":
            if problems:
                first = problems[0]
                where = {"line": first["line"], "column": first["column"]}
                raise Refused(first["kind"], first["message"], where)
            return self.edit(add=[(t, context, opts) for _, _, t in read])
        loaded = self._load_reporting(read, context, opts, problems)
        problems.sort(key=lambda p: (p["line"], p["column"]))
        return replace(loaded, problems=problems)

    def _load_reporting(
        self,
        read: list[tuple[int, int, Term]],
        context: Any,
        opts: dict[str, Any],
        problems: list[dict[str, Any]],
    ) -> Edited:
        """`read` loaded as one edit, each sentence a check refuses left out and listed in
        `problems` — in one pass, as the all-or-nothing load makes it: a refused sentence
        changes nothing before its refusal, so the write goes on past it. (A dry run of
        the whole batch and then the edit did every sentence's work twice, and more.)
        A refusal after a change (a split rule's second part, refused) undoes the write
        and the slower way is taken: each sentence judged by a dry run, the rest loaded.
        A refusal when the whole settles (a rule deriving past the limit) belongs to no
        one sentence: the facts are loaded first, then each rule as a write of its own,
        so a rule that cannot finish is reported by its line and the rest still load."""
        with (
            self._lock,
            self._bounded("the write"),
            collector.paused(),
        ):
            tx = self._begin("edit")
            found: list[dict[str, Any]] = []
            settling = False
            try:
                handles = []
                budget = self._running()
                for line, column, term in read:
                    if budget is not None:
                        budget.tick()
                    mark = (len(tx.undo), len(tx.added), tx.next_handle)
                    try:
                        handles.append(self._add_entry(tx, (term, context, opts)))
                    except Refused as refusal:
                        if refusal.kind == "budget-exhausted" or mark != (
                            len(tx.undo),
                            len(tx.added),
                            tx.next_handle,
                        ):
                            raise
                        found.append(_placed(line, column, refusal.kind, refusal.message))
                settling = True
                seq = self._finish(tx, None, want_seq=True)
            except Refused as refusal:
                self._abort(tx)
                rules = [r for r in read if is_rule_sentence(r[2])]
                if refusal.kind == "budget-exhausted" or (settling and not rules):
                    refusal.data.setdefault("rolled_back", True)
                    raise
                if not settling:
                    return self._load_checked(read, context, opts, problems)
            except BaseException:
                self._abort(tx)
                raise
            else:
                problems += found
                return Edited(handles, tx.removed_sentexes, tx.removed_justifications, seq)
        facts = [r for r in read if not is_rule_sentence(r[2])]
        loaded = self._load_reporting(facts, context, opts, problems)
        handles, seq = list(loaded.handles), loaded.seq
        removed = [loaded.removed_sentexes, loaded.removed_justifications]
        for line, column, rule in rules:
            try:
                one = self.edit(add=[(rule, context, opts)])
            except Refused as refusal:
                problems.append(_placed(line, column, refusal.kind, refusal.message))
                continue
            handles += one.handles
            seq = one.seq if one.seq is not None else seq
            removed = [removed[0] + one.removed_sentexes, removed[1] + one.removed_justifications]
        return Edited(handles, removed[0], removed[1], seq)

    def _load_checked(
        self,
        read: list[tuple[int, int, Term]],
        context: Any,
        opts: dict[str, Any],
        problems: list[dict[str, Any]],
    ) -> Edited:
        entries = [(term, context, opts) for _, _, term in read]
        refused = {p["index"]: p for p in self.check_edit(add=entries)}
        for index in sorted(refused):
            line, column, _ = read[index]
            problems.append(
                _placed(line, column, refused[index]["kind"], refused[index]["message"])
            )
        return self.edit(add=[e for i, e in enumerate(entries) if i not in refused])

    def mark_shipped(self, handles: Collection[int]) -> None:
        """Make `handles`, the shipped vocabulary, read-only (`KB.mark_shipped`)."""
        with self._lock:
            self.shipped = frozenset(handles)

    def add_provenance(self, handle: Any, fields: dict[str, Any]) -> dict[str, Any] | None:
        """Add provenance fields to a stored sentex (fields it has already are kept)."""
        handle = checked_handle(handle)
        extra = _provenance(fields)
        with self._lock:
            node = self._maintenance.index.by_handle.get(handle)
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

    def _begin(self, op: str) -> Transaction:
        if self._closed:
            raise Refused("closed", "this knowledge base is closed", {})
        self._kb.refuse_if_lost()
        ledger = self.ledger  # (a second write in progress is refused there)
        return ledger.begin(Transaction(op, self._clock(), ledger.next_handle, ledger.next_just))

    def _finish(self, tx: Transaction, result: Any, want_seq: bool = False) -> Any:
        """Settle belief, commit durably, publish the event; returns `result` (or seq).

        In a group, the store holds the rows and the event waits for `commit_group`,
        routed now, against the hierarchy this write saw.
        """
        self._maintenance.settle(tx)
        tx.changes = self._changes(tx)
        ledger = self.ledger
        rows = ledger.rows_written
        seq = self._commit(tx)
        ledger.end(tx)
        if seq is not None:
            added, removed = tx.changes
            routed = self._watching().route(seq, added, removed) if added or removed else None
            if not ledger.in_group:
                self._publish(seq, tx.op, routed)
                self._checkpoints().checkpoint_after_write(ledger.rows_written - rows)
            else:
                ledger.hold(tx, seq, routed)
        return seq if want_seq else result

    def _publish(self, seq: int, op: str, routed: Routed | None) -> None:
        """Tell the watchers and the commit listeners about one durable write."""
        if routed:
            self._watching().deliver(routed)
        for listener in list(self._commit_listeners.values()):
            try:
                listener(seq, op)
            except Exception:
                log.exception("commit listener failed")

    def begin_group(self) -> None:
        """Let the writes that follow share one durable commit (`KB.begin_group` says the rest)."""
        with self._lock:
            if self._closed:
                raise Refused("closed", "this knowledge base is closed", {})
            if self.ledger.in_group:
                raise Refused("group-open", "a group commit is already open", {})
            self._kb.refuse_if_lost()
            self._store.begin_group()
            self.ledger.open_group()

    def commit_group(self) -> int:
        """Make the open group durable, or undo it whole (`KB.commit_group` says the rest)."""
        with self._lock:
            ledger = self.ledger
            held = ledger.close_group()
            if held is None:
                return 0
            try:
                self._store.commit_group()
            except BaseException:
                for tx, _, _ in reversed(held):
                    self._undo(tx)
                ledger.group_failed()
                with contextlib.suppress(Exception):  # handles it consumed stay consumed
                    self._store.save_next_handle(ledger.next_handle)
                raise
            for tx, seq, routed in held:
                self._publish(seq, tx.op, routed)
            return len(held)

    def _abort(self, tx: Transaction) -> None:
        consumed = bool(tx.added) or bool(tx.limbo)
        self._undo(tx)
        self.ledger.end(tx)  # (what it consumed stays consumed)
        if consumed:
            # the refusal being raised matters more than a failure to record the mark
            with contextlib.suppress(Exception):
                self._store.save_next_handle(self.ledger.next_handle)

    def _undo(self, tx: Transaction) -> None:
        """Undo a write: its steps, last first; then the nodes it made and still holds
        are unlinked, its justifications, which touch no other structure, detached
        (those it attached) or attached again (those it detached), and the old belief
        labels put back. (Nodes link and unlink in any order: each structure holds a
        node independently of the others.) The caller ends the write in the ledger."""
        for step in reversed(tx.undo):
            step[0](*step[1:])
        maintenance = self._maintenance
        by_handle = maintenance.index.by_handle
        for node in reversed(tx.added.values()):
            if by_handle.get(node.handle) is node:  # (not waiting in limbo: see firing.py)
                maintenance.unlink_quiet(node)
        for j in reversed(_kept(tx)):
            maintenance.detach(j)
        for j in tx.dead_justs.values():
            maintenance.attach(j)
        maintenance.restore_belief(tx.old_belief)

    def _apply_batch(self, tx: Transaction, add: Sequence[Any], remove: Sequence[Any]) -> list[Any]:
        handles = []
        for where, items in (("add", add), ("remove", remove)):
            budget = self._running()
            for i, item in enumerate(_listed(items, where)):
                if budget is not None:
                    budget.tick()
                try:
                    if where == "add":
                        handles.append(self._add_entry(tx, item))
                    else:
                        self._remove(tx, checked_handle(item), top=True)
                except Refused as refusal:
                    refusal.data.update({"rolled_back": True, "in": where, "index": i})
                    raise
        return handles

    def _add_entry(self, tx: Transaction, item: Any) -> int | list[int]:
        if type(item) is tuple and len(item) == 2 and _PRINCIPAL.get() is None:
            entry = checks.plain(*item)
            if entry is not None:
                return self._store_entry(tx, entry, DEFAULT, None, None)
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

    def _add(
        self, tx: Transaction, sentence: Any, context: Any, opts: dict[str, Any]
    ) -> int | list[int]:
        strength, creator, extra = self._write_options(opts) if opts else (DEFAULT, None, None)
        principal = _PRINCIPAL.get()
        if principal is not None:
            extra = {**(extra or {}), "principal": principal}
        if type(sentence) is str and not sentence.isascii():
            values.check_text("sentence", sentence, nul=True)  # its NULs are stored escaped
        entries = checks.prepare(sentence, context)
        if not entries[0].split:  # (then it is the only one)
            return self._store_entry(tx, entries[0], strength, creator, extra)
        return [self._store_entry(tx, e, strength, creator, extra) for e in entries]

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
        self, tx: Transaction, entry: Entry, strength: int, creator: str | None, extra: dict | None
    ) -> int:
        atom = entry.atom
        if atom[0] is GENL_CX:
            strength = MONOTONIC  # genlCx edges are always held monotonic
        key = entry.key
        node = self._maintenance.index.find(atom, key, entry.context, entry.positive)
        if node is not None:
            self._strengthen(tx, node, strength)
            self._merge_provenance(tx, node, creator, extra)
            return node.handle
        self._check_state(tx, entry)
        node = Node(
            tx.next_handle,
            atom,
            key,
            entry.context,
            entry.positive,
            True,
            strength,
            creator,
            tx.now,
            extra,
        )
        tx.next_handle += 1
        self._maintenance.link(tx, node)
        if entry.shown is not None:  # (else shown only if the store's row asks: `Entry`)
            tx.texts[node.handle] = entry.shown
        return node.handle

    def _check_state(self, tx: Transaction, entry: Entry) -> None:
        """The checks that read the store: handles, cycles, arity declarations."""
        for handle in entry.handles:
            if handle not in self._maintenance.index.by_handle:
                raise Refused(
                    "unknown-handle",
                    f"(sentexHandle {handle}) names no stored sentex",
                    {"handle": handle},
                )
        atom = entry.atom
        if atom[0] is GENL_CX and self._maintenance.hierarchy.would_cycle(
            atom[1].name, atom[2].name
        ):
            raise Refused(
                "not-well-formed",
                f"{entry.text} would make a cycle: {atom[2].name} already sees {atom[1].name}",
                {"sentence": entry.text},
            )
        declarations = self._maintenance.index.by_functor.get(ARITY)
        if declarations is None or not declarations.args:  # nothing declares an arity
            return
        declared_for = declarations.args[0]  # by predicate (a symbol's key is the symbol)
        atoms = (
            [atom]
            if entry.rule is None
            else [a for _, a in entry.rule.antecedents] + [entry.rule.consequent[1]]
        )
        for a in atoms:
            if a[0] not in declared_for:  # the common case: no arity declared for it
                continue
            declared = self._maintenance.declared_arity(a[0], entry.context, tx)
            if declared is not None and declared != len(a) - 1:
                raise Refused(
                    "arity",
                    f"{a[0].name} takes {declared} argument(s), not {len(a) - 1}",
                    {"predicate": a[0].name, "declared": declared, "given": len(a) - 1},
                )

    def _strengthen(self, tx: Transaction, node: Node, strength: int) -> None:
        if not node.premise:
            self._set(tx, node, "premise", True)
            self._set(tx, node, "strength", strength)
        elif strength > node.strength:
            self._set(tx, node, "strength", strength)
        else:
            return
        tx.seeds.add(node)

    def _merge_provenance(
        self, tx: Transaction, node: Node, creator: str | None, extra: dict | None
    ) -> None:
        if creator is not None and node.creator is None:
            self._set(tx, node, "creator", creator)
        if extra:
            current = node.extra or {}
            new = {k: v for k, v in extra.items() if k not in current}
            if new:
                self._set(tx, node, "extra", {**current, **new})

    def _set(self, tx: Transaction, node: Node, attr: str, value: Any) -> None:
        old = getattr(node, attr)
        setattr(node, attr, value)
        tx.undo.append((setattr, node, attr, old))
        if node.handle not in tx.added:
            tx.touched.add(node)

    def _remove(self, tx: Transaction, handle: int, top: bool = True) -> None:
        node = self._maintenance.index.by_handle.get(handle)
        if node is None:
            if handle in tx.deleted:  # named twice in one edit, or gone with what it rested on
                return
            if handle >= tx.next_handle:
                hint = "no sentex has had that handle yet: handles come from assert"
            else:
                hint = "it was retracted or removed earlier, or its write was refused"
            raise Refused(
                "unknown-handle",
                f"no sentex {handle} is stored ({hint}); nothing to retract",
                {"handle": handle, "issued": handle < tx.next_handle},
            )
        if handle in self.shipped:
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
            tx.unfounded.append(node)  # its derivations may all rest on itself
        else:
            self._maintenance.delete_cascading(tx, node, "retracted")

    def _changes(self, tx: Transaction) -> tuple[list[Change | Node], list[Change]]:
        added: list[Change | Node] = []
        removed: list[Change] = []
        by_handle = self._maintenance.index.by_handle
        text = tx.text
        for node in tx.added.values():  # made by this write: believed now, or not at all
            if node.believed and by_handle.get(node.handle) is node:
                added.append(node)  # its own change (sentex.py)
        for node, (was, _, _) in tx.old_belief.items():
            gone = node.handle in tx.deleted or node.handle not in by_handle
            if gone:
                continue
            if node.believed and not was:
                added.append(node)
            elif was and not node.believed:
                why = "defeated" if node.defeated else "unsupported"
                removed.append(_change(node, text(node), why))
        for node, why in tx.deleted.values():
            if tx.old_belief.get(node, (node.believed,))[0]:
                removed.append(_change(node, text(node), why))
        for mask, was_added in tx.masks:
            target = by_handle.get(mask.atom[1][1])
            if target is None or not target.believed:
                continue
            if was_added and mask.handle in by_handle:
                removed.append(_change(target, text(target), "excepted", mask.context))
            elif not was_added and mask.handle not in by_handle:
                added.append(_change(target, text(target), None, mask.context))
        if len(added) > 1:
            added.sort(key=_by_handle)
        if len(removed) > 1:
            removed.sort(key=_by_handle)
        return added, removed

    def _commit(self, tx: Transaction) -> int | None:
        """Make the transaction durable; returns its seq, or None if it changed nothing."""
        added, removed = tx.changes
        upserts = list(tx.added.values())
        if tx.touched:
            upserts.extend(
                n for n in tx.touched if n.handle not in tx.deleted and n.handle not in tx.added
            )
        new_justs = _kept(tx)
        changed = upserts or tx.deleted or new_justs or tx.dead_justs or added or removed
        if not changed and tx.records is None:
            return None
        seq = self.ledger.seq + 1
        entry = LogEntry(
            seq,
            tx.op,
            self._clock(),
            added,  # encoded a change at a time (store/__init__.py, encoded_diff)
            removed,
            tx.summary,
        )
        tx.records_result = self._store.commit(
            Commit(
                entry,
                tx.next_handle,
                upserts,
                list(tx.deleted),
                new_justs,
                list(tx.dead_justs),
                tx.records,
                tx.texts,
            )
        )
        # the rows it changed: what a restart from the last checkpoint would replay
        rows = len(upserts) + len(tx.deleted) + len(new_justs) + len(tx.dead_justs)
        self.ledger.committed(seq, rows)
        return seq

    def transact(
        self,
        op: str,
        records: Callable[[Any, list[Any]], Any],
        *,
        add: Sequence[Any] = (),
        remove: Sequence[Any] = (),
        summary: dict[str, Any] | None = None,
    ) -> tuple[Any, Edited]:
        """One durable write of sentexes and domain records (`KB.transact` says the rest)."""
        with self._lock, self._bounded("the write"), collector.paused():
            self.ledger.refuse_inside_group("a domain write")
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


def _kept(tx: Transaction) -> list[Justification]:
    """The justifications the write made and kept (not detached again)."""
    if not tx.dropped:
        return tx.new_justs
    return [j for j in tx.new_justs if j.id not in tx.dropped]


def _placed(line: int, column: int, kind: str, message: str) -> dict[str, Any]:
    return {"line": line, "column": column, "kind": kind, "message": message}


def is_rule_sentence(term: Any) -> bool:
    return type(term) is tuple and term[0] is IMPLIES


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


def _by_handle(change: Change | Node) -> int:
    return change.handle


def _change(
    node: Node, text: str, reason: str | None = None, hidden_in: str | None = None
) -> Change:
    return Change(node.handle, text, node.positive, node.atom, node.context, reason, hidden_in)
