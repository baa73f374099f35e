"""The write path's ledger: the write in progress, the open group commit, and the counters
— the seq of the last durable write, the next handle and justification id, the rows
written. Writes owns it (state.py's `OWNERS`); it is the only place these change.

Invariants:
- At most one write is in progress (`begin` refuses a second: `reentrant-write`).
- Handles and justification ids are never given out twice: a write takes them from its
  transaction (`Transaction.next_handle` / `next_just`, started from here), and `end`
  takes back where it stopped — committed or undone alike, since what an undone write
  consumed may have been seen. Only a dry run (`check_edit`) hands its ids back
  (`end(tx, keep_ids=False)`): nothing it made was stored or shown.
- `seq` is the seq of the last durable write: it moves on only when the store has
  committed one (`committed`), and back only when a group commit the store could not
  make is undone (`group_failed`: to the seq before the group's first write).

Why a derivation takes its ids from its transaction, not from here by a call: a closure
makes a million, and each would pay a method call for what is an attribute's increment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from koinii.errors import Refused

if TYPE_CHECKING:
    from koinii.kb.feed import Routed
    from koinii.kb.writes import Transaction

Held = tuple["Transaction", int, "Routed | None"]  # a group's write: (tx, its seq, its event)


class Ledger:
    """The write in progress, the open group and the counters (see the module docstring)."""

    __slots__ = ("_tx", "_group", "_group_seq", "_seq", "_next_handle", "_next_just", "_rows")

    def __init__(self) -> None:
        self._tx: Transaction | None = None
        self._group: list[Held] | None = None  # the open group's writes (see `open_group`)
        self._group_seq = 0  # the seq before the open group's first write
        self._seq = 0
        self._next_handle = 1
        self._next_just = 1
        self._rows = 0  # rows written since this KB opened (checkpoint.py counts from it)

    # --- the counters ---------------------------------------------------------------------

    @property
    def seq(self) -> int:
        """The seq of the last durable write."""
        return self._seq

    @property
    def next_handle(self) -> int:
        """The handle the next new sentex gets: every handle below it was given out once
        (in a write, the transaction's `next_handle` is ahead of it)."""
        return self._next_handle

    @property
    def next_just(self) -> int:
        """The id the next justification gets; every id below it was given out once."""
        return self._next_just

    @property
    def rows_written(self) -> int:
        """The rows (sentexes and justifications, written or deleted) every durable write
        since this KB opened has changed: checkpoint.py takes the difference."""
        return self._rows

    def restart(self, seq: int, next_handle: int, next_just: int) -> None:
        """Take the counters of a store just opened: its seq, and the ids it has given
        out (the rows' highest, and what the store recorded as consumed)."""
        self._seq, self._next_handle, self._next_just = seq, next_handle, next_just

    def issued(self, just: int) -> None:
        """Justification `just` is stored (a checkpoint's tail): its id is not given again."""
        if just >= self._next_just:
            self._next_just = just + 1

    # --- the write in progress ------------------------------------------------------------

    @property
    def tx(self) -> Transaction | None:
        """The write in progress, if any."""
        return self._tx

    def begin(self, tx: Transaction) -> Transaction:
        """Make `tx` (started at `next_handle` / `next_just`) the write in progress."""
        if self._tx is not None:
            raise Refused(
                "reentrant-write",
                "a write started while another was in progress on this thread",
                {},
            )
        self._tx = tx
        return tx

    def end(self, tx: Transaction, *, keep_ids: bool = True) -> None:
        """No write is in progress any more; the ids `tx` took stay taken (`keep_ids`),
        or are handed back (a dry run's only)."""
        self._tx = None
        if keep_ids:
            self._next_handle, self._next_just = tx.next_handle, tx.next_just

    def committed(self, seq: int, rows: int) -> None:
        """The store has made a write durable as `seq`, changing `rows` rows."""
        self._seq = seq
        self._rows += rows

    # --- the group commit -----------------------------------------------------------------

    @property
    def in_group(self) -> bool:
        """Whether a group commit is open (`Writes.begin_group`)."""
        return self._group is not None

    def refuse_inside_group(self, what: str) -> None:
        """Refuse `what` while a group is open: it writes the store itself, at once, and
        cannot wait for the group's commit (the parts that do so call this first)."""
        if self._group is not None:
            raise Refused(
                "group-open",
                f"{what} cannot happen inside a group commit; commit the group first",
                {"what": what},
            )

    def open_group(self) -> None:
        """A group commit is open: the writes that follow are held (`hold`), and the seq
        they started from kept for `group_failed` (Writes refuses a second group)."""
        self._group = []
        self._group_seq = self._seq

    def hold(self, tx: Transaction, seq: int, routed: Routed | None) -> None:
        """A write of the open group, its event routed, waiting for the group's commit."""
        assert self._group is not None, "a write is held only while a group is open"
        self._group.append((tx, seq, routed))

    def close_group(self) -> list[Held] | None:
        """The open group's writes, in order, and no group open (None: none was)."""
        held, self._group = self._group, None
        return held

    def group_failed(self) -> None:
        """The store could not commit the group just closed: none of its writes happened,
        so the seq is the one before its first (the ids they took stay taken)."""
        self._seq = self._group_seq
