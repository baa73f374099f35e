"""Wraps are durable records of the KB's store: they survive a reopen and kill -9."""

import signal
import subprocess
import sys
import threading
import time

import koinii
from koinii import Refused, Unavailable
from koinii.operations import invoker
from koinii.wraps import Coordinators, WrapQueue


def test_wraps_and_coordinators_survive_a_reopen(new_location):
    location = new_location()
    with koinii.open_kb(location) as kb:
        queue = WrapQueue(kb)
        Coordinators(kb).register("AgentCoordA", project_id="hive", session_id="s-a", pid=7)
        queue.add_wrap_notification(
            "w1", project_id="hive:api", parent_session_id="s-a", created_ids=[1, "x"]
        )
        queue.add_wrap_notification("w2", project_id="hive", stats={"notes": 3}, depth=2)
        marked = queue.mark_wrap_processed("w1")
        before = queue.wraps(include_processed=True)
        seq = kb.seq
    with koinii.open_kb(location) as kb:
        queue = WrapQueue(kb)
        assert queue.wraps(include_processed=True) == before
        assert [w["wrap_id"] for w in queue.get_unprocessed_wraps_for_hierarchy("hive")] == ["w2"]
        assert queue.mark_wrap_processed("w1") == marked and kb.seq == seq
        assert Coordinators(kb).get("AgentCoordA")["pid"] == 7


def test_every_acknowledged_wrap_survives_kill_9_of_the_daemon(start_daemon):
    daemon = start_daemon()
    setup = daemon.client()
    Coordinators(setup).register("AgentCoordA", project_id="hive", session_id="s-a")
    WrapQueue(setup).add_wrap_notification("early", project_id="hive", parent_session_id="s-a")
    WrapQueue(setup).mark_wrap_processed("early")
    acknowledged: list[str] = []
    stop = threading.Event()

    def file_wraps(n: int) -> None:
        queue, i = WrapQueue(daemon.client()), 0
        while not stop.is_set():
            wrap_id = f"load-{n}-{i}"
            try:
                queue.add_wrap_notification(wrap_id, project_id="hive:api", created_ids=[i])
            except (Unavailable, Refused):
                return
            acknowledged.append(wrap_id)
            i += 1

    writers = [threading.Thread(target=file_wraps, args=(n,)) for n in range(3)]
    for writer in writers:
        writer.start()
    time.sleep(0.6)
    daemon.proc.send_signal(signal.SIGKILL)
    daemon.proc.wait(10)
    stop.set()
    for writer in writers:
        writer.join(10)
    assert acknowledged, "the load acknowledged nothing"

    daemon.start()  # the same store, a new process
    queue = WrapQueue(daemon.client())
    unprocessed = {w["wrap_id"] for w in queue.get_unprocessed_wraps()}
    assert set(acknowledged) <= unprocessed
    [early] = [w for w in queue.wraps(include_processed=True) if w["wrap_id"] == "early"]
    assert early["processed"] is True
    assert Coordinators(daemon.client()).get("AgentCoordA")["session_id"] == "s-a"


WRITER = """
import sys, koinii
from koinii.wraps import WrapQueue
kb = koinii.open_kb(sys.argv[1])
queue = WrapQueue(kb)
for i in range(100_000):
    queue.add_wrap_notification(f"w{i}", project_id="hive", created_ids=[i])
    print(f"w{i}", flush=True)
"""


def test_every_acknowledged_wrap_survives_kill_9_of_an_in_process_writer(new_location):
    location = new_location()
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, location], stdout=subprocess.PIPE, text=True
    )
    acknowledged = [child.stdout.readline().strip() for _ in range(200)]
    child.send_signal(signal.SIGKILL)
    child.wait(10)
    # PostgreSQL lets the dead writer's lock go once its session sees the socket closed,
    # which may be a moment after the process is gone: wait for it (SQLite's goes at once)
    with koinii.open_kb(location, standby=True) as kb:
        stored = {w["wrap_id"] for w in WrapQueue(kb).get_unprocessed_wraps()}
        assert set(acknowledged) <= stored
        # the store is usable afterwards: the next write takes the next seq
        seq = kb.seq
        assert invoker(kb)("wraps.add", wrap_id="after")["seq"] == seq + 1


def test_wraps_and_coordinators_move_between_sqlite_and_postgresql(tmp_path, postgres):
    from koinii.kb.store.migrate import migrate
    from tests.conftest import pg_location

    schemas: list[str] = []
    source, back = str(tmp_path / "from.db"), str(tmp_path / "back.db")
    with koinii.open_kb(source) as kb:
        Coordinators(kb).register("AgentCoordA", project_id="hive", session_id="s-a")
        queue = WrapQueue(kb)
        queue.add_wrap_notification("w1", project_id="hive:api", parent_session_id="s-a")
        queue.add_wrap_notification("w2", project_id="hive-mcp", created_ids=[1, "x"])
        marked = queue.mark_wrap_processed("w1")
        before = queue.wraps(include_processed=True)
    try:
        target = pg_location(postgres, schemas)
        migrate(source, target)
        migrate(target, back)
        for location in (target, back):
            with koinii.open_kb(location) as kb:
                queue = WrapQueue(kb)
                assert queue.wraps(include_processed=True) == before
                assert queue.get_unprocessed_wraps_for_hierarchy("hive") == []
                assert queue.mark_wrap_processed("w1") == marked
                assert Coordinators(kb).get("AgentCoordA")["session_id"] == "s-a"
    finally:
        for schema in schemas:
            postgres.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
