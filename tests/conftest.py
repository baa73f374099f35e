"""Shared fixtures: real daemon processes on free ports with temporary databases."""

from __future__ import annotations

import itertools
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import zlib
from dataclasses import dataclass, field

import pytest

import koinii
from koinii.server.tokens import add_token

# Each pytest-xdist worker hands out ports from a range of its own, below the kernel's
# ephemeral range. A port the kernel called free (a bind to port 0) could be handed to
# both workers before either daemon bound it: a test then talked to the other test's
# daemon, which answered `/health` for it (`unauthorized`; an old writer that seemed to
# answer after a takeover, when its standby had in fact failed to listen).
# Checkouts of the repository on one machine (several engineers' worktrees) start at
# different places too, so two runs at once rarely meet on a port.
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
_CHECKOUT = zlib.crc32(str(pathlib.Path(__file__).resolve().parent).encode()) % 6
_SHARE = 2_000 // max(_WORKERS, 1)
_FIRST = 20_000 + 2_000 * _CHECKOUT + _SHARE * _WORKER
_PORTS = itertools.cycle(range(_FIRST, _FIRST + _SHARE))


def free_port() -> int:
    """A port no daemon of this run holds now, and that no other worker hands out."""
    while True:
        port = next(_PORTS)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use, or its last connection still winding down
            return port


@dataclass
class Daemon:
    """A `koinii serve` child process."""

    db: str
    args: list[str]
    tokens: dict[str, str] = field(default_factory=dict)  # principal -> token
    port: int = 0
    proc: subprocess.Popen | None = None
    fd_limit: int | None = None  # run it under this RLIMIT_NOFILE (as `ulimit -n` would)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 15.0, *, same_port: bool = False) -> Daemon:
        """Start it (again); `same_port` comes back where it was, as a restarted service."""
        if not (same_port and self.port):
            self.port = free_port()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "koinii",
                "serve",
                "--db",
                self.db,
                "--port",
                str(self.port),
                *self.args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=None if self.fd_limit is None else self._limit_fds,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited: {self.proc.stderr.read().decode()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("daemon did not come up")

    def _limit_fds(self) -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (self.fd_limit, self.fd_limit))

    def client(self, principal: str | None = None, **kw) -> koinii.Client:
        token = self.tokens[principal] if principal is not None else None
        return koinii.connect(self.url, token=token, **kw)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> int:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
                raise
        return self.proc.returncode if self.proc else 0

    def restart(self) -> Daemon:
        self.stop()
        return self.start()

    def restart_by(self, sig: int) -> Daemon:
        """Stop it with `sig` (SIGTERM, SIGKILL) and start it again on the same port."""
        self.proc.send_signal(sig)
        self.proc.wait(20)
        return self.start(same_port=True)


# --- stores: every suite that stores runs on SQLite and on PostgreSQL ---------------------

PG_ADMIN = os.environ.get("KOINII_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


@pytest.fixture(scope="session")
def postgres():
    """An admin connection to the test PostgreSQL server. In CI its absence is a failure,
    never a silent skip; elsewhere the PostgreSQL half of the suite is skipped, loudly."""
    import psycopg

    try:
        conn = psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3)
    except psycopg.Error as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is not reachable at {PG_ADMIN}: {exc}")
        pytest.skip(f"{NO_POSTGRES} at {PG_ADMIN} (set KOINII_TEST_PG): {_first_line(exc)}")
    yield conn
    conn.close()


