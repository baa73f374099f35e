"""Sessions benchmark: the ranked session search against a bare FTS5 floor, and imports.

Workload (fixed seed)
    N synthetic sessions (default 100,000) of T turns each (default 10: 1,000,000 turns)
    in one SQLite store. Text is drawn from a Zipf-distributed vocabulary of 20,000
    made-up words: a title of 3-6 words, a request of 8-16, one or two iterations per
    turn with 20-40 words of reply and, half the time, 10-30 of thinking, and a tool
    block in a third of them. One session in 500 has the word `zephyrquartz` in its
    title, so the title band has something rare to find.

    The sessions are written through the public import path (`SessionStore.
    import_session`, one transaction per session), which is timed: turns/s.

Measured
    - THE ranked search: `Introspection(kb).list_sessions(q, limit=50, ranking="lexical")`
      (the bands; hybrid ranking is `recall.py`'s subject) — the whole
      read, through the operation layer: the title band, the request/reply/thinking
      bands, newest first inside a band, flags and snippets; and beside it
      `ranking="relevance"`, which adds the band of the sessions holding some of the
      words where the bands leave room (its median and p99).
    - The floor, on the same database in the same run: the bare FTS5 query a ranked
      full-text search cannot do without — `SELECT rowid, snippet(…) FROM turn_search
      WHERE turn_search MATCH ? ORDER BY bm25(turn_search) LIMIT 50` — with the same
      words (ANDed, the last one a prefix), over all three columns at once.
    Queries mix a very common word, mid-frequency and rare words, two-word queries,
    a three-letter prefix and the rare title word; the two systems alternate, query by
    query, so neither gets a warmer cache. The target: banded median <= 3x the floor.
    - Live recording through a real daemon (`python -m koinii serve`, SQLite): turns of
      6 events (start, two iterations with a block each, a block, finish) recorded one
      durable write per event (`SessionStore`), then batched (`SessionRecorder`, its
      final flush included): ms per recorded event at steady load. The target: batched
      <= 0.5 ms per event.
    - Finding a session on the sample transcripts (the repository's tests/data/sessions,
      and ../shared/data/transcripts beside it, or `--transcripts DIR`) with a build log
      of LOG_MB MiB beside them (tool output, as long sessions have): SAMPLE_SEARCHES,
      questions in a person's words written before the search was tuned, each naming
      the transcript that answers it. Per ranking (`banded`, the default, `lexical` and
      `relevance`; `hybrid` too where koinii[semantic] is installed): how often the right
      session comes first, the MRR@10, and the median and p90 of the search through
      `Introspection.list_sessions(q, limit=10)`. The target: first for 9 in 10, a
      median under 50 ms.
    - The import rate of Claude Code transcripts: the real third-party samples in
      ../shared/data/transcripts beside the repository when they are there, else the
      repository's own (tests/data/sessions), copied with fresh ids into many files,
      imported with `import_paths` (records/s); the row names which.

Run it::

    .venv/bin/python benchmarks/sessions.py              # 100,000 sessions, minutes
    .venv/bin/python benchmarks/sessions.py --quick      # 2,000 sessions, seconds
    .venv/bin/python benchmarks/sessions.py --sessions 20000 --turns 5

Progress goes to stderr and the table to stdout.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import random
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import koinii
from koinii.sessions import Introspection, SessionStore
from koinii.sessions.importing import import_paths
from koinii.sessions.search import RANKINGS, SNIPPET_TOKENS, words

SEED = 20_260_211
DEFAULT_SESSIONS = 100_000
QUICK_SESSIONS = 2_000
VOCABULARY = 20_000
LIMIT = 50
TITLE_WORD = "zephyrquartz"
SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in ("a", "e", "i", "o", "u", "ai", "ou")]
SHARED_SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"
OWN_SAMPLES = pathlib.Path(__file__).resolve().parents[1] / "tests" / "data" / "sessions"
LOG_MB = 4  # the build log's size, beside the samples

# (search, the transcript that answers it: a part of its file's name). Written as a
# person asks, before the search was tuned; those naming SHARED_ONLY transcripts run
# where the shared transcripts are.
SAMPLE_SEARCHES = [
    ("where did we add retry with backoff to the upload client", "sample_tools"),
    ("how did we make the uploader retry", "sample_tools"),
    ("commit message naming the retry", "sample_tools"),
    ("why does the invoices test fail one run in five", "v2.1.38_sample.jsonl"),
    ("flaky test on CI", "v2.1.38_sample.jsonl"),
    ("which tests call datetime.now", "v2.1.38_sample.jsonl"),
    ("fix the failing push tests", "codex_rollout-2026-02-23"),
    ("what was wrong with test_retry", "codex_rollout-2026-02-23"),
    ("the patch does not apply", "codex_rollout-2026-02-23"),
    ("which VAT rounding does Germany require", "rollout-2026-03-02"),
    ("did we check the german VAT rules", "rollout-2026-03-02"),
    ("why did the checkout tests fail", "5f0c2d1e"),
    ("switch the VAT rounding to Decimal", "5f0c2d1e"),
    ("banker's rounding in test_totals", "5f0c2d1e"),
    ("where did we summarise the payment module", "9c1e4b2a"),
    ("what wraps the Stripe adapter and its retry policy", "9c1e4b2a"),
    ("how did we start phoenix in the background", "spotter_tool_heavy"),
    ("xterm.js scrollback with tmux", "spotter_tool_heavy"),
    ("mix phx.server doesn't start", "spotter_short"),
    ("create a CLAUDE.md for the repository", "ccviewer"),
    ("the phoenix server will not boot", "spotter_short"),
    ("analyze this codebase and create CLAUDE.md", "ccviewer"),
]
SHARED_ONLY = ("spotter", "ccviewer")


def claude_code_samples() -> tuple[list[pathlib.Path], str]:
    """The transcripts the import is measured on, and whose they are."""
    real = sorted(SHARED_SAMPLES.glob("*.jsonl"))
    if real:
        return real, "real"
    return sorted(OWN_SAMPLES.glob("claude-code_*.jsonl")), "the repository's sample"


def progress(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


# --- the workload -------------------------------------------------------------------------


def vocabulary(rng: random.Random) -> list[str]:
    found: dict[str, None] = {}
    while len(found) < VOCABULARY:
        found["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))] = None
    return list(found)


class Text:
    """Zipf-distributed words, drawn in bulk (one draw per call is the slow part)."""

    def __init__(self, rng: random.Random, vocab: list[str]) -> None:
        self.rng = rng
        self.vocab = vocab
        weights = [1 / (rank + 1) for rank in range(len(vocab))]
        total, self.cumulative = 0.0, []
        for w in weights:
            total += w
            self.cumulative.append(total)
        self._pool: list[str] = []
        self._at = 0

    def words(self, n: int) -> str:
        if self._at + n > len(self._pool):
            self._pool = self.rng.choices(self.vocab, cum_weights=self.cumulative, k=200_000)
            self._at = 0
        self._at += n
        return " ".join(self._pool[self._at - n : self._at])


def sessions(count: int, turns: int, text: Text, rng: random.Random) -> Iterator[tuple]:
    """(external id, session fields, turn documents) for each synthetic session."""
    base = 1_700_000_000  # seconds; one session a minute, one turn a few seconds apart
    for number in range(count):
        start = base + number * 60
        title = text.words(rng.randint(3, 6))
        if number % 500 == 0:
            title += f" {TITLE_WORD}"
        session = {
            "channel": "bench",
            "title": title,
            "provider": "anthropic",
            "model": "claude-bench",
            "created_at": _iso(start),
        }
        docs = []
        for t in range(turns):
            iterations = []
            for _ in range(rng.randint(1, 2)):
                blocks = []
                if rng.random() < 0.33:
                    blocks.append({"tool": "Bash", "code": text.words(4), "result": "ok"})
                iterations.append(
                    {
                        "prose": text.words(rng.randint(20, 40)),
                        "thinking": text.words(rng.randint(10, 30)) if rng.random() < 0.5 else None,
                        "tokens": {"input": 1000, "cached": 800, "output": 60},
                        "blocks": blocks,
                    }
                )
            docs.append(
                {
                    "user_request": text.words(rng.randint(8, 16)),
                    "created_at": _iso(start + 3 * t),
                    "attempts": [{"status": "done", "iterations": iterations}],
                }
            )
        yield f"bench:{number}", session, docs


def _iso(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(seconds))


def queries(vocab: list[str]) -> list[str]:
    """Words by frequency rank: very common, common, mid, rare; pairs; a prefix; a title."""
    return [
        vocab[3],
        vocab[30],
        vocab[300],
        vocab[3_000],
        vocab[15_000],
        f"{vocab[10]} {vocab[200]}",
        f"{vocab[100]} {vocab[1_000]}",
        f"{vocab[50]} {vocab[500][:3]}",
        vocab[20][:3],
        TITLE_WORD,
    ]


# --- measuring ------------------------------------------------------------------------------


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter_ns()
    result = call()
    return (time.perf_counter_ns() - start) / 1e6, result


def floor_query(search: str) -> str:
    terms = [f'"{w}"' for w in words(search)]
    terms[-1] += "*"
    return " ".join(terms)


FLOOR_SQL = (
    "SELECT rowid, snippet(turn_search, -1, '', '', '…', ?) FROM turn_search "
    "WHERE turn_search MATCH ? ORDER BY bm25(turn_search) LIMIT ?"
)


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def transcript_copies(folder: pathlib.Path, copies: int, paths: list[pathlib.Path]) -> int:
    """Write `copies` of each sample with fresh ids; returns the records written."""
    id_pattern = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
    samples = [p.read_text() for p in paths]
    records = 0
    for _ in range(copies):
        for text in samples:
            fresh: dict[str, str] = {}

            def rename(match: re.Match, fresh: dict[str, str] = fresh) -> str:
                return fresh.setdefault(match.group(), str(uuid.uuid4()))

            renamed = id_pattern.sub(rename, text)
            session_id = str(uuid.uuid4())
            renamed = re.sub(r'"sessionId":"[^"]+"', f'"sessionId":"{session_id}"', renamed)
            (folder / f"{session_id}.jsonl").write_text(renamed)
            records += sum(1 for line in renamed.splitlines() if line.strip())
    return records


def run(args: argparse.Namespace) -> str:
    rng = random.Random(SEED)
    vocab = vocabulary(rng)
    text = Text(rng, vocab)
    scratch = pathlib.Path(tempfile.mkdtemp())
    path = args.db or str(scratch / "sessions.db")
    reuse = args.db is not None and os.path.exists(args.db)
    rows: list[tuple[str, str, str, str]] = []
    try:
        with koinii.open_kb(path) as kb:
            if reuse:
                progress(f"reusing the sessions in {path}")
                rows.append(("write: import_session, 1 tx/session", "(reused store)", "", ""))
            else:
                rows.append(write(kb, args, text, rng, path))
            search_rows, samples = measure_search(kb, vocab, args.rounds)
            rows += search_rows
            rows += measure_reads(kb, args.rounds)
        size = os.path.getsize(path) + _wal(path)
        rows.append(("store size", f"{size / 2**20:,.0f} MiB", "", ""))
        rows.append(measure_import(scratch, args.copies))
        rows += measure_recording(scratch, 20 if args.quick else 300)
        finding = measure_sample_search(scratch, args)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    header = (
        f"sessions benchmark: {args.sessions:,} sessions / {args.sessions * args.turns:,} turns, "
        f"limit {LIMIT}, {len(queries(vocab))} queries x {args.rounds} rounds "
        f"(Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{os.cpu_count()} CPUs)"
    )
    table = [("measure", "Koinii", "floor", "ratio"), *rows]
    width = [max(len(row[i]) for row in table) for i in range(4)]
    lines = [header, ""]
    for row in table:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, width)).rstrip())
    lines += ["", "per query (median ms, banded / floor, rows found banded / floor):", *samples]
    lines += ["", *finding]
    return "\n".join(lines)


def write(kb: Any, args: argparse.Namespace, text: Text, rng: random.Random, path: str) -> tuple:
    store = SessionStore(kb)
    progress(f"writing {args.sessions:,} sessions x {args.turns} turns to {path}")
    took = 0.0  # the writes only, not making up their text
    made = sessions(args.sessions, args.turns, text, rng)
    for n, (external, session, docs) in enumerate(made, 1):
        start = time.perf_counter()
        store.import_session(external, session, docs)
        took += time.perf_counter() - start
        if n % 10_000 == 0:
            progress(f"{n:,} sessions ({took:.0f} s writing)")
    rate = f"{args.sessions * args.turns / took:,.0f} turns/s"
    return ("write: import_session, 1 tx/session", rate, "", "")


def _wal(path: str) -> int:
    return os.path.getsize(path + "-wal") if os.path.exists(path + "-wal") else 0


def measure_search(kb: Any, vocab: list[str], rounds: int) -> tuple[list, list[str]]:
    reader = Introspection(kb)
    banded: dict[str, list[float]] = {}
    some: list[float] = []  # relevance: the seed's bands and the fifth (some of the words)
    floor: dict[str, list[float]] = {}
    found: dict[str, tuple[int, int]] = {}
    progress(f"searching: {len(queries(vocab))} queries x {rounds} rounds")
    for round_ in range(rounds + 1):
        for q in queries(vocab):
            ms, got = timed(lambda q=q: reader.list_sessions(q, limit=LIMIT, ranking="lexical"))
            fts = floor_query(q)
            fms, floor_rows = timed(
                lambda fts=fts: kb.read_records(
                    lambda db: db.execute(FLOOR_SQL, (SNIPPET_TOKENS, fts, LIMIT)).fetchall()
                )
            )
            sms, _ = timed(lambda q=q: reader.list_sessions(q, limit=LIMIT, ranking="relevance"))
            if round_ == 0:  # warm-up, and a check that both found what they should
                if not got and floor_rows:
                    raise SystemExit(f"the banded search found nothing for {q!r}")
                found[q] = (len(got), len(floor_rows))
                continue
            banded.setdefault(q, []).append(ms)
            some.append(sms)
            floor.setdefault(q, []).append(fms)
    every_banded = [v for vs in banded.values() for v in vs]
    every_floor = [v for vs in floor.values() for v in vs]
    median_b, median_f = statistics.median(every_banded), statistics.median(every_floor)
    rows = [
        (
            "ranked search, median",
            f"{median_b:.2f} ms",
            f"{median_f:.2f} ms",
            f"{median_b / median_f:.2f}x (target <= 3x)",
        ),
        (
            "ranked search, p99",
            f"{p99(every_banded):.2f} ms",
            f"{p99(every_floor):.2f} ms",
            f"{p99(every_banded) / p99(every_floor):.2f}x",
        ),
        (
            "with some of the words (relevance), median / p99",
            f"{statistics.median(some):.2f} / {p99(some):.2f} ms",
            "",
            "",
        ),
    ]
    samples = [
        f"  {q!r:32} {statistics.median(banded[q]):8.2f} / {statistics.median(floor[q]):8.2f}"
        f"   {found[q][0]:>3} / {found[q][1]:>3}"
        for q in banded
    ]
    return rows, samples


def measure_reads(kb: Any, rounds: int) -> list[tuple[str, str, str, str]]:
    reader = Introspection(kb)
    ids = [row["id"] for row in reader.list_sessions(limit=rounds * 5)]
    index = [timed(lambda: reader.list_sessions(limit=LIMIT))[0] for _ in range(rounds * 5)]
    read = [timed(lambda i=i: reader.read_session(i))[0] for i in ids]
    get = [timed(lambda i=i: reader.get_session(i[:8]))[0] for i in ids]
    return [
        ("list_sessions() newest 50, median", f"{statistics.median(index):.2f} ms", "", ""),
        ("get_session(8-char prefix), median", f"{statistics.median(get):.2f} ms", "", ""),
        ("read_session(id), median", f"{statistics.median(read):.2f} ms", "", ""),
    ]


def build_log(megabytes: int) -> str:
    """A long build's output: test runs, retries, warnings (the words people search)."""
    rng = random.Random(SEED)
    lines = [
        "tests/test_{0}.py::test_{1} PASSED",
        "tests/test_{0}.py::test_{1} FAILED: assert {2} == {3}",
        "retrying upload of {0}.tar.gz (attempt {2}) after a timeout",
        "warning: rounding {2}.{3} to {2} in the {0} module",
        "server started on port {3}; checking the {1} endpoint",
        "compiling {0}/{1}.ex ({2} files)",
    ]
    names = ["payments", "checkout", "invoices", "uploader", "push", "phoenix", "client"]
    out, size = [], 0
    while size < megabytes * 2**20:
        line = rng.choice(lines).format(
            rng.choice(names), rng.choice(names), rng.randint(1, 99), rng.randint(100, 9999)
        )
        out.append(line)
        size += len(line) + 1
    return "\n".join(out)


