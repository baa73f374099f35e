"""Wire benchmark: the Koinii daemon over HTTP, against the stack it runs on.

What is measured (every server is started here on a free 127.0.0.1 port, with a
temporary database, and stopped at the end; no traffic leaves the loopback interface)

1. One client's durable assert round trip: ``Client.assert_`` of ~3,000 distinct
   sentences, one after another, each timed with ``time.perf_counter_ns``; p50 / p99.
2. Load: 1, 4 and 16 client *processes*, each with its own client and keep-alive
   connection, asserting distinct sentences for a fixed time (default 5 s per side) from
   a common start; total durable writes/s, p50 / p99 over every call, and the server
   process's CPU time (user + system, psutil) per write. A fresh daemon per level. The
   same worker processes load Koinii and the ceiling (4) in four rounds, Koinii /
   ceiling / ceiling / Koinii, so that drift in the machine's speed during a level hits
   both sides alike.
3. Feed latency: a subscriber process long-polls (``poll(..., wait_ms=20000)`` in a
   loop) while this process asserts ``(ping ItemN <time_ns>)`` every 5 ms. Latency is
   the subscriber's ``time.time_ns()`` when the poll returns minus the timestamp carried
   in the sentence (one machine, one clock); p50 / p99 over ~500 events.
4. The framework ceiling: a bare Starlette app with one POST route that parses the JSON
   body and answers ``{"ok": true, "result": 1}``, under uvicorn with uvloop and
   httptools like the daemon, hit through the client's own transport
   (``koinii.client.sync._Transport``) with the same bodies as 1 and 2, at the same load
   levels. It is the reference column of rows 1 and 2; the 16-process target is Koinii's
   rate as a fraction of the ceiling's.
5. PostgreSQL ``LISTEN/NOTIFY`` on loopback (psycopg 3; ``$KOINII_TEST_PG``, else
   127.0.0.1:5432, user and database postgres, trust auth): a listener process and
   ``pg_notify`` with a ``time_ns`` payload every 5 ms. It is the reference column of row 3, or
   "n/a (PostgreSQL not reachable)".

Durable is what the daemon promises before it replies: the write is in a committed SQLite
transaction (WAL, synchronous=NORMAL), so it survives kill -9 of the daemon. Writes that
arrive together share one transaction (group commit, docs/daemon.md).

Run it (about a minute on a 2-core machine)::

    .venv/bin/python benchmarks/wire.py               # 5 s per load phase
    .venv/bin/python benchmarks/wire.py --quick       # a few-second smoke run
    .venv/bin/python benchmarks/wire.py --seconds 10  # longer load phases

Progress goes to stderr and the table to stdout. Clients and servers share the
machine's cores, so absolute numbers move between machines; the ratios to the reference
column are the part to compare.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import queue
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from importlib.metadata import version
from multiprocessing.process import BaseProcess
from typing import Any

import psutil

import koinii
from daemon_port import port_from_log  # beside this script
from koinii.client.protocol import Call, endpoint
from koinii.client.sync import _Transport

HOST = "127.0.0.1"
LOAD_CONTEXT = "CxBench"
FEED_CONTEXT = "CxFeed"
CEILING_PATH = "/x"
# the tests' server (tests/conftest.py), connect_timeout=3 added where it is used
PG_DSN = os.environ.get("KOINII_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
PG_CHANNEL = "koinii_wire_bench"
LEVELS = (1, 4, 16)  # client processes in the load phase
WARMUP_CALLS = 50  # untimed calls before any timed series
PACE_NS = 5_000_000  # one feed write every 5 ms
POLL_WAIT_MS = 20_000
START_TIMEOUT_S = 15.0  # a server must answer within this
BARRIER_TIMEOUT_S = 60.0  # every worker must be connected and warm within this
STOP_TIMEOUT_S = 15.0  # after SIGTERM, before SIGKILL
SPAWN = multiprocessing.get_context("spawn")


@dataclass(frozen=True)
class Sizes:
    round_trips: int  # timed sequential calls (row 1)
    seconds: float  # length of each load phase (row 2)
    feed_events: int  # timed events (row 3)
    feed_warmup: int  # untimed events before them

    @staticmethod
    def for_run(quick: bool, seconds: float | None) -> Sizes:
        if quick:
            return Sizes(200, seconds or 0.5, 50, 5)
        return Sizes(3_000, seconds or 5.0, 500, 20)


# ================================================================ statistics


def p50_ms(samples_ns: Sequence[int]) -> float:
    return statistics.median(samples_ns) / 1e6


def p99_ms(samples_ns: Sequence[int]) -> float:
    return statistics.quantiles(samples_ns, n=100)[98] / 1e6


@dataclass(frozen=True)
class Load:
    """What one load level produced: every call's latency, the summed rate, and the CPU
    time the server process spent per call (user + system)."""

    samples_ns: list[int]
    per_second: float
    server_cpu_us: float


@dataclass(frozen=True)
class Server:
    """A running server: where to reach it, and its process (to read its CPU time)."""

    url: str
    pid: int

    def cpu_seconds(self) -> float:
        times = psutil.Process(self.pid).cpu_times()
        return times.user + times.system


# ================================================================ servers


def wait_until_answering(probe: Callable[[], Any], alive: Callable[[], bool], what: str) -> None:
    """Call `probe` until it succeeds; give up when the server dies or the time is up."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"{what} exited before it answered")
        try:
            probe()
            return
        except koinii.Unavailable:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not answer within {START_TIMEOUT_S:.0f} s")


