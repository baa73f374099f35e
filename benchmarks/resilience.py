"""Resilience benchmark: each attack of issue 17 (the transport) and of issue 37 (an agent
with a valid token doing its worst within the documented limits) against a daemon, while
another client measures what everyone else gets.

Issue 37's suite (`--suite agents`) runs a daemon with a token table: AgentAtlas attacks,
AgentBoreas — in its own process — is everyone else, timing `/health`, a write (an assert
in its own context) and a read (a query of it, limit 1) every 10 ms. Each attack is sent
again and again for the phase: a 150,000-entry edit; a 9 MB edit refused at its first
entry; a reader's 8 MB edit; `wraps/add` of 1.4 M ids; a 15 MB `sessions/record_batch`;
`conversation.disputes` over 3,000 disputes; a search over 20,000 matches the searched
context does not see; the first search after 30,000 writes (sent as fast as the agent's
write budget lets it, the prober starting as the last is acknowledged: whatever the
daemon has not indexed by then, the search waits for); `conversation.disputes` and
`conversation.thread` with a functional declaration of 2,000 values; `vocabulary` over
20,000 notes; and, signed in to the web view as a browser, the disputes page over the
3,000 disputes, the page of a channel Atlas is not on after 6,000 writes of Atlas's, and
the thread page with the functional values; the roster of a channel after 100,000
sessions of Atlas's; and `wraps.wait` on 300 wraps of Atlas's, 10,000 ids each.
`--only WORDS` runs the attacks whose name holds one of the comma-separated words. The
bodies are encoded once and sent as bytes. Its table: attack, answer, the attack's
longest request, p50 / p99 / max of each of the three calls, and a verdict: "ok" when
every p99 is under 100 ms. `--tiny` shrinks each attack to about a hundredth (every cap
is still passed): a smoke run (tests/test_benchmarks.py).

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
    .venv/bin/python benchmarks/resilience.py --suite agents      # issue 37's table only

`--before SRC` runs every attack also against the daemon of another source tree (its
`src` folder, put first on the daemon's PYTHONPATH) and prints its rows beside these: the
before/after comparison. An attack the old daemon cannot even express is n/a; an attack
whose own request outlives `--attack-timeout` (default 10 s) is shown as "> 10 s", and
its daemon is killed. `--json` prints the rows as JSON (for tests/test_resilience.py).
Progress goes to stderr, the table to stdout.
"""

from __future__ import annotations

import argparse
import contextlib
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
from koinii import Refused, Unavailable
from koinii.channel import agent as channel
from koinii.server.tokens import add_token

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
    args: list[str] = field(default_factory=list)  # more `koinii serve` options

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
                [sys.executable, "-m", "koinii", "serve", "--db", self.db, "--port", str(port)]
                + self.args,
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


def _probe(url: str, stop: Any, out: Any, ready: Any = None) -> None:
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
        if ready is not None:
            ready.set()  # up and probing: the attack may start
        i += 1
        time.sleep(PROBE_EVERY_S)
    out.put(samples)


class Prober:
    def __init__(self, url: str) -> None:
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._out = context.Queue()
        self._ready = context.Event()
        self._proc = context.Process(target=_probe, args=(url, self._stop, self._out, self._ready))

    def __enter__(self) -> Prober:
        """Once the prober has made its first round: on a busy machine a fixed wait was
        not always enough, and a phase then had no samples."""
        self._proc.start()
        if not self._ready.wait(120):
            raise RuntimeError("the prober did not start probing within 120 s")
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
    _in_batches(client, facts)  # small batches: within any write budget


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


# --- issue 37: one agent's worst, within the documented limits -------------------------------
#
# A daemon with a token table: AgentAtlas attacks, AgentBoreas (the prober, in its own
# process) is everyone else, AgentCyra a third member whose claims Atlas disputes, and
# ReaderRhea a reader. The prober runs /health, a write (an assert in CxBoreas) and a read
# (a query of CxBoreas, limit 1) every 10 ms, each timed.

