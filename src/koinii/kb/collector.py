"""How the engine lives with Python's cyclic garbage collector.

A KB is a heap of many small objects that live as long as the store (nodes, atoms,
justifications), and a write allocates many more. The collector's young-generation
scans are triggered by allocations, and its full collections rescan everything: left
alone, a big write is slowed by scans of what it just made, and the first collections
after it scan all of that again. So:

- the collector is paused for the span of each write and of an open (`paused`);
- after one that allocated a great deal, what it made goes straight to the oldest
  generation (`settled_as_old`), unscanned: a full collection still reaches it, in its
  turn, and what it drops is freed by reference counting at once.

Invariant: nothing here frees or keeps anything; it only decides when the collector
scans. Nothing the engine keeps is in a reference cycle that only the collector could
free: a deleted node is unlinked from what it held.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

# Objects allocated (and still alive) past which an operation's are settled as old. A
# young-generation scan of a write of 10,000 facts (~50,000 objects) costs about 6 ms,
# and its survivors are scanned again in the middle generation: 7 % of a bulk load made
# in such writes; of a big write's millions, a second. Below this, a write's objects
# are few enough to scan, and whatever else the process made meanwhile is not put
# among the oldest with them.
SETTLE_FROM = 10_000


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Pause the collector for the span of one write (or an open).

    Retracting a rule's 30,000 conclusions took four times as long with the collector
    running, and about a third of a bulk load's time went to it, both growing with the
    KB. Nothing a write keeps is garbage; what it drops is collected once the collector
    resumes. On the way out, a write that allocated more than SETTLE_FROM objects has
    them settled as old.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        # asked before the collector resumes: once it has, the next allocation (asking,
        # say) would set off the very scan of everything young that settling spares
        if gc.get_count()[0] > SETTLE_FROM:
            settled_as_old()
        gc.enable()


def settled_as_old() -> None:
    """Put every object the collector has not scanned yet among its oldest, unscanned.

    Built with the collector paused, what an open or a big write made sits in the
    youngest generation: the first collections after it would scan all of it, twice (to
    the middle generation, then the oldest) — over a second each at a million facts.
    Freezing and unfreezing moves every tracked object to the oldest generation in
    constant time. Where the program froze its heap itself (the daemon does, after the
    open), unfreezing would undo that: what was made joins the frozen heap instead.
    """
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
    else:
        gc.freeze()
