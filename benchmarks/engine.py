"""Engine benchmark: Koinii against pyoxigraph, rdflib and a raw-sqlite3 floor.

Workload (fixed seed, identical for every system)
    N binary facts ``(relK EntityI EntityJ)`` (default N = 200,000) over 20 predicates and
    20,000 entities. 94 % sit in the 50 contexts ``CxPart00``..``CxPart49``, 5 % in their
    shared parent ``CxShared`` (so reads through ancestors find something there), and 1 %
    in a chain ``CxDeep4 -> CxDeep3 -> CxDeep2 -> CxDeep1 -> CxPart00``, whose deepest
    context sees six contexts: itself, the three above it, ``CxPart00`` and ``CxShared``.

    Koinii stores the hierarchy as ``genlCx`` sentences and reads at a context through its
    ancestor set. The RDF peers get one named graph per context; "reading through
    ancestors" there means reading the union of the context's graph and its ancestors'
    graphs. The floor is plain ``sqlite3``: one indexed table of (context, predicate,
    subject, object) rows, which is what storing the facts costs with no engine at all.

Every system receives its input pre-built in its own native form (Koinii tuples of
``Sym``, pyoxigraph ``Quad``s, rdflib ``URIRef`` tuples, plain strings for sqlite3), so the
timings cover the store, not the conversion. Latencies are per call, timed with
``time.perf_counter_ns``; before the query rows are timed, every system's answers to the
same lookups are compared, so all of them measure the same work. Resident memory is the
RSS growth (psutil) of a fresh ``spawn``-ed process while it builds the in-memory store.

Run it (about a minute at the default size on a 2-core machine)::

    .venv/bin/python benchmarks/engine.py            # 200,000 facts
    .venv/bin/python benchmarks/engine.py --quick    # a few-second smoke run
    .venv/bin/python benchmarks/engine.py --facts 50000

Progress goes to stderr and the table to stdout. The ratio next to each peer value is
that value divided by Koinii's on the same row: above 1 means more facts/s on rate rows
and more time or bytes on every other row. Absolute numbers vary between machines; the
ratios are the part to compare.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import psutil
import pyoxigraph as ox
import rdflib
from rdflib import URIRef

import koinii
from koinii import Sym, Var

SEED = 20_240_611
DEFAULT_FACTS = 200_000
QUICK_FACTS = 5_000
PREDICATES = 20
ENTITIES = 20_000
PARTS = tuple(f"CxPart{i:02d}" for i in range(50))
SHARED = "CxShared"
DEEP_CHAIN = ("CxDeep1", "CxDeep2", "CxDeep3", "CxDeep4")  # each sees the one before it
DEEPEST = DEEP_CHAIN[-1]
UNIVERSE = "CxUniverse"  # where Koinii keeps genlCx sentences
SHARED_PERCENT = 5
DEEP_PERCENT = 1
BATCH = 10_000
IRI = "urn:koinii:"  # the RDF peers name everything <urn:koinii:Name>
WARMUP_CALLS = 50  # at most; never more than a quarter of the calls
AGREEMENT_SAMPLE = 200  # lookups whose answers must agree across systems

Row = tuple[str, str, str, str]  # (context, predicate, subject, object)
Lookup = tuple[str, str, str]  # (context read at, predicate, subject); the object is unbound


# ================================================================ workload


@dataclass(frozen=True)
class Sizes:
    facts: int
    single_writes: int  # durable one-commit writes timed one by one
    lookups: int  # point and ancestor-set lookups per system
    rdflib_sparql_lookups: int  # rdflib's SPARQL takes milliseconds, so it gets fewer

    @staticmethod
    def for_run(quick: bool, facts: int | None) -> Sizes:
        if quick:
            return Sizes(facts or QUICK_FACTS, 200, 200, 50)
        return Sizes(facts or DEFAULT_FACTS, 2_000, 5_000, 300)


@dataclass(frozen=True)
class Workload:
    facts: tuple[Row, ...]  # distinct
    edges: tuple[tuple[str, str], ...]  # (child, parent): child sees parent
    ancestors: dict[str, tuple[str, ...]]  # context -> itself and every context it sees
    fresh: tuple[Row, ...]  # facts not in `facts`, for the single-write test
    # Each query row gets its own lookups and none repeats, so no call finds its goal
    # already parsed (Koinii caches recent goal texts).
    point_lookups: tuple[Lookup, ...]  # stored facts of CxPartNN, read at CxPartNN
    own_lookups: tuple[Lookup, ...]  # the same kind, for the own-context row
    deep_lookups: tuple[Lookup, ...]  # facts visible from DEEPEST, read at DEEPEST

    @property
    def size(self) -> int:
        return len(self.facts)

    def batches(self) -> Iterator[tuple[Row, ...]]:
        for start in range(0, len(self.facts), BATCH):
            yield self.facts[start : start + BATCH]


def make_workload(sizes: Sizes) -> Workload:
    rng = random.Random(SEED)
    n = sizes.facts
    shared, deep = n * SHARED_PERCENT // 100, n * DEEP_PERCENT // 100
    contexts = [SHARED] * shared + [rng.choice(DEEP_CHAIN) for _ in range(deep)]
    contexts += [rng.choice(PARTS) for _ in range(n - shared - deep)]
    rng.shuffle(contexts)

    seen: set[Row] = set()
    facts: list[Row] = []
    for context in contexts:
        while True:
            row = (context, f"rel{rng.randrange(PREDICATES)}", _entity(rng), _entity(rng))
            if row not in seen:
                break
        seen.add(row)
        facts.append(row)

    edges = [(part, SHARED) for part in PARTS]
    edges += list(zip(DEEP_CHAIN, (PARTS[0], *DEEP_CHAIN[:-1])))
    ancestors = _ancestor_sets(edges)

    fresh = tuple(
        (rng.choice(PARTS), f"rel{rng.randrange(PREDICATES)}", f"Fresh{i}", _entity(rng))
        for i in range(sizes.single_writes)
    )

    in_parts = [(c, p, s) for c, p, s, _ in facts if c in PARTS]
    visible = [(DEEPEST, p, s) for c, p, s, _ in facts if c in ancestors[DEEPEST]]
    point = _distinct_sample(rng, in_parts, 2 * sizes.lookups)
    deep = _distinct_sample(rng, visible, sizes.lookups)
    return Workload(
        facts=tuple(facts),
        edges=tuple(edges),
        ancestors=ancestors,
        fresh=fresh,
        point_lookups=tuple(point[: sizes.lookups]),
        own_lookups=tuple(point[sizes.lookups :]),
        deep_lookups=tuple(deep),
    )


def _distinct_sample(rng: random.Random, keys: list[Lookup], k: int) -> list[Lookup]:
    """`k` lookups, all different while there are enough."""
    distinct = sorted(set(keys))
    if k <= len(distinct):
        return rng.sample(distinct, k)
    return rng.choices(distinct, k=k)


def _entity(rng: random.Random) -> str:
    return f"Entity{rng.randrange(ENTITIES)}"


def _ancestor_sets(edges: Sequence[tuple[str, str]]) -> dict[str, tuple[str, ...]]:
    parents: dict[str, list[str]] = {}
    for child, parent in edges:
        parents.setdefault(child, []).append(parent)
    out = {}
    for context in {c for edge in edges for c in edge}:
        found, todo = [context], [context]
        while todo:
            for parent in parents.get(todo.pop(), ()):
                if parent not in found:
                    found.append(parent)
                    todo.append(parent)
        out[context] = tuple(found)
    return out


# ================================================================ timing helpers


def rate(count: int, action: Callable[[], Any]) -> float:
    """Items per second for one run of `action` that handles `count` items."""
    gc.collect()
    start = time.perf_counter_ns()
    action()
    return count / ((time.perf_counter_ns() - start) / 1e9)


def per_call_ns(call: Callable[..., Any], args: Sequence[tuple]) -> list[int]:
    """Wall time of each `call(*a)` in nanoseconds; the first calls warm up, untimed."""
    warmup = min(WARMUP_CALLS, len(args) // 4)
    for a in args[:warmup]:
        call(*a)
    gc.collect()
    clock = time.perf_counter_ns
    samples: list[int] = []
    record = samples.append
    for a in args[warmup:]:
        start = clock()
        call(*a)
        record(clock() - start)
    return samples


def seconds(action: Callable[[], Any]) -> float:
    gc.collect()
    start = time.perf_counter_ns()
    action()
    return (time.perf_counter_ns() - start) / 1e9


def median_us(samples: list[int]) -> float:
    return statistics.median(samples) / 1e3


def p99_us(samples: list[int]) -> float:
    return statistics.quantiles(samples, n=100)[98] / 1e3


def resident_bytes() -> int:
    return psutil.Process().memory_info().rss


def resident_per_fact_in_fresh_process(system: type, sizes: Sizes) -> float:
    """Bytes of RSS growth per fact while `system` builds its in-memory store."""
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
        return pool.submit(_resident_worker, system, sizes).result()


def _resident_worker(system: type, sizes: Sizes) -> float:
    bench = system(make_workload(sizes), sizes, workdir=None)  # inputs built before baseline
    gc.collect()
    before = resident_bytes()
    bench.load_in_memory()
    gc.collect()
    return (resident_bytes() - before) / bench.workload.size


# ================================================================ systems
#
# Each class measures one system. A method's name says which metric it feeds; a system
# without a method has no comparable operation and shows "n/a". Methods run in table
# order, so the query methods find the stores the load methods built.


class KoiniiBench:
    name = "Koinii"

    def __init__(self, workload: Workload, sizes: Sizes, workdir: str | None) -> None:
        self.workload = workload
        self.path = workdir and os.path.join(workdir, "koinii.db")
        self.hierarchy = [
            ((Sym("genlCx"), Sym(child), Sym(parent)), UNIVERSE) for child, parent in workload.edges
        ]
        self.batches = [
            [((Sym(p), Sym(s), Sym(o)), c) for c, p, s, o in batch] for batch in workload.batches()
        ]
        self.memory: koinii.KB | None = None
        self.durable: koinii.KB | None = None

    def _load(self, kb: koinii.KB) -> float:
        kb.edit(add=self.hierarchy)  # setup, not timed

        def load() -> None:
            for batch in self.batches:
                kb.edit(add=batch)

        return rate(self.workload.size, load)

    def load_in_memory(self) -> float:
        self.memory = koinii.open_kb(None)
        return self._load(self.memory)

    def load_durable(self) -> float:
        self.durable = koinii.open_kb(self.path)
        return self._load(self.durable)

    def single_writes(self) -> list[int]:
        args = [((Sym(p), Sym(s), Sym(o)), c) for c, p, s, o in self.workload.fresh]
        return per_call_ns(self.durable.assert_, args)

    def point_through_ancestors(self) -> list[int]:
        return per_call_ns(self.memory.query, _goals(self.workload.point_lookups))

    def point_own_context(self) -> list[int]:
        # `query` always reads through the ancestor set; `sentexes_matching` reads the
        # context alone (no inheritance), which is what the peers' single-graph call does.
        return per_call_ns(self.memory.sentexes_matching, _goals(self.workload.own_lookups))

    def ancestor_query(self) -> list[int]:
        return per_call_ns(self.memory.query, _goals(self.workload.deep_lookups))

    def reopen(self) -> float:
        def reopen() -> None:
            self.durable.close()
            self.durable = koinii.open_kb(self.path)
            self.durable.stats()

        return seconds(reopen)

    def answers(self, lookup: Lookup) -> frozenset[str]:
        context, p, s = lookup
        goal = (Sym(p), Sym(s), Var("o"))  # a term, so the timed goal texts stay unparsed
        return frozenset(str(b["?o"]) for b in self.memory.query(goal, context))

    def close(self) -> None:
        for kb in (self.memory, self.durable):
            if kb is not None:
                kb.close()


def _goals(lookups: Sequence[Lookup]) -> list[tuple[str, str]]:
    return [(f"({p} {s} ?o)", c) for c, p, s in lookups]


class OxigraphBench:
    name = "pyoxigraph"

    def __init__(self, workload: Workload, sizes: Sizes, workdir: str | None) -> None:
        self.workload = workload
        self.path = workdir and os.path.join(workdir, "oxigraph")
        self.batches = [[_quad(row) for row in batch] for batch in workload.batches()]
        self.memory: ox.Store | None = None
        self.durable: ox.Store | None = None

    def _load(self, store: ox.Store) -> float:
        def load() -> None:
            for batch in self.batches:
                store.extend(batch)  # one transaction per batch, like Koinii's edit

        return rate(self.workload.size, load)

    def load_in_memory(self) -> float:
        self.memory = ox.Store()
        return self._load(self.memory)

    def load_durable(self) -> float:
        self.durable = ox.Store(self.path)
        return self._load(self.durable)

    def single_writes(self) -> list[int]:
        # Each add is one RocksDB transaction written to its WAL without fsync (Oxigraph's
        # default write options): the process-crash durability of SQLite WAL with
        # synchronous=NORMAL. flush() is not a commit (it forces memtables to SST files).
        return per_call_ns(self.durable.add, [(_quad(row),) for row in self.workload.fresh])

    def point_through_ancestors(self) -> list[int]:
        return self._union_reads(self.workload.point_lookups)

    def point_own_context(self) -> list[int]:
        store = self.memory

        def read(s: ox.NamedNode, p: ox.NamedNode, g: ox.NamedNode) -> list:
            return list(store.quads_for_pattern(s, p, None, g))

        return per_call_ns(read, [(_n(s), _n(p), _n(c)) for c, p, s in self.workload.own_lookups])

    def ancestor_query(self) -> list[int]:
        return self._union_reads(self.workload.deep_lookups)

    def _union_reads(self, lookups: Sequence[Lookup]) -> list[int]:
        """One pattern call per graph of the context's ancestor set."""
        store, ancestors = self.memory, self.workload.ancestors

        def read(s: ox.NamedNode, p: ox.NamedNode, graphs: list[ox.NamedNode]) -> list:
            out = []
            for g in graphs:
                out.extend(store.quads_for_pattern(s, p, None, g))
            return out

        return per_call_ns(read, [(_n(s), _n(p), _ns(ancestors[c])) for c, p, s in lookups])

    def ancestor_sparql(self) -> list[int]:
        store = self.memory
        queries = [(_sparql(lookup, self.workload),) for lookup in self.workload.deep_lookups]
        return per_call_ns(lambda q: list(store.query(q)), queries)

    def reopen(self) -> float:
        def reopen() -> None:
            self.durable = None  # the last reference: RocksDB closes here
            gc.collect()
            self.durable = ox.Store(self.path)
            len(self.durable)

        return seconds(reopen)

    def answers(self, lookup: Lookup) -> frozenset[str]:
        c, p, s = lookup
        return frozenset(
            q.object.value.removeprefix(IRI)
            for g in self.workload.ancestors[c]
            for q in self.memory.quads_for_pattern(_n(s), _n(p), None, _n(g))
        )

    def close(self) -> None:
        self.memory = self.durable = None


