"""PostgreSQL failover: a writer daemon and a --standby daemon on one database; the writer
is killed under a write load; the standby takes over with every acknowledged write, and a
subscriber resumes from its seq without loss."""

import signal
import threading
import time

import pytest

import koinii
from koinii import Refused, Unavailable
from tests.conftest import Daemon, pg_location


@pytest.fixture
def database(postgres):
    schemas: list[str] = []
    yield pg_location(postgres, schemas)
    for schema in schemas:
        postgres.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_a_standby_takes_over_when_the_writer_is_killed(database):
    writer = Daemon(database, []).start()
    standby = Daemon(database, ["--standby"])
    try:
        client = writer.client()
        client.assert_("(started Load)", "CxLoad")
        resume_from = client.seq  # what a subscriber had seen before the crash

        # the standby waits for the lock: it does not serve while the writer lives
        standby_started = threading.Thread(target=standby.start, kwargs={"timeout": 60})
        standby_started.start()
        time.sleep(1.0)
        assert standby.proc.poll() is None and standby_started.is_alive()

        acknowledged: list[tuple[int, str]] = []
        stop = threading.Event()

        def load(name: str) -> None:
            c = writer.client()
            i = 0
            while not stop.is_set():
                sentence = f"(wrote {name} Item{i})"
                try:
                    acknowledged.append((c.assert_(sentence, "CxLoad"), sentence))
                except (Unavailable, Refused):
                    return
                i += 1

        threads = [threading.Thread(target=load, args=(f"Writer{n}",)) for n in range(3)]
        for t in threads:
            t.start()
        time.sleep(0.8)
        writer.proc.send_signal(signal.SIGKILL)
        writer.proc.wait(10)
        stop.set()
        for t in threads:
            t.join(10)
        assert len(acknowledged) > 10

        killed_at = time.monotonic()
        standby_started.join(60)
        assert time.monotonic() - killed_at < 10  # takes over within a few seconds
        survivor = standby.client()
        for handle, sentence in acknowledged:
            sentex = survivor.sentex(handle)
            assert sentex is not None and sentex.text == sentence

        # a subscriber resumes from its last seq through the durable tail: nothing missed
        seen = []
        since = resume_from
        while True:
            tail = survivor.changes(since=since, limit=500)
            assert tail["too_old"] is False
            if not tail["entries"]:
                break
            seen.extend(c["handle"] for e in tail["entries"] for c in e["added"])
            since = tail["entries"][-1]["seq"]
        assert {h for h, _ in acknowledged} <= set(seen)

        # and the new writer writes
        assert isinstance(survivor.assert_("(resumed Load)", "CxLoad"), int)
    finally:
        writer.kill()
        standby.kill()


def test_a_second_writer_without_standby_refuses_to_start(database):
    writer = Daemon(database, []).start()
    try:
        with pytest.raises(RuntimeError) as failure:
            Daemon(database, []).start()
        assert "store-locked" in str(failure.value)
        with pytest.raises(Refused) as refusal:
            koinii.open_kb(database)
        assert refusal.value.kind == "store-locked"
    finally:
        writer.kill()
