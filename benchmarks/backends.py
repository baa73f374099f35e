"""Backend benchmark: the same Koinii workloads on SQLite and on PostgreSQL, in one run.

Workload (fixed seed, identical for both backends)
    N binary facts ``(relK EntityI EntityJ)`` (default N = 100,000) over 20 predicates and
    20,000 entities: 95 % in the 50 contexts ``CxPart00``..``CxPart49``, 5 % in their shared
    parent ``CxShared`` (each ``CxPartNN`` sees it through a ``genlCx`` sentence).

What is measured, per backend (an SQLite file in a temporary directory; a fresh schema in
the PostgreSQL server, created here and dropped at the end)

1. Load: the N facts through ``KB.edit`` in atomic batches of 10,000; facts/s.
2. Durable single assert: ``KB.assert_`` of ~2,000 new facts, one committed write each,
   in-process; median and p99.
3. Point query: ``KB.query("(relK EntityI ?o)", "CxPartNN")`` (bound predicate and subject,
   read through the context's ancestor set) on the loaded KB; median. Before timing, a
   sample of answers is checked against the workload, so both backends do the same work.
4. Reopen: ``close`` + ``open_kb`` + ``stats`` of the loaded store (the engine rebuilds its
   in-memory index from the store); seconds.
5. The wire: ``python -m koinii serve`` over the loaded store, started here on a free
   127.0.0.1 port and stopped with SIGTERM; one client's durable ``Client.assert_``
   round trips, one after another; p50 and p99.

Latencies are per call, timed with ``time.perf_counter_ns`` after untimed warm-up calls.
PostgreSQL is the server at ``--postgres URL``, else ``$KOINII_TEST_PG`` (as for the
tests), else ``postgresql://postgres@127.0.0.1:5432/postgres``; when it cannot be
reached its column says so and the SQLite column is still measured.

Run it (under half a minute on a 2-core machine)::

    .venv/bin/python benchmarks/backends.py              # 100,000 facts
    .venv/bin/python benchmarks/backends.py --quick      # a few-second smoke run
    .venv/bin/python benchmarks/backends.py --facts 50000

Progress goes to stderr and the table to stdout. The last column is the PostgreSQL value
divided by the SQLite value on the same row. Absolute numbers vary between machines.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import secrets
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import koinii
from daemon_port import port_from_log  # beside this script
from koinii import Sym, Var

SEED = 20_240_611
DEFAULT_FACTS = 100_000
QUICK_FACTS = 5_000
BATCH = 10_000
PREDICATES = 20
ENTITIES = 20_000
PARTS = tuple(f"CxPart{i:02d}" for i in range(50))
SHARED = "CxShared"
UNIVERSE = "CxUniverse"  # where Koinii keeps genlCx sentences
SHARED_PERCENT = 5
ANSWER_CHECKS = 200  # point lookups whose answers are checked before timing
WARMUP_CALLS = 50  # untimed calls before each timed series
HOST = "127.0.0.1"
POSTGRES_URL = os.environ.get(
    "KOINII_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres"
)  # as the tests' server
CONNECT_TIMEOUT_S = 3
START_TIMEOUT_S = 60.0  # the daemon loads the whole store before it answers
STOP_TIMEOUT_S = 15.0  # after SIGTERM, before SIGKILL
BACKENDS = ("SQLite", "PostgreSQL")

Row = tuple[str, str, str, str]  # (context, predicate, subject, object)
Lookup = tuple[str, str, str]  # (context read at, predicate, subject); the object is unbound


# ================================================================ workload


@dataclass(frozen=True)
class Sizes:
    facts: int
    single_writes: int  # in-process durable asserts (row 2)
    lookups: int  # point queries (row 3)
    round_trips: int  # wire asserts (row 5)

    @staticmethod
    def for_run(quick: bool, facts: int | None) -> Sizes:
        if quick:
            return Sizes(facts or QUICK_FACTS, 200, 200, 200)
        return Sizes(facts or DEFAULT_FACTS, 2_000, 5_000, 2_000)


@dataclass(frozen=True)
class Workload:
    facts: tuple[Row, ...]  # distinct
    # Each series below holds WARMUP_CALLS untimed calls, then the timed ones.
    fresh: tuple[Row, ...]  # new facts for the in-process single asserts
    wire: tuple[Row, ...]  # new facts for the wire asserts
    lookups: tuple[Lookup, ...]  # distinct, so every query parses its goal text

    def batches(self) -> Iterator[tuple[Row, ...]]:
        for start in range(0, len(self.facts), BATCH):
            yield self.facts[start : start + BATCH]


def make_workload(sizes: Sizes) -> Workload:
    rng = random.Random(SEED)
    shared = sizes.facts * SHARED_PERCENT // 100
    contexts = [SHARED] * shared + [rng.choice(PARTS) for _ in range(sizes.facts - shared)]
    rng.shuffle(contexts)
    seen: set[Row] = set()
    facts: list[Row] = []
    for context in contexts:
        row = _fact(rng, context)
        while row in seen:
            row = _fact(rng, context)
        seen.add(row)
        facts.append(row)
    keys = sorted({(c, p, s) for c, p, s, _ in facts if c != SHARED})
    wanted = sizes.lookups + WARMUP_CALLS
    return Workload(
        facts=tuple(facts),
        fresh=_new_facts(rng, "Fresh", sizes.single_writes + WARMUP_CALLS),
        wire=_new_facts(rng, "Wire", sizes.round_trips + WARMUP_CALLS),
        lookups=tuple(rng.sample(keys, wanted) if wanted <= len(keys) else keys),
    )


def _fact(rng: random.Random, context: str) -> Row:
    return (context, f"rel{rng.randrange(PREDICATES)}", _entity(rng), _entity(rng))


def _entity(rng: random.Random) -> str:
    return f"Entity{rng.randrange(ENTITIES)}"


def _new_facts(rng: random.Random, prefix: str, count: int) -> tuple[Row, ...]:
    """Facts whose subjects appear nowhere else, so none is already stored."""
    return tuple(
        (rng.choice(PARTS), f"rel{rng.randrange(PREDICATES)}", f"{prefix}{i}", _entity(rng))
        for i in range(count)
    )


def expected_answers(workload: Workload, lookups: Sequence[Lookup]) -> dict[Lookup, set[str]]:
    """What a read at CxPartNN must find: objects stored in CxPartNN or in CxShared."""
    wanted = {(p, s) for _, p, s in lookups}
    by_key: dict[tuple[str, str, str], set[str]] = {}
    for c, p, s, o in workload.facts:
        if (p, s) in wanted:
            by_key.setdefault((c, p, s), set()).add(o)
    return {
        (c, p, s): by_key.get((c, p, s), set()) | by_key.get((SHARED, p, s), set())
        for c, p, s in lookups
    }


def term(row: Row) -> tuple[Any, str]:
    c, p, s, o = row
    return (Sym(p), Sym(s), Sym(o)), c


def text(row: Row) -> tuple[str, str]:
    c, p, s, o = row
    return f"({p} {s} {o})", c


# ================================================================ timing helpers


def per_call_ns(call: Callable[..., Any], args: Sequence[tuple]) -> list[int]:
    """Wall time of each `call(*a)` in nanoseconds; the first WARMUP_CALLS are untimed."""
    for a in args[:WARMUP_CALLS]:
        call(*a)
    gc.collect()
    clock = time.perf_counter_ns
    samples: list[int] = []
    record = samples.append
    for a in args[WARMUP_CALLS:]:
        start = clock()
        call(*a)
        record(clock() - start)
    return samples


def rate(count: int, action: Callable[[], Any]) -> float:
    """Items per second for one run of `action` that handles `count` items."""
    gc.collect()
    start = time.perf_counter_ns()
    action()
    return count / ((time.perf_counter_ns() - start) / 1e9)


def median(samples: Sequence[int]) -> float:
    return statistics.median(samples)


def p99(samples: Sequence[int]) -> float:
    return statistics.quantiles(samples, n=100)[98]


# ================================================================ stores


@contextmanager
def sqlite_location(workdir: str) -> Iterator[str]:
    yield os.path.join(workdir, "koinii.db")  # the temporary directory removes it


def postgres_unreachable(server: str) -> str | None:
    """Why PostgreSQL cannot be measured, or None when it can."""
    try:
        import psycopg
    except ImportError:
        return "n/a (psycopg not installed)"
    try:
        psycopg.connect(server, connect_timeout=CONNECT_TIMEOUT_S).close()
    except (psycopg.Error, OSError):
        return "n/a (PostgreSQL not reachable)"
    return None


def postgres_settings(server: str) -> str:
    import psycopg

    with psycopg.connect(server, connect_timeout=CONNECT_TIMEOUT_S) as conn:
        version, commit, fsync = conn.execute(
            "SELECT current_setting('server_version'), current_setting('synchronous_commit'),"
            " current_setting('fsync')"
        ).fetchone()
    return f"PostgreSQL {version} (synchronous_commit={commit}, fsync={fsync})"


@contextmanager
def postgres_location(server: str) -> Iterator[str]:
    """A fresh schema for one store, dropped on the way out; yields the store's URL."""
    import psycopg
    from psycopg import sql

    name = f"koinii_bench_{os.getpid()}_{secrets.token_hex(4)}"  # needs no quoting
    schema = sql.Identifier(name)
    with psycopg.connect(server, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(schema))
    try:
        separator = "&" if "?" in server else "?"
        yield f"{server}{separator}options=-csearch_path%3D{name}"
    finally:
        with psycopg.connect(server, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(schema))