@contextmanager
def koinii_daemon(workdir: str) -> Iterator[Server]:
    """A fresh `python -m koinii serve` on a new database."""
    folder = tempfile.mkdtemp(prefix="koinii-", dir=workdir)
    command = [sys.executable, "-m", "koinii", "serve", "--host", HOST, "--port", "0"]
    command += ["--db", os.path.join(folder, "koinii.db")]
    log_path = os.path.join(folder, "koinii.log")
    with open(log_path, "wb") as log:
        daemon = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            try:
                port = port_from_log(log_path, daemon, START_TIMEOUT_S)
            except RuntimeError as exc:
                raise RuntimeError(f"{exc}; its log ends:\n{log_tail(log_path)}") from None
            yield Server(f"http://{HOST}:{port}", daemon.pid)
        finally:
            daemon.terminate()  # SIGTERM: a graceful shutdown that closes the store
            try:
                daemon.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()


def log_tail(path: str, lines: int = 20) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return "".join(f.readlines()[-lines:])


def serve_ceiling(ports: Any) -> None:
    """The ceiling (runs in a child process): one JSON POST route on the daemon's stack,
    on a port the system chooses (port 0), which it puts on `ports` (a queue)."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def bare(request: Request) -> JSONResponse:
        await request.json()  # read and parse the body, as every daemon operation does
        return JSONResponse({"ok": True, "result": 1})

    app = Starlette(routes=[Route(CEILING_PATH, bare, methods=["POST"])])
    listening = socket.socket()
    listening.bind((HOST, 0))
    ports.put(listening.getsockname()[1])
    config = uvicorn.Config(
        app,
        loop="uvloop",
        http="httptools",
        lifespan="off",
        access_log=False,
        log_level="warning",
    )
    uvicorn.Server(config).run(sockets=[listening])


@contextmanager
def ceiling_server() -> Iterator[Server]:
    """The bare Starlette app in a child process."""
    ports = SPAWN.Queue()
    with child_processes(serve_ceiling, [(ports,)]) as (server,):
        url = f"http://{HOST}:{ports.get(timeout=START_TIMEOUT_S)}"
        probe = _Transport(endpoint(url, None), 1)
        try:
            wait_until_answering(
                lambda: probe.post(CEILING_PATH, b"{}"), server.is_alive, "the ceiling server"
            )
        finally:
            probe.close()
        yield Server(url, server.pid)


@contextmanager
def child_processes(target: Callable[..., None], args: Sequence[tuple]) -> Iterator[list]:
    """Spawned processes, one per argument tuple; always stopped on the way out."""
    children = [SPAWN.Process(target=target, args=a, daemon=True) for a in args]
    try:
        for child in children:
            child.start()
        yield children
    finally:
        for child in children:
            stop_process(child)


def stop_process(child: BaseProcess) -> None:
    """Let a finished child exit; SIGTERM one still running, then SIGKILL if it lingers."""
    if child.pid is None:  # never started
        return
    child.join(timeout=2)
    if child.is_alive():
        child.terminate()
        child.join(timeout=STOP_TIMEOUT_S)
    if child.is_alive():
        child.kill()
        child.join()


# ================================================================ calls


@contextmanager
def writer(kind: str, url: str) -> Iterator[Callable[[str], Any]]:
    """One durable Koinii assert per call, or the same body posted to the ceiling."""
    if kind == "koinii":
        with koinii.connect(url) as client:
            yield lambda sentence: client.assert_(sentence, LOAD_CONTEXT)
        return
    transport = _Transport(endpoint(url, None), 30)

    def body(sentence: str) -> bytes:  # encoded as the client encodes an operation's
        return Call("x", {"sentence": sentence, "context": LOAD_CONTEXT}, id).request(None)[0]

    try:
        yield lambda sentence: transport.post(CEILING_PATH, body(sentence))
    finally:
        transport.close()


def load_sentence(worker: int, n: int) -> str:
    return f"(rel Writer{worker} Item{n})"


def warm_up(call: Callable[[str], Any], worker: int) -> None:
    for n in range(WARMUP_CALLS):
        call(f"(rel Warmer{worker} Item{n})")


def round_trips(kind: str, url: str, count: int) -> list[int]:
    """Row 1: `count` sequential calls from this process, each timed."""
    clock = time.perf_counter_ns
    samples = []
    with writer(kind, url) as call:
        warm_up(call, 0)
        for n in range(count):
            start = clock()
            call(load_sentence(0, n))
            samples.append(clock() - start)
    return samples


# Each load level runs in rounds, Koinii and the ceiling taking turns in the order
# A B B A: on a machine whose speed drifts (shared cores, other tenants), a drift that is
# linear over the level hits both sides alike, and the ratio stays honest.
ROUNDS = ("koinii", "ceiling", "ceiling", "koinii")


def load_worker(urls: dict[str, str], worker: int, seconds: float, barrier, results) -> None:
    """Row 2, in a child process: connect to both servers and warm up, then for each
    round wait for all the workers and write to that round's server until its time is up."""
    clock = time.perf_counter_ns
    try:
        with writer("koinii", urls["koinii"]) as mine, writer("ceiling", urls["ceiling"]) as ref:
            calls = {"koinii": mine, "ceiling": ref}
            for call in calls.values():
                warm_up(call, worker)
            written = dict.fromkeys(calls, 0)
            for kind in ROUNDS:
                call = calls[kind]
                samples: list[int] = []
                barrier.wait(timeout=BARRIER_TIMEOUT_S)
                began = start = clock()
                deadline = began + int(seconds * 1e9)
                while start < deadline:
                    call(load_sentence(worker, written[kind] + len(samples)))
                    end = clock()
                    samples.append(end - start)
                    start = end
                written[kind] += len(samples)
                results.put(("ok", (kind, samples, start - began)))
    except Exception as exc:
        barrier.abort()
        results.put(("error", f"worker {worker}: {exc!r}"))


