"""History benchmark: the conversation's reads as the record of what was taken back grows.

Workload (deterministic; an in-memory store): a channel CxTeam where AgentBoreas keeps
changing its answers to 20 filler questions — each change supersedes the answer before
and leaves one record in CxHistory (koinii.channel.history) — until the history holds N records;
then a probe question with two standing answers, a dispute on one of them, a changed
ballot and a withdrawn third answer (its record beside them).

What is measured, per history size: the median latency of `thread(probe)`,
`disputes(limit=20)` and `thread(probe, as_of=seq)` (the seq before the withdrawal), each
over many calls after a warm-up. Reads find a claim's records through the history's
index (`history.Index`: by target, question, retired handle, retired sentence), built once
per write; before the index, each claim's lookups scanned every record, so a thread grew
with the whole history, not with its own.

Run it (about a minute on a 2-core machine)::

    .venv/bin/python benchmarks/history.py            # 0, 1,000 and 4,000 records
    .venv/bin/python benchmarks/history.py --quick    # 0 and 200 records (seconds)

Progress goes to stderr and the table to stdout.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import koinii
from koinii.channel import agent as channel
from koinii.channel import history

FILLER_QUESTIONS = 20


def build(records: int) -> tuple[object, int, int]:
    """A channel whose history holds `records` records (and the probe's); returns the
    agent that reads, the probe question and the seq before the probe's withdrawal."""
    kb = koinii.open_kb()
    medium = channel.local(kb)
    atlas, boreas, cyra, dune = (
        channel.join(medium, "CxTeam", a)
        for a in ("AgentAtlas", "AgentBoreas", "AgentCyra", "AgentDune")
    )
    fillers = [atlas.ask(f"(poolSize Db{i} ?size)") for i in range(FILLER_QUESTIONS)]
    for n in range(records + FILLER_QUESTIONS):  # the first answer to each supersedes none
        boreas.answer(fillers[n % FILLER_QUESTIONS], str(n))
    probe = atlas.ask("(poolSize ProdDb ?size)")
    first = boreas.answer(probe, "500")
    cyra.answer(probe, "800")
    cyra.dispute(first)
    dune.vote(first, "for")
    dune.vote(first, "against")
    third = dune.answer(probe, "650")
    before = kb.seq
    dune.withdraw(third)
    assert len(history.records(kb)) == records + 2
    return atlas, probe, before


def median_ms(call, repeat: int) -> float:
    call()  # warm-up: the index is built once per write
    times = []
    for _ in range(repeat):
        started = time.perf_counter_ns()
        call()
        times.append(time.perf_counter_ns() - started)
    return statistics.median(times) / 1e6


def measure(atlas, probe: int, before: int, repeat: int) -> tuple[float, float, float]:
    return (
        median_ms(lambda: atlas.thread(probe), repeat),
        median_ms(lambda: atlas.disputes(limit=20), repeat),
        median_ms(lambda: atlas.thread(probe, as_of=before), repeat),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="0 and 200 records")
    args = parser.parse_args()
    sizes, repeat = ((0, 200), 5) if args.quick else ((0, 1_000, 4_000), 30)
    rows = []
    for size in sizes:
        print(f"building {size:,} records…", file=sys.stderr)
        rows.append((size, *measure(*build(size), repeat)))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"Koinii history reads, median ms (load average {load}; {os.cpu_count()} cores)\n")
    print("| records kept | thread(probe) | disputes(limit=20) | thread(probe, as_of) |")
    print("| --- | --- | --- | --- |")
    for size, thread, disputes, as_of in rows:
        print(f"| {size:,} | {thread:.2f} | {disputes:.2f} | {as_of:.2f} |")


if __name__ == "__main__":
    main()