# ================================================================ the daemon


@contextmanager
def daemon(location: str, workdir: str) -> Iterator[str]:
    """`python -m koinii serve` over `location` as a child process; yields its URL."""
    command = [sys.executable, "-m", "koinii", "serve", "--host", HOST, "--port", "0"]
    command += ["--db", location]
    descriptor, log_path = tempfile.mkstemp(prefix="daemon-", suffix=".log", dir=workdir)
    with open(descriptor, "wb") as log:
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            try:
                port = port_from_log(log_path, child, START_TIMEOUT_S)
            except RuntimeError as exc:
                raise RuntimeError(f"{exc}; its log ends:\n{log_tail(log_path)}") from None
            url = f"http://{HOST}:{port}"
            wait_for_health(url, child, log_path)
            yield url
        finally:
            child.terminate()  # SIGTERM: a graceful shutdown that closes the store
            try:
                child.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def wait_for_health(url: str, child: subprocess.Popen, log_path: str) -> None:
    """Poll GET /health until it answers; give up when the daemon dies or time is up."""
    deadline = time.monotonic() + START_TIMEOUT_S
    with koinii.connect(url, timeout=1) as probe:
        while time.monotonic() < deadline:
            if child.poll() is not None:
                raise RuntimeError(f"the daemon exited; its log ends:\n{log_tail(log_path)}")
            try:
                probe.health()
                return
            except koinii.Unavailable:
                time.sleep(0.05)
    raise RuntimeError(f"the daemon did not answer within {START_TIMEOUT_S:.0f} s")