AGENTS = {
    "AgentAtlas": "agent",
    "AgentBoreas": "agent",
    "AgentCyra": "agent",
    "ReaderRhea": "reader",
}
CHANNEL = "CxTeam"
QUIET = "CxQuiet"  # Boreas and Cyra's channel, which Atlas is not on
TARGET_P99_MS = 100.0


@dataclass
class Sizes:
    """How big each attack is: the issue's sizes, or about a hundredth (`--tiny`)."""

    edit_entries: int = 150_000
    edit_mb: int = 9
    reader_mb: int = 8
    wrap_ids: int = 1_400_000
    batch_mb: int = 15
    disputes: int = 3_000
    hidden: int = 20_000
    values: int = 2_000
    backlog: int = 30_000  # writes not yet indexed for search when the search comes
    log: int = 6_000  # writes the channel page looks through, none in the channel
    sessions: int = 100_000  # sessions of Atlas's the roster looks through
    wraps: int = 300  # wraps of Atlas's, 10,000 ids each, a wait finds

    @classmethod
    def tiny(cls) -> Sizes:
        return cls(12_000, 1, 1, 14_000, 1, 30, 200, 20, 300, 60, 1_000, 3)  # each cap passed


def _probe_agent(url: str, token: str, stop: Any, out: Any, ready: Any = None) -> None:
    """Another agent, in its own process: /health, a write and a read, each timed."""
    client = koinii.connect(url, token=token, timeout=30)
    samples = []
    i = 0
    while not stop.is_set():
        at = time.monotonic()
        times, oks = [], []
        for call in (
            lambda: urllib.request.urlopen(url + "/health", timeout=30).close(),
            functools.partial(client.assert_, f"(probe P{i})", "CxBoreas"),
            lambda: client.query("(probe ?x)", "CxBoreas", limit=1),
        ):
            started = time.perf_counter()
            try:
                call()
                oks.append(True)
            except (OSError, Refused, Unavailable):
                oks.append(False)
            times.append(time.perf_counter() - started)
        samples.append((at, *times, all(oks)))
        if ready is not None:
            ready.set()  # up and probing: the attack may start
        i += 1
        time.sleep(PROBE_EVERY_S)
    out.put(samples)


class AgentProber(Prober):
    def __init__(self, url: str, token: str) -> None:
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._out = context.Queue()
        self._ready = context.Event()
        self._proc = context.Process(
            target=_probe_agent, args=(url, token, self._stop, self._out, self._ready)
        )


@dataclass
class AgentRow:
    attack: str
    side: str  # "after" (this tree) or "before" (--before)
    answer: str = ""
    held_s: float | None = None  # the attack's longest request
    calls: int = 0  # the prober's rounds during the attack
    failed: int = 0
    ms: dict[str, list[float | None]] = field(default_factory=dict)  # call -> p50, p99, max

    @property
    def verdict(self) -> str:
        worst = [v[1] for v in self.ms.values() if v[1] is not None]
        if not worst or self.failed:
            return "FAILED" if self.failed else "—"
        return "ok" if max(worst) < TARGET_P99_MS else f"over {TARGET_P99_MS:g} ms"


def _fill_agents(row: AgentRow, samples: list[tuple], start: float, end: float) -> AgentRow:
    during = [s for s in samples if start <= s[0] <= end]
    row.calls = len(during)
    row.failed = sum(1 for s in during if not s[4])
    for column, name in ((1, "health"), (2, "write"), (3, "read")):
        values = [s[column] for s in during]
        top = max(values) * 1000 if values else None
        row.ms[name] = [_quantile(values, 0.5), _quantile(values, 0.99), top]
    return row


