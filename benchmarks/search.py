"""Search benchmark: `KB.search` latency against the bare FTS5 floor (docs/search.md).

Workload (fixed seed)
    N sentexes (default 100,000; ``--sentexes 1000000`` for the million): claims
    ``(predicate Subject Object)`` over 300 camelCase predicates and 30,000 entities built
    from a vocabulary of 3,000 made-up words drawn with a Zipf-like skew (the commonest in
    about one sentex in six, most in a few dozen), and one in five a note holding a string of 6 to
    16 words. 90 % are in the team's agents' contexts under the channel ``CxTeam``, 10 % in
    contexts the channel does not see (they must be skipped, never returned).

What is measured
1. KB search: ``kb.search(text, "CxTeam", limit=10, ranking="lexical")`` on an SQLite
   store (and on the in-memory store, whose index is the same FTS5 table in memory), for
   1- to 3-word searches from the same vocabulary: the full call — ranking, visibility
   through the channel's ancestor set, snapshots, snippets. Where ``koinii[semantic]`` is
   installed, also ``ranking="hybrid"`` (the lexical rank fused with the embedding
   model's, over every sentex's vector: docs/search.md), after embedding the store once.
2. The floor: the same MATCH query (the very string the KB sends, over the very rows it
   indexed) run directly on a bare ``sqlite3`` FTS5 table with the same tokenizer:
   ``SELECT rowid, rank FROM t WHERE t MATCH ? ORDER BY rank LIMIT 10``.

A second floor row runs the bare query in the shape the KB sends it (``ORDER BY rank,
rowid``: SQLite's bounded sorter, where FTS5's own ``ORDER BY rank`` sorts every match);
the floor is the faster of the two. The ratio column is each row's median over the
floor's (target: at most 3x). Latencies
are per call, timed with ``time.perf_counter_ns`` after untimed warm-up calls; the rows
take turns on each search (the same search, one after another), so a machine busy with
something else slows them alike.

Run it::

    .venv/bin/python benchmarks/search.py                       # 100,000 sentexes
    .venv/bin/python benchmarks/search.py --sentexes 1000000    # the million (minutes)
    .venv/bin/python benchmarks/search.py --quick               # a few-second smoke run

Progress goes to stderr and the table to stdout. Absolute numbers vary between machines.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import koinii
from koinii.kb import semantic
from koinii.kb.store import fulltext

SEED = 20_261_201
DEFAULT_SENTEXES = 100_000
QUICK_SENTEXES = 3_000
WORDS = 3_000
PREDICATES = 300
ENTITIES = 30_000
AGENTS = 8
HIDDEN = ("CxOtherTeam", "CxScratch")
HIDDEN_PERCENT = 10
NOTE_PERCENT = 20
BATCH = 10_000
SEARCHES = 300
QUICK_SEARCHES = 60
WARMUP = 20
LIMIT = 10
TARGET_RATIO = 3.0


# ================================================================ workload


def vocabulary(rng: random.Random) -> list[str]:
    """WORDS distinct made-up lower-case words of two to four syllables."""
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    words: dict[str, None] = {}
    while len(words) < WORDS:
        words["".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))] = None
    return list(words)


class Workload:
    def __init__(self, sentexes: int, searches: int) -> None:
        rng = random.Random(SEED)
        self.words = vocabulary(rng)
        # Zipf-like: word i drawn with weight 1/(i+10): the commonest word is in about one
        # sentex in six, most words in a few dozen
        self._cumulative = list(itertools.accumulate(1 / (i + 10) for i in range(WORDS)))
        self.rng = rng
        self.predicates = [self._camel(rng.randint(2, 3), upper=False) for _ in range(PREDICATES)]
        self.entities = [
            self._camel(rng.randint(1, 2), upper=True) + str(i) for i in range(ENTITIES)
        ]
        self.agents = [f"CxAgent{i}" for i in range(AGENTS)]
        self.rows = [self._row() for _ in range(sentexes)]
        self.searches = [
            " ".join(self._word() for _ in range(rng.randint(1, 3)))
            for _ in range(searches + WARMUP)
        ]

    def _word(self) -> str:
        return self.rng.choices(self.words, cum_weights=self._cumulative)[0]

    def _camel(self, n: int, upper: bool) -> str:
        parts = [self._word() for _ in range(n)]
        head = parts[0].capitalize() if upper else parts[0]
        return head + "".join(p.capitalize() for p in parts[1:])

    def _row(self) -> tuple[str, str]:
        rng = self.rng
        if rng.randrange(100) < HIDDEN_PERCENT:
            context = rng.choice(HIDDEN)
        else:
            context = rng.choice(self.agents)
        if rng.randrange(100) < NOTE_PERCENT:
            note = " ".join(self._word() for _ in range(rng.randint(6, 16)))
            return f'(memoryNote {rng.choice(self.entities)} "{note}")', context
        return (
            f"({rng.choice(self.predicates)} {rng.choice(self.entities)} "
            f"{rng.choice(self.entities)})",
            context,
        )


def load(kb: Any, workload: Workload) -> None:
    for agent in workload.agents:
        kb.assert_(f"(genlCx CxTeam {agent})", "CxUniverse", strength="monotonic")
    rows = workload.rows
    for start in range(0, len(rows), BATCH):
        kb.edit(add=rows[start : start + BATCH])
        say(f"loaded {min(start + BATCH, len(rows)):,} of {len(rows):,}")


def floor_table(kb: Any) -> sqlite3.Connection:
    """A bare FTS5 table holding exactly the rows the KB's store indexed."""
    rows = kb.read_records(
        lambda db: db.execute("SELECT handle, words, extra FROM sentex_words").fetchall()
    )
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5 (words, extra, tokenize = 'porter unicode61')")
    db.executemany("INSERT INTO t (rowid, words, extra) VALUES (?, ?, ?)", rows)
    return db