def log_tail(path: str, lines: int = 20) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return "".join(f.readlines()[-lines:])


# ================================================================ one backend


@dataclass(frozen=True)
class Results:
    load_rate: float  # facts/s
    asserts_ns: list[int]
    queries_ns: list[int]
    reopen_ns: int
    round_trips_ns: list[int]


def measure_backend(name: str, location: str, workload: Workload, workdir: str) -> Results:
    """Rows 1-4 in-process on one store, then row 5 with a daemon over the same store."""
    progress(f"{name}: load {len(workload.facts):,} facts")
    kb = koinii.open_kb(location)
    try:
        load_rate = load(kb, workload)
        progress(f"{name}: {len(workload.fresh) - WARMUP_CALLS:,} single asserts")
        asserts_ns = per_call_ns(kb.assert_, [term(row) for row in workload.fresh])
        progress(f"{name}: {len(workload.lookups) - WARMUP_CALLS:,} point queries")
        check_answers(kb, workload)
        queries_ns = per_call_ns(kb.query, goals(workload.lookups, name))
        progress(f"{name}: reopen")
        kb, reopen_ns = reopen(kb, location)
    finally:
        kb.close()
    progress(f"{name}: {len(workload.wire) - WARMUP_CALLS:,} wire round trips")
    with daemon(location, workdir) as url:
        round_trips_ns = wire_round_trips(url, workload.wire)
    return Results(load_rate, asserts_ns, queries_ns, reopen_ns, round_trips_ns)


