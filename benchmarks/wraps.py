"""Wrap-queue benchmark: a coordinator's reads on a large queue, against raw SQL.

Workload (seeded, deterministic; an SQLite store file in a temporary directory)

- A 3-level project hierarchy: ORGS x 10 teams x 5 services (`org3:team7:svc2`): 10 orgs
  and 500 leaf projects by default.
- 1,000 coordinator sessions, two per leaf project (two coordinators sharing a project
  is the case `parent_session_id` exists for), each registered with `Coordinators`.
- 100,000 wraps, 100 per session, filed in the session's leaf project through
  `WrapQueue.add_wrap_notification` (one durable write each), in shuffled order; then
  90% of them marked through `mark_wrap_processed` (a queue in use: nothing is deleted,
  so processed history piles up, and the unprocessed reads must not pay for it).

What is measured, per read: the median and p99 latency of the `WrapQueue` call over many
keys (each call timed with `perf_counter_ns`, after untimed warm-up calls), against the
SAME SQL statement (`koinii.wraps.queue.wraps_query`) run with `fetchall()` on a second,
read-only sqlite3 connection to the same file (the floor: no Python dicts, no JSON
decoding, no locking), and the same statement forced to scan the table (`NOT INDEXED`),
which is what an unindexed queue would cost. The plan column is SQLite's
`EXPLAIN QUERY PLAN` for the statement.

Targets (issue 6): the session read and the hierarchy read (a team: the level a
coordinator permeates) each <= 2 ms at the median on the full workload, and indexed.

Run it (about half a minute on a 2-core machine)::

    .venv/bin/python benchmarks/wraps.py            # 100,000 wraps, 1,000 sessions
    .venv/bin/python benchmarks/wraps.py --quick    # 10,000 wraps, 100 sessions (seconds)

Progress goes to stderr and the table to stdout.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import koinii
from koinii.wraps import Coordinators, WrapQueue
from koinii.wraps.queue import wraps_query

SEED = 20_260_114
TEAMS, SERVICES, SESSIONS_PER_LEAF = 10, 5, 2
WRAPS_PER_SESSION = 100
PROCESSED = 0.9
TARGET_MS = 2.0


@dataclass(frozen=True)
class Sizes:
    orgs: int
    calls: int  # timed calls per read
    warmup: int

    @property
    def leaves(self) -> list[str]:
        return [
            f"org{o}:team{t}:svc{s}"
            for o in range(self.orgs)
            for t in range(TEAMS)
            for s in range(SERVICES)
        ]

    @property
    def sessions(self) -> int:
        return len(self.leaves) * SESSIONS_PER_LEAF

    @property
    def wraps(self) -> int:
        return self.sessions * WRAPS_PER_SESSION


@dataclass(frozen=True)
class Read:
    label: str
    target: bool  # held to TARGET_MS
    keys: Callable[[random.Random, Sizes], Any]  # one key per call
    call: Callable[[WrapQueue, Any], list]
    query: Callable[[Any], tuple[str, tuple]]


def _session(rng: random.Random, sizes: Sizes) -> str:
    return f"session:coord-{rng.randrange(sizes.sessions)}"


def _team(rng: random.Random, sizes: Sizes) -> str:
    return f"org{rng.randrange(sizes.orgs)}:team{rng.randrange(TEAMS)}"


READS = [
    Read(
        "session read (one coordinator's lings)",
        True,
        _session,
        lambda q, key: q.get_unprocessed_wraps_for_session(key),
        lambda key: wraps_query(parent_session_id=key),
    ),
    Read(
        "hierarchy read, a team (org:team + 5 services)",
        True,
        _team,
        lambda q, key: q.get_unprocessed_wraps_for_hierarchy(key),
        lambda key: wraps_query(project_id=key, include_children=True),
    ),
    Read(
        "project read, a leaf (exact)",
        False,
        lambda rng, sizes: rng.choice(sizes.leaves),
        lambda q, key: q.get_unprocessed_wraps_for_project(key),
        lambda key: wraps_query(project_id=key),
    ),
    Read(
        "hierarchy read, an org (50 projects)",
        False,
        lambda rng, sizes: f"org{rng.randrange(sizes.orgs)}",
        lambda q, key: q.get_unprocessed_wraps_for_hierarchy(key),
        lambda key: wraps_query(project_id=key, include_children=True),
    ),
]


# ================================================================ load


def load(path: str, sizes: Sizes) -> None:
    rng = random.Random(SEED)
    leaves = sizes.leaves
    with koinii.open_kb(path) as kb:
        coordinators, queue = Coordinators(kb), WrapQueue(kb)
        for n in range(sizes.sessions):
            coordinators.register(
                f"AgentCoord{n}",
                project_id=leaves[n // SESSIONS_PER_LEAF],
                session_id=f"session:coord-{n}",
            )
        plan = [(s, k) for s in range(sizes.sessions) for k in range(WRAPS_PER_SESSION)]
        rng.shuffle(plan)
        started = time.perf_counter()
        for i, (session, k) in enumerate(plan):
            queue.add_wrap_notification(
                f"wrap-{session}-{k}",
                agent_id=f"AgentLing{session}x{k}",
                session_id=f"session:ling-{session}-{k}",
                project_id=leaves[session // SESSIONS_PER_LEAF],
                parent_session_id=f"session:coord-{session}",
                depth=1,
                created_ids=[3 * i + 1, 3 * i + 2, 3 * i + 3],
                stats={"notes": 2, "decisions": 1, "conventions": 0},
            )
            if (i + 1) % 20_000 == 0:
                progress(f"filed {i + 1:,} wraps")
        filed = time.perf_counter() - started
        marked = [wrap_id for wrap_id in (f"wrap-{s}-{k}" for s, k in plan)]
        marked = marked[: int(len(marked) * PROCESSED)]
        started = time.perf_counter()
        for wrap_id in marked:
            queue.mark_wrap_processed(wrap_id)
        progress(
            f"filed {len(plan):,} wraps ({filed / len(plan) * 1e6:.0f} us each), marked "
            f"{len(marked):,} ({(time.perf_counter() - started) / len(marked) * 1e6:.0f} us each)"
        )


# ================================================================ measure


def timed(call: Callable[[Any], Any], keys: Sequence[Any], warmup: int) -> list[int]:
    for key in keys[:warmup]:
        call(key)
    out = []
    for key in keys[warmup:]:
        started = time.perf_counter_ns()
        call(key)
        out.append(time.perf_counter_ns() - started)
    return out


def unindexed(sql: str) -> str:
    return sql.replace("FROM wrap_notification", "FROM wrap_notification NOT INDEXED")


def plan_of(raw: sqlite3.Connection, sql: str, params: tuple) -> str:
    """SQLite's plan, shortened: `SEARCH by_session (parent_session_id=?)` per table access."""
    steps = [row[3] for row in raw.execute("EXPLAIN QUERY PLAN " + sql, params)]
    shown = [s for s in steps if s.startswith(("SEARCH", "SCAN"))]
    return "; ".join(
        s.replace("wrap_notification USING INDEX wrap_unprocessed_", "") for s in shown
    )