class Raw:
    """One body sent as it is, again and again (the attacker's own encoding is not what
    is measured): the refusal's kind, or "done"."""

    def __init__(self, url: str, token: str, timeout: float) -> None:
        self.host, self.port = url.removeprefix("http://").split(":")
        self.token = token
        self.timeout = timeout

    def post(self, path: str, body: bytes) -> str:
        import http.client

        connection = http.client.HTTPConnection(self.host, int(self.port), timeout=self.timeout)
        try:
            connection.request(
                "POST",
                "/v1/" + path,
                body,
                {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
            )
            reply = json.loads(connection.getresponse().read())
        except OSError:
            return "unavailable"
        finally:
            connection.close()
        return "done" if reply.get("ok") else reply["error"]["kind"]


class Browser:
    """A signed-in browser of the web view (its cookie, never the token, after the
    sign-in): a page's refusal kind, or "done"."""

    def __init__(self, url: str, token: str, timeout: float) -> None:
        import http.client
        import urllib.parse

        self.host, self.port = url.removeprefix("http://").split(":")
        self.timeout = timeout
        connection = http.client.HTTPConnection(self.host, int(self.port), timeout=timeout)
        try:
            form = urllib.parse.urlencode({"token": token, "next": "/"})
            connection.request(
                "POST", "/login", form, {"Content-Type": "application/x-www-form-urlencoded"}
            )
            reply = connection.getresponse()
            reply.read()
            self.cookie = reply.getheader("set-cookie", "").split(";")[0]
        finally:
            connection.close()

    def get(self, path: str) -> str:
        import http.client

        connection = http.client.HTTPConnection(self.host, int(self.port), timeout=self.timeout)
        try:
            connection.request("GET", path, headers={"Cookie": self.cookie})
            reply = connection.getresponse()
            page = reply.read().decode("utf-8", "replace")
        except OSError:
            return "unavailable"
        finally:
            connection.close()
        if reply.status == 200:
            return "done"
        found = page.find("Refused: <code>")  # the error page names the refusal
        return page[found + 15 : page.find("<", found + 15)] if found >= 0 else str(reply.status)


def _encoded(body: Any) -> bytes:
    return json.dumps(body).encode()


def _in_batches(client: koinii.Client, entries: list[tuple], size: int = 100) -> None:
    """Edits within an agent's write budget: a batch past it is sent again in halves."""
    at = 0
    while at < len(entries):
        try:
            client.edit(add=entries[at : at + size])
            at += size
        except Refused as refusal:
            if refusal.kind != "budget-exhausted" or size == 1:
                raise
            size //= 2


def _members(clients: dict[str, koinii.Client]) -> dict[str, Any]:
    return {
        name: channel.join(channel.wire(clients[name]), CHANNEL, name)
        for name in ("AgentAtlas", "AgentBoreas", "AgentCyra")
    }


def _disputes_setup(clients: dict[str, koinii.Client], sizes: Sizes) -> dict[str, Any]:
    """Cyra claims `sizes.disputes` facts; Atlas disputes every one (moves, 4 at a time)."""
    from concurrent.futures import ThreadPoolExecutor

    members = _members(clients)
    claims = [members["AgentCyra"].claim(f"(fact F{i})") for i in range(sizes.disputes)]
    atlas = members["AgentAtlas"]
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(atlas.dispute, claims))
    return {}


def _hidden_setup(clients: dict[str, koinii.Client], sizes: Sizes) -> dict[str, Any]:
    """Atlas's own notes, all matching the search, none seen from CxBoreas."""
    notes = [(f'(note N{i} "secret plan {i}")', "CxAtlas") for i in range(sizes.hidden)]
    _in_batches(clients["AgentAtlas"], notes)
    # the first search indexes what the housekeeping has not yet (kb/search.py): paid
    # here, so the row measures the hidden matches, not the catch-up
    for _ in range(30):
        with contextlib.suppress(Refused):
            clients["AgentAtlas"].search("secret plan", "CxBoreas")
            break
    return {}


