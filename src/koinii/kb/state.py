"""The knowledge base's in-memory state: every structure the engine's rooms share.

`KB` is one object assembled from rooms — `writes` (transactions and commit),
`maintenance` (truth maintenance: linking, justifications, belief), `firing` (rules and
carried claims), `reads`, `clashes` and `feed` (watching) — each a class over this state.
The state is declared once, here, with what each part means; only the room named beside
a structure changes it.

Invariants (each kept by the room that writes the structure):
- `_index` holds a Node exactly while it is stored (maintenance: `link` / `_unlink`).
- `_hierarchy`, `_rules`, `_rules_by_literal`, `_masks`, `_carriers` and `_referrers`
  are functions of the stored nodes (maintenance, in `link_quiet` / `unlink_quiet`).
- `_tx` is the write in progress, if any; `_group` the open group commit (writes).
- `_seq` is the seq of the last durable write; handles and justification ids below
  `_next_handle` / `_next_just` are never reused (writes).
- `_search_vectors` holds a vector for stored handles up to its `top` (search: caught
  up lazily; a handle no longer stored is skipped, never returned).
- A node's `justs` and `uses` (sentex.py) are maintenance's: firing makes and drops a
  justification only through `Maintenance.justify` / `drop_justification`, and asks a
  rule's firings of `firings_of` (a rule keeps no `uses`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from koinii.kb.budget import Budget
    from koinii.kb.contexts import Hierarchy
    from koinii.kb.feed import Feed, Routed
    from koinii.kb.index import Index
    from koinii.kb.joins import Triggers
    from koinii.kb.rules import Rule
    from koinii.kb.semantic import Vectors
    from koinii.kb.sentex import Node
    from koinii.kb.store import Store
    from koinii.kb.writes import Transaction
    from koinii.terms import Sym


class State:
    """The attributes every room reads (set up by `KB.__init__`)."""

    _store: Store
    _clock: Callable[[], int]  # epoch ms for `created` stamps and the change log
    _lock: threading.RLock  # serialises everything: a KB may be shared between threads
    _index: Index
    _hierarchy: Hierarchy
    _rules: dict[Node, Rule]
    _rules_by_literal: dict[tuple[Sym, bool], list[tuple[Node, int]]]
    # `_rules_by_literal` by what a node must hold to fill each literal (joins.Triggers),
    # made when first asked, dropped for a functor when its rules change
    _triggers: dict[tuple[Sym, bool], Triggers]
    _masks: dict[int, list[Node]]  # masked handle -> its mask nodes
    _carriers: dict[Sym, list[Node]]  # functor -> its carriesClaim declarations
    _referrers: dict[int, set[Node]]  # handle -> nodes naming it
    _feed: Feed
    _commit_listeners: dict[int, Callable[[int, str], Any]]
    _tx: Transaction | None
    _group: list[tuple[Transaction, int, Routed | None]] | None
    _group_seq: int  # the seq before the open group's first write
    _closed: bool
    _seq: int
    _next_handle: int
    _next_just: int
    _budget: Budget | None  # the running operation's (see `KB.budget`)
    _shipped: frozenset[int]  # the shipped vocabulary's handles (see `mark_shipped`)
    _search_vectors: Vectors | None  # the stored sentences' vectors (search, semantic.py)
    _search_terms: Any  # the stored words' counts (search, terms_of_search.Terms) or None
    last_examined: int  # matches (by words and by meaning) the last search looked at
    max_depth: int
    max_derivations: int
    query_budget_s: float | None
    write_budget_s: float | None
