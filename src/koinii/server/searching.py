"""Searches off the event loop, and the search index kept caught up in slices of it
(docs/daemon.md, bounded work; docs/security.md, non-interference).

A search asks the store's word index a few questions (`Search.search_steps`: the ranked
matches of its words, in pages, then snippets) and does the rest in memory: which of
the matches its reader may see, the ranking by meaning, the threads. The asks are most
of its time — a search over 20,000 matches hidden from its reader spends nine tenths
of it in FTS5 ranking them — so they run on a thread, each through a connection of
its own (`Store.reader`: it reads what is committed), while the loop serves everyone
else; the steps between them run on the loop, where the KB lives (it is touched from
no other thread), each within what is left of the search's budget. A forked snapshot
(snapshot.py) would run the in-memory steps off the loop too, but SQLite's connections
must not cross a fork (its locks and shared memory are per process, and a connection
opened in the child would share the parent's), and once the asks are off the loop the
steps left are a few milliseconds: looking at MAX_EXAMINED matches at most. The store
that keeps its index in one connection's memory (no `reader`) is searched on the loop,
within the budget, as before.

The index is caught up by the writer, in slices, never all at once on the loop: the
writes since the last search wait to be indexed (FTS5 is kept lazily, kb/store/
fulltext.py; the stored words' counts and, with the semantic extra, the vectors are
the engine's). `SearchIndex.keep` indexes SLICE sentexes at a time by their words,
back to back while any are behind — the loop serves everyone between two slices —
and then embeds them EMBED_SLICE at a time. A search first indexes by words what is
still behind, a slice per turn of the loop, until every sentex below the handle next
at its arrival is indexed: so it sees every write acknowledged before it, and nobody
waits more than a slice for its catch-up. (That wait is not part of its budget: it
holds nobody, and ends once the writes before it are indexed.) A search by meaning
then embeds the backlog the same way, EMBED_PER_SEARCH sentences of it at most, as a
search in one process does; a sentence not embedded yet is found by its words.

Invariants:
- The KB is touched only on the loop's thread; a reader's thread touches only its
  connection. At most READERS searches ask the index at once; the others wait their
  turn off the loop. A reader is opened on a thread, kept for the next search, and
  closed once its connection fails (the next search opens another); a records read's
  connection is opened for it and closed after, and its statements share the read
  budget (`BudgetedRecords`) — over the memory store, the store's own connection, on
  the loop, its progress handler taken off after.
- A search asks the index only after `index_words` reports every sentex below the
  handle next at its arrival indexed by its words (the open group committed first).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from koinii.errors import Refused
from koinii.kb import KB, semantic
from koinii.kb.search import EMBED_PER_SEARCH, Hit, Steps

log = logging.getLogger("koinii.server")

READERS = 2  # searches asking the index at once (one connection each)
SLICE = 500  # sentexes indexed by their words per slice of the loop: ~5-10 ms
EMBED_SLICE = 100  # sentences embedded per slice (semantic extra): 5-15 ms
IDLE_S = 0.1  # how often an idle keeper looks for writes to index


class SearchIndex:
    """The daemon's search index kept caught up with its writes, in slices."""

    def __init__(self, kb: KB, flush: Callable[[], None]) -> None:
        self.kb = kb
        self.flush = flush  # commits the open group: the index holds what is committed
        self.model: asyncio.Task | None = None  # the embedding model, loading (`keep`)

    def slice(self) -> tuple[int, int]:
        """Index one slice by its words: (indexed, written) as `KB.index_words`."""
        self.flush()
        return self.kb.index_words(SLICE)

    async def caught_up(self, meaning: bool) -> None:
        """Return once every write acknowledged before now is indexed by its words — and,
        for a search by `meaning`, the backlog embedded, EMBED_PER_SEARCH of it at most
        (as a search in one process does) —: a slice at a time, everyone else served
        between two."""
        indexed, written = self.slice()
        while indexed < written:
            await asyncio.sleep(0)
            indexed, _ = self.slice()
        if not meaning:
            return
        if self.model is not None:  # loading in its thread: not on the loop
            await asyncio.wait([self.model])
        embedded = 0
        while embedded < EMBED_PER_SEARCH:
            done = self.kb.index_meaning(EMBED_SLICE)
            embedded += done
            if done < EMBED_SLICE:
                return
            await asyncio.sleep(0)

    async def keep(self) -> None:
        """The keeper (a task for the daemon's life): slices while anything is behind,
        the loop served between them, by words first, then by meaning; a look every
        IDLE_S otherwise."""
        # The embedding model (where installed) loads in a thread: loaded by the first
        # embedding, on the loop, it would hold every request for a third of a second.
        model = self.model = asyncio.create_task(asyncio.to_thread(semantic.load))
        try:
            while True:
                try:
                    indexed, written = self.slice()
                    busy = indexed < written or (
                        model.done() and self.kb.index_meaning(EMBED_SLICE) > 0
                    )
                except Exception:  # (a search meeting it is refused with it)
                    log.exception("indexing for search failed")
                    busy = False
                await asyncio.sleep(0 if busy else IDLE_S)
        finally:
            model.cancel()


