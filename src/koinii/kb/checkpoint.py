"""Opening a store without rebuilding it: the engine's in-memory state kept in a
checkpoint file — beside an SQLite store, in the machine's cache for a PostgreSQL one —
read back with the rows written since.

One concept: the checkpoint, written and read; its size is the state it must carry whole
(indexes, belief, rules) and the checks that a checkpoint still fits its rows.

Rebuilding the indexes and belief from the rows costs time in proportion to the store
(16 s at a million facts); unpickling the state those rows built costs a fraction of it.
A checkpoint is a cache of that state, never the truth — the rows stay the truth:

- It is used only when it names this store (the store's random id), the change-log entry
  at its seq is this store's own (a fingerprint, so a copy of the store that went its own
  way is not mistaken for it), the code that wrote it is this code (a fingerprint of the
  modules whose objects it holds, and of how belief is labelled), and its bytes are
  whole (length and CRC). Anything else — or any error reading it — is a rebuild from
  the rows, exactly as without it.
- It holds the durable state at its seq and nothing else: it is taken between writes,
  with no group commit open.
- What was written after it is applied on top from the rows: each row records the seq
  of the write that last wrote it (`written`), so the rows after the checkpoint are found
  by an index, and what was deleted since is what the checkpoint holds and the store
  no longer does. Belief is then labelled again over everything those rows can reach
  (`closure`), or everywhere when they change the hierarchy, a mask or a carrier.
  Reopening from a checkpoint equals a rebuild (tests/test_checkpoint.py holds it so,
  over random histories and under kill -9).
- The search's vectors (semantic.py), where there are any, follow the pickle as raw
  arrays with their own CRC, and are read back only under the same model; a key no
  longer stored is skipped by the search as ever, and what was written since is
  embedded as it is searched.
- Writing one never holds the writer long: `checkpoint(wait=False)` forks (twice, so
  nothing is left to reap) and the child writes a temporary file, syncs it and renames
  it over the old one; a child killed midway leaves the old checkpoint whole.

The file is a pickle: it is written with the store file's own permissions (0600 in a
cache folder of 0700), and read by an unpickler that admits only the engine's own
classes.
"""

from __future__ import annotations

import contextlib
import copyreg
import gc
import hashlib
import importlib
import io
import json
import logging
import os
import pathlib
import pickle
import signal
import threading
import time
import zlib
from collections.abc import Callable, Collection
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any, Protocol

from koinii._version import __version__
from koinii.errors import Refused
from koinii.kb import semantic
from koinii.kb.index import Index
from koinii.kb.maintenance import Structures
from koinii.kb.rules import CARRIES_CLAIM, EXCEPT, GENL_CX
from koinii.kb.sentex import Justification, Node, justification_of, node_of
from koinii.terms import Sym

if TYPE_CHECKING:
    from koinii.kb.ledger import Ledger
    from koinii.kb.store import Store
    from koinii.kb.writes import Transaction

log = logging.getLogger("koinii.kb")

MAGIC = b"koinii checkpoint\n"
# 2: a rule keeps no `uses` (maintenance.py, `firings_of`); 3: big `justs`, `uses` and
# index buckets are `ListSet`s (sentex.py), not dicts and sets
FORMAT = 3
# Below this many sentexes a rebuild takes under a quarter of a second: no file is
# written at close, nor kept up by the daemon (an explicit `checkpoint()` still writes).
KEEP_FROM = 20_000
# The daemon keeps the checkpoint up once this share of the store's rows changed since
# the last one (so a restart after a crash replays at most about that much), and
# at most this often: writing one costs a core for seconds on a big store.
KEEP_AFTER_SHARE = 0.1
KEEP_EVERY_S = 60.0
# A write of this many rows or more (a rule's closure, a bulk load), and at least
# KEEP_AFTER_SHARE of the store, is followed by a checkpoint at once, in the background:
# rebuilding what it wrote from the rows would cost the next open seconds, and the
# store may be closed, or its writer killed, before any idle moment comes.
KEEP_AFTER_WRITE_OF = 50_000
# A background writer that has not finished in this long is stuck (a lock a thread of
# the parent held at the fork): the alarm ends it, and the old checkpoint stays.
CHILD_LIMIT_S = 600

