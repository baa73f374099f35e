"""The knowledge base's in-memory state: every structure the engine's parts share, and
which part owns each.

`KB` is one object assembled from parts: `engine` (the facade: the lifecycle, budgets,
the store's record tables), which declares its own state here, on `State`, and seven
objects of their own that the engine makes and delegates to: `maintenance` (truth
maintenance, one object: linking, justifications, belief, and its forward-chaining
half from firing.py), `writes` (transactions and commit) and `checkpoint`, made before
the open, which reads through them; `reads` (sentexes, `query`, `why`, the change
log), `search`, `clashes` and `watching` (the feed), made once the KB is open. Each is
given in its constructor what it reads (the lock, the store, maintenance's index,
hierarchy, masks and rules, or maintenance itself, writes' ledger, the KB through a
Protocol naming just what it asks).

The state is declared once, with its owner in `OWNERS`: the owner makes it (the engine
in `KB.__init__`; a composed part in its own object) and is the only part that binds
it again; the others read it, and change it only by asking the owner (a public method
on the owner's part or on the object it holds). A composed part's state is its own
object's (its `__slots__`, named in `OWNERS` under its module): no other part binds it
or reaches into its privates, and it changes none of what it is given.
tests/test_engine_parts.py holds every part to that, and holds a node's belief labels
(`believed`, `mono`, `defeated`) and its `justs` / `uses` to maintenance alone.

Invariants (each kept by the owner):
- Maintenance's `index` holds a Node exactly while it is stored (`link` /
  `unlink_quiet`).
- Its `hierarchy`, `rules`, `masks` and its other structures are functions of the
  stored nodes (in `link_quiet` / `unlink_quiet`; a checkpoint's are taken whole by
  `take_structures`). They are bound again only while the KB opens: the composed parts
  made after it hold `index`, `hierarchy`, `masks` and `rules`; the checkpoints, made
  before, hold none of them (they ask `structures` at each use), and writes reads
  them through maintenance.
- Writes' `ledger` holds the write in progress, the open group commit, the seq of the
  last durable write, and the next handle and justification id, never reused
  (ledger.py).
- The search's vectors hold a vector for stored handles up to their `top` (search:
  caught up lazily; a handle no longer stored is skipped, never returned).
- A node's `justs` and `uses` (sentex.py) and its labels are maintenance's: firing makes
  and drops a justification only through `Maintenance.justify` / `drop_justification`,
  writes puts a write's old labels back through `restore_belief`, and a rule's firings
  are asked of `firings_of` (a rule keeps no `uses`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from koinii.kb.budget import Budget
    from koinii.kb.checkpoint import Checkpoints
    from koinii.kb.clashes import Clashes
    from koinii.kb.maintenance import Maintenance
    from koinii.kb.reads import Reads
    from koinii.kb.search import Search
    from koinii.kb.store import Store
    from koinii.kb.watching import Watching
    from koinii.kb.writes import Writes

# Which part (its module in kb/) owns each attribute of the state: the only one that
# binds it. Every attribute the engine binds is declared on `State` and named here; a
# composed part's (maintenance, writes, checkpoint, reads, search, clashes, watching)
# are its own object's, named here too, and the rest of its `__slots__` are what its
# constructor is given, bound there only.
OWNERS: dict[str, tuple[str, ...]] = {
    "engine": (
        "_store",
        "_clock",
        "_lock",
        "_closed",
        "_budget",
        "_opened",
        "max_depth",
        "max_derivations",
        "query_budget_s",
        "write_budget_s",
        "_reads",
        "_search",
        "_clashes",
        "_watching",
        "_checkpoints",
        "_maintenance",
        "_writes",
    ),
    # the composed parts: each its own object's state
    "writes": ("ledger", "shipped", "_commit_listeners", "_next_listener", "_closed"),
    "maintenance": (
        "index",
        "hierarchy",
        "rules",
        "masks",
        "_rules_by_literal",
        "_triggers",
        "_carriers",
        "_referrers",
        "_concluders",
    ),
    "checkpoint": ("_enabled", "_seq", "_at", "_rows"),
    "reads": (),
    "search": ("_vectors_kept", "_terms_counted", "_words_indexed", "last_examined", "_closed"),
    "clashes": (),
    "watching": ("_feed",),
}


class State:
    """The engine's own attributes, declared (made in `KB.__init__`: `OWNERS`)."""

    # the lifecycle, the budgets
    _store: Store
    _clock: Callable[[], int]  # epoch ms for `created` stamps and the change log
    _lock: threading.RLock  # serialises everything: a KB may be shared between threads
    _closed: bool
    _budget: Budget | None  # the running operation's (see `KB.budget`)
    _opened: dict[str, Any]  # how this KB was opened (`KB.opened`)
    max_depth: int
    max_derivations: int
    query_budget_s: float | None
    write_budget_s: float | None
    # the composed parts, made by the engine (the first three before the open)
    _maintenance: Maintenance
    _writes: Writes
    _checkpoints: Checkpoints
    _reads: Reads
    _search: Search
    _clashes: Clashes
    _watching: Watching