def _backlog_setup(clients: dict[str, koinii.Client], sizes: Sizes) -> dict[str, Any]:
    """Atlas writes `sizes.backlog` notes, as fast as its write budget lets it; the
    attack searches them at once, before the daemon has indexed them all."""
    notes = [(f'(note B{i} "release {i} shipped")', "CxAtlas") for i in range(sizes.backlog)]
    _in_batches(clients["AgentAtlas"], notes)
    return {}


def _log_setup(clients: dict[str, koinii.Client], sizes: Sizes) -> dict[str, Any]:
    """Boreas and Cyra on a channel of their own; `sizes.log` writes of Atlas's (3 notes
    each, 4 at a time) that its page's window must look through, none of them shown."""
    from concurrent.futures import ThreadPoolExecutor

    for name in ("AgentBoreas", "AgentCyra"):
        channel.join(channel.wire(clients[name]), QUIET, name)
    atlas = clients["AgentAtlas"]

    def write(i: int) -> None:
        atlas.edit(add=[(f"(note L{i} Part{part})", "CxAtlas") for part in range(3)])

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write, range(sizes.log)))
    return {}


def _functional_setup(clients: dict[str, koinii.Client], sizes: Sizes) -> dict[str, Any]:
    """Atlas declares poolSize functional and gives it `sizes.values` values; Boreas asks
    a question the thread read will show."""
    members = _members(clients)
    atlas = clients["AgentAtlas"]
    atlas.assert_("(functional poolSize)", "CxAtlas")
    _in_batches(atlas, [(f"(poolSize Db V{i})", "CxAtlas") for i in range(sizes.values)])
    question = members["AgentBoreas"].ask("(poolSize Db ?n)")
    members["AgentCyra"].answer(question, {"?n": "V1"})
    return {"question": question}