# The modules whose objects a checkpoint holds, or whose code decided its belief labels:
# a change to any of them makes older checkpoints unusable (they are rebuilt, not read).
_LAYOUT_MODULES = (
    "koinii.terms",
    "koinii.kb.sentex",
    "koinii.kb.index",
    "koinii.kb.contexts",
    "koinii.kb.rules",
    "koinii.kb.maintenance",
    "koinii.kb.checkpoint",
)
_ADMITTED = {
    ("koinii.kb.checkpoint", "_begin_nodes"),
    ("koinii.kb.checkpoint", "_next_node"),
    ("koinii.kb.checkpoint", "_symbol"),
    ("koinii.kb.checkpoint", "_index"),
    ("koinii.kb.sentex", "Justification"),
    ("koinii.kb.sentex", "ListSet"),
    ("koinii.kb.index", "FunctorIndex"),
    ("koinii.kb.contexts", "Hierarchy"),
    ("koinii.kb.rules", "Rule"),
    ("koinii.terms", "Var"),
}


class Maintained(Protocol):
    """What the checkpoint asks of truth maintenance (maintenance.py), at each use: the
    structures it keeps (`structures`), to take a checkpoint's (`take_structures`, or
    `fresh_state` when one could not be applied), and — bringing one up to the rows — to
    link, unlink, attach and detach, and to label belief again."""

    def structures(self) -> Structures: ...

    def take_structures(
        self, structures: Structures, links: list[tuple[Node, Any, Any]]
    ) -> None: ...

    def fresh_state(self) -> None: ...

    def link_quiet(self, node: Node) -> None: ...

    def unlink_quiet(self, node: Node) -> None: ...

    def attach(self, j: Justification) -> None: ...

    def detach(self, j: Justification) -> None: ...

    def resting_on(self, node: Node) -> list[Justification]: ...

    def closure(self, seeds: Collection[Node], made: Collection[int] = ()) -> set[Node]: ...

    def relabel(self, nodes: Collection[Node], tx: Transaction | None) -> None: ...