def sample_folders(given: str | None) -> tuple[list[pathlib.Path], bool]:
    """The sample transcripts searched, and whether the shared ones are among them."""
    shared = pathlib.Path(given) if given else SHARED_SAMPLES
    folders = [OWN_SAMPLES] + ([shared] if shared.is_dir() else [])
    return folders, len(folders) > 1


def measure_sample_search(work: pathlib.Path, args: argparse.Namespace) -> list[str]:
    """Finding the session that answers a question, on the sample transcripts (module
    docstring): a table per ranking, then each search's place per ranking."""
    from koinii.kb import semantic

    folders, shared = sample_folders(args.transcripts)
    searches = [
        (q, name) for q, name in SAMPLE_SEARCHES if shared or not name.startswith(SHARED_ONLY)
    ]
    rankings = [r for r in ("banded", "lexical", "relevance") if r in RANKINGS]
    rankings += ["hybrid"] if semantic.installed() else []
    rounds = 3 if args.quick else 10
    progress(f"searching the sample transcripts: {len(searches)} searches x {rounds} rounds")
    with koinii.open_kb(str(work / "samples.db")) as kb:
        store = SessionStore(kb)
        reports = import_paths(store, folders)
        log = store.start_session(title="nightly build", created_at="2026-01-15T00:00:00Z")
        turn = store.start_turn(log, "run the nightly build", created_at="2026-01-15T00:00:01Z")
        iteration = store.record_iteration(turn, prose="Running the build.")
        store.record_block(iteration, tool="Bash", code="make ci", stdout=build_log(LOG_MB))
        store.finish_turn(turn, "done", "complete")
        ids = {r["path"]: r["session_id"] for r in reports if r.get("session_id")}
        reader = Introspection(kb)
        count = len(reader.list_sessions())
        table = [
            f"finding a session: {count} sessions from "
            + " and ".join(_shown(folder) for folder in folders)
            + f" and a {LOG_MB} MiB build log, {len(searches)} searches, limit 10",
            "",
            "| ranking | right session first | MRR@10 | median ms | p90 ms |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        places: dict[str, list[str]] = {q: [] for q, _ in searches}
        for ranking in rankings:
            firsts, mrr, times = 0, 0.0, []
            for search, name in searches:
                wanted = {i for path, i in ids.items() if name in path}
                for round_ in range(rounds + 1):
                    ms, rows = timed(
                        lambda q=search, r=ranking: reader.list_sessions(q, limit=10, ranking=r)
                    )
                    times += [ms] if round_ else []  # the first round warms up
                found = [i for i, row in enumerate(rows) if row["id"] in wanted]
                place = found[0] + 1 if found else None
                firsts += place == 1
                mrr += 1 / place if place else 0.0
                places[search].append(str(place or "-"))
            table.append(
                f"| {ranking} | {firsts} of {len(searches)} ({firsts / len(searches):.2f}) "
                f"| {mrr / len(searches):.2f} | {statistics.median(times):.1f} "
                f"| {sorted(times)[int(0.9 * (len(times) - 1))]:.1f} |"
            )
    table += ["", "each search's place (" + ", ".join(rankings) + "):"]
    table += [f"  {q!r:62} {' '.join(p):>8}" for q, p in places.items()]
    return table


def _shown(folder: pathlib.Path) -> str:
    """A folder as the table names it: relative to the repository where it can be."""
    try:
        return str(folder.relative_to(OWN_SAMPLES.parents[2]))
    except ValueError:
        return folder.name


def measure_import(work: pathlib.Path, copies: int) -> tuple[str, str, str, str]:
    folder = work / "transcripts"
    folder.mkdir(exist_ok=True)
    paths, whose = claude_code_samples()
    records = transcript_copies(folder, copies, paths)
    progress(
        f"importing {copies * len(paths):,} {whose} Claude Code transcripts ({records:,} records)"
    )
    with koinii.open_kb(str(work / "imports.db")) as kb:
        store = SessionStore(kb)
        took, reports = timed(lambda: import_paths(store, [folder]))
    assert all(r["status"] == "new" for r in reports), {r["status"] for r in reports}
    return (
        f"import {whose} Claude Code transcripts ({len(reports):,} files)",
        f"{records / (took / 1000):,.0f} records/s",
        "",
        "",
    )


def record_turns(writer: Any, session_id: str, turns: int) -> int:
    """`turns` live turns of 6 events each through `writer` (a store or a recorder)."""
    for n in range(turns):
        turn = writer.start_turn(session_id, f"request {n}: look at the deploy logs")
        for step in range(2):
            writer.record_iteration(
                turn,
                prose=f"step {step}: reading the log",
                tokens={"input": 1200, "cached": 800, "output": 90},
                blocks=[{"tool": "Bash", "code": "tail -n 50 deploy.log", "result": "ok"}],
            )
        iteration = writer.record_iteration(turn, prose="done")
        writer.record_block(iteration, tool="Bash", code="make deploy", stdout="deployed")
        writer.finish_turn(turn, "done", "complete", answer="deployed")
    return turns * 6


def measure_recording(scratch: pathlib.Path, turns: int) -> list[tuple[str, str, str, str]]:
    from wire import koinii_daemon  # the wire benchmark's daemon runner (benchmarks/)

    progress(f"recording {turns:,} live turns through a daemon, per write and batched")
    with koinii_daemon(str(scratch)) as server, koinii.connect(server.url) as client:
        store = SessionStore(client)
        direct = store.start_session(title="recorded one write per event", channel="api")
        record_turns(store, direct, 5)  # warm the connection and the daemon
        start = time.perf_counter()
        events = record_turns(store, direct, turns)
        per_write = (time.perf_counter() - start) * 1000 / events
        recorder = store.recorder()
        batched = recorder.start_session(title="recorded in batches", channel="api")
        record_turns(recorder, batched, 5)
        recorder.flush()
        start = time.perf_counter()
        events = record_turns(recorder, batched, turns)
        recorder.flush()
        per_event = (time.perf_counter() - start) * 1000 / events
    return [
        ("record: one write per event", f"{per_write:.2f} ms/event", "", ""),
        (
            f"record: batched ({recorder.batch_events} events/batch)",
            f"{per_event:.3f} ms/event",
            "0.5 ms (target)",
            f"{per_event / 0.5:.2f}x",
        ),
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (seconds)")
    parser.add_argument("--sessions", type=int, metavar="N", help="sessions to write")
    parser.add_argument("--turns", type=int, default=10, help="turns per session (default 10)")
    parser.add_argument("--rounds", type=int, help="timed rounds per query (default 20)")
    parser.add_argument("--copies", type=int, help="copies of each sample transcript")
    parser.add_argument(
        "--db", help="the sessions store: written here and kept; if it exists, reused as is"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    parser.add_argument(
        "--transcripts", help="more sample transcripts (default: ../shared/data/transcripts)"
    )
    parser.add_argument(
        "--finding-only", action="store_true", help="only finding a session on the samples"
    )
    args = parser.parse_args(argv)
    args.sessions = args.sessions or (QUICK_SESSIONS if args.quick else DEFAULT_SESSIONS)
    args.rounds = args.rounds or (5 if args.quick else 20)
    args.copies = args.copies or (20 if args.quick else 300)
    if args.sessions < 100 or args.turns < 1:
        parser.error("--sessions must be at least 100 and --turns at least 1")
    if args.finding_only:
        scratch = pathlib.Path(tempfile.mkdtemp())
        try:
            print("Koinii sessions benchmark\n\n" + "\n".join(measure_sample_search(scratch, args)))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return
    print(run(args))


if __name__ == "__main__":
    main()