NO_POSTGRES = "PostgreSQL is not reachable"  # how the skips above begin


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Say plainly when the PostgreSQL half of the suite was skipped, and why: a count of
    skips alone does not tell a missing server from a test that chose to skip."""
    skipped = terminalreporter.stats.get("skipped", [])
    reasons = [str(getattr(report, "longrepr", ("", "", ""))[-1]) for report in skipped]
    without = [reason for reason in reasons if NO_POSTGRES in reason]
    if not without:
        return
    reason = without[0].removeprefix("Skipped: ")
    terminalreporter.write_sep("=", "the PostgreSQL half of the suite did not run", yellow=True)
    terminalreporter.write_line(
        f"{len(without)} test(s) skipped: {reason}. They are the PostgreSQL half of the "
        "suite: start a PostgreSQL on 127.0.0.1:5432 with trust auth, or point "
        "KOINII_TEST_PG at one (its admin URL), to run them."
    )


def pg_location(postgres, schemas: list[str]) -> str:
    """A fresh, empty schema on the test server, as a store location."""
    import uuid

    schema = f"koinii_test_{uuid.uuid4().hex[:12]}"
    postgres.execute(f"CREATE SCHEMA {schema}")
    schemas.append(schema)
    return f"{PG_ADMIN}?options=-csearch_path%3D{schema}"


@pytest.fixture(autouse=True, scope="session")
def _cache_of_our_own(tmp_path_factory):
    """The machine's cache, where PostgreSQL stores keep their checkpoints
    (kb/checkpoint.py), is a folder of the test run's own: nothing is left in ~/.cache,
    and no run reads another's."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request):
    return request.param


@pytest.fixture
def new_location(request, backend, tmp_path):
    """new_location() -> a fresh store location on the backend under test."""
    schemas: list[str] = []
    made = 0

    def new() -> str:
        nonlocal made
        made += 1
        if backend == "sqlite":
            return str(tmp_path / f"store-{made}.db")
        return pg_location(request.getfixturevalue("postgres"), schemas)

    yield new
    if schemas:
        postgres = request.getfixturevalue("postgres")
        for schema in schemas:
            postgres.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture
def kb(new_location):
    """A fresh knowledge base on the backend under test."""
    with koinii.open_kb(new_location()) as opened:
        yield opened


@pytest.fixture
def start_daemon(tmp_path, new_location):
    """start_daemon(*args, principals={"AgentAtlas": "agent", ...}) -> a running Daemon."""
    started: list[Daemon] = []

    def start(
        *args: str, principals: dict[str, str] | None = None, db: str | None = None
    ) -> Daemon:
        args_ = list(args)
        tokens: dict[str, str] = {}
        if principals:
            table = str(tmp_path / f"tokens-{len(started)}.json")
            for principal, role in principals.items():
                tokens[principal] = add_token(table, principal, role)
            args_ += ["--tokens", table]
        daemon = Daemon(db or new_location(), args_, tokens)
        started.append(daemon)
        return daemon.start()

    yield start
    for daemon in started:
        daemon.kill()


@pytest.fixture
def daemon(start_daemon):
    return start_daemon()


@pytest.fixture
def client(daemon):
    with daemon.client() as c:
        yield c


@pytest.fixture(params=["sync", "async"])
def connect(request):
    """connect(daemon_or_url, principal=None, **kw) -> a `Client`, or an `AsyncClient`
    behind a blocking face (tests/blocking.py): a suite that connects through this runs
    over both clients, unchanged."""
    from tests.blocking import Blocking, Loop

    loop = Loop() if request.param == "async" else None
    made: list = []

    def make(where, principal: str | None = None, **kw):
        url = where if isinstance(where, str) else where.url
        token = None if principal is None else where.tokens[principal]
        if loop is None:
            made.append(koinii.connect(url, token=token, **kw))
        else:
            made.append(Blocking(koinii.aconnect(url, token=token, **kw), loop))
        return made[-1]

    make.flavour = request.param
    yield make
    for client in made:
        client.close()
    if loop is not None:
        loop.close()


def refused(call) -> koinii.Refused:
    """The refusal `call()` raises (the test fails if it raises none)."""
    with pytest.raises(koinii.Refused) as refusal:
        call()
    return refusal.value


def holds(kb, agent: str, claim: str, strength: str = "default") -> int:
    """`agent` asserts `claim` in its own context, as its creator."""
    from koinii.identity import context_for

    return kb.assert_(claim, context_for(agent), strength=strength, creator=agent)


def channel_sees(kb, channel: str, *agents: str) -> None:
    """The channel context sees each agent's own context."""
    from koinii.identity import context_for

    for agent in agents:
        kb.assert_(f"(genlCx {channel} {context_for(agent)})", "CxUniverse", strength="monotonic")


def wait_until(predicate, timeout: float = 5.0, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


os.environ.setdefault("PYTHONUNBUFFERED", "1")
