"""The knowledge base: one store, its in-memory indexes and belief, and the facade over
them — `KB`, assembled from the parts that each own one concern and its state:

| part | owns |
| --- | --- |
| `maintenance` | truth maintenance: linking, justifications, deletion, belief |
| `firing` | its forward chaining: rules, carried claims (of maintenance's object) |
| `writes` | transactions and commit: checks, the undo log, group commit, durable records |
| `checkpoint` | the state kept in a file beside the store, and opening from it |
| `reads` | reads and queries: sentexes, `query`, `why`, the change log |
| `search` | ranked full-text `search` and the `vocabulary` in use |
| `clashes` | contradictions, conflicts and functional clashes |
| `watching` | the feed as the KB offers it: watch, replay, unwatch |

Each is an object of its own, which `KB` makes and delegates to (issue 43;
docs/architecture.md, "The engine's parts"): each is given in its constructor what it
reads — the lock, the store, the index, the hierarchy, the ledger, truth maintenance,
and this KB only through a Protocol naming what it asks — and keeps its own state
(maintenance: the index, every structure over the stored nodes and each node's labels
and links; writes: the ledger — the write in progress, the open group, the seq, the
handle and justification counters —, the shipped handles, the commit listeners;
checkpoint: where the last one stands; search: the words' counts and the vectors;
watching: the feed; reads and clashes keep none). Truth maintenance is one object of
two classes (`Maintenance`, deriving from firing.py's `Firing`), so a call between its
halves, once per derivation, is a plain call on `self`; writes calls it through its
public methods (`settle`, `link`, …), once per entry or per write. Maintenance, writes
and the checkpoints are made before the open, which reads through them (an open from
a checkpoint replaces the index, hierarchy, masks and rules: the checkpoints ask for
them at each use); the other four once the KB is open, given the opened ones (and
writes asks for the watching and the checkpoints at each write).

One concept: the facade. Its length is the KB's public surface: each delegating
method below keeps the signature and docstring the KB always had, written out so that
mypy and the docs read them, and is one line. Besides, this module keeps the lifecycle
(open — from a checkpoint, or by a rebuild — and close), the budgets and the writer's
health, the domain record tables, attribution, and the composed parts. `state.State`
declares its own attributes, and `state.OWNERS` names them.

Invariants kept here:
- One `RLock` serialises everything, so a KB may be shared between threads; callbacks
  run on the writer's thread and may write (their events follow).
- Work is bounded: inside `budget(seconds)` (the daemon wraps each operation so), every
  loop whose length the input decides ticks the budget (`spend`, and `index.solve`
  takes it), so an operation past its deadline is refused `budget-exhausted` before
  anything of it is durable.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from collections.abc import Callable, Collection, Sequence
from contextvars import ContextVar
from typing import Any

from koinii.errors import Refused
from koinii.kb import collector
from koinii.kb.budget import Budget
from koinii.kb.checkpoint import Checkpoints
from koinii.kb.clashes import Clashes
from koinii.kb.feed import Event
from koinii.kb.maintenance import Maintenance
from koinii.kb.reads import Reads
from koinii.kb.search import DEFAULT_HITS, Hit, Search, Steps
from koinii.kb.semantic import Vectors
from koinii.kb.sentex import Node, Sentex, justification_of, node_of
from koinii.kb.state import State
from koinii.kb.store import Store, open_store
from koinii.kb.watching import Watching
from koinii.kb.writes import _PRINCIPAL, Edited, Retracted, Writes
from koinii.results import WhyTree
from koinii.terms import Term

# The record tables' own connection a `reading_records_through` block reads through.
_OWN_RECORDS: ContextVar[tuple[Any, Any] | None] = ContextVar("own_records", default=None)


class KB(State):
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
        checkpoints: bool = True,
    ) -> None:
        self._store = store
        self._clock = clock or _now  # epoch ms for `created` stamps and the change log
        self._lock = threading.RLock()
        self._closed = False
        self.max_depth = max_depth
        self.max_derivations = max_derivations
        self.query_budget_s = query_budget_s
        self.write_budget_s = write_budget_s
        self._budget: Budget | None = None  # the running operation's (see `budget`)
        # The composed parts, each given what it reads: the KB itself only through the
        # narrow view its module names, and weakly — a part holding the KB would make a
        # cycle, and a KB let go without `close` kept its store, and its writer's lock,
        # until the cyclic collector ran. Truth maintenance, writes and the checkpoints
        # first: the open reads through them (the checkpoints ask maintenance for its
        # structures at each use, as an open from a checkpoint replaces them).
        view = weakref.proxy(self)

        def running() -> Budget | None:
            """The running operation's budget (`budget`), for the write path's loops."""
            return view._budget

        self._maintenance = maintenance = Maintenance(view, lock=self._lock, running=running)
        # (the watching and the checkpoints read writes' ledger, so they are made after
        # it, and it asks for them at each write)
        self._writes = writes = Writes(
            view,
            lock=self._lock,
            store=self._store,
            clock=self._clock,
            maintenance=maintenance,
            running=running,
            watching=lambda: view._watching,
            checkpoints=lambda: view._checkpoints,
        )
        ledger = writes.ledger
        self._checkpoints = Checkpoints(
            maintenance,
            lock=self._lock,
            store=self._store,
            ledger=ledger,
            vectors=lambda: view._search.vectors,
            enabled=checkpoints,
        )
        vectors = self._open()
        # The others, made once the index and hierarchy they read are the opened ones (an
        # open from a checkpoint replaces maintenance's whole).
        index, hierarchy = maintenance.index, maintenance.hierarchy
        self._search = Search(
            view,
            lock=self._lock,
            store=self._store,
            index=index,
            ledger=ledger,
            shipped=lambda: writes.shipped,
            clock=self._clock,
            vectors=vectors,
        )
        self._reads = Reads(
            view,
            goals=maintenance,
            lock=self._lock,
            store=self._store,
            index=index,
            hierarchy=hierarchy,
            masks=maintenance.masks,
            rules=maintenance.rules,
            ledger=ledger,
        )
        self._clashes = Clashes(view, lock=self._lock, index=index, hierarchy=hierarchy)
        self._watching = Watching(
            maintenance,
            lock=self._lock,
            store=self._store,
            ledger=ledger,
            hierarchy=hierarchy,
        )

    @property
    def location(self) -> str:
        return self._store.location

    @property
    def durability(self) -> dict[str, str]:
        """What a committed write survives: the backend and the setting that decides it,
        as the store read it back from its connection (e.g. SQLite's PRAGMA synchronous)."""
        return dict(self._store.durability)

    def _open(self) -> Vectors | None:
        """Take the state from the store's checkpoint and the rows written since, or else
        build it from the rows (checkpoint.py); the search's vectors the checkpoint kept."""
        with collector.paused():
            from_checkpoint = self._checkpoints.open_from_checkpoint()
            if from_checkpoint is None:
                started = time.perf_counter()
                self._rebuild_from(self._store.load())
                seconds = round(time.perf_counter() - started, 3)
                self._opened, vectors = {"from": "rows", "seconds": seconds}, None
            else:
                self._opened, vectors = from_checkpoint
        return vectors

    @property
    def opened(self) -> dict[str, Any]:
        """How this KB was opened: `{"from": "rows" | "checkpoint", "seconds", …}`, and
        for a checkpoint its `seq`, the `tail_sentexes` / `tail_justifications` rows
        written after it that were applied on top, and the search `vectors` it kept."""
        return dict(self._opened)

    def _rebuild_from(self, loaded: Any) -> None:
        maintenance = self._maintenance
        index_link = maintenance.link_quiet
        for row in loaded.sentexes:
            index_link(node_of(row))
        by_handle = maintenance.index.by_handle
        attach = maintenance.attach
        top = 0
        for jrow in loaded.justifications:
            attach(justification_of(jrow, by_handle))
            top = max(top, jrow.id)
        self._writes.ledger.restart(loaded.seq, loaded.next_handle, top + 1)
        # The rows keep the derivations firing held, not which it elided (firing.py,
        # `_derive`): every derived node may have, and finds them again when asked.
        for node in by_handle.values():
            if not node.premise:
                node.elided = True
        maintenance.relabel(list(by_handle.values()), None)

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                try:
                    self._writes.commit_group()
                    self._checkpoints.checkpoint_at_close()
                finally:
                    self._closed = True
                    self._writes.close()
                    self._search.close()
                    self._store.close()
                    collector.release()  # what its writes froze is the collector's again

    def __enter__(self) -> KB:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

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

    def bounded(
        self, seconds: float | None, what: str
    ) -> contextlib.AbstractContextManager[Budget | None]:
        """This operation's budget: the one in force, else `seconds` (None: unbounded).
        The block is given the Budget that bounds it (None: nothing does): a read's
        join ticks it (`Reads.query`)."""
        if self._budget is not None or seconds is None:
            return contextlib.nullcontext(self._budget)
        return self.budget(seconds, what)

    def spend(self) -> None:
        """One unit of work toward the running operation's budget: every part calls it once
        per turn of any loop whose length the input decides (a derivation, a node
        relabelled), and so may work done on the KB's behalf outside it (the daemon's
        access check of each entry of a batch). Past the deadline it refuses
        `budget-exhausted`; with no budget in force it does nothing."""
        budget = self._budget
        if budget is not None:
            budget.tick()

    def unstored_justification_id(self) -> int:
        """An id for a justification truth maintenance holds and no write stores: one
        found again while the KB opens (`Maintenance.rederive_elided`). Issued by the
        ledger, so no write's justification takes it after."""
        ledger = self._writes.ledger
        issued = ledger.next_just
        ledger.issued(issued)
        return issued

    def check_writer(self) -> Refused | None:
        """None while this KB is still its store's writer; else the refusal every write
        now gets (`writer-lost`: a PostgreSQL writer whose connection was lost and that
        could not reconnect as the same writer). Probes the store's connection."""
        with self._lock:
            return None if self._closed else self._store.check_writer()

    def hold_lease(self, seconds: float) -> None:
        """Say in the store that this KB's daemon answers from memory for up to `seconds`
        after each `check_writer`: a writer that takes the store over while the daemon may
        still be answering waits that long before it writes (Store.hold_lease)."""
        with self._lock:
            self.refuse_if_lost()
            self._store.hold_lease(seconds)

    def refuse_if_lost(self) -> None:
        """Raise the store's `writer-lost` refusal if it is no longer this KB's to write:
        a write, a group and a lease call it before they touch the store."""
        lost = self._store.lost
        if lost is not None:
            raise Refused(lost.kind, lost.message, lost.data)

    def ensure_schema(self, domain: str, migrations: Any) -> None:
        """Create or upgrade a domain's record tables (wraps, sessions) in this store."""
        with self._lock:
            self._writes.ledger.refuse_inside_group("creating record tables")
            self._store.ensure_schema(domain, migrations)

    def read_records(self, reader: Callable[[Any], Any]) -> Any:
        """`reader(connection)` over the record tables, between writes — or, inside
        `reading_records_through`, through the reader's own connection."""
        own = _OWN_RECORDS.get()
        if own is not None and own[0] is self:
            return reader(own[1])
        with self._lock:
            if self._closed:
                raise Refused("closed", "this knowledge base is closed", {})
            return self._store.read(reader)

    def records_reader(self) -> Any:
        """A read-only connection of its own to the record tables (`Store.records_reader`;
        the caller closes it), or None where the store has none."""
        return self._store.records_reader()

    @contextlib.contextmanager
    def reading_records_through(self, connection: Any):
        """Inside the block (in this thread or task), `read_records` reads through
        `connection`, a `records_reader`, not the writer's: for a server that reads the
        record tables off its writer's thread (server/searching.py)."""
        token = _OWN_RECORDS.set((self, connection))
        try:
            yield
        finally:
            _OWN_RECORDS.reset(token)

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

    # --- writes, delegated (writes.py: `Writes`) --------------------------------------

    def on_commit(self, listener: Callable[[int, str], Any]) -> int:
        """Call `listener(seq, op)` after every durable write (belief changed or not)."""
        return self._writes.on_commit(listener)

    def off_commit(self, token: int) -> bool:
        """Stop the listener `token`; whether it was one."""
        return self._writes.off_commit(token)

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
        return self._writes.assert_(
            sentence, context, strength=strength, creator=creator, provenance=provenance
        )

    def retract(self, handle: Any) -> Retracted:
        """Remove an asserted sentex and everything that rested only on it.

        Also tears down, recursively, every stored meta-sentex whose predicate is marked
        `(target_following_predicate P)` and that names a removed sentex. A handle that
        names no stored sentex is refused (`unknown-handle`; `data.issued` tells one that
        was stored once — a retract sent again after it landed — from a typo).
        """
        return self._writes.retract(handle)

    def edit(self, add: Sequence[Any] = (), remove: Sequence[Any] = ()) -> Edited:
        """Adds, then removes, as ONE all-or-nothing write with one settle and one event.

        `add` holds `(sentence, context)` or `(sentence, context, opts)`; a refusal rolls
        the whole batch back and carries `{"rolled_back": True, "in", "index"}`.
        """
        return self._writes.edit(add, remove)

    def check(self, sentence: Term | str, context: Any, **opts: Any) -> list[dict[str, Any]]:
        """Dry run of `assert_`: [] when admissible, else the problems. Stores nothing."""
        return self._writes.check(sentence, context, **opts)

    def check_edit(
        self, add: Sequence[Any] = (), remove: Sequence[Any] = ()
    ) -> list[dict[str, Any]]:
        """Dry run of `edit`: every problem of the batch, judged against the KB as it is."""
        return self._writes.check_edit(add, remove)

    def load_text(
        self,
        source: Any,
        context: Any,
        *,
        strength: str = "default",
        on_error: str = "refuse",
        format: str = "koinii",
    ) -> Edited:
        """Load every sentence of a file or text into `context`.

        `source` is the text itself (a str) or a file (a `pathlib.Path` / PathLike).
        Loading is idempotent: sentences already stored change nothing. With
        `on_error="refuse"` (the default) it is one all-or-nothing edit: a bad sentence
        refuses the whole text, naming its line and column. With `on_error="report"` the
        sentences that read and pass every check are loaded in one edit, and the others
        are listed in the result's `problems` — `{line, column, kind, message}` each — so
        one bad statement does not lose a 5 MB file. `format="kif"` reads SUO-KIF
        (`=>`, `<=>`, quantifiers: koinii.kb.kif) instead of Koinii's own sentences.
        """
        return self._writes.load_text(
            source, context, strength=strength, on_error=on_error, format=format
        )

    def mark_shipped(self, handles: Collection[int]) -> None:
        """Make `handles` — the vocabulary that ships, installed on every open — read-only:
        a retraction of one would be acknowledged and then undone by the next open's
        install, so it is refused (`vocabulary-read-only`) instead."""
        return self._writes.mark_shipped(handles)

    def add_provenance(self, handle: Any, fields: dict[str, Any]) -> dict[str, Any] | None:
        """Add provenance fields to a stored sentex (fields it has already are kept)."""
        return self._writes.add_provenance(handle, fields)

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
        return self._writes.begin_group()

    def commit_group(self) -> int:
        """Make the open group durable, then publish its writes in seq order; returns
        how many writes it held (0 when no group is open).

        If the store cannot commit, every write of the group is undone — in memory as in
        the store, last first — and the store's refusal is raised: none of them happened.
        """
        return self._writes.commit_group()

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
        return self._writes.transact(op, records, add=add, remove=remove, summary=summary)

    # --- reads, delegated (reads.py: `Reads`) ----------------------------------------

    def sentex(self, handle: Any) -> Sentex | None:
        """The sentex stored under `handle`, as a snapshot; None when none is stored."""
        return self._reads.sentex(handle)

    def provenance(self, handle: Any) -> dict[str, Any] | None:
        """The provenance the sentex `handle` was stored with; None when none is stored."""
        return self._reads.provenance(handle)

    def believed(self, handle: Any, ctx: Any = None) -> bool:
        """Is the sentex believed (and, given `ctx`, visible and unmasked there)?"""
        return self._reads.believed(handle, ctx)

    def why(self, handle: Any) -> WhyTree | None:
        """The justification tree: premises at the leaves, rules and antecedents above."""
        return self._reads.why(handle)

    def why_not(self, handle: Any, ctx: Any = None) -> str | None:
        """Why a sentex is not believed: retracted, defeated, unsupported, excepted,
        not-visible (at `ctx`) or not-stored; None when it is believed."""
        return self._reads.why_not(handle, ctx)

    def sentexes_matching(self, pattern: Any, ctx: Any) -> list[Sentex]:
        """Believed sentexes stored in exactly `ctx` (a variable: any) unifying with
        `pattern`. No inheritance; `CxEverything` reads every stored one."""
        return self._reads.sentexes_matching(pattern, ctx)

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
        return self._reads.query(goal, ctx, limit=limit)

    def acceptor(self, ctx: str) -> Callable[[Node, dict], dict | None]:
        """What a read at `ctx` sees, as one test: `accept(node, binding)` returns the
        binding to go on with (a variable context bound to its witness), or None."""
        return self._reads.acceptor(ctx)

    def argue(self, sentence: Any, ctx: Any) -> str:
        """ "true", "false", "contradiction" (both believed) or "unknown" at `ctx`."""
        return self._reads.argue(sentence, ctx)

    def context_up(self, ctx: Any) -> frozenset[str]:
        """`ctx` and every context it sees, CxUniverse included."""
        return self._reads.context_up(ctx)

    def context_down(self, ctx: Any) -> frozenset[str]:
        """`ctx` and every context that sees it."""
        return self._reads.context_down(ctx)

    def sees(self, ctx: Any, other: Any) -> bool:
        """Whether `ctx` sees `other`: it is among `context_up(ctx)`."""
        return self._reads.sees(ctx, other)

    def context_counts(self) -> dict[str, int]:
        """Every context the KB knows (stored in, or named by the hierarchy), with how
        many sentexes are stored in exactly it, believed or not."""
        return self._reads.context_counts()

    def sentexes_in(self, ctx: Any, *, after: int = 0, limit: int = 100) -> list[Sentex]:
        """The sentexes stored in exactly `ctx`, believed or not, by handle: the first
        `limit` after the handle `after` (a page; the next starts after its last)."""
        return self._reads.sentexes_in(ctx, after=after, limit=limit)

    def stats(self) -> dict[str, Any]:
        """How many sentexes (believed, premises, derived), rules, justifications and
        contexts the KB holds, and the seq of its last durable write."""
        return self._reads.stats()

    @property
    def seq(self) -> int:
        """The global log sequence number of the last durable write (the ledger's)."""
        return self._writes.ledger.seq

    def changes(self, since: int = 0, limit: int = 1000, wait_ms: int = 0) -> dict[str, Any]:
        """The durable change log after global seq `since`: `{entries, seq, too_old}`.

        `too_old` is True when the log was compacted past `since`: resnapshot. With
        `wait_ms`, waits up to that long for a write when there is nothing yet (from
        another thread: this one holds no lock while it waits).
        """
        return self._reads.changes(since, limit, wait_ms)

    def log_point(self, seq: int | None = None, at: int | None = None) -> dict[str, int] | None:
        """`{seq, at, next_handle}` of the write at `seq`, or of the last one made at or
        before epoch-ms `at` (Store.log_point); seq 0, before any write, while the log
        starts there. None when the log does not hold it (compacted, or not yet written)."""
        return self._reads.log_point(seq, at)

    def compact_log(self, keep: int) -> int:
        """Keep only the newest `keep` change-log entries; returns how many were dropped."""
        return self._reads.compact_log(keep)

    # --- the composed parts' operations, delegated ------------------------------------

    def checkpoint(self, *, wait: bool = True) -> dict[str, Any] | None:
        """Write this store's checkpoint now, so the next open reads it instead of
        rebuilding from the rows. With `wait=False` a forked child writes it and this
        returns at once (None); else `{path, seq, bytes, seconds}` (None: nothing to keep
        yet, or the change log compacted past the last write). Kept beside an SQLite
        file, or for a PostgreSQL store in this machine's cache (`checkpoint-unsupported`
        in memory), between writes (`group-open` inside a group commit). The KB also
        writes one at close, on a store big enough to gain from it, and the daemon keeps
        it up as the store changes (checkpoint.py: `Checkpoints.checkpoint`)."""
        return self._checkpoints.checkpoint(wait=wait)

    def keep_checkpoint(self) -> bool:
        """Write the checkpoint in the background if it is due: a store of at least
        KEEP_FROM sentexes, KEEP_AFTER_SHARE of its rows changed since the last one, and
        KEEP_EVERY_S since the last background one. For a long-running writer's idle
        moments (the daemon's housekeeping); returns whether one was started."""
        return self._checkpoints.keep_checkpoint()

    def search(
        self, text: Any, ctx: Any, *, limit: int = DEFAULT_HITS, ranking: str | None = None
    ) -> list[Hit]:
        """The sentexes visible at `ctx` whose words — or, ranked hybrid, whose meaning —
        match `text`, best first (search.py: `Search.search`; docs/search.md)."""
        return self._search.search(text, ctx, limit=limit, ranking=ranking)

    def search_steps(
        self,
        text: Any,
        ctx: Any,
        *,
        limit: int = DEFAULT_HITS,
        ranking: str | None = None,
        catch_up: bool = False,
    ) -> Steps:
        """`search` as steps, each ask of the store's word index yielded, for a server that
        answers them off its event loop (`Search.search_steps`)."""
        return self._search.search_steps(text, ctx, limit=limit, ranking=ranking, catch_up=catch_up)

    def answer(self, steps: Steps) -> list[Hit]:
        """Run a search's steps to its hits, each ask answered by the store, here."""
        return self._search.answer(steps)

    def index_reader(self) -> Any:
        """A reader of the store's word index for another thread (`Search.index_reader`)."""
        return self._search.index_reader()

    def index_for_search(self, limit: int | None = None) -> int:
        """Index for search, now, up to `limit` of the sentexes written since the last
        search; how many (`Search.index_for_search`: after a bulk load)."""
        return self._search.index_for_search(limit)

    def index_words(self, limit: int) -> tuple[int, int]:
        """Index by their words up to `limit` sentexes not indexed yet: (indexed, written)
        (`Search.index_words`: a server's keeper)."""
        return self._search.index_words(limit)

    def index_meaning(self, limit: int) -> int:
        """Embed up to `limit` sentences not embedded yet; how many (`Search.index_meaning`)."""
        return self._search.index_meaning(limit)

    def vocabulary(self, ctx: Any) -> list[dict[str, Any]]:
        """The predicates of the sentexes visible at `ctx`, most used first, each with its
        count and oldest example (`Search.vocabulary`)."""
        return self._search.vocabulary(ctx)

    @property
    def last_examined(self) -> int:
        """How many matches (by words and by meaning) the last search looked at."""
        return self._search.last_examined

    def violations(self) -> list[dict[str, Any]]:
        """Rule firings that derived nothing: no context to place their conclusion in
        (`reason: no-context`), or a speech act whose speaker is not the rule's author
        (`speaks-for-another`) (firing.py: `Firing.violations`)."""
        return self._maintenance.violations()

    def contradictions(self, ctx: Any = None) -> list[dict[str, Any]]:
        """Dilemmas (default vs default) a reader at `ctx` can see (None: all; clashes.py)."""
        return self._clashes.contradictions(ctx)

    def conflicts(self, ctx: Any = None) -> list[dict[str, Any]]:
        """Clashes between monotonic sentexes a reader at `ctx` can see (None: all)."""
        return self._clashes.conflicts(ctx)

    def watch(
        self,
        callback: Callable[[Event], Any],
        goal: Any = None,
        ctx: Any = None,
        *,
        since: int | None = None,
    ) -> int:
        """Call `callback(event)` after each durable write that changes belief (with a
        goal, only matching changes; with a context, only those it sees; with `since`,
        first the writes after it, replayed); a token for `unwatch` (`Watching.watch`)."""
        return self._watching.watch(callback, goal, ctx, since=since)

    def unwatch(self, token: Any) -> bool:
        """Stop the watch `token`; whether it was one."""
        return self._watching.unwatch(token)

    def watchers(self) -> list[dict[str, Any]]:
        """The watches registered: each one's token, goal and context."""
        return self._watching.watchers()


def _now() -> int:
    return time.time_ns() // 1_000_000


def open_kb(location: Any = None, **options: Any) -> KB:
    """Open a knowledge base: None → in memory, a path → SQLite, `postgresql://…`.

    Options: `synchronous` ("normal"/"full", SQLite), `standby` (PostgreSQL: wait to take
    over from the current writer instead of refusing), `create` (default True; False
    refuses `no-such-store` where no store exists yet), `max_depth`, `max_derivations`,
    `query_budget_s`, `write_budget_s` (seconds an operation may run; None: unbounded),
    `clock` (a function returning epoch ms, for `created` stamps), `checkpoints`
    (default True: a store is opened from its checkpoint and the rows written since, and
    one is left at close; False: always rebuilt from the rows, docs/engine.md),
    `checkpoint_dir` (PostgreSQL: where this machine keeps it; see `open_store`).
    The shipped vocabulary (CxCore) is loaded into a new store; loading is idempotent.
    """
    from koinii.kb.vocab import install

    engine_opts = {
        k: options.pop(k)
        for k in (
            "max_depth",
            "max_derivations",
            "query_budget_s",
            "write_budget_s",
            "clock",
            "checkpoints",
        )
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