class Checkpoints:
    """Writing the checkpoint, and opening from it (see the module docstring): an object
    of its own, which `KB` makes before it opens (an open reads the checkpoint through
    it) and delegates `checkpoint` and `keep_checkpoint` to (engine.py).

    Its state is its own: whether checkpoints are kept at all, and where the last one
    stands (its seq, when the last one in the background was started, the ledger's rows
    written when it was taken). What it reads is given to it, and it changes none of it
    but through its owner: the KB's lock, the store, the ledger (writes': an open sets
    its counters through `restart` and `issued`), the search's vectors (asked when one
    is written: the search is made after the open), and truth maintenance (`Maintained`),
    whose structures an open from a checkpoint replaces whole — asked for at each use,
    never held."""

    __slots__ = (
        "_maintained",
        "_lock",
        "_store",
        "_ledger",
        "_vectors",
        "_enabled",
        "_seq",
        "_at",
        "_rows",
    )

    def __init__(
        self,
        maintained: Maintained,
        *,
        lock: threading.RLock,
        store: Store,
        ledger: Ledger,
        vectors: Callable[[], semantic.Vectors | None],
        enabled: bool = True,
    ) -> None:
        self._maintained = maintained
        self._lock = lock
        self._store = store
        self._ledger = ledger
        self._vectors = vectors  # the search's, once it is made
        self._enabled = enabled  # read and write them at all (open_kb's `checkpoints`)
        self._seq: int | None = None  # the seq of the one on disk, as far as we know
        self._at = -KEEP_EVERY_S  # monotonic time of the last one in the background
        # the ledger's `rows_written` when it was taken: the rows changed since are the
        # difference (what a restart from it would replay)
        self._rows = 0

    def checkpoint(self, *, wait: bool = True) -> dict[str, Any] | None:
        """Write this store's checkpoint now: in a forked child with `wait=False`, else
        here, returning where and how big (`KB.checkpoint` says the rest)."""
        with self._lock:
            self._ledger.refuse_inside_group("writing a checkpoint")
            path = self._store.checkpoint_path
            if path is None or not self._enabled:
                raise Refused(
                    "checkpoint-unsupported",
                    f"{self._store.location} keeps no checkpoint: one is kept beside an "
                    "SQLite file, or for a PostgreSQL store in this machine's cache, when "
                    "opened with checkpoints on (the default)",
                    {"location": self._store.location},
                )
            header = self._header()
            if header is None:  # nothing written yet, or the log compacted past the last write
                return None
            if wait:
                started = time.perf_counter()
                size = _write(path, header, self._state(), self._vectors())
                self._taken()
                return {
                    "path": path,
                    "seq": header["seq"],
                    "bytes": size,
                    "seconds": time.perf_counter() - started,
                }
            if not hasattr(os, "fork"):
                self.checkpoint(wait=True)
                return None
            state, vectors = self._state, self._vectors()
            _in_grandchild(lambda: _write(path, header, state(), vectors))
            self._taken()
            self._at = time.monotonic()
            return None

    def _stored(self) -> int:
        """How many sentexes are stored (what a checkpoint would hold)."""
        return len(self._maintained.structures().index.by_handle)

    def _taken(self) -> None:
        """The checkpoint holds the state as it is now."""
        self._seq = self._ledger.seq
        self._rows = self._ledger.rows_written

    def keep_checkpoint(self) -> bool:
        """Write the checkpoint in the background if it is due (`KB.keep_checkpoint`:
        KEEP_FROM, KEEP_AFTER_SHARE, KEEP_EVERY_S); whether one was started."""
        with self._lock:
            stored = self._stored()
            changed = self._ledger.rows_written - self._rows
            if (
                not self._enabled
                or self._store.checkpoint_path is None
                or self._store.lost is not None
                or self._ledger.in_group
                or stored < KEEP_FROM
                or changed < KEEP_AFTER_SHARE * stored
                or time.monotonic() - self._at < KEEP_EVERY_S
            ):
                return False
            self.checkpoint(wait=False)
            return True

    def checkpoint_after_write(self, rows: int) -> None:
        """After a big write (KEEP_AFTER_WRITE_OF rows or more, KEEP_AFTER_SHARE of the
        store at least), outside a group: the checkpoint, started in the background now,
        unless one is being written already (its temporary file is there)."""
        if rows < KEEP_AFTER_WRITE_OF or rows < KEEP_AFTER_SHARE * self._stored():
            return
        path = self._store.checkpoint_path
        if not self._enabled or path is None or self._store.lost is not None:
            return
        folder, name = os.path.split(path)
        with contextlib.suppress(OSError):
            entries = os.listdir(folder or ".")
            if any(e.startswith(name + ".") and e.endswith(".tmp") for e in entries):
                return  # (that one will not hold this write: the one at close will)
        try:
            self.checkpoint(wait=False)
        except Exception:  # the rows are the truth: the next open rebuilds from them
            log.exception("could not write the checkpoint of %s", self._store.location)

    def checkpoint_at_close(self) -> None:
        """At close: leave a checkpoint for the next open, if it would gain from one."""
        if (
            self._enabled
            and self._store.checkpoint_path is not None
            and self._store.lost is None  # a writer that lost its role keeps nothing
            and self._ledger.seq != self._seq
            and self._stored() >= KEEP_FROM
        ):
            try:
                self.checkpoint(wait=False)
            except Exception:  # the rows are the truth: the next open rebuilds from them
                log.exception("could not write the checkpoint of %s", self._store.location)

    def _header(self) -> dict[str, Any] | None:
        ledger = self._ledger
        mark = self._store.mark(ledger.seq)
        if mark is None:
            return None
        return {
            "format": FORMAT,
            "layout": _layout(),
            "store": self._store.identity(),
            "seq": ledger.seq,
            "mark": mark,
            "next_handle": ledger.next_handle,
            "next_just": ledger.next_just,
        }

    def _state(self) -> tuple:
        # The nodes come first (their fields as columns, then the nodes), with nothing that
        # refers to another node, so every later reference to one is shallow: a chain of
        # justifications pickled through the nodes would recurse its length.
        structures = self._maintained.structures()
        nodes = list(structures.index.by_handle.values())
        links = [(n, n.justs, n.uses) for n in nodes if n.justs is not None or n.uses is not None]
        return (
            _Columns(nodes),
            nodes,
            links,
            *structures,
        )

    # --- opening ---------------------------------------------------------------------

    def open_from_checkpoint(self) -> tuple[dict[str, Any], semantic.Vectors | None] | None:
        """Take the state from the checkpoint and the rows written after it; how it was
        opened (`KB.opened`) and the search's vectors it kept (for the search the KB then
        makes: what was written since is embedded as it is searched), or None (and
        nothing changed) when there is no usable checkpoint."""
        path = self._store.checkpoint_path
        if path is None or not self._enabled:
            return None
        started = time.perf_counter()
        try:
            header, payload, vectors = _read(path)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("checkpoint %s is unreadable (%s): rebuilding from the rows", path, exc)
            return None
        why = self._unusable(header)
        if why is not None:
            log.info("checkpoint %s not used (%s): rebuilding from the rows", path, why)
            return None
        try:
            state = _unpickled(payload)
            del payload
            tail = self._restore(header, state)
        except Exception as exc:
            log.warning("checkpoint %s could not be applied (%s): rebuilding", path, exc)
            self._maintained.fresh_state()
            return None
        self._seq = header["seq"]
        # the tail applied counts as changed since it (the ledger counts from this open)
        self._rows = self._ledger.rows_written - (tail[0] + tail[1])
        opened = {
            "from": "checkpoint",
            "seconds": round(time.perf_counter() - started, 3),
            "seq": header["seq"],
            "tail_sentexes": tail[0],
            "tail_justifications": tail[1],
            "vectors": 0 if vectors is None else len(vectors.arrays()[0]),
        }
        return opened, vectors

    def _unusable(self, header: dict[str, Any]) -> str | None:
        """Why this checkpoint cannot serve this store, or None."""
        if header.get("format") != FORMAT or header.get("layout") != _layout():
            return "written by another version of Koinii"
        if header.get("store") != self._store.identity():
            return "taken of another store"
        _, seq = self._store.head()
        if header["seq"] > seq:
            return "ahead of the store (an older copy of it was put back)"
        if self._store.mark(header["seq"]) != header["mark"]:
            return "the store's history differs at its seq, or was compacted past it"
        return None

    def _restore(self, header: dict[str, Any], state: tuple) -> tuple[int, int]:
        """Take `state`, then apply the rows written after it; (sentexes, justifications)
        applied."""
        _, nodes, links, *kept = state
        structures = Structures(*kept)
        if type(structures.index) is not Index or len(nodes) != header["sentexes"]:
            raise ValueError("the checkpoint's state is not the one its header describes")
        structures.index.by_handle = {node.handle: node for node in nodes}
        self._maintained.take_structures(structures, links)
        next_handle, seq = self._store.head()
        self._ledger.restart(seq, max(next_handle, header["next_handle"]), header["next_just"])
        if seq == header["seq"]:
            return 0, 0
        return self._apply_tail(header)

    def _apply_tail(self, header: dict[str, Any]) -> tuple[int, int]:
        """Bring the checkpoint's state up to the rows: drop what was deleted since, change
        what was rewritten, add what is new, and label belief again where that reaches."""
        seq = header["seq"]
        store = self._store
        tail = store.tail(seq)
        index = self._maintained.structures().index
        by_handle = index.by_handle
        seeds: list[Node] = []
        structural = False

        changed = [row for row in tail.sentexes if row.handle in by_handle]
        if tail.sentexes_before + len(changed) != len(by_handle):
            kept = store.handles_written_upto(seq)
            kept.update(row.handle for row in changed)
            gone = [node for handle, node in by_handle.items() if handle not in kept]
        else:
            gone = []
        if tail.justifications or tail.justifications_before != header["justifications"]:
            kept_ids = store.justifications_written_upto(seq)
            for node in list(by_handle.values()):
                for j in list(node.justs or ()):
                    if j.id not in kept_ids:  # deleted since (or its id given out again,
                        self._maintained.detach(j)  # or never stored: see below)
                        seeds.append(j.conclusion)
                        node.elided = node.elided or not node.premise
        for node in gone:  # what of theirs is still attached (their rows went with them)
            for j in dict.fromkeys([*(node.justs or ()), *self._maintained.resting_on(node)]):
                self._maintained.detach(j)
            self._maintained.unlink_quiet(node)
            structural = structural or _structural(node)
            seeds.extend(index.same_atom(node.atom, node.key))
        for row in changed:
            node = by_handle[row.handle]
            node.premise, node.strength = row.premise, row.strength
            node.creator, node.extra = row.creator, row.extra
            structural = structural or _structural(node)
            seeds.append(node)
        for row in tail.sentexes:
            if row.handle in by_handle:
                continue
            node = node_of(row)
            # (the rows keep the derivations firing held, not which it elided, nor
            # those found again unstored while the KB opened: a derived node may have)
            node.elided = not row.premise
            self._maintained.link_quiet(node)
            structural = structural or _structural(node)
            seeds.append(node)
        top = 0
        for jrow in tail.justifications:
            j = justification_of(jrow, by_handle)
            self._maintained.attach(j)
            seeds.append(j.conclusion)
            top = max(top, jrow.id)
        self._ledger.issued(top)
        if structural:
            self._maintained.relabel(list(by_handle.values()), None)
        elif seeds:
            self._maintained.relabel(self._maintained.closure(seeds), None)
        return len(tail.sentexes) + len(gone), len(tail.justifications)