# ================================================================ timing


def per_call_ns(calls: dict[str, Callable[[str], Any]], searches: Sequence[str]) -> dict:
    """Each call's wall time per search, in ns. The calls take turns on every search
    (the same search, one after another), so a machine busy with something else slows
    them alike and the ratio stays honest."""
    for text in searches[:WARMUP]:
        for call in calls.values():
            call(text)
    gc.collect()
    clock = time.perf_counter_ns
    samples: dict[str, list[int]] = {name: [] for name in calls}
    for text in searches[WARMUP:]:
        for name, call in calls.items():
            start = clock()
            call(text)
            samples[name].append(clock() - start)
    return samples


def summary(samples: list[int]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered) / 1e6, p99 / 1e6


def say(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


# ================================================================ the run


def run(sentexes: int, searches: int) -> str:
    say(f"workload: {sentexes:,} sentexes, {searches} searches")
    workload = Workload(sentexes, searches)
    with tempfile.TemporaryDirectory() as tmp, koinii.open_kb(os.path.join(tmp, "s.db")) as kb:
        load(kb, workload)
        calls: dict[str, Callable[[str], Any]] = {}
        embedded = None
        if semantic.installed():
            say("embedding the store for the hybrid row")
            kb.search("warm", "CxTeam", ranking="lexical")  # FTS5 catches up: not timed
            start = time.perf_counter()
            kb.index_for_search()
            embedded = time.perf_counter() - start
            calls[HYBRID_ROW] = lambda t: kb.search(t, "CxTeam", limit=LIMIT, ranking="hybrid")
        say("the in-memory store")
        with koinii.open_kb() as memory:
            load(memory, workload)
            memory.search("warm", "CxTeam")  # its lazy index catches up, once
            floor = floor_table(kb)
            for text in workload.searches:  # the KB never returns what it cannot see
                for hit in kb.search(text, "CxTeam", limit=LIMIT):
                    assert hit.sentex.context not in HIDDEN, hit
            hits = sum(len(kb.search(t, "CxTeam", limit=LIMIT)) for t in workload.searches)

            def bare(sql: str) -> Callable[[str], list]:
                def run_it(text: str) -> list:
                    match = fulltext.sqlite_match(fulltext.query_words(text))
                    return floor.execute(sql, (match, LIMIT)).fetchall()

                return run_it

            say("timing")
            samples = per_call_ns(
                {
                    SQLITE_ROW: lambda t: kb.search(t, "CxTeam", limit=LIMIT, ranking="lexical"),
                    MEMORY_ROW: lambda t: memory.search(
                        t, "CxTeam", limit=LIMIT, ranking="lexical"
                    ),
                    FLOOR_ROW: bare(
                        "SELECT rowid, rank FROM t WHERE t MATCH ? ORDER BY rank LIMIT ?"
                    ),
                    SORTED_FLOOR_ROW: bare(
                        "SELECT rowid, rank FROM t WHERE t MATCH ? ORDER BY rank, rowid LIMIT ?"
                    ),
                    **calls,
                },
                workload.searches,
            )
    results = {name: summary(found) for name, found in samples.items()}
    return table(sentexes, searches, results, hits, embedded)


SQLITE_ROW = "KB search, SQLite store"
MEMORY_ROW = "KB search, in-memory store"
FLOOR_ROW = "bare FTS5 floor (same MATCH)"
SORTED_FLOOR_ROW = "bare FTS5, ORDER BY rank, rowid"
HYBRID_ROW = "KB search, hybrid, SQLite store"


def table(sentexes: int, searches: int, results: dict, hits: int, embedded: float | None) -> str:
    # the floor is the faster of the two bare queries: FTS5's own ORDER BY rank sorts every
    # match, while ORDER BY rank, rowid LIMIT (the KB's) goes through SQLite's bounded sorter
    floor_median = min(results[FLOOR_ROW][0], results[SORTED_FLOOR_ROW][0])
    lines = [
        f"Koinii search benchmark: {sentexes:,} sentexes, {searches} searches of 1-3 words, "
        f"limit {LIMIT} ({hits / (searches + WARMUP):.1f} hits per search on average)",
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{platform.machine()} {platform.system()}",
        "",
        f"| {'what':<34} | {'median ms':>9} | {'p99 ms':>8} | {'x floor':>7} |",
        f"| {'-' * 34} | {'-' * 9}:| {'-' * 8}:| {'-' * 7}:|",
    ]
    order = [SQLITE_ROW, MEMORY_ROW, FLOOR_ROW, SORTED_FLOOR_ROW]
    order += [HYBRID_ROW] if HYBRID_ROW in results else []
    worst = 0.0
    for name in order:
        median, p99 = results[name]
        ratio = median / floor_median if floor_median else float("inf")
        if name in (SQLITE_ROW, MEMORY_ROW):
            worst = max(worst, ratio)
        lines.append(f"| {name:<34} | {median:>9.3f} | {p99:>8.3f} | {ratio:>6.2f}x |")
    verdict = "met" if worst <= TARGET_RATIO else "NOT met"
    if sentexes < DEFAULT_SENTEXES:
        verdict += f" (below {DEFAULT_SENTEXES:,} sentexes the fixed cost of a call weighs most)"
    lines += ["", f"target: KB search at most {TARGET_RATIO:g}x the floor (median): {verdict}"]
    if embedded is None:
        lines.append("hybrid: not measured (koinii[semantic] is not installed)")
    else:
        lines.append(
            f"hybrid: embedding the store took {embedded:.1f} s "
            f"({embedded / sentexes * 1e6:.0f} µs a sentex, once; then as they are written)"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny smoke run (seconds)")
    parser.add_argument(
        "--sentexes",
        type=int,
        default=None,
        help=f"sentexes to load (default {DEFAULT_SENTEXES:,}; {QUICK_SENTEXES:,} with --quick)",
    )
    args = parser.parse_args(argv)
    sentexes = args.sentexes or (QUICK_SENTEXES if args.quick else DEFAULT_SENTEXES)
    print(run(sentexes, QUICK_SEARCHES if args.quick else SEARCHES))


if __name__ == "__main__":
    main()