class BudgetedRecords:
    """A connection to the record tables whose statements share one budget: each may
    run, its rows read included, until what was left of the budget when it started has
    passed — SQLite looks at the clock every CHECK_EVERY steps of its machine (a
    progress handler), PostgreSQL is given it as `statement_timeout` — and none starts
    once the statements' own time has spent it. What runs between two statements (the
    embedding of the sessions' backlog, EMBED_PER_SEARCH texts at most; the ranking in
    memory) is not counted: like a search's catch-up of its index, it is bounded by
    itself, and it runs on the reading thread, holding nobody. `stopped`: the budget
    stopped a statement, whatever the domain made of its error."""

    CHECK_EVERY = 1_000

    def __init__(self, connection: Any, budget_s: float) -> None:
        self._connection = connection
        self.dialect = getattr(connection, "dialect", "sqlite")
        self.budget_s = budget_s
        self.spent = 0.0
        self.stopped = False
        self._until: float | None = None
        if self.dialect == "sqlite":
            connection.set_progress_handler(self._past, self.CHECK_EVERY)

    def _past(self) -> bool:
        if self._until is not None and time.monotonic() > self._until:
            self.stopped = True
            return True  # SQLite stops the statement: "interrupted"
        return False

    def execute(self, sql: str, params: Any = ()) -> Any:
        left = self.budget_s - self.spent
        if left <= 0:
            self.stopped = True
            raise self.exhausted()
        started = time.monotonic()
        self._until = started + left
        try:
            if self.dialect == "postgres":
                self._connection.raw.execute(f"SET statement_timeout = {math.ceil(left * 1000)}")
            return self._connection.execute(sql, params)
        except Exception:
            if time.monotonic() < self._until:
                raise
            self.stopped = True
            raise self.exhausted() from None
        finally:
            self.spent += time.monotonic() - started

    def release(self) -> None:
        """Its connection no longer watched: the memory store's own outlives the read."""
        if self.dialect == "sqlite":
            self._connection.set_progress_handler(None, 0)

    def exhausted(self) -> Refused:
        return Refused(
            "budget-exhausted",
            f"the read of the records ran past its {self.budget_s:g} s budget and was "
            "stopped: narrow it (fewer or rarer words, a smaller limit, a window of turns)",
            {"budget_s": self.budget_s},
        )


class Searches:
    """Searches run with their asks off the loop (see the module docstring)."""

    def __init__(self, kb: KB, flush: Callable[[], None]) -> None:
        self.kb = kb
        self.index = SearchIndex(kb, flush)
        self._slots = asyncio.Semaphore(READERS)
        self._idle: list[Any] = []  # the readers not in use
        self._records_turn = asyncio.Lock()  # one records read at a time (see `records`)

    async def run(self, steps: Steps, budget_s: float, meaning: bool) -> list[Hit]:
        """The search's hits, within `budget_s` (refused `budget-exhausted` past it);
        `meaning`: it ranks by meaning too (hybrid)."""
        await self.index.caught_up(meaning)
        async with self._slots:
            reader = self._idle.pop() if self._idle else None
            if reader is None:  # opened on a thread: PostgreSQL's takes milliseconds
                reader = await asyncio.to_thread(self.kb.index_reader)
            sound = True
            try:
                return await self._answer(steps, budget_s, reader)
            except Refused as refusal:
                sound = refusal.kind != "store-error"  # its connection failed: a new one next
                raise
            except BaseException:  # (cancelled: its thread may still be using it)
                reader, sound = None, False
                raise
            finally:
                steps.close()
                if reader is not None:
                    if sound:
                        self._idle.append(reader)
                    else:
                        reader.close()

    async def _answer(self, steps: Steps, budget_s: float, reader: Any) -> list[Hit]:
        kb = self.kb
        if reader is None:  # the index lives in the store's memory: on the loop
            with kb.budget(budget_s, "the search"):
                return kb.answer(steps)
        loop = asyncio.get_running_loop()
        started = loop.time()
        answer = None
        while True:
            with kb.budget(budget_s, "the search", spent=loop.time() - started) as budget:
                if not budget.remaining():
                    raise budget.exhausted()
                try:
                    kind, words, arg = steps.send(answer)
                except StopIteration as done:
                    return done.value
            ask = reader.search if kind == "search" else reader.snippets
            answer = await asyncio.to_thread(ask, words, arg)

    async def records(self, read: Callable[[], Any], budget_s: float, spent: float = 0.0) -> Any:
        """`read()` — a domain's read of the record tables, the session reads — on a
        thread, `KB.read_records` reading through a connection of its own whose
        statements share what `spent` left of `budget_s` (`BudgetedRecords`; refused
        `budget-exhausted` past it), while the loop serves everyone else. One at a time:
        what such a read keeps in memory beside the KB (the sessions' vectors) is kept by
        one thread at once. Where the store has no connection to spare (the memory
        store: its record tables are one connection's memory), on the loop, through that
        connection, within the same budget: it holds everyone, but no longer than that."""
        async with self._records_turn:
            connection = await asyncio.to_thread(self.kb.records_reader)  # opened for it
            if connection is None:  # through the store's own, on the loop

                def through_the_stores(own: Any) -> Any:
                    return _within(self.kb, own, budget_s, spent, read)

                return self.kb.read_records(through_the_stores)

            def through_its_own() -> Any:
                try:
                    return _within(self.kb, connection, budget_s, spent, read)
                finally:
                    connection.close()

            return await asyncio.to_thread(through_its_own)

    def close(self) -> None:
        for reader in self._idle:
            reader.close()
        self._idle.clear()


def _within(kb: KB, connection: Any, budget_s: float, spent: float, read: Callable[[], Any]) -> Any:
    """`read()`, its reads of the record tables through `connection`, their statements
    within what `spent` left of `budget_s` (`BudgetedRecords`)."""
    budgeted = BudgetedRecords(connection, budget_s)
    budgeted.spent = spent
    try:
        with kb.reading_records_through(budgeted):
            found = read()
    except Exception:  # (a store error, say, for a statement it stopped)
        if budgeted.stopped:
            raise budgeted.exhausted() from None
        raise
    finally:
        budgeted.release()
    if budgeted.stopped:  # (a domain's never-failing read answered a default)
        raise budgeted.exhausted()
    return found
