"""What a daemon shows its operator and its callers: a start-up line saying where it
listens, on what store, as what and for whom; a line when a standby takes over; an access
log on request; SIGHUP reloading the token table; 405 for a wrong method; a browsable
API page served offline; a refusal, not "unreachable", for a port it cannot have; and on
port 0, the port the system chose, on its start-up line and in its port file."""

import http.client
import json
import pathlib
import signal
import socket
import subprocess
import sys
import threading

import pytest

import koinii
from koinii.server.tokens import add_token, revoke
from koinii.server.verbs import served
from tests.conftest import Daemon, line_within, pg_location, port_from, refused, wait_until
from tests.web_client import Browser

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix


def first_line(daemon: Daemon) -> str:
    """The daemon's start-up line: printed before it answers anything, so it is there
    once `start` saw /health answer."""
    return daemon.proc.stderr.readline().decode()


def get(daemon: Daemon, path: str, method: str = "GET") -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=10)
    try:
        conn.request(method, path, body=b"{}" if method == "POST" else None)
        reply = conn.getresponse()
        return reply.status, dict(reply.getheaders()), reply.read()
    finally:
        conn.close()


# --- the start-up line --------------------------------------------------------------------


def test_the_start_up_line_says_where_what_as_what_and_for_whom(start_daemon, backend):
    daemon = start_daemon(principals={"AgentAtlas": "agent", "OpsLead": "operator"})
    line = first_line(daemon)
    assert line.startswith(f"koinii serve: listening on {daemon.url} (pid {daemon.proc.pid})")
    table = daemon.args[daemon.args.index("--tokens") + 1]
    kind = "postgresql" if backend == "postgres" else "sqlite"
    assert f"store {daemon.db} ({kind}, built from its rows in " in line
    assert "· writer ·" in line
    assert f"tokens {table} (2 principal(s); SIGHUP reloads it)" in line


def test_an_open_daemon_says_it_is_open(daemon):
    assert "open: no token table, every loopback caller is an operator" in first_line(daemon)


def test_a_standby_says_it_waits_and_when_it_takes_over(postgres):
    schemas: list[str] = []
    database = pg_location(postgres, schemas)
    writer = Daemon(database, []).start()
    standby = Daemon(database, ["--standby"])
    started = threading.Thread(target=standby.start, kwargs={"timeout": 60})
    try:
        started.start()
        assert wait_until(lambda: standby.proc is not None, timeout=10)
        waiting = standby.proc.stderr.readline().decode()
        assert waiting.startswith("koinii serve: standby: waiting for the writer of")
        writer.stop()
        started.join(60)
        took_over = standby.proc.stderr.readline().decode()
        assert took_over.startswith("koinii serve: standby: took over, now the writer of")
        assert "· writer (took over as a standby) ·" in standby.proc.stderr.readline().decode()
    finally:
        writer.kill()
        standby.kill()
        for schema in schemas:
            postgres.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


# --- the access log -------------------------------------------------------------------------