def _n(name: str) -> ox.NamedNode:
    return ox.NamedNode(IRI + name)


def _ns(names: Sequence[str]) -> list[ox.NamedNode]:
    return [_n(name) for name in names]


def _quad(row: Row) -> ox.Quad:
    c, p, s, o = row
    return ox.Quad(_n(s), _n(p), _n(o), _n(c))


def _sparql(lookup: Lookup, workload: Workload) -> str:
    c, p, s = lookup
    graphs = " ".join(f"<{IRI}{g}>" for g in workload.ancestors[c])
    return f"SELECT ?o WHERE {{ VALUES ?g {{ {graphs} }} GRAPH ?g {{ <{IRI}{s}> <{IRI}{p}> ?o }} }}"


class RdflibBench:
    name = "rdflib"

    def __init__(self, workload: Workload, sizes: Sizes, workdir: str | None) -> None:
        self.workload = workload
        self.batches = [
            [
                (URIRef(IRI + s), URIRef(IRI + p), URIRef(IRI + o), URIRef(IRI + c))
                for c, p, s, o in batch
            ]
            for batch in workload.batches()
        ]
        self.sparql_lookups = sizes.rdflib_sparql_lookups
        self.memory: rdflib.Dataset | None = None
        self.graphs: dict[str, rdflib.Graph] = {}

    def load_in_memory(self) -> float:
        self.memory = ds = rdflib.Dataset()
        self.graphs = {name: ds.graph(URIRef(IRI + name)) for name in self.workload.ancestors}
        by_iri = {g.identifier: g for g in self.graphs.values()}
        quads = [[(s, p, o, by_iri[c]) for s, p, o, c in batch] for batch in self.batches]

        def load() -> None:
            for batch in quads:
                ds.addN(batch)

        return rate(self.workload.size, load)

    def point_through_ancestors(self) -> list[int]:
        return per_call_ns(self._read_union, self._pattern_args(self.workload.point_lookups))

    def point_own_context(self) -> list[int]:
        args = [
            (self.graphs[c], URIRef(IRI + s), URIRef(IRI + p))
            for c, p, s in self.workload.own_lookups
        ]
        return per_call_ns(lambda g, s, p: list(g.triples((s, p, None))), args)

    def ancestor_query(self) -> list[int]:
        return per_call_ns(self._read_union, self._pattern_args(self.workload.deep_lookups))

    def ancestor_sparql(self) -> list[int]:
        lookups = self.workload.deep_lookups[: self.sparql_lookups]
        queries = [(_sparql(lookup, self.workload),) for lookup in lookups]
        return per_call_ns(lambda q: list(self.memory.query(q)), queries)

    def _pattern_args(self, lookups: Sequence[Lookup]) -> list[tuple]:
        ancestors = self.workload.ancestors
        return [
            ([self.graphs[g] for g in ancestors[c]], URIRef(IRI + s), URIRef(IRI + p))
            for c, p, s in lookups
        ]

    @staticmethod
    def _read_union(graphs: list[rdflib.Graph], s: URIRef, p: URIRef) -> list:
        out = []
        for g in graphs:
            out.extend(g.triples((s, p, None)))
        return out

    def answers(self, lookup: Lookup) -> frozenset[str]:
        (args,) = self._pattern_args([lookup])
        return frozenset(str(o).removeprefix(IRI) for _, _, o in self._read_union(*args))

    def close(self) -> None:
        self.memory = None
        self.graphs = {}