def _structural(node: Node) -> bool:
    """Does this node change what contexts see, what is masked, or what is carried?"""
    return node.atom[0] in (GENL_CX, EXCEPT, CARRIES_CLAIM)


# --- the file ---------------------------------------------------------------------------


# Reading a checkpoint is mostly making a million nodes and half a million symbols, each
# in one call, its fields set once, no name checked again (each was checked when it was
# first written). A node's fields are written as columns, one list per field, before the
# nodes, and each node is then made from the next row: were they each node's own tuple
# of arguments, the unpickler's memo would hold a million of those until the end, and
# the heap would stay that much bigger than a rebuild's. The `created` stamps are written
# as runs of one value (a write's nodes share theirs) and read back by `itertools`, the
# nodes of a run sharing one int as they did when written: read back one per node, they
# were 32 more bytes a node than before the reopen.
_FIELDS = Node.__slots__[:10] + ("believed", "mono", "defeated", "elided")
_CREATED = _FIELDS.index("created")
_reading = threading.Lock()  # one checkpoint read at a time: the rows below are its
_next_row: Any = None


class _Columns:
    def __init__(self, nodes: list[Node]) -> None:
        columns: list[Any] = [[getattr(n, f) for n in nodes] for f in _FIELDS]
        columns[_CREATED] = _runs(columns[_CREATED])
        self.columns = tuple(columns)