def measure(path: str, sizes: Sizes) -> list[dict[str, Any]]:
    rows = []
    raw = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    with koinii.open_kb(path) as kb:
        queue = WrapQueue(kb)
        for read in READS:
            rng = random.Random(f"{SEED}:{read.label}")
            keys = [read.keys(rng, sizes) for _ in range(sizes.calls + sizes.warmup)]
            # the same answers, or the rows time different work
            for key in keys[:20]:
                mine = [w["wrap_id"] for w in read.call(queue, key)]
                sql, params = read.query(key)
                floor = [r[0] for r in raw.execute(sql, params).fetchall()]
                if mine != floor:
                    raise RuntimeError(f"{read.label}: Koinii and raw SQL disagree on {key}")
            progress(f"timing {read.label}")
            koinii_ns = timed(lambda key, r=read: r.call(queue, key), keys, sizes.warmup)
            raw_ns = timed(
                lambda key, r=read: raw.execute(*r.query(key)).fetchall(), keys, sizes.warmup
            )
            scan_keys = keys[: sizes.warmup + max(20, sizes.calls // 20)]
            scan_ns = timed(
                lambda key, r=read: raw.execute(
                    unindexed(r.query(key)[0]), r.query(key)[1]
                ).fetchall(),
                scan_keys,
                sizes.warmup,
            )
            sql, params = read.query(keys[0])
            counts = [len(read.call(queue, key)) for key in keys[:50]]
            rows.append(
                {
                    "read": read,
                    "rows": statistics.median(counts),
                    "koinii": koinii_ns,
                    "raw": raw_ns,
                    "scan": scan_ns,
                    "plan": plan_of(raw, sql, params),
                }
            )
    raw.close()
    return rows


# ================================================================ report


def ms(ns: float) -> str:
    return f"{ns / 1e6:.3f}"


def p99(values: Sequence[int]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def render(table: list[list[str]], right: set[int]) -> str:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = []
    for n, row in enumerate(table):
        cells = [
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))
        ]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def report(rows: list[dict[str, Any]], sizes: Sizes, quick: bool, elapsed: float) -> str:
    table = [
        [
            "read",
            "rows",
            "Koinii p50 ms",
            "p99",
            "raw SQL p50",
            "x raw",
            "table scan p50",
            "target",
            "plan",
        ]
    ]
    for row in rows:
        mine, floor = statistics.median(row["koinii"]), statistics.median(row["raw"])
        indexed = "SCAN" not in row["plan"]
        if not row["read"].target:
            verdict = ""
        elif quick:
            verdict = "(quick run)"
        else:
            verdict = "pass" if mine <= TARGET_MS * 1e6 and indexed else "MISS"
        table.append(
            [
                row["read"].label,
                f"{row['rows']:g}",
                ms(mine),
                ms(p99(row["koinii"])),
                ms(floor),
                f"{mine / floor:.1f}",
                ms(statistics.median(row["scan"])),
                verdict,
                row["plan"],
            ]
        )
    head = (
        f"Koinii wrap-queue benchmark: {sizes.wraps:,} wraps ({PROCESSED:.0%} processed) over "
        f"{sizes.sessions:,} coordinator sessions in {len(sizes.leaves):,} leaf projects "
        f"({sizes.orgs} orgs x {TEAMS} teams x {SERVICES} services), seed {SEED}\n"
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs; koinii {koinii.__version__}, SQLite {sqlite3.sqlite_version}"
    )
    notes = (
        f"Latency per call over {sizes.calls:,} keys after {sizes.warmup} warm-up calls; "
        "rows = median result size.\n"
        "raw SQL: the same statement (koinii.wraps.queue.wraps_query) with fetchall() on a "
        "read-only sqlite3 connection to the same file; x raw = Koinii / raw SQL.\n"
        "table scan: that statement with NOT INDEXED (what the read costs without its "
        "partial index).\n"
        f"target: <= {TARGET_MS:g} ms at the median and an index search (no SCAN) in the plan.\n"
        f"Whole run: {elapsed:.0f} s."
    )
    return "\n".join([head, "", render(table, right={1, 2, 3, 4, 5, 6}), "", notes])


def progress(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


def run(sizes: Sizes, quick: bool) -> str:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="koinii-wraps-bench-") as workdir:
        path = os.path.join(workdir, "wraps.db")
        progress(f"loading {sizes.wraps:,} wraps over {sizes.sessions:,} sessions")
        load(path, sizes)
        rows = measure(path, sizes)
    return report(rows, sizes, quick, time.perf_counter() - started)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="10,000 wraps over 100 sessions (seconds)"
    )
    args = parser.parse_args(argv)
    sizes = Sizes(orgs=1, calls=300, warmup=20) if args.quick else Sizes(10, 2_000, 50)
    print(run(sizes, args.quick))


if __name__ == "__main__":
    main()