class FloorBench:
    """Raw sqlite3: an indexed table in WAL mode, no parsing, checking or belief."""

    name = "sqlite3 floor"

    def __init__(self, workload: Workload, sizes: Sizes, workdir: str | None) -> None:
        self.workload = workload
        self.path = workdir and os.path.join(workdir, "floor.db")
        self.db: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    def load_durable(self) -> float:
        self.db = db = self._connect()
        db.execute(
            "CREATE TABLE facts (context TEXT NOT NULL, predicate TEXT NOT NULL,"
            " subject TEXT NOT NULL, object TEXT NOT NULL)"
        )
        db.execute("CREATE INDEX facts_ps ON facts (predicate, subject)")
        batches = list(self.workload.batches())
        insert = "INSERT INTO facts VALUES (?, ?, ?, ?)"

        def load() -> None:
            for batch in batches:
                db.execute("BEGIN")
                db.executemany(insert, batch)
                db.execute("COMMIT")

        return rate(self.workload.size, load)

    def single_writes(self) -> list[int]:
        db = self.db

        def write(row: Row) -> None:
            db.execute("BEGIN")
            db.execute("INSERT INTO facts VALUES (?, ?, ?, ?)", row)
            db.execute("COMMIT")

        return per_call_ns(write, [(row,) for row in self.workload.fresh])

    def point_through_ancestors(self) -> list[int]:
        return self._timed_reads(self.workload.point_lookups)

    def point_own_context(self) -> list[int]:
        sql = "SELECT object FROM facts WHERE predicate = ? AND subject = ? AND context = ?"
        args = [(sql, (p, s, c)) for c, p, s in self.workload.own_lookups]
        return per_call_ns(lambda q, a: self.db.execute(q, a).fetchall(), args)

    def ancestor_query(self) -> list[int]:
        return self._timed_reads(self.workload.deep_lookups)

    def _read_sql(self, lookup: Lookup) -> tuple[str, tuple[str, ...]]:
        c, p, s = lookup
        graphs = self.workload.ancestors[c]
        marks = ", ".join("?" * len(graphs))
        sql = "SELECT object FROM facts WHERE predicate = ? AND subject = ? AND context IN "
        return f"{sql}({marks})", (p, s, *graphs)

    def _timed_reads(self, lookups: Sequence[Lookup]) -> list[int]:
        args = [self._read_sql(lookup) for lookup in lookups]
        return per_call_ns(lambda q, a: self.db.execute(q, a).fetchall(), args)

    def reopen(self) -> float:
        def reopen() -> None:
            self.db.close()
            self.db = self._connect()
            self.db.execute("SELECT count(*) FROM facts").fetchone()

        return seconds(reopen)

    def answers(self, lookup: Lookup) -> frozenset[str]:
        return frozenset(o for (o,) in self.db.execute(*self._read_sql(lookup)))

    def close(self) -> None:
        if self.db is not None:
            self.db.close()