def _runs(stamps: list[int]) -> tuple[list[int], list[int]]:
    """`stamps` as runs of one value: (values, lengths)."""
    values: list[int] = []
    lengths: list[int] = []
    for stamp in stamps:
        if values and values[-1] == stamp:
            lengths[-1] += 1
        else:
            values.append(stamp)
            lengths.append(1)
    return values, lengths


def _begin_nodes(columns: tuple[Any, ...]) -> None:
    global _next_row
    columns = list(columns)
    columns[_CREATED] = chain.from_iterable(map(repeat, *columns[_CREATED]))
    _next_row = zip(*columns).__next__


def _next_node() -> Node:
    (
        handle,
        atom,
        key,
        context,
        positive,
        premise,
        strength,
        creator,
        created,
        extra,
        believed,
        mono,
        defeated,
        elided,
    ) = _next_row()
    node = _new(Node)
    node.handle, node.atom, node.key, node.context = handle, atom, key, context
    node.positive, node.premise, node.strength = positive, premise, strength
    node.creator, node.created, node.extra = creator, created, extra
    node.justs = node.uses = None
    node.believed, node.mono, node.defeated, node.elided = believed, mono, defeated, elided
    return node


_new = object.__new__


def _symbol(name: str) -> Sym:
    """`Sym(name)` for a name checked when it was first written, in one call: half a
    million of these are most of a reopen's symbols."""
    sym = _interned.get(name)
    if sym is None:
        sym = _new(Sym)
        _set_name(sym, name)  # (past Sym's own __setattr__, which refuses)
        if len(name) > Sym.longest:
            Sym._note_length(name)
        sym = _interned.setdefault(name, sym)  # two threads interning at once: one wins
    return sym