def load(kb: koinii.KB, workload: Workload) -> float:
    """Facts/s of the batched load; the context hierarchy goes in first, untimed."""
    kb.edit(add=[((Sym("genlCx"), Sym(part), Sym(SHARED)), UNIVERSE) for part in PARTS])
    batches = [[term(row) for row in batch] for batch in workload.batches()]

    def run() -> None:
        for batch in batches:
            kb.edit(add=batch)

    return rate(len(workload.facts), run)


def check_answers(kb: koinii.KB, workload: Workload) -> None:
    """The queries to be timed must find what the workload stored, on every backend."""
    sample = workload.lookups[:ANSWER_CHECKS]
    for (c, p, s), expected in expected_answers(workload, sample).items():
        found = {str(b["?o"]) for b in kb.query((Sym(p), Sym(s), Var("o")), c)}
        if found != expected or not found:
            raise RuntimeError(f"({p} {s} ?o) at {c}: found {found}, expected {expected}")


def goals(lookups: Sequence[Lookup], backend: str) -> list[tuple[str, str]]:
    """Goal texts whose variable is named after the backend: Koinii caches parsed goal
    texts process-wide, so the second backend must not find the first one's parses."""
    return [(f"({p} {s} ?{backend.lower()})", c) for c, p, s in lookups]


def reopen(kb: koinii.KB, location: str) -> tuple[koinii.KB, int]:
    """Close and reopen the store; returns the reopened KB and the time it took."""
    gc.collect()
    start = time.perf_counter_ns()
    kb.close()
    kb = koinii.open_kb(location)
    kb.stats()
    return kb, time.perf_counter_ns() - start


def wire_round_trips(url: str, rows: Sequence[Row]) -> list[int]:
    with koinii.connect(url) as client:
        return per_call_ns(client.assert_, [text(row) for row in rows])


# ================================================================ the table


@dataclass(frozen=True)
class Metric:
    label: str
    value: Callable[[Results], float]
    show: Callable[[float], str]


RATE = "{:,.0f}".format
DECIMAL = "{:,.1f}".format
THREE = "{:,.3f}".format


def metrics(sizes: Sizes) -> tuple[Metric, ...]:
    return (
        Metric(
            f"1  load {sizes.facts:,} facts, edits of {min(BATCH, sizes.facts):,}, facts/s",
            lambda r: r.load_rate,
            RATE,
        ),
        Metric(
            "2  durable single assert, median us", lambda r: median(r.asserts_ns) / 1e3, DECIMAL
        ),
        Metric("   durable single assert, p99 us", lambda r: p99(r.asserts_ns) / 1e3, DECIMAL),
        Metric("3  point query, median us", lambda r: median(r.queries_ns) / 1e3, DECIMAL),
        Metric(f"4  close + reopen {sizes.facts:,} facts, s", lambda r: r.reopen_ns / 1e9, THREE),
        Metric(
            "5  wire: durable assert round trip, p50 ms",
            lambda r: median(r.round_trips_ns) / 1e6,
            THREE,
        ),
        Metric(
            "   wire: durable assert round trip, p99 ms",
            lambda r: p99(r.round_trips_ns) / 1e6,
            THREE,
        ),
    )