SYSTEMS = (KoiniiBench, OxigraphBench, RdflibBench, FloorBench)


# ================================================================ the table


@dataclass(frozen=True)
class Metric:
    label: str
    methods: tuple[str, ...]  # the first of these that a system has is measured
    summary: Callable[[Any], float]  # raw result -> the value shown
    show: Callable[[float], str]
    target: tuple[str, float] | None = None  # (">=" or "<=", threshold) for Koinii
    reads: bool = False  # times queries, so the systems' answers are compared first


RATE = "{:,.0f}".format
MICROSECONDS = "{:,.1f}".format
SECONDS = "{:,.3f}".format


def metrics(sizes: Sizes) -> tuple[Metric, ...]:
    # `float` as the summary: the method's result already is the value.
    return (
        Metric("1  load in memory, facts/s", ("load_in_memory",), float, RATE, (">=", 100_000)),
        Metric(
            "2  load durable, 10k batches, facts/s", ("load_durable",), float, RATE, (">=", 50_000)
        ),
        Metric(
            "3  durable single write, median us",
            ("single_writes",),
            median_us,
            MICROSECONDS,
            ("<=", 100),
        ),
        Metric("   durable single write, p99 us", ("single_writes",), p99_us, MICROSECONDS),
        Metric(
            "4  point query via ancestors, median us",
            ("point_through_ancestors",),
            median_us,
            MICROSECONDS,
            ("<=", 15),
            reads=True,
        ),
        Metric(
            "   point query own context only, median us",
            ("point_own_context",),
            median_us,
            MICROSECONDS,
            reads=True,
        ),
        Metric(
            "5  6-context ancestor query, median us",
            ("ancestor_query",),
            median_us,
            MICROSECONDS,
            ("<=", 25),
            reads=True,
        ),
        Metric(
            "   same, peers via SPARQL, median us",
            ("ancestor_sparql", "ancestor_query"),
            median_us,
            MICROSECONDS,
            reads=True,
        ),
        Metric(
            f"6  close + reopen {sizes.facts:,} facts, s", ("reopen",), float, SECONDS, ("<=", 5)
        ),
        Metric(
            "7  resident bytes per fact, in memory",
            ("resident_per_fact",),
            float,
            RATE,
            ("<=", 1024),
        ),
    )


