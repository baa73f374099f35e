"""Resilience benchmark: each attack of issue 17 against a daemon, while another client
measures what everyone else gets.

What is measured. For each attack a fresh daemon is started on a free 127.0.0.1 port with
a temporary SQLite store (and PostgreSQL for the connection-loss row, when reachable). A
prober *process* — so it shares no interpreter lock with the attacker — runs throughout:
every 10 ms a `GET /health` and a one-write round trip (`Client.assert_` of a new
sentence), each timed with `time.perf_counter`. The table gives, per attack, what the
attack was answered and how long it held its own request, and the prober's p50 / p99
for both calls while the attack ran (the "quiet" row: no attack), with how many of its
calls failed. The attacks:

- **cross-rule write**: one 400-fact edit under `(implies (and (s ?x) (s ?y)) (t ?x ?y))`
  (160,000 derivations), sent again and again for the phase;
- **15 MiB goal**: a query whose goal is a 15 MiB string, again and again;
- **3-literal join**: `(r ?a ?b) (r ?b ?c) (r ?c ?d)` over 1,600 facts (2.5 M solutions),
  again and again;
- **join, limit 1**: the same join with `limit: 1`;
- **SIGTERM, consumers attached**: a `koinii tail` and a `changes(wait_ms=20000)` parked;
  the row's "held" is how long the daemon took to exit;
- **kill -9 restart, subscriber**: a `channel.wire` subscription across a kill -9 and a
  restart on the same port, a write on each side; "answer" is events lost / repeated;
- **PostgreSQL backend killed**: `pg_terminate_backend` on the writer's session, then a
  write; "answer" is what the write and `/health` said (PostgreSQL only).

Run it (about a minute; `--quick` a shorter phase per attack)::

    .venv/bin/python benchmarks/resilience.py
    .venv/bin/python benchmarks/resilience.py --quick
    .venv/bin/python benchmarks/resilience.py --before /path/to/old/checkout/src

`--before SRC` runs every attack also against the daemon of another source tree (its
`src` folder, put first on the daemon's PYTHONPATH) and prints its rows beside these: the
before/after comparison. An attack the old daemon cannot even express is n/a; an attack
whose own request outlives `--attack-timeout` (default 10 s) is shown as "> 10 s", and
its daemon is killed. `--json` prints the rows as JSON (for tests/test_resilience.py).
Progress goes to stderr, the table to stdout.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import koinii
from daemon_port import port_from_log  # beside this script
from koinii import Refused, Unavailable, channel

HOST = "127.0.0.1"
PG_ADMIN = os.environ.get("KOINII_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
PROBE_EVERY_S = 0.01
CROSS_RULE = "(implies (and (s ?x) (s ?y)) (t ?x ?y))"
JOIN = ["(r ?a ?b)", "(r ?b ?c)", "(r ?c ?d)"]


# --- a daemon process ----------------------------------------------------------------------


@dataclass
class Daemon:
    db: str
    source: str | None  # another tree's src folder, or None for this one
    port: int = 0
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self, same_port: bool = False) -> Daemon:
        """Start it on a port the system chooses; `same_port` on the port it had."""
        port = self.port if same_port and self.port else 0
        env = dict(os.environ)
        if self.source is not None:
            env["PYTHONPATH"] = self.source + os.pathsep + env.get("PYTHONPATH", "")
        descriptor, log_path = tempfile.mkstemp(prefix="koinii-daemon-", suffix=".log")
        with open(descriptor, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "koinii", "serve", "--db", self.db, "--port", str(port)],
                stdout=subprocess.DEVNULL,
                stderr=log,
                env=env,
            )
        try:
            self.port = port_from_log(log_path, self.proc, timeout=30)
        finally:
            os.remove(log_path)  # what it says later is not read (it was not before either)
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


# --- the prober ------------------------------------------------------------------------------


def _probe(url: str, stop: Any, out: Any) -> None:
    """Another client, in its own process: /health and a one-write round trip, timed."""
    client = koinii.connect(url, timeout=30)
    samples = []
    i = 0
    while not stop.is_set():
        at = time.monotonic()  # a call counts for the phase it started in
        started = time.perf_counter()
        health_ok = True
        try:
            with urllib.request.urlopen(url + "/health", timeout=30) as reply:
                health_ok = reply.status == 200
        except OSError:
            health_ok = False
        health = time.perf_counter() - started
        started = time.perf_counter()
        write_ok = True
        try:
            client.assert_(f"(probe P{i})", "CxProbe")
        except (Refused, Unavailable):
            write_ok = False
        write = time.perf_counter() - started
        samples.append((at, health, health_ok, write, write_ok))
        i += 1
        time.sleep(PROBE_EVERY_S)
    out.put(samples)


class Prober:
    def __init__(self, url: str) -> None:
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._out = context.Queue()
        self._proc = context.Process(target=_probe, args=(url, self._stop, self._out))

    def __enter__(self) -> Prober:
        self._proc.start()
        time.sleep(1.0)  # the prober's interpreter is up and probing
        return self

    def stop(self) -> list[tuple]:
        self._stop.set()
        samples = self._out.get(timeout=60)
        self._proc.join(30)
        return samples

    def __exit__(self, *exc: Any) -> None:
        if self._proc.is_alive():
            self._proc.kill()


# --- rows ------------------------------------------------------------------------------------


@dataclass
class Row:
    attack: str
    side: str  # "after" (this tree) or "before" (--before)
    answer: str = ""
    held_s: float | None = None  # how long the attack's own request (or the stop) took
    health_p50_ms: float | None = None
    health_p99_ms: float | None = None
    write_p50_ms: float | None = None
    write_p99_ms: float | None = None
    failed: int = 0  # prober calls that failed during the attack
    notes: list[str] = field(default_factory=list)


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _fill(row: Row, samples: list[tuple], start: float, end: float) -> Row:
    during = [s for s in samples if start <= s[0] <= end]
    row.health_p50_ms = _quantile([s[1] for s in during], 0.5)
    row.health_p99_ms = _quantile([s[1] for s in during], 0.99)
    row.write_p50_ms = _quantile([s[3] for s in during], 0.5)
    row.write_p99_ms = _quantile([s[3] for s in during], 0.99)
    row.failed = sum(1 for s in during if not (s[2] and s[4]))
    return row


def _repeat(call: Callable[[], Any], seconds: float, timeout: float) -> tuple[str, float]:
    """Run `call` again and again for `seconds`; (its last answer, its longest call)."""
    answer, longest = "", 0.0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.monotonic()
        try:
            call()
            answer = "done"
        except Refused as refusal:
            answer = refusal.kind
        except Unavailable:
            took = time.monotonic() - started
            answer = f"> {timeout:g} s" if took >= timeout * 0.9 else "unavailable"
            return answer, took
        longest = max(longest, time.monotonic() - started)
    return answer, longest


def _grid(client: koinii.Client) -> None:
    facts = [(f"(r N{i} N{j})", "CxA") for i in range(40) for j in range(40)]
    for chunk in range(0, len(facts), 200):  # small batches: within any write budget
        client.edit(add=facts[chunk : chunk + 200])


def attack_rows(source: str | None, side: str, phase_s: float, timeout: float) -> list[Row]:
    rows = []
    setups: dict[str, Callable[[koinii.Client], None]] = {
        "quiet": lambda c: None,
        "cross-rule write": lambda c: c.assert_(CROSS_RULE, "CxB"),
        "15 MiB goal": lambda c: None,
        "3-literal join": _grid,
        "join, limit 1": _grid,
    }
    big_goal = "(p " + "x" * (15 << 20) + ")"
    attacks: dict[str, Callable[[koinii.Client], Any]] = {
        "quiet": lambda c: time.sleep(0.05),
        "cross-rule write": lambda c: c.edit(add=[(f"(s M{i})", "CxB") for i in range(400)]),
        "15 MiB goal": lambda c: c.query(big_goal, "CxA"),
        "3-literal join": lambda c: c.query(JOIN, "CxA"),
        "join, limit 1": lambda c: c.query(JOIN, "CxA", limit=1),
    }
    for name, attack in attacks.items():
        progress(f"{side}: {name}")
        with tempfile.TemporaryDirectory() as folder:
            daemon = Daemon(f"{folder}/kb.db", source).start()
            try:
                setups[name](daemon_client(daemon, 60))
                client = daemon_client(daemon, timeout)
                with Prober(daemon.url) as prober:
                    start = time.monotonic()
                    call = functools.partial(attack, client)
                    answer, held = _repeat(call, phase_s, timeout)
                    end = time.monotonic()
                    samples = prober.stop()
                row = _fill(Row(name, side, answer, held), samples, start, end)
                if name == "quiet":
                    row.answer, row.held_s = "", None
                rows.append(row)
            finally:
                daemon.kill()
    rows.append(_shutdown_row(source, side))
    rows.append(_restart_row(source, side))
    rows.append(_pg_row(source, side))
    return rows


def daemon_client(daemon: Daemon, timeout: float) -> koinii.Client:
    return koinii.connect(daemon.url, timeout=timeout)


def _shutdown_row(source: str | None, side: str) -> Row:
    progress(f"{side}: SIGTERM, consumers attached")
    row = Row("SIGTERM, consumers attached", side)
    with tempfile.TemporaryDirectory() as folder:
        daemon = Daemon(f"{folder}/kb.db", source).start()
        tail = subprocess.Popen(
            [sys.executable, "-m", "koinii", "tail", "--url", daemon.url],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        answers: list[str] = []
        client = daemon_client(daemon, 30)
        client.assert_("(started Work)", "CxA")
        since = client.seq
        parked = threading.Thread(target=lambda: _park_since(daemon, since, answers), daemon=True)
        parked.start()
        time.sleep(1.0)
        started = time.monotonic()
        daemon.proc.send_signal(signal.SIGTERM)
        try:
            daemon.proc.wait(30)
            row.held_s = time.monotonic() - started
        except subprocess.TimeoutExpired:
            row.held_s = 30.0
            daemon.kill()
        parked.join(30)
        tail.kill()
        tail.wait(10)
        row.answer = f"exit {daemon.proc.returncode}; parked wait: {answers[0] if answers else '?'}"
        again = Daemon(daemon.db, source)
        try:
            again.start()
            row.notes.append("restart at once: ok")
        except RuntimeError:
            row.notes.append("restart at once: failed")
        finally:
            again.kill()
    return row


def _park_since(daemon: Daemon, since: int, answers: list[str]) -> None:
    try:
        daemon_client(daemon, 60).changes(since=since, wait_ms=20_000)
        answers.append("normal reply")
    except Refused as refusal:
        answers.append(refusal.kind)
    except Unavailable:
        answers.append("no reply")


def _restart_row(source: str | None, side: str) -> Row:
    progress(f"{side}: kill -9 restart, subscriber")
    row = Row("kill -9 restart, subscriber", side)
    with tempfile.TemporaryDirectory() as folder:
        daemon = Daemon(f"{folder}/kb.db", source).start()
        try:
            seen: list[int] = []
            errors: list[BaseException] = []
            medium = channel.wire(daemon_client(daemon, 10))
            sub = medium.subscribe(
                "(item ?x)", "CxA", lambda e: seen.extend(c["handle"] for c in e.added),
                2_000, None, errors.append,
            )  # fmt: skip
            writer = daemon_client(daemon, 10)
            written = [writer.assert_("(item Before)", "CxA")]
            time.sleep(0.5)
            started = time.monotonic()
            daemon.proc.kill()
            daemon.proc.wait(10)
            daemon.start(same_port=True)
            written.append(daemon_client(daemon, 10).assert_("(item After)", "CxA"))
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not set(written) <= set(seen):
                time.sleep(0.05)
            row.held_s = time.monotonic() - started
            lost = len(set(written) - set(seen))
            repeated = len(seen) - len(set(seen))
            row.answer = f"lost {lost}, repeated {repeated}"
            row.notes.append(f"outages reported: {len(errors)}")
            sub.stop()
        finally:
            daemon.kill()
    return row


def _pg_row(source: str | None, side: str) -> Row:
    row = Row("PostgreSQL backend killed", side)
    try:
        import psycopg

        admin = psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3)
    except Exception:
        row.answer = "n/a (PostgreSQL not reachable)"
        return row
    progress(f"{side}: PostgreSQL backend killed")
    schema = f"koinii_bench_{uuid.uuid4().hex[:10]}"
    app = f"koinii_bench_{uuid.uuid4().hex[:8]}"
    admin.execute(f"CREATE SCHEMA {schema}")
    dsn = f"{PG_ADMIN}?options=-csearch_path%3D{schema}&application_name={app}"
    daemon = Daemon(dsn, source)
    try:
        daemon.start()
        client = daemon_client(daemon, 10)
        client.assert_("(before Kill)", "CxA")
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (app,),
        )
        started = time.monotonic()
        try:
            client.assert_("(after Kill)", "CxA")
            write = "write ok"
        except Refused as refusal:
            write = f"write {refusal.kind}"
        row.held_s = time.monotonic() - started
        time.sleep(1.0)
        try:
            health = "health 200" if client.health().get("ok") else "health 503"
        except Unavailable:
            health = "exited" if daemon.proc.poll() is not None else "health unreachable"
        row.answer = f"{write}; {health}"
    finally:
        daemon.kill()
        admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        admin.close()
    return row


# --- output ----------------------------------------------------------------------------------


def progress(message: str) -> None:
    print(f"[resilience] {message}", file=sys.stderr, flush=True)


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def print_table(rows: list[Row]) -> None:
    header = (
        "| attack | daemon | answer | held (s) | /health p50 / p99 (ms) | write p50 / p99 (ms) "
        "| prober failed |"
    )
    print(header)
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        held = "—" if r.held_s is None else f"{r.held_s:.2f}"
        notes = f" ({'; '.join(r.notes)})" if r.notes else ""
        print(
            f"| {r.attack} | {r.side} | {r.answer}{notes} | {held} | "
            f"{_ms(r.health_p50_ms)} / {_ms(r.health_p99_ms)} | "
            f"{_ms(r.write_p50_ms)} / {_ms(r.write_p99_ms)} | {r.failed} |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short phase per attack")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per attack phase")
    parser.add_argument("--attack-timeout", type=float, default=10.0)
    parser.add_argument("--before", default=None, help="another tree's src folder to compare")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    phase = 1.0 if args.quick else args.seconds
    rows = attack_rows(None, "after", phase, args.attack_timeout)
    if args.before is not None:
        before = str(pathlib.Path(args.before).resolve())
        order = [r.attack for r in rows]
        rows += attack_rows(before, "before", phase, args.attack_timeout)
        rows.sort(key=lambda r: order.index(r.attack))  # before beside after, per attack
    print(f"Koinii {koinii.__version__} resilience, {os.cpu_count()} cores, phase {phase:g} s")
    if args.json:
        print(json.dumps([asdict(r) for r in rows]))
    else:
        print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