_interned = Sym._interned
_set_name = Sym.__dict__["name"].__set__


def _index(by_functor: dict, per_context: dict, two_sided: dict) -> Index:
    """An Index from a checkpoint; `by_handle` is filled from the nodes (their own handle
    objects as keys, not a second million ints)."""
    index = Index()
    index.by_functor, index.per_context, index.two_sided = by_functor, per_context, two_sided
    return index


class _Pickler(pickle.Pickler):
    dispatch_table = copyreg.dispatch_table.copy()
    dispatch_table[_Columns] = lambda c: (_begin_nodes, (c.columns,))
    dispatch_table[Node] = lambda node: (_next_node, ())
    dispatch_table[Justification] = lambda j: (
        Justification,
        (j.id, j.conclusion, j.rule, j.antecedents),
    )
    dispatch_table[Sym] = lambda symbol: (_symbol, (symbol.name,))
    dispatch_table[Index] = lambda ix: (
        _index,
        (ix.by_functor, ix.per_context, ix.two_sided),
    )


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ADMITTED:
            raise pickle.UnpicklingError(f"a checkpoint holds no {module}.{name}")
        return super().find_class(module, name)


def _layout() -> str:
    """A fingerprint of this Koinii's checkpoint layout: its version and the source of
    the modules whose objects a checkpoint holds (a development checkout changes them
    without a new version number)."""
    global _LAYOUT
    if _LAYOUT is None:
        digest = hashlib.blake2b(__version__.encode(), digest_size=16)
        for name in _LAYOUT_MODULES:
            digest.update(name.encode())
            source = importlib.import_module(name).__file__
            with contextlib.suppress(OSError, TypeError):
                digest.update(pathlib.Path(source).read_bytes())  # type: ignore[arg-type]
        _LAYOUT = digest.hexdigest()
    return _LAYOUT


_LAYOUT: str | None = None