def _target_text(target: tuple[str, float] | None) -> str:
    return "" if target is None else f"{target[0]} {target[1]:,g}"


def _verdict(value: float, target: tuple[str, float] | None) -> str:
    if target is None:
        return ""
    op, threshold = target
    ok = value >= threshold if op == ">=" else value <= threshold
    return "pass" if ok else "MISS"


def _ratio_text(value: float, koinii_value: float | None) -> str:
    if not koinii_value:
        return ""
    r = value / koinii_value
    if r >= 100:
        return f"({r:,.0f}x)"
    return f"({r:.1f}x)" if r >= 10 else f"({r:.2f}x)" if r >= 0.1 else f"({r:.1g}x)"


def render(rows: list[list[str]], right: set[int]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for k, row in enumerate(rows):
        cells = [
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths))
        ]
        lines.append("  ".join(cells).rstrip())
        if k == 0:
            lines.append("-" * len(lines[0]))
    return "\n".join(lines)


# ================================================================ the run


def run(sizes: Sizes) -> str:
    started = time.perf_counter()
    progress(f"workload: {sizes.facts:,} facts, seed {SEED}")
    workload = make_workload(sizes)
    results: dict[tuple[str, str], Any] = {}
    with tempfile.TemporaryDirectory(prefix="koinii-bench-") as workdir:
        benches = [system(workload, sizes, workdir) for system in SYSTEMS]
        try:
            checked = False
            for metric in metrics(sizes):
                if metric.reads and not checked:
                    check_agreement(benches, workload)
                    checked = True
                for bench in benches:
                    measure(bench, metric, sizes, results)
        finally:
            for bench in benches:
                bench.close()
    table = build_table(metrics(sizes), results)
    elapsed = time.perf_counter() - started
    return "\n".join([header(workload), "", table, "", notes(sizes, workload, elapsed)])


