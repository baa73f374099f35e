"""Web-view benchmark: how long a large channel takes to open, over HTTP, from a daemon.

Workload (deterministic; an SQLite store file in a temporary directory): three agents on
one channel, `CxTeam`, hold a conversation of 10,000 moves — per question (about 1,090):
the question, two answers (each carrying its claim), endorsements and a justification;
every fifth answer disputed and voted on by all three (for, for, against), the others
accepted by the asker. Then `koinii serve` opens the store with a reader token, and a
client signs in to the view like a browser (one cookie) and times each page with a fresh
connection per request: the first open (templates compiled, caches cold), then the median
and the slowest of `--calls` more.

The pages: the channel (its newest 200 moves from the change log, told by the narrator,
and its 12 newest questions as whole threads), the questions part the live page fetches
after each move, the disputes page, one question's thread, and the context graph. The
peer row is what a page without windows would cost: telling the whole change log
(`tail --since 0`, in process) and reading every question's summary
(`conversation.questions`), both timed in process on the same store.

Target (issue 20): the channel opens in under a second on this machine (2 cores).

Run it (about a minute on a 2-core machine: building the conversation is most of it)::

    .venv/bin/python benchmarks/web.py            # 10,000 moves
    .venv/bin/python benchmarks/web.py --quick    # 1,000 moves (seconds)

Progress goes to stderr and the table to stdout.
"""

from __future__ import annotations

import argparse
import http.client
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Sequence

import koinii
from daemon_port import port_from_log  # beside this script
from koinii.channel import agent as channel
from koinii.channel import conversation
from koinii.channel.narrator import Narrator
from koinii.server.tokens import add_token

TARGET_MS = 1000.0


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def build(path: str, moves: int) -> tuple[int, int]:
    """The conversation, in process; returns (moves made, a question's handle)."""
    with koinii.open_kb(path) as kb:
        medium = channel.local(kb)
        atlas, boreas, cyra = (
            channel.join(medium, "CxTeam", f"Agent{name}") for name in ("Atlas", "Boreas", "Cyra")
        )
        made, i, last = 0, 0, 0
        while made < moves:
            q = last = atlas.pose_query(f"(versionOf Service{i} ?v)")
            b = boreas.answer(str(i), q)
            c = cyra.answer(str(i + 1), q)
            atlas.endorse(b)
            boreas.justify(f"ReleaseNotes{i}", b)
            cyra.endorse(c)
            made += 6
            if i % 5 == 0:
                cyra.dispute(b)
                for agent, stance in ((atlas, "for"), (boreas, "for"), (cyra, "against")):
                    agent.vote(stance, b)
                made += 4
            else:
                atlas.justify(f"Checked{i}", c)
                atlas.accept(b)
                boreas.endorse(c)
                made += 3
            i += 1
            if i % 200 == 0:
                log(f"  {made:,} moves")
        return made, last


def fetch(port: int, path: str, cookie: str) -> float:
    """One GET on a fresh connection; its seconds (the page must answer 200)."""
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("GET", path, headers={"Cookie": cookie})
    reply = connection.getresponse()
    reply.read()
    connection.close()
    if reply.status != 200:
        raise SystemExit(f"{path} answered {reply.status}")
    return time.perf_counter() - started


def sign_in(port: int, token: str) -> str:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = urllib.parse.urlencode({"token": token})
    connection.request(
        "POST", "/login", body, {"Content-Type": "application/x-www-form-urlencoded"}
    )
    reply = connection.getresponse()
    reply.read()
    return reply.getheader("set-cookie").split(";", 1)[0]


def serve(db: str, tokens: str) -> tuple[subprocess.Popen, int]:
    """The daemon over `db`, and the port it listens on (one the system chose)."""
    log_path = db + ".log"
    with open(log_path, "wb") as log:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "koinii", "serve", "--db", db, "--port", "0"]
            + ["--tokens", tokens],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        return daemon, port_from_log(log_path, daemon)
    except RuntimeError as exc:
        daemon.kill()
        with open(log_path, encoding="utf-8", errors="replace") as log:
            raise SystemExit(f"{exc}: {log.read()}") from None


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms"


def run(moves: int, calls: int) -> str:
    folder = tempfile.mkdtemp(prefix="koinii-web-bench-")
    db = os.path.join(folder, "team.db")
    log(f"building a {moves:,}-move channel …")
    started = time.perf_counter()
    made, question = build(db, moves)
    log(f"  built in {time.perf_counter() - started:.1f} s")

    log("the unwindowed peers, in process …")
    with koinii.open_kb(db) as kb:
        started = time.perf_counter()
        narrator, since, told = Narrator(kb), 0, 0
        while True:
            entries = kb.changes(since=since, limit=1000)["entries"]
            if not entries:
                break
            told += sum(len(narrator.entry(e)) for e in entries)
            since = entries[-1]["seq"]
        whole_log = time.perf_counter() - started
        started = time.perf_counter()
        asked = len(conversation.questions(kb, "CxTeam"))
        every_question = time.perf_counter() - started

    tokens = os.path.join(folder, "team.tokens")
    token = add_token(tokens, "Viewer", "reader")
    daemon, port = serve(db, tokens)
    try:
        cookie = sign_in(port, token)
        pages = [
            ("channel page (newest 200 moves, 12 questions)", "/channel/CxTeam/"),
            ("questions part (after each live move)", "/channel/CxTeam/?part=questions"),
            ("disputes page", "/channel/CxTeam/disputes"),
            ("one question's thread", f"/channel/CxTeam/thread/{question}"),
            ("context graph", "/contexts"),
        ]
        rows = []
        for name, path in pages:
            log(f"timing {path} …")
            first = fetch(port, path, cookie)
            times = [fetch(port, path, cookie) for _ in range(calls)]
            rows.append((name, first, statistics.median(times), max(times)))
    finally:
        daemon.terminate()
        daemon.wait(30)

    width = max(len(r[0]) for r in rows) + 2
    lines = [
        f"Koinii web-view benchmark: a channel of {made:,} moves ({asked:,} questions), "
        f"{calls} calls a page",
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; over HTTP from `koinii serve`, one cookie",
        "",
        f"{'page':<{width}}{'first open':>12}{'median':>10}{'slowest':>10}",
    ]
    for name, first, median, slowest in rows:
        lines.append(f"{name:<{width}}{ms(first):>12}{ms(median):>10}{ms(slowest):>10}")
    channel_first, channel_median = rows[0][1], rows[0][2]
    verdict = "meets" if max(channel_first, channel_median) * 1000 < TARGET_MS else "MISSES"
    lines += [
        "",
        "without windows (in process, the same store):",
        f"  telling the whole change log ({told:,} lines)   {ms(whole_log)}",
        f"  every question's summary ({asked:,})            {ms(every_question)}",
        "",
        f"the channel opens in {ms(channel_first)} (first) / {ms(channel_median)} (median): "
        f"{verdict} the {TARGET_MS:,.0f} ms target",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 moves (seconds)")
    parser.add_argument("--calls", type=int, default=None, help="timed calls a page")
    args = parser.parse_args(argv)
    moves = 1_000 if args.quick else 10_000
    print(run(moves, args.calls or (5 if args.quick else 20)))


if __name__ == "__main__":
    main()