def _write(path: str, header: dict[str, Any], state: tuple, vectors: Any = None) -> int:
    """Pickle `state` to `path`, and the search's `vectors` after it as raw arrays (a
    gigabyte at a million sentexes: pickled, it would be copied twice more), whole or not
    at all: a temporary file, synced, renamed (and the temporary files of writers that
    died midway removed)."""
    nodes, links = state[1], state[2]
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(state)
    payload = buffer.getbuffer()
    header = {
        **header,
        "sentexes": len(nodes),
        "justifications": sum(len(justs) for _, justs, _ in links if justs is not None),
        "length": len(payload),
        "crc": zlib.crc32(payload),
    }
    sections: tuple = ()
    if vectors is not None:
        sections = vectors.arrays()
        header["vectors"] = {
            "model": semantic.model_identity(),
            "top": vectors.top,
            "count": len(sections[0]),
            "crc": zlib.crc32(sections[1], zlib.crc32(sections[0])),
        }
    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    _remove_abandoned(path)
    store_file = path.removesuffix(".checkpoint")
    try:
        mode = os.stat(store_file).st_mode & 0o777
    except OSError:
        mode = 0o600
    temporary = f"{path}.{os.getpid()}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(MAGIC)
            file.write(json.dumps(header).encode() + b"\n")
            file.write(payload)
            for section in sections:
                file.write(section.data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return len(MAGIC) + len(payload) + sum(section.nbytes for section in sections)


def _unpickled(payload: bytes) -> Any:
    global _next_row
    with _reading:
        try:
            return _Unpickler(io.BytesIO(payload)).load()
        finally:
            _next_row = None


def _remove_abandoned(path: str) -> None:
    """Remove the temporary files of checkpoint writers no longer alive."""
    folder, name = os.path.split(path)
    for entry in os.listdir(folder or "."):
        pid = entry.removeprefix(name + ".").removesuffix(".tmp")
        if entry.endswith(".tmp") and entry.startswith(name + ".") and pid.isdigit():
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(folder, entry))
            except PermissionError:
                pass  # alive, and someone else's


def _read(path: str) -> tuple[dict[str, Any], bytes, Any]:
    """The header, payload and search vectors (None: none kept, or not of the model this
    process has) of the checkpoint at `path`; ValueError if not whole."""
    with open(path, "rb") as file:
        if file.read(len(MAGIC)) != MAGIC:
            raise ValueError("not a Koinii checkpoint")
        header = json.loads(file.readline())
        if not isinstance(header, dict) or not _HEADER.issubset(header):
            raise ValueError("its header is not a checkpoint's")
        payload = file.read(header["length"])
        if len(payload) != header["length"] or zlib.crc32(payload) != header["crc"]:
            raise ValueError("cut short or damaged")
        kept = header.get("vectors")
        if not kept or not semantic.installed() or kept["model"] != semantic.model_identity():
            return header, payload, None
        import numpy

        keys = numpy.empty(kept["count"], dtype=numpy.int64)
        rows = numpy.empty((kept["count"], semantic.DIMENSIONS), dtype=numpy.float32)
        for array in (keys, rows):
            if file.readinto(memoryview(array).cast("B")) != array.nbytes:
                raise ValueError("its vectors are cut short")
        if zlib.crc32(rows, zlib.crc32(keys)) != kept["crc"]:
            raise ValueError("its vectors are damaged")
    return header, payload, semantic.Vectors.restored(kept["top"], keys, rows)


_HEADER = {"format", "layout", "store", "seq", "mark", "next_handle", "next_just"} | {
    "sentexes",
    "justifications",
    "length",
    "crc",
}


def _in_grandchild(work: Any) -> None:
    """Run `work()` in a grandchild process and return at once. The child forks and
    leaves, so the grandchild belongs to init and nothing is left for us to reap. The
    grandchild keeps no file the parent opened — above all not the store's writer lock,
    which would otherwise stay held after the parent closed the store — nor its signal
    wake-up and handlers, and leaves with `os._exit`, so no destructor of the parent's
    objects runs twice."""
    pid = os.fork()
    if pid:
        os.waitpid(pid, 0)  # the child leaves at once
        return
    try:
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        if os.fork() == 0:
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, signal.SIG_DFL)
            signal.alarm(CHILD_LIMIT_S)
            gc.disable()  # reading the heap must not copy it page by page
            code = 0
            try:
                work()
            except BaseException:
                code = 1
            os._exit(code)
    finally:
        os._exit(0)