def serve_logging_to(tmp_path, *args: str) -> tuple[subprocess.Popen, int, pathlib.Path]:
    log = tmp_path / "stderr.log"
    with log.open("w") as out:  # a file: a pipe nobody reads would stall a chatty daemon
        proc = subprocess.Popen(
            [sys.executable, "-m", "koinii", "serve", "--db", str(tmp_path / "kb.db")]
            + ["--port", "0", "--port-file", str(tmp_path / "port"), *args],
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    port = port_from(tmp_path / "port", proc)
    assert "listening on" in log.read_text(), log.read_text()
    return proc, port, log


@pytest.mark.parametrize("flag", [True, False], ids=["--access-log", "default"])
def test_the_access_log_is_a_line_per_request_and_off_by_default(tmp_path, flag):
    proc, port, log = serve_logging_to(tmp_path, *(["--access-log"] if flag else []))
    try:
        with koinii.connect(f"http://127.0.0.1:{port}") as client:
            client.stats()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/health")
        conn.getresponse().read()
        conn.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    text = log.read_text()
    logged = '"POST /v1/stats HTTP/1.1" 200' in text and '"GET /health HTTP/1.1" 200' in text
    assert logged is flag, text


# --- SIGHUP: the token table again -----------------------------------------------------------


def test_sighup_reloads_the_token_table(start_daemon):
    daemon = start_daemon(principals={"AgentAtlas": "agent"})
    first_line(daemon)
    table = daemon.args[daemon.args.index("--tokens") + 1]
    token = add_token(table, "AgentBoreas", "agent")
    with koinii.connect(daemon.url, token=token) as boreas:
        refusal = refused(boreas.stats)  # added while it runs: not yet
        assert refusal.kind == "unauthorized" and "kill -HUP" in refusal.message
        daemon.proc.send_signal(signal.SIGHUP)
        assert "SIGHUP: reloaded" in daemon.proc.stderr.readline().decode()
        assert wait_until(lambda: _works(boreas))
        revoke(table, "AgentBoreas")
        daemon.proc.send_signal(signal.SIGHUP)
        daemon.proc.stderr.readline()
        assert wait_until(lambda: not _works(boreas))
    with daemon.client("AgentAtlas") as atlas:
        assert atlas.stats()["seq"] >= 0  # the others' tokens unchanged


def test_a_revoked_principals_web_view_ends_at_the_reload(start_daemon):
    daemon = start_daemon(principals={"AgentAtlas": "agent", "Viewer": "reader"})
    first_line(daemon)
    table = daemon.args[daemon.args.index("--tokens") + 1]
    viewer, atlas = Browser(daemon.url), Browser(daemon.url)
    assert viewer.sign_in(daemon.tokens["Viewer"]).status == 303
    assert atlas.sign_in(daemon.tokens["AgentAtlas"]).status == 303
    assert viewer.get("/").status == 200
    revoke(table, "Viewer")
    assert viewer.get("/").status == 200  # until the daemon reads its table again
    daemon.proc.send_signal(signal.SIGHUP)
    assert "SIGHUP: reloaded" in daemon.proc.stderr.readline().decode()
    assert viewer.get("/").status == 303  # back to the sign-in
    assert atlas.get("/").status == 200


def test_a_table_that_does_not_load_on_sighup_leaves_the_one_in_force(start_daemon):
    daemon = start_daemon(principals={"AgentAtlas": "agent"})
    first_line(daemon)
    table = daemon.args[daemon.args.index("--tokens") + 1]
    with open(table, "w") as f:
        f.write("{not json")
    daemon.proc.send_signal(signal.SIGHUP)
    said = daemon.proc.stderr.readline().decode()
    assert said.startswith("koinii serve: SIGHUP: kept the token table as it was: bad-token-table")
    with daemon.client("AgentAtlas") as atlas:
        assert atlas.stats()["seq"] >= 0
    assert daemon.proc.poll() is None


def test_sighup_on_an_open_daemon_says_there_is_nothing_to_reload(daemon):
    first_line(daemon)
    daemon.proc.send_signal(signal.SIGHUP)
    assert "no token table to reload" in daemon.proc.stderr.readline().decode()
    assert daemon.proc.poll() is None


def _works(client) -> bool:
    try:
        client.stats()
    except koinii.Refused:
        return False
    return True


# --- 405 and the API page ----------------------------------------------------------------------


def test_a_wrong_method_on_an_operation_is_405_and_an_unknown_one_404(daemon):
    status, headers, body = get(daemon, "/v1/assert")
    error = json.loads(body)["error"]
    assert (status, error["kind"], headers["allow"]) == (405, "method-not-allowed", "POST")
    assert "POST /v1/assert" in error["message"]
    status, _, body = get(daemon, "/v1/no_such_operation")
    assert (status, json.loads(body)["error"]["kind"]) == (404, "not-found")
    status, headers, _ = get(daemon, "/health", "POST")
    assert status == 405 and "GET" in headers["allow"]


def test_the_api_page_lists_every_operation_offline_and_needs_no_sign_in(start_daemon):
    daemon = start_daemon(principals={"AgentAtlas": "agent"})
    status, headers, body = get(daemon, "/api")
    page = body.decode()
    assert status == 200 and headers["content-type"].startswith("text/html")
    for op in served():
        assert f"<code>POST /v1/{op.route}</code>" in page, op.name
    assert "<code>POST /v1/wraps/" in page and "<code>POST /v1/sessions/" in page
    assert "budget_ms" in page and "a sentence in canonical text" in page  # the field table
    assert 'src="http' not in page and 'href="http' not in page  # nothing from elsewhere
    assert "script-src 'self'" in headers["content-security-policy"]


# --- a port it cannot have ---------------------------------------------------------------------


def test_a_busy_port_is_refused_with_exit_code_1_and_leaves_the_store_free(tmp_path):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    db = str(tmp_path / "kb.db")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "koinii", "serve", "--db", db, "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        holder.close()
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"koinii serve: cannot-listen: cannot listen on 127.0.0.1:{port}")
    assert "Traceback" not in done.stderr
    with koinii.open_kb(db) as kb:  # the store was closed again: its lock is free
        assert kb.seq >= 0


# --- port 0: a port the system chooses ----------------------------------------------------------


def test_on_port_0_it_listens_where_the_system_chose_and_says_so_twice(tmp_path):
    """The start-up line and the port file name the port it listens on, never 0: how a
    supervisor (the test harness, `koinii demo`) starts a daemon without picking a port
    that another process could take before the daemon binds it."""
    port_file = tmp_path / "port"
    proc = subprocess.Popen(
        [sys.executable, "-m", "koinii", "serve", "--db", str(tmp_path / "kb.db")]
        + ["--port", "0", "--port-file", str(port_file)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = line_within(proc.stderr, timeout=30)
        port = port_from(port_file, proc)
        assert port != 0 and port_file.read_text() == f"{port}\n"
        url = f"http://127.0.0.1:{port}"
        assert line.startswith(f"koinii serve: listening on {url} (pid {proc.pid})"), line
        with koinii.connect(url) as client:
            assert client.health()["ok"] is True
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0


def test_a_port_file_it_cannot_write_stops_it_with_exit_code_1(tmp_path):
    nowhere = tmp_path / "no-such-folder" / "port"
    done = subprocess.run(
        [sys.executable, "-m", "koinii", "serve", "--db", str(tmp_path / "kb.db")]
        + ["--port", "0", "--port-file", str(nowhere)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    said = done.stderr.splitlines()[-1].removeprefix("koinii serve: ")
    assert said.startswith(f"cannot-write-port-file: cannot write the port to {nowhere}:"), said
    assert "Traceback" not in done.stderr and not nowhere.parent.exists()
    with koinii.open_kb(str(tmp_path / "kb.db")) as kb:  # it closed its store on the way out
        assert kb.seq >= 0