def measure(bench: Any, metric: Metric, sizes: Sizes, results: dict) -> None:
    """Run the first of `metric.methods` that `bench` has, once per (system, method).

    Resident memory is measured for every system that can load in memory, in a fresh
    process, so it is not a method of the system classes.
    """
    for method in metric.methods:
        key = (bench.name, method)
        if key in results:
            return
        if method == "resident_per_fact" and hasattr(bench, "load_in_memory"):
            progress(f"{bench.name}: resident memory (fresh process)")
            results[key] = resident_per_fact_in_fresh_process(type(bench), sizes)
            return
        if hasattr(bench, method):
            progress(f"{bench.name}: {method}")
            results[key] = getattr(bench, method)()
            return


def check_agreement(benches: Sequence[Any], workload: Workload) -> None:
    """Every system must give the same answers, so the query rows time the same work."""
    progress("checking that all systems answer alike")
    sample = workload.point_lookups[:AGREEMENT_SAMPLE] + workload.deep_lookups[:AGREEMENT_SAMPLE]
    for lookup in sample:
        answers = {bench.name: bench.answers(lookup) for bench in benches}
        if len(set(answers.values())) != 1 or not next(iter(answers.values())):
            raise RuntimeError(f"systems disagree on {lookup}: {answers}")


def build_table(rows: Sequence[Metric], results: dict) -> str:
    names = [system.name for system in SYSTEMS]
    table = [["metric", "target", "Koinii", "", *names[1:]]]
    for metric in rows:
        values = {}
        for name in names:
            raw = next((results[(name, m)] for m in metric.methods if (name, m) in results), None)
            values[name] = None if raw is None else metric.summary(raw)
        mine = values["Koinii"]
        line = [metric.label, _target_text(metric.target)]
        line += ["n/a", ""] if mine is None else [metric.show(mine), _verdict(mine, metric.target)]
        for name in names[1:]:
            v = values[name]
            line.append("n/a" if v is None else f"{metric.show(v)} {_ratio_text(v, mine)}")
        table.append(line)
    return render(table, right={2, 4, 5, 6})