def ratio(mine: float, reference: float) -> str:
    r = mine / reference if reference else 0.0
    return f"{r:,.1f}x" if r >= 10 else f"{r:.2f}x"


def build_table(sizes: Sizes, results: dict[str, Results], missing: str | None) -> str:
    sqlite, postgres = (results.get(name) for name in BACKENDS)
    rows = [["measure", *BACKENDS, "PostgreSQL/SQLite"]]
    for metric in metrics(sizes):
        mine = metric.value(sqlite)
        if postgres is None:
            rows.append([metric.label, metric.show(mine), missing or "n/a", ""])
            continue
        theirs = metric.value(postgres)
        rows.append([metric.label, metric.show(mine), metric.show(theirs), ratio(theirs, mine)])
    return render(rows, right={1, 2, 3})


def render(rows: list[list[str]], right: set[int]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for k, row in enumerate(rows):
        cells = [
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if k == 0:
            lines.append("-" * len(lines[0]))
    return "\n".join(lines)


def header(sizes: Sizes, postgres: str) -> str:
    return "\n".join(
        [
            f"Koinii backend benchmark: {sizes.facts:,} facts over {len(PARTS)} contexts under "
            f"{SHARED}, seed {SEED}; {sizes.single_writes:,} asserts, {sizes.lookups:,} "
            f"queries, {sizes.round_trips:,} wire round trips per backend",
            f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
            f"{os.cpu_count()} CPUs; koinii {koinii.__version__}, SQLite "
            f"{sqlite3.sqlite_version}, {postgres}",
        ]
    )


def notes(elapsed_s: float) -> str:
    return "\n".join(
        [
            "PostgreSQL/SQLite: above 1 is more facts/s on row 1 and more time on every other row.",
            "Durable: an SQLite commit is WAL with synchronous=NORMAL, no fsync: it survives "
            "kill -9, not power loss.",
            "A PostgreSQL commit follows the server's settings (above): synchronous_commit=on "
            "flushes its WAL to disk.",
            f"Rows 2, 3, 5: each call timed with perf_counter_ns after {WARMUP_CALLS} untimed "
            "warm-up calls; no query repeats.",
            "Row 3: reads CxPartNN, CxShared and CxUniverse from the in-memory index; the "
            "store is not touched.",
            "       Each backend names the query variable after itself, so neither finds the "
            "other's goal texts parsed.",
            "Row 4: close, open_kb, stats: the engine rebuilds its index from every stored row.",
            "Row 5: a daemon child process over the loaded store; one client, one keep-alive "
            "connection on loopback.",
            f"Whole run: {elapsed_s:.0f} s.",
        ]
    )


# ================================================================ the run


def run(sizes: Sizes, postgres_server: str) -> str:
    started = time.perf_counter_ns()
    progress(f"workload: {sizes.facts:,} facts, seed {SEED}")
    workload = make_workload(sizes)
    missing = postgres_unreachable(postgres_server)
    postgres = "no PostgreSQL" if missing else postgres_settings(postgres_server)
    results: dict[str, Results] = {}
    with tempfile.TemporaryDirectory(prefix="koinii-backends-") as workdir:
        with sqlite_location(workdir) as location:
            results["SQLite"] = measure_backend("SQLite", location, workload, workdir)
        if missing is None:
            with postgres_location(postgres_server) as location:
                results["PostgreSQL"] = measure_backend("PostgreSQL", location, workload, workdir)
    table = build_table(sizes, results, missing)
    elapsed_s = (time.perf_counter_ns() - started) / 1e9
    return "\n".join([header(sizes, postgres), "", table, "", notes(elapsed_s)])


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
    parser.add_argument(
        "--postgres",
        default=POSTGRES_URL,
        metavar="URL",
        help=f"PostgreSQL server to create a scratch schema in (default {POSTGRES_URL})",
    )
    args = parser.parse_args(argv)
    if args.facts is not None and args.facts < 1_000:
        parser.error("--facts must be at least 1000")
    print(run(Sizes.for_run(args.quick, args.facts), args.postgres))


if __name__ == "__main__":
    main()