def run_load(servers: dict[str, Server], processes: int, seconds: float) -> dict[str, Load]:
    """`processes` writers released together for each round. A side's writes/s is the sum
    of every worker's rate in a round, averaged over that side's rounds; each side writes
    for `seconds` in all. A side's server CPU per call is the CPU time its server process
    spent during its rounds over the calls they made. Returns {"koinii": Load, "ceiling":
    Load}."""
    barrier = SPAWN.Barrier(processes + 1)
    results = SPAWN.Queue()
    each = seconds / ROUNDS.count("koinii")
    urls = {kind: server.url for kind, server in servers.items()}
    args = [(urls, w, each, barrier, results) for w in range(processes)]
    samples: dict[str, list[int]] = {kind: [] for kind in urls}
    rate_sum = dict.fromkeys(urls, 0.0)
    server_cpu = dict.fromkeys(urls, 0.0)
    with child_processes(load_worker, args):
        for side in ROUNDS:
            cpu_before = servers[side].cpu_seconds()
            # A broken barrier means a worker failed or was late: its report says which.
            with suppress(threading.BrokenBarrierError):
                barrier.wait(timeout=BARRIER_TIMEOUT_S)
            for _ in range(processes):
                kind, worker_samples, ns = receive(results, each + BARRIER_TIMEOUT_S)
                samples[kind] += worker_samples
                rate_sum[kind] += len(worker_samples) / (ns / 1e9) if ns else 0.0
            server_cpu[side] += servers[side].cpu_seconds() - cpu_before
    return {
        kind: Load(
            samples[kind],
            rate_sum[kind] / ROUNDS.count(kind),
            server_cpu[kind] / len(samples[kind]) * 1e6 if samples[kind] else 0.0,
        )
        for kind in urls
    }


