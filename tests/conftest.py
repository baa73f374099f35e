"""Shared fixtures: real daemon processes, each on a port the system chose for it (port 0),
with temporary databases."""

from __future__ import annotations

import os
import pathlib
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO

import pytest

import koinii
from koinii.server.tokens import add_token
from tests import forks

# Every daemon of the suite takes port 0 and says which port it got (its --port-file): a
# port picked here and handed to it could be taken by another process in between (another
# run of the suite on this machine, or a client's outgoing connection), and a test would
# then talk to another test's daemon, which answered `/health` for it. The port comes from
# the daemon the test started, written once that daemon answers, never from whoever
# answers on a port.


# The working directory a transcript records: an absolute path on the machine that wrote
# it, which the tests never use as a path.
RECORDED_CWD = str(pathlib.Path(tempfile.gettempdir()) / "shop")


def port_from(port_file: pathlib.Path, proc: subprocess.Popen, timeout: float = 15.0) -> int:
    """The port a daemon started with `--port-file port_file` listens on, once it answers
    (it writes the file then, whole). RuntimeError if `proc` exits first or `timeout`
    passes: never a wait without end."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_file.exists():
            return int(port_file.read_text())
        if proc.poll() is not None:
            raise RuntimeError(f"the daemon exited with {proc.returncode} before it answered")
        time.sleep(0.02)
    raise RuntimeError(f"the daemon did not answer within {timeout:g} s")


def line_within(stream: IO[str], timeout: float) -> str:
    """The next line a child process writes to `stream`, or TimeoutError after `timeout`
    seconds: a child that never says it is ready fails the test instead of hanging it (the
    reading thread ends when the child is killed and its end of the pipe closes)."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout)
    except queue.Empty:
        raise TimeoutError(f"no line within {timeout:g} s") from None


@pytest.fixture
def unreachable_url() -> Iterator[str]:
    """A URL where nothing listens while the test runs: its port is bound here and never
    listened on, so a connection to it is refused, and no other process (another run of
    the suite included) can take the port meanwhile."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{held.getsockname()[1]}"


_FORKER: list[forks.Forker] = []


def forker() -> forks.Forker:
    """This test process's zygote (tests/forks.py), started at its first use: Koinii's
    commands forked from it skip the imports a new interpreter spends most of its start on."""
    if not _FORKER:
        _FORKER.append(forks.Forker())
    return _FORKER[0]


@pytest.fixture(autouse=True, scope="session")
def _zygote_stops_with_the_run():
    yield
    if _FORKER:
        _FORKER.pop().close()


@dataclass
class Daemon:
    """A `koinii serve` child process (forked from the zygote: see `forker`)."""

    db: str
    args: list[str]
    tokens: dict[str, str] = field(default_factory=dict)  # principal -> token
    port: int = 0
    proc: subprocess.Popen | None = None
    fd_limit: int | None = None  # run it under this RLIMIT_NOFILE (as `ulimit -n` would)
    # Started as a person starts it (`python -m koinii serve`): its own imports and its own
    # load of what the zygote has loaded already, for a test of how a daemon starts.
    cold: bool = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 15.0, *, same_port: bool = False) -> Daemon:
        """Start it (again) on a port the system chooses (port 0), returning once it
        answers; `same_port` comes back on the port it had, as a restarted service."""
        port = self.port if same_port and self.port else 0
        folder = pathlib.Path(tempfile.mkdtemp(prefix="koinii-daemon-"))
        args = ["serve", "--db", self.db, "--port", str(port), "--port-file", str(folder / "port")]
        if self.cold:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "koinii", *args, *self.args], stderr=subprocess.PIPE
            )
        else:
            self.proc = forker().popen(args + self.args, stderr=forks.PIPE, fd_limit=self.fd_limit)
        try:
            self.port = port_from(folder / "port", self.proc, timeout)
        except RuntimeError as failed:
            said = self.proc.communicate(timeout=10)[1] if self.proc.poll() is not None else b""
            raise RuntimeError(f"{failed}: {said.decode()}") from None
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return self

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


# --- stores: the backend matrix -----------------------------------------------------------
#
# A test that reaches a store through `backend` (`kb`, `new_location`, `start_daemon`, …)
# runs once per backend its closest `@pytest.mark.backends(...)` names — a test's mark
# over its module's `pytestmark` — and on every backend without one. The backends differ
# below the engine (SQL dialect, transactions, the log, full-text search, locks), so the
# suites about storage run on each; a suite about what runs above the store (speech, moves,
# conversation reads, the wire, access) marks itself `backends("sqlite")` and keeps a
# test on PostgreSQL only where its behaviour reaches the store's own machinery.

BACKENDS = ("sqlite", "postgres")  # and "memory" (an in-memory store), when a mark names it


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        mark = metafunc.definition.get_closest_marker("backends")
        metafunc.parametrize("backend", mark.args if mark else BACKENDS, indirect=True)


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


@pytest.fixture
def backend(request):
    return request.param  # (parametrized by pytest_generate_tests above)


@pytest.fixture
def new_location(request, backend, tmp_path):
    """new_location() -> a fresh store location on the backend under test."""
    schemas: list[str] = []
    made = 0

    def new() -> str | None:
        nonlocal made
        made += 1
        if backend == "memory":
            return None
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
        *args: str,
        principals: dict[str, str] | None = None,
        db: str | None = None,
        cold: bool = False,
    ) -> Daemon:
        args_ = list(args)
        tokens: dict[str, str] = {}
        if principals:
            table = str(tmp_path / f"tokens-{len(started)}.json")
            for principal, role in principals.items():
                tokens[principal] = add_token(table, principal, role)
            args_ += ["--tokens", table]
        daemon = Daemon(db or new_location(), args_, tokens, cold=cold)
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