def header(workload: Workload) -> str:
    versions = (
        f"koinii {koinii.__version__}, pyoxigraph {ox.__version__}, "
        f"rdflib {rdflib.__version__}, SQLite {sqlite3.sqlite_version}"
    )
    return "\n".join(
        [
            f"Koinii engine benchmark: {workload.size:,} facts, {len(PARTS)} contexts under "
            f"{SHARED}, chain {' > '.join(reversed(DEEP_CHAIN))} > {PARTS[0]}, seed {SEED}",
            f"Python {platform.python_version()} on {platform.system()} "
            f"{platform.machine()}, {os.cpu_count()} CPUs; {versions}",
        ]
    )


def notes(sizes: Sizes, workload: Workload, elapsed: float) -> str:
    return "\n".join(
        [
            "(x) = system / Koinii on that row: above 1 is faster on rows 1-2, slower or bigger "
            "on rows 3-7. pass/MISS: Koinii vs its target.",
            "Durable = SQLite WAL synchronous=NORMAL (Koinii, floor) or RocksDB WAL without fsync "
            "(pyoxigraph): survives kill -9, not power loss.",
            "Rows 3-5: latency of each call (perf_counter_ns) after a few untimed warm-up calls.",
            "Row 3: one commit per write (Koinii assert_, pyoxigraph add on disk, floor BEGIN/"
            "INSERT/COMMIT); rdflib has no durable store installed.",
            "Row 4: Koinii query at CxPartNN (reads CxPartNN, CxShared, CxUniverse); peers one "
            "pattern call per graph; floor context IN (...).",
            "      own context: Koinii sentexes_matching (no inheritance), peers one graph, floor "
            "context = ?. No lookup repeats, so every Koinii call parses its goal text.",
            f"Row 5: read at {DEEPEST}, which sees {len(workload.ancestors[DEEPEST])} contexts; "
            "Koinii and the floor have one query path, shown on both lines.",
            f"      rdflib's SPARQL line uses {sizes.rdflib_sparql_lookups} lookups (it takes "
            f"milliseconds each); every other query row uses {sizes.lookups:,}.",
            "Row 6: close, open, count. Koinii rebuilds its in-memory index from SQLite; "
            "pyoxigraph replays its RocksDB WAL (flush() before close would avoid that).",
            "Row 7: RSS growth (psutil) of a fresh spawned process while it loads in memory; "
            "inputs are built before the baseline.",
            f"Whole run: {elapsed:.0f} s.",
        ]
    )


def progress(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny smoke run (seconds)")
    parser.add_argument(
        "--facts",
        type=int,
        metavar="N",
        help=f"facts to load (default {DEFAULT_FACTS:,}; {QUICK_FACTS:,} with --quick)",
    )
    args = parser.parse_args(argv)
    if args.facts is not None and args.facts < 1_000:
        parser.error("--facts must be at least 1000")
    print(run(Sizes.for_run(args.quick, args.facts)))


if __name__ == "__main__":
    main()