def receive(results, timeout: float) -> Any:
    """The next ("ok", payload) from a child, or an error naming what went wrong."""
    try:
        status, payload = results.get(timeout=timeout)
    except queue.Empty:
        raise RuntimeError(f"a child process did not report within {timeout:.0f} s") from None
    if status != "ok":
        raise RuntimeError(payload)
    return payload


# ================================================================ one-way latency


def paced(send: Callable[[int], Any], count: int) -> None:
    """Call `send(n)` for n in range(count), one every PACE_NS (never catching up in bursts)."""
    clock = time.perf_counter_ns
    due = clock()
    for n in range(count):
        pause = due - clock()
        if pause > 0:
            time.sleep(pause / 1e9)
        send(n)
        due = max(due + PACE_NS, clock())


def listen_timeout(count: int) -> float:
    """How long a listener waits for `count` paced events before it gives up (bounded)."""
    return count * PACE_NS / 1e9 + 30.0


def one_way(
    listener: Callable[..., None], args: tuple, send: Callable[[int], Any], count: int, warmup: int
) -> list[int]:
    """Start `listener(*args, count, ready, results)`, send `count` events, collect latencies."""
    ready = SPAWN.Event()
    results = SPAWN.Queue()
    with child_processes(listener, [(*args, count, ready, results)]):
        if not ready.wait(timeout=BARRIER_TIMEOUT_S):
            raise RuntimeError("the listener did not get ready")
        paced(send, count)
        latencies = receive(results, listen_timeout(count) + POLL_WAIT_MS / 1000)
    if len(latencies) < count:
        raise RuntimeError(f"the listener got {len(latencies)} of {count} events")
    return latencies[warmup:]


def sent_ns(sentence: str) -> int:
    """The send timestamp of `(ping ItemN <time_ns>)`."""
    return int(sentence.rstrip(")").rsplit(" ", 1)[1])


def feed_subscriber(url: str, count: int, ready, results) -> None:
    """Row 3, in a child process: watch, then long-poll until `count` pings arrived."""
    latencies: list[int] = []
    try:
        with koinii.connect(url) as client:
            subscription = client.watch()
            token, cursor = subscription["token"], subscription["cursor"]
            ready.set()
            deadline = time.monotonic() + listen_timeout(count)
            while len(latencies) < count and time.monotonic() < deadline:
                reply = client.poll(token, cursor, wait_ms=POLL_WAIT_MS)
                received = time.time_ns()
                cursor = reply["cursor"]
                latencies += [
                    received - sent_ns(entry["sentence"])
                    for event in reply["events"]
                    for entry in event.added
                ]
        results.put(("ok", latencies))
    except Exception as exc:
        results.put(("error", f"feed subscriber: {exc!r}"))


def feed_latency(url: str, sizes: Sizes) -> list[int]:
    with koinii.connect(url) as client:
        return one_way(
            feed_subscriber,
            (url,),
            lambda n: client.assert_(f"(ping Item{n} {time.time_ns()})", FEED_CONTEXT),
            sizes.feed_warmup + sizes.feed_events,
            sizes.feed_warmup,
        )


def pg_listener(count: int, ready, results) -> None:
    """Row 3's reference, in a child process: LISTEN, then take `count` notifications."""
    import psycopg

    try:
        with psycopg.connect(PG_DSN, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f"LISTEN {PG_CHANNEL}")
            ready.set()
            latencies = [
                time.time_ns() - int(note.payload)
                for note in conn.notifies(timeout=listen_timeout(count), stop_after=count)
            ]
        results.put(("ok", latencies))
    except Exception as exc:
        results.put(("error", f"PostgreSQL listener: {exc!r}"))


def pg_unreachable() -> str | None:
    """Why PostgreSQL cannot be the reference here, or None when it can."""
    try:
        import psycopg
    except ImportError:
        return "n/a (psycopg not installed)"
    try:
        psycopg.connect(PG_DSN, connect_timeout=3).close()
    except (psycopg.Error, OSError):
        return "n/a (PostgreSQL not reachable)"
    return None


def notify_latency(sizes: Sizes) -> list[int]:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True, connect_timeout=3) as conn:

        def send(n: int) -> None:
            conn.execute("SELECT pg_notify(%s, %s)", (PG_CHANNEL, str(time.time_ns())))

        return one_way(
            pg_listener, (), send, sizes.feed_warmup + sizes.feed_events, sizes.feed_warmup
        )


