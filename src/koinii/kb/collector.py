"""How the engine lives with Python's cyclic garbage collector.

A KB is a heap of many small objects that live as long as the store (nodes, atoms,
justifications), and a write allocates many more. The collector's young-generation
scans are triggered by allocations, and its full collections rescan everything: left
alone, a big write is slowed by scans of what it just made, and a full collection over
a big KB holds the whole process (0.25 s at 100,000 facts, seconds at a million; with
the collector's own rule, one falls due after the first few hundred thousand objects
that reads or the host keep a while). So:

- the collector is paused for the span of each write and of an open (`paused`), and
  of a query once its answer is big (`READ_PAUSE_FROM`);
- after one that allocated a great deal, what it made is frozen (`freeze`):
  never scanned again, as the daemon freezes what its open built. What it drops is
  still freed by reference counting at once: nothing the engine keeps is in a
  reference cycle that only the collector could free (a deleted node is unlinked from
  what it held).
- closing a KB unfreezes (`release`): a closed KB's heap, and whatever young objects of
  the host were frozen with a big write's, are the collector's again.

Invariant: nothing here frees or keeps anything; it only decides when the collector
scans.
"""

from __future__ import annotations

import gc

# Objects allocated (and still alive) past which an operation's are settled (frozen). A
# young-generation scan of a write of 10,000 facts (~50,000 objects) costs about 6 ms,
# and its survivors are scanned again in the middle generation: 7 % of a bulk load made
# in such writes; of a big write's millions, a second. Below this, a write's objects
# are few enough to scan, and whatever else the process made meanwhile is not put
# among the oldest with them.
SETTLE_FROM = 10_000


class paused:
    """Pause the collector for the span of one write (or an open).

    Retracting a rule's 30,000 conclusions took four times as long with the collector
    running, and about a third of a bulk load's time went to it, both growing with the
    KB. Nothing a write keeps is garbage; what it drops is collected once the collector
    resumes. On the way out, a write that allocated more than SETTLE_FROM objects has
    them settled: frozen.

    A class, not a generator's context manager: entering and leaving one of those costs
    1.7 µs, this 0.6 (a small write takes 40).
    """

    __slots__ = ("pausing",)

    def __init__(self) -> None:
        self.pausing = False

    def __enter__(self) -> None:
        self.pausing = gc.isenabled()  # (paused already: an enclosing pause resumes it)
        if self.pausing:
            gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.pausing:
            # asked before the collector resumes: once it has, the next allocation
            # (asking, say) would set off the very scan of everything young that
            # settling spares
            if gc.get_count()[0] > SETTLE_FROM:
                freeze()
            gc.enable()


# Solutions past which a query pauses the collector until its answer is made and sorted
# (reads.py, `query`): the answer is the caller's, to keep or drop, so it is not frozen,
# only not rescanned as it grows — a 9,000-row answer met 30 young collections, a tenth
# of its time — and scanned once when the collector resumes. A smaller answer never
# meets one, and would only pay for the pause (half a microsecond of a point query's 6).
READ_PAUSE_FROM = 256


def freeze() -> None:
    """Freeze every object the collector tracks: never scanned again, until `release`.

    Built with the collector paused, what an open or a big write made sits in the
    youngest generation: the first collections after it would scan all of it, twice (to
    the middle generation, then the oldest) — over a second each at a million facts —
    and every full collection after that all of it again. Moved to the oldest generation
    instead (frozen, then unfrozen), it was still rescanned whenever a full collection
    fell due: a read of 9,000 rows took 330 ms instead of 70 when one did, at 100,000
    facts. Freezing costs constant time, and frozen objects are still freed when their
    count drops to zero. What else the host made and still held young is frozen with
    it (the young generations hold a few thousand objects when a write pauses the
    collector); a cycle among those waits for `release`.
    """
    gc.freeze()


def release() -> None:
    """Unfreeze everything (a KB is closing): the collector may scan and free it again."""
    gc.unfreeze()