def _sessions_setup(clients: dict[str, koinii.Client], sizes: Sizes) -> dict[str, Any]:
    """The three on the channel; Atlas starts `sizes.sessions` sessions, 1,000 a batch."""
    _members(clients)
    event = {"verb": "start_session", "fields": {"title": "a session"}}
    for _ in range(sizes.sessions // 1_000):
        clients["AgentAtlas"].invoke("sessions.record_batch", events=[event] * 1_000)
    return {}


def _wraps_setup(clients: dict[str, koinii.Client], sizes: Sizes) -> dict[str, Any]:
    """Atlas files `sizes.wraps` wraps into one session, 10,000 ids each (the cap)."""
    ids = [f"id-{i}" for i in range(10_000)]  # (not handles: they name no sentex)
    for w in range(sizes.wraps):
        clients["AgentAtlas"].invoke(
            "wraps.add",
            wrap_id=f"w-{w}",
            agent_id="AgentAtlas",
            created_ids=ids,
            parent_session_id="s-atlas",
        )
    return {}


def agent_rows(
    source: str | None,
    side: str,
    phase_s: float,
    timeout: float,
    sizes: Sizes,
    only: list[str] | None = None,
) -> list[AgentRow]:
    """Each attack of issue 37 in turn, on a fresh daemon (of `source`: None for this
    tree), the prober running."""
    filler = "y" * 900
    edit_big = [{"sentence": "(note First)", "context": "CxBoreas"}] + [
        {"sentence": f'(note N{i} "{filler}")', "context": "CxAtlas"}
        for i in range(sizes.edit_mb * 1_000)
    ]
    event = {"verb": "set_title", "fields": {"session_id": "s-1", "title": "x" * 60}}
    bodies = {
        "edit": _encoded(
            {
                "add": [
                    {"sentence": f"(note N{i})", "context": "CxAtlas"}
                    for i in range(sizes.edit_entries)
                ]
            }
        ),
        "edit_big": _encoded({"add": edit_big}),
        "reader": _encoded(
            {
                "add": [{"sentence": "(n " + "z" * 1000 + ")", "context": "CxRhea"}]
                * (sizes.reader_mb * 1_000)
            }
        ),
        "wrap": _encoded({"wrap_id": "w-big", "created_ids": list(range(1, sizes.wrap_ids + 1))}),
        "batch": _encoded({"events": [event] * (sizes.batch_mb * 8_000)}),
    }

    def none(clients: dict[str, koinii.Client], sizes: Sizes) -> dict[str, Any]:
        return {}

    attacks: list[tuple[str, Callable, Callable[[dict[str, Any]], Any]]] = [
        ("quiet", none, lambda a: time.sleep(0.05) or "—"),
        (
            f"{sizes.edit_entries:,}-entry edit",
            none,
            lambda a: a["raw"].post("edit", bodies["edit"]),
        ),
        (
            f"{sizes.edit_mb} MB edit, refused at entry 0",
            none,
            lambda a: a["raw"].post("edit", bodies["edit_big"]),
        ),
        (
            f"reader's {sizes.reader_mb} MB edit",
            none,
            lambda a: a["reader"].post("edit", bodies["reader"]),
        ),
        (
            f"wraps/add, {sizes.wrap_ids:,} ids",
            none,
            lambda a: a["raw"].post("wraps/add", bodies["wrap"]),
        ),
        (
            f"{sizes.batch_mb} MB record_batch",
            none,
            lambda a: a["raw"].post("sessions/record_batch", bodies["batch"]),
        ),
        (
            f"disputes read, {sizes.disputes:,} disputes",
            _disputes_setup,
            lambda a: a["atlas"].invoke("conversation.disputes", channel=CHANNEL),
        ),
        (
            f"search, {sizes.hidden:,} hidden matches",
            _hidden_setup,
            lambda a: a["atlas"].search("secret plan", "CxBoreas"),
        ),
        (
            f"first search after {sizes.backlog:,} writes",
            _backlog_setup,
            lambda a: a["atlas"].search("release shipped", "CxAtlas"),
        ),
        (
            f"disputes read, functional with {sizes.values:,} values",
            _functional_setup,
            lambda a: a["atlas"].invoke("conversation.disputes", channel=CHANNEL),
        ),
        (
            "thread read, the same",
            _functional_setup,
            lambda a: a["atlas"].invoke(
                "conversation.thread", handle=a["question"], channel=CHANNEL
            ),
        ),
        (
            f"vocabulary, {sizes.hidden:,} notes",
            _hidden_setup,
            lambda a: a["atlas"].vocabulary("CxAtlas"),
        ),
        (
            f"web: disputes page, {sizes.disputes:,} disputes",
            _disputes_setup,
            lambda a: a["browser"].get(f"/channel/{CHANNEL}/disputes"),
        ),
        (
            f"web: channel page, {sizes.log:,} writes it does not show",
            _log_setup,
            lambda a: a["browser"].get(f"/channel/{QUIET}/"),
        ),
        (
            "web: thread page, functional with the values above",
            _functional_setup,
            lambda a: a["browser"].get(f"/channel/{CHANNEL}/thread/{a['question']}"),
        ),
        (
            f"roster, {sizes.sessions:,} sessions",
            _sessions_setup,
            lambda a: a["atlas"].invoke("conversation.roster", channel=CHANNEL),
        ),
        (
            f"wraps.wait, {sizes.wraps:,} wraps of 10,000 ids",
            _wraps_setup,
            lambda a: a["atlas"].invoke("wraps.wait", parent_session_id="s-atlas", timeout_s=1),
        ),
    ]
    if only:
        attacks = [a for a in attacks if a[0] == "quiet" or any(w in a[0] for w in only)]
    rows = []
    for name, setup, attack in attacks:
        progress(f"{side}: agents: {name}")
        with tempfile.TemporaryDirectory() as folder:
            table = f"{folder}/tokens.json"
            tokens = {who: add_token(table, who, role) for who, role in AGENTS.items()}
            daemon = Daemon(f"{folder}/kb.db", source, args=["--tokens", table]).start()
            try:
                clients = {
                    who: koinii.connect(daemon.url, token=token, timeout=120)
                    for who, token in tokens.items()
                }
                made = setup(clients, sizes)
                ammo = {
                    **made,
                    "atlas": koinii.connect(
                        daemon.url, token=tokens["AgentAtlas"], timeout=timeout
                    ),
                    "raw": Raw(daemon.url, tokens["AgentAtlas"], timeout),
                    "reader": Raw(daemon.url, tokens["ReaderRhea"], timeout),
                    "browser": Browser(daemon.url, tokens["AgentAtlas"], timeout),
                }
                with AgentProber(daemon.url, tokens["AgentBoreas"]) as prober:
                    start = time.monotonic()
                    answer, held = _repeat_answers(
                        functools.partial(attack, ammo), phase_s, timeout
                    )
                    end = time.monotonic()
                    samples = prober.stop()
                row = _fill_agents(AgentRow(name, side, answer, held), samples, start, end)
                if name == "quiet":
                    row.answer, row.held_s = "", None
                rows.append(row)
            finally:
                daemon.kill()
    return rows


def _repeat_answers(call: Callable[[], Any], seconds: float, timeout: float) -> tuple[str, float]:
    """`_repeat` for calls that answer their refusal's kind as well as raise it."""
    answer, longest = "", 0.0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.monotonic()
        try:
            said = call()
            answer = said if isinstance(said, str) else "done"
        except Refused as refusal:
            answer = refusal.kind
        except Unavailable:
            return "unavailable", time.monotonic() - started
        longest = max(longest, time.monotonic() - started)
    return answer, longest


def print_agent_table(rows: list[AgentRow]) -> None:
    print(
        "| attack (AgentAtlas) | daemon | answer | held (s) | /health p50 / p99 / max (ms) "
        "| write p50 / p99 / max (ms) | read p50 / p99 / max (ms) | verdict |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        held = "—" if r.held_s is None else f"{r.held_s:.2f}"
        cells = [
            " / ".join(_ms(v) for v in r.ms.get(name, [None] * 3))
            for name in ("health", "write", "read")
        ]
        print(
            f"| {r.attack} | {r.side} | {r.answer} | {held} | {' | '.join(cells)} | {r.verdict} |"
        )


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
    parser.add_argument(
        "--suite",
        choices=("all", "transport", "agents"),
        default="all",
        help="issue 17's attacks (transport), issue 37's (agents), or both",
    )
    parser.add_argument(
        "--tiny", action="store_true", help="agents: a hundredth of each attack (a smoke run)"
    )
    parser.add_argument(
        "--only", default=None, help="agents: only the attacks whose name holds one of these words"
    )
    args = parser.parse_args(argv)
    phase = 1.0 if args.quick else args.seconds
    if args.tiny:
        phase = min(phase, 0.5)
    print(f"Koinii {koinii.__version__} resilience, {os.cpu_count()} cores, phase {phase:g} s")
    if args.suite in ("all", "transport"):
        rows = attack_rows(None, "after", phase, args.attack_timeout)
        if args.before is not None:
            before = str(pathlib.Path(args.before).resolve())
            order = [r.attack for r in rows]
            rows += attack_rows(before, "before", phase, args.attack_timeout)
            rows.sort(key=lambda r: order.index(r.attack))  # before beside after, per attack
        if args.json:
            print(json.dumps([asdict(r) for r in rows]))
        else:
            print_table(rows)
    if args.suite in ("all", "agents"):
        sizes = Sizes.tiny() if args.tiny else Sizes()
        only = args.only.split(",") if args.only else None
        agents = agent_rows(None, "after", phase, args.attack_timeout, sizes, only)
        if args.before is not None:
            before = str(pathlib.Path(args.before).resolve())
            order = [r.attack for r in agents]
            agents += agent_rows(before, "before", phase, args.attack_timeout, sizes, only)
            agents.sort(key=lambda r: order.index(r.attack))
        if args.json:
            print(json.dumps([{**asdict(r), "verdict": r.verdict} for r in agents]))
        else:
            print()
            print_agent_table(agents)
    return 0


if __name__ == "__main__":
    sys.exit(main())