# ================================================================ the run


@dataclass
class Results:
    koinii_trips: list[int]
    ceiling_trips: list[int]
    koinii_load: dict[int, Load]
    ceiling_load: dict[int, Load]
    feed: list[int]
    notify: list[int] | None
    notify_missing: str | None


def measure(sizes: Sizes) -> Results:
    """Koinii and the ceiling take turns phase by phase (and round by round within a load
    level), so drift in the machine hits both.

    The ceiling stays up throughout (idle between its turns); Koinii gets a fresh daemon
    and database for every phase, so no phase inherits another's store.
    """
    koinii_load: dict[int, Load] = {}
    ceiling_load: dict[int, Load] = {}
    with tempfile.TemporaryDirectory(prefix="koinii-wire-") as workdir, ceiling_server() as bare:
        progress(f"{sizes.round_trips:,} sequential calls, Koinii then the ceiling")
        with koinii_daemon(workdir) as daemon:
            koinii_trips = round_trips("koinii", daemon.url, sizes.round_trips)
        ceiling_trips = round_trips("ceiling", bare.url, sizes.round_trips)
        for n in LEVELS:
            progress(
                f"{n} client process(es), {sizes.seconds:g} s each side, in rounds "
                + " ".join(ROUNDS)
            )
            with koinii_daemon(workdir) as daemon:
                loads = run_load({"koinii": daemon, "ceiling": bare}, n, sizes.seconds)
            koinii_load[n], ceiling_load[n] = loads["koinii"], loads["ceiling"]
        progress(f"Koinii feed latency over {sizes.feed_events} events")
        with koinii_daemon(workdir) as daemon:
            feed = feed_latency(daemon.url, sizes)
    missing = pg_unreachable()
    notify = None
    if missing is None:
        progress(f"PostgreSQL LISTEN/NOTIFY over {sizes.feed_events} notifications")
        notify = notify_latency(sizes)
    return Results(koinii_trips, ceiling_trips, koinii_load, ceiling_load, feed, notify, missing)


# ================================================================ the table

TARGET_TRIP_P50_MS = 1.0
TARGET_CEILING_FRACTION = 0.7
TARGET_FEED_P50_MS = 1.0
TARGET_FEED_P99_MS = 5.0


def ms(value: float) -> str:
    return f"{value:.3f}"


def rate(value: float) -> str:
    return f"{value:,.0f}"


def ratio(mine: float, reference: float) -> str:
    return f"{mine / reference:.2f}x" if reference else ""


def verdict(ok: bool) -> str:
    return "pass" if ok else "MISS"


def latency_rows(
    mine: Sequence[int],
    ref: Sequence[int] | None,
    missing: str,
    targets: tuple[float | None, float | None],
) -> list[list[str]]:
    """A p50 row and a p99 row: label, target, Koinii, verdict, reference, Koinii/reference."""
    rows = []
    for name, stat, target in (("p50", p50_ms, targets[0]), ("p99", p99_ms, targets[1])):
        value = stat(mine)
        row = [f"   {name} ms", "" if target is None else f"<= {target:g}", ms(value)]
        row.append("" if target is None else verdict(value <= target))
        row += [missing, ""] if ref is None else [ms(stat(ref)), ratio(value, stat(ref))]
        rows.append(row)
    return rows


def load_rows(n: int, mine: Load, ref: Load) -> list[list[str]]:
    """A writes/s row and a p50 / p99 row for one load level; the top level has the target."""
    clients = f"   {n} process{'es' if n > 1 else ''}"
    fraction = mine.per_second / ref.per_second if ref.per_second else 0.0
    top = n == LEVELS[-1]
    target = f">= {TARGET_CEILING_FRACTION:g}x ref" if top else ""
    check = verdict(fraction >= TARGET_CEILING_FRACTION) if top else ""
    both = [f"{ms(p50_ms(s.samples_ns))} / {ms(p99_ms(s.samples_ns))}" for s in (mine, ref)]
    rates = [rate(mine.per_second), check, rate(ref.per_second)]
    cpu = [f"{mine.server_cpu_us:.0f}", "", f"{ref.server_cpu_us:.0f}"]
    return [
        [f"{clients}, writes/s", target, *rates, ratio(mine.per_second, ref.per_second)],
        [f"{clients}, p50 / p99 ms", "", both[0], "", both[1], ""],
        [f"{clients}, server CPU us/write", "", *cpu, ratio(mine.server_cpu_us, ref.server_cpu_us)],
    ]


def build_table(r: Results, sizes: Sizes) -> str:
    """Sections are one-cell rows; the reference column is the ceiling (4) or PostgreSQL (5)."""
    rows = [["measure", "target", "Koinii", "", "reference", "Koinii/ref"]]
    rows.append(["1  One client's durable assert round trip; reference (4): the bare JSON route"])
    rows += latency_rows(r.koinii_trips, r.ceiling_trips, "", (TARGET_TRIP_P50_MS, None))
    rows.append(
        [
            f"2  Durable asserts from N client processes for {sizes.seconds:g} s; "
            "reference (4): the bare JSON route"
        ]
    )
    for n in LEVELS:
        rows += load_rows(n, r.koinii_load[n], r.ceiling_load[n])
    rows.append(
        ["3  Feed, write -> long poll in another process; reference (5): PostgreSQL NOTIFY"]
    )
    rows += latency_rows(
        r.feed, r.notify, r.notify_missing or "", (TARGET_FEED_P50_MS, TARGET_FEED_P99_MS)
    )
    return render(rows, right={2, 4, 5})


def render(rows: list[list[str]], right: set[int]) -> str:
    """Aligned columns; a one-cell row is a section title printed as it is."""
    columns = len(rows[0])
    widths = [max(len(row[i]) for row in rows if len(row) == columns) for i in range(columns)]
    lines = []
    for k, row in enumerate(rows):
        if len(row) == 1:
            lines.append(row[0])
            continue
        cells = [
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if k == 0:
            lines.append("-" * len(lines[0]))
    return "\n".join(lines)


def header(sizes: Sizes) -> str:
    stack = ", ".join(
        f"{name} {version(name)}" for name in ("uvicorn", "starlette", "uvloop", "httptools")
    )
    return "\n".join(
        [
            f"Koinii wire benchmark: {sizes.round_trips:,} sequential asserts, "
            f"{'/'.join(map(str, LEVELS))} client processes x {sizes.seconds:g} s, "
            f"{sizes.feed_events} feed events every {PACE_NS / 1e6:g} ms",
            f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
            f"{os.cpu_count()} CPUs; koinii {koinii.__version__}, {stack}",
        ]
    )


def notes(elapsed: float) -> str:
    return "\n".join(
        [
            "(4) the ceiling: a bare Starlette POST route that parses the JSON body, on the "
            "daemon's stack",
            "    (uvicorn, uvloop, httptools), called through the same client transport with "
            "the same bodies.",
            "(5) PostgreSQL LISTEN/NOTIFY on 127.0.0.1 (psycopg 3): pg_notify in autocommit, "
            "a listener process.",
            "Koinii/ref above 1 is slower on latency rows and faster on writes/s rows; "
            "pass/MISS is Koinii vs its target.",
            "Durable: committed in SQLite (WAL, synchronous=NORMAL) before the reply; writes "
            "that arrive together share a commit.",
            f"Latencies per call with perf_counter_ns after {WARMUP_CALLS} untimed warm-up "
            "calls; under load each process",
            "has its own connections; the load rounds run Koinii, ceiling, ceiling, Koinii; "
            "writes/s sums each process's",
            "rate in a round, averaged over a side's rounds; p50/p99 cover every call. Server CPU "
            "is the server process's",
            "user + system time in its side's rounds over the writes they made: clients and "
            "servers share the cores, so",
            "where they are all busy, writes/s follows the CPU each write costs on both ends.",
            "Feed: the subscriber's time.time_ns() when its poll returns minus the time_ns the "
            "write carried.",
            f"Whole run: {elapsed:.0f} s.",
        ]
    )


def progress(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny smoke run (seconds)")
    parser.add_argument(
        "--seconds",
        type=float,
        metavar="N",
        help="length of each load phase (default 5; 0.5 with --quick)",
    )
    args = parser.parse_args(argv)
    if args.seconds is not None and not 0 < args.seconds <= 600:
        parser.error("--seconds must be above 0 and at most 600")
    sizes = Sizes.for_run(args.quick, args.seconds)
    started = time.perf_counter()
    results = measure(sizes)
    elapsed = time.perf_counter() - started
    print("\n".join([header(sizes), "", build_table(results, sizes), "", notes(elapsed)]))


if __name__ == "__main__":
    main()
