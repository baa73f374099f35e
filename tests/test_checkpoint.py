"""Opening a store from its checkpoint (kb/checkpoint.py, docs/engine.md "Storage").

A checkpoint is a cache of the in-memory state: opening from it plus the rows written
since must hold exactly what a rebuild from the rows holds (the state machine in
test_kb_state_machine.py compares them over random histories; here, under kill -9 too).
A checkpoint that is damaged, of another store, ahead of the store, of a copy that went
its own way, or written by other code is never used — the store is rebuilt instead —
and nothing but the engine's own classes is ever unpickled from one.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import pickle
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import zlib

import pytest

import koinii
from koinii import Refused
from koinii.kb import checkpoint
from tests.conftest import Daemon
from tests.test_kb_state_machine import _internals


def _fill(kb: koinii.KB) -> dict[str, int]:
    kb.assert_("(genlCx CxTeam CxShared)", "CxUniverse")
    kb.assert_("(implies (and (parent ?x ?y) (parent ?y ?z)) (grandparent ?x ?z))", "CxShared")
    handles = {
        "ann-bob": kb.assert_("(parent Ann Bob)", "CxShared"),
        "bob-cat": kb.assert_("(parent Bob Cat)", "CxTeam"),
        "ready": kb.assert_("(ready Release)", "CxShared"),
    }
    kb.assert_("(not (ready Release))", "CxTeam", strength="monotonic")
    return handles


def _opened(path, **options) -> tuple[dict, dict]:
    """How the store at `path` opens, and what it then holds."""
    with koinii.open_kb(path, **options) as kb:
        return kb.opened, _internals(kb)


def _rebuilt(path) -> dict:
    return _opened(path, checkpoints=False)[1]


def test_a_store_opens_from_its_checkpoint_and_the_rows_written_since(new_location, backend):
    path = new_location()
    with koinii.open_kb(path) as kb:
        handles = _fill(kb)
        assert kb.opened["from"] == "rows"
        written = kb.checkpoint()
        assert written["seq"] == kb.seq and written["bytes"] > 0
        assert os.path.isfile(written["path"])
        if backend == "postgres":  # in this machine's cache, named by the store's id
            assert written["path"].startswith(os.environ["XDG_CACHE_HOME"])
    opened, held = _opened(path)
    assert opened["from"] == "checkpoint" and opened["tail_sentexes"] == 0
    assert held == _rebuilt(path)

    with koinii.open_kb(path) as kb:  # the tail: new rows, a changed row, deleted rows
        kb.assert_("(parent Cat Dan)", "CxTeam")
        kb.assert_("(parent Ann Bob)", "CxShared", strength="monotonic")
        kb.retract(handles["ready"])
        kb.assert_("(genlCx CxSide CxTeam)", "CxUniverse")
        seq = kb.seq
    opened, held = _opened(path)
    assert opened["from"] == "checkpoint" and opened["seq"] == written["seq"]
    assert opened["tail_sentexes"] >= 4 and opened["tail_justifications"] >= 1
    assert held == _rebuilt(path)
    with koinii.open_kb(path) as kb:
        assert kb.seq == seq
        assert kb.query("(grandparent ?x ?z)", "CxSide") == [
            {"?x": koinii.Sym("Ann"), "?z": koinii.Sym("Cat")},
            {"?x": koinii.Sym("Bob"), "?z": koinii.Sym("Dan")},
        ]
        assert kb.sentex(handles["ann-bob"]).strength == "monotonic"
        assert kb.sentex(handles["ready"]) is None


def _checkpointed(tmp_path) -> tuple[str, str]:
    path = str(tmp_path / "team.db")
    with koinii.open_kb(path) as kb:
        _fill(kb)
        written = kb.checkpoint()
    return path, written["path"]


def _damage(file: str, how: str) -> None:
    data = bytearray(pathlib.Path(file).read_bytes())
    if how == "cut short":
        data = data[: len(data) * 2 // 3]
    elif how == "a byte changed":
        data[-100] ^= 0xFF
    elif how == "not a checkpoint":
        data = bytearray(b"hello\n" + data)
    elif how == "empty":
        data = bytearray()
    elif how == "a header that is none":
        body = data[len(checkpoint.MAGIC) :]
        data = bytearray(checkpoint.MAGIC + b"5\n" + body[body.index(b"\n") + 1 :])
    pathlib.Path(file).write_bytes(bytes(data))


@pytest.mark.parametrize(
    "how", ["cut short", "a byte changed", "not a checkpoint", "empty", "a header that is none"]
)
def test_a_damaged_checkpoint_is_not_used(tmp_path, how, caplog):
    path, file = _checkpointed(tmp_path)
    _damage(file, how)
    with caplog.at_level(logging.WARNING, logger="koinii.kb"):
        opened, held = _opened(path)
    assert opened["from"] == "rows"
    assert held == _rebuilt(path)
    assert "unreadable" in caplog.text


def test_a_checkpoint_of_another_store_is_not_used(tmp_path):
    _, file = _checkpointed(tmp_path)
    other = str(tmp_path / "other.db")
    with koinii.open_kb(other) as kb:
        _fill(kb)  # the same writes: only the store's id tells them apart
    shutil.copy(file, other + ".checkpoint")
    assert _opened(other)[0]["from"] == "rows"


def test_a_checkpoint_ahead_of_the_store_is_not_used(tmp_path):
    path = str(tmp_path / "team.db")
    with koinii.open_kb(path) as kb:
        _fill(kb)
    shutil.copy(path, tmp_path / "older.db")  # a copy taken now, put back later
    with koinii.open_kb(path) as kb:
        kb.assert_("(parent Cat Dan)", "CxTeam")
        kb.checkpoint()
    shutil.copy(tmp_path / "older.db", path)
    opened, held = _opened(path)
    assert opened["from"] == "rows"
    assert "(parent Cat Dan)" not in {n[0] for n in held["nodes"].values()}


def test_a_copy_that_went_its_own_way_is_not_mistaken_for_the_store(tmp_path):
    path = str(tmp_path / "team.db")
    with koinii.open_kb(path) as kb:
        _fill(kb)
    copy = str(tmp_path / "copy.db")
    shutil.copy(path, copy)  # the same store id, the same history so far
    with koinii.open_kb(path) as kb:
        kb.assert_("(parent Cat Dan)", "CxTeam")
        kb.checkpoint()
    with koinii.open_kb(copy) as kb:
        kb.assert_("(parent Cat Eve)", "CxTeam")  # the same seq, another write
    shutil.copy(path + ".checkpoint", copy + ".checkpoint")
    opened, held = _opened(copy)
    assert opened["from"] == "rows"
    assert held == _rebuilt(copy)


def test_a_checkpoint_written_by_other_code_is_not_used(tmp_path, monkeypatch):
    path, _ = _checkpointed(tmp_path)
    monkeypatch.setattr(checkpoint, "_LAYOUT", "another version")
    assert _opened(path)[0]["from"] == "rows"


def test_nothing_but_the_engines_own_classes_is_unpickled(tmp_path, caplog):
    path, file = _checkpointed(tmp_path)
    witness = tmp_path / "ran"

    class Hostile:
        def __reduce__(self):
            return (os.mkdir, (str(witness),))

    with open(file, "rb") as f:
        magic, header = f.read(len(checkpoint.MAGIC)), json.loads(f.readline())
    payload = pickle.dumps(Hostile())
    header.update(length=len(payload), crc=zlib.crc32(payload))
    with open(file, "wb") as f:
        f.write(magic + json.dumps(header).encode() + b"\n" + payload)
    with caplog.at_level(logging.WARNING, logger="koinii.kb"):
        opened, held = _opened(path)
    assert opened["from"] == "rows" and not witness.exists()
    assert "holds no posix.mkdir" in caplog.text
    assert held == _rebuilt(path)


def _written_in_the_background(path: str) -> None:
    """Until the checkpoint a forked writer is making is in place (or 30 s went by)."""
    deadline = time.monotonic() + 30
    while not os.path.exists(path + ".checkpoint") and time.monotonic() < deadline:
        time.sleep(0.02)


def test_close_leaves_a_checkpoint_in_the_background_on_a_store_big_enough(tmp_path, monkeypatch):
    path = str(tmp_path / "team.db")
    monkeypatch.setattr(checkpoint, "KEEP_FROM", 10)
    with koinii.open_kb(path) as kb:
        _fill(kb)
        seq = kb.seq
    _written_in_the_background(path)
    opened, _ = _opened(path)
    assert opened == {**opened, "from": "checkpoint", "seq": seq, "tail_sentexes": 0}


def test_a_big_write_is_followed_by_a_checkpoint_at_once(tmp_path, monkeypatch):
    """A rule's closure (a big write) leaves a checkpoint behind it, in the background, at
    once: the store reopens from it with nothing to replay — though it is too small to be
    given one at close, and was not given one by its small writes before."""
    path = str(tmp_path / "team.db")
    monkeypatch.setattr(checkpoint, "KEEP_AFTER_WRITE_OF", 100)
    with koinii.open_kb(path) as kb:
        kb.edit(add=[(f"(n N{i})", "CxShared") for i in range(80)])  # 80 rows: small
        assert not os.path.exists(path + ".checkpoint")
        kb.assert_("(implies (n ?x) (m ?x))", "CxShared")  # 161 rows: big
        seq = kb.seq
        _written_in_the_background(path)
    opened, held = _opened(path)
    assert opened == {**opened, "from": "checkpoint", "seq": seq, "tail_sentexes": 0}
    assert opened["tail_justifications"] == 0
    assert held == _rebuilt(path)


def test_a_small_store_leaves_no_checkpoint_at_close(tmp_path):
    path = str(tmp_path / "team.db")
    with koinii.open_kb(path) as kb:
        _fill(kb)
    time.sleep(0.2)
    assert not os.path.exists(path + ".checkpoint")


def test_a_checkpoint_is_refused_where_none_is_kept(tmp_path):
    with koinii.open_kb() as kb:
        with pytest.raises(Refused) as refused:
            kb.checkpoint()
        assert refused.value.kind == "checkpoint-unsupported"
        assert "SQLite" in refused.value.message
    with koinii.open_kb(tmp_path / "off.db", checkpoints=False) as kb:
        with pytest.raises(Refused) as refused:
            kb.checkpoint()
        assert refused.value.kind == "checkpoint-unsupported"
    with koinii.open_kb(tmp_path / "team.db") as kb:
        kb.begin_group()
        kb.assert_("(parent Ann Bob)", "CxShared")
        with pytest.raises(Refused) as refused:
            kb.checkpoint()
        assert refused.value.kind == "group-open"
        kb.commit_group()
    assert not os.path.exists(tmp_path / "team.db.checkpoint")


def test_a_writer_that_died_midway_leaves_nothing_behind_for_long(tmp_path):
    path = str(tmp_path / "team.db")
    abandoned = f"{path}.checkpoint.{2**22 + 1}.tmp"  # above any pid the kernel gives out
    in_progress = f"{path}.checkpoint.{os.getppid()}.tmp"  # a live process's
    for name in (abandoned, in_progress):
        pathlib.Path(name).write_bytes(b"half a checkpoint")
    with koinii.open_kb(path) as kb:
        _fill(kb)
        kb.checkpoint()
    assert not os.path.exists(abandoned) and os.path.exists(in_progress)


def test_checkpoints_off_never_reads_one(tmp_path):
    path, _ = _checkpointed(tmp_path)
    assert _opened(path, checkpoints=False)[0]["from"] == "rows"


def test_a_long_running_writer_keeps_its_checkpoint_up_as_the_store_changes(tmp_path, monkeypatch):
    path = str(tmp_path / "team.db")
    monkeypatch.setattr(checkpoint, "KEEP_FROM", 10)
    monkeypatch.setattr(checkpoint, "KEEP_EVERY_S", 0.0)
    with koinii.open_kb(path) as kb:
        _fill(kb)
        assert kb.keep_checkpoint()  # the store changed: one is due
        assert not kb.keep_checkpoint()  # nothing changed since
        kb.begin_group()
        kb.assert_("(parent Dan Eve)", "CxTeam")
        assert not kb.keep_checkpoint()  # never with a group open
        kb.commit_group()
    monkeypatch.setattr(checkpoint, "KEEP_FROM", 10**9)
    with koinii.open_kb(path) as kb:
        _fill(kb)
        kb.assert_("(parent Eve Fay)", "CxTeam")
        assert not kb.keep_checkpoint()  # too small a store to gain from one


def test_a_daemon_says_how_it_opened_its_store(tmp_path):
    path, _ = _checkpointed(tmp_path)
    daemon = Daemon(path, []).start()
    try:
        line = daemon.proc.stderr.readline().decode()
        with daemon.client() as client:
            seq = client.health()["seq"]
            opened = client.health()["opened"]
        assert f"opened from its checkpoint at seq {seq} + 0 row(s) written since in " in line
        assert opened["from"] == "checkpoint" and opened["seq"] == seq
        with daemon.client() as client:
            client.assert_("(parent Cat Dan)", "CxTeam")
    finally:
        daemon.kill()
    daemon.start()
    try:
        with daemon.client() as client:
            opened = client.health()["opened"]
        assert opened["from"] == "checkpoint" and opened["tail_sentexes"] >= 1
    finally:
        daemon.stop()


# --- kill -9 ------------------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import random, sys
    import koinii
    kb = koinii.open_kb(sys.argv[1])
    rng = random.Random(int(sys.argv[2]))
    kb.assert_("(implies (and (likes ?x ?y) (likes ?y ?x)) (trusts ?x ?y))", "CxA")
    names = ["Ann", "Bob", "Cat", "Dan"]
    handles = []
    step = 0
    while True:
        step += 1
        roll = rng.random()
        try:
            if roll < 0.5 or not handles:
                a, b = rng.choice(names), rng.choice(names)
                ctx = rng.choice(["CxA", "CxB", "CxC"])
                sentence = f"(likes {a} {b})" if rng.random() < 0.8 else f"(not (likes {a} {b}))"
                strength = "monotonic" if rng.random() < 0.2 else "default"
                handles.append(kb.assert_(sentence, ctx, strength=strength))
            elif roll < 0.7:
                kb.retract(handles.pop(rng.randrange(len(handles))))
            elif roll < 0.8:
                mask = f"(except (sentexHandle {rng.choice(handles)}))"
                kb.assert_(mask, rng.choice(["CxA", "CxC"]))
            elif roll < 0.85:
                kb.assert_(rng.choice(["(genlCx CxB CxA)", "(genlCx CxC CxB)"]), "CxUniverse")
            elif roll < 0.93:
                kb.checkpoint()
            else:
                kb.checkpoint(wait=False)
        except koinii.Refused:
            pass
        print(step, kb.seq, flush=True)
    """
)


@pytest.mark.parametrize("round_", range(3))
def test_a_store_killed_at_any_point_opens_from_its_checkpoint_as_a_rebuild_would(
    new_location, round_, caplog
):
    path = new_location()
    rng = random.Random(round_)
    for kill in range(3):
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, path, str(100 * round_ + kill)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        acknowledged = 0
        try:
            for _ in range(rng.randrange(20, 120)):
                line = child.stdout.readline()
                if not line:
                    raise AssertionError("the writer stopped early: " + child.stderr.read())
                acknowledged = int(line.split()[1])
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
            child.stdout.close()
            child.stderr.close()
        _wait_for_the_lock(path)
        with caplog.at_level(logging.INFO, logger="koinii.kb"):
            opened, held = _opened(path)
        assert "checkpoint" not in caplog.text  # none passed over: each whole, and ours
        assert held["seq"] >= acknowledged
        assert held == _rebuilt(path), opened
    assert _opened(path)[0]["from"] == "checkpoint"


def _wait_for_the_lock(path: str) -> None:
    """A writer killed as it forked its checkpoint's writer leaves the store's lock with
    the child for the moment the child takes to close what it inherited (well under a
    second); then the store opens."""
    deadline = time.monotonic() + 2.0
    while True:
        try:
            koinii.open_kb(path, checkpoints=False).close()
            return
        except Refused as refusal:
            if refusal.kind != "store-locked" or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


LONG_SYMBOLS = textwrap.dedent(
    """
    import sys
    import koinii
    from koinii import Sym
    kb = koinii.open_kb(sys.argv[1])
    assert kb.opened["from"] == "checkpoint", kb.opened
    long = Sym(sys.argv[2])  # made by the checkpoint, not by this process
    try:
        kb.assert_((Sym("likes"), long, long, long), "CxA")
    except koinii.Refused as refusal:
        print(refusal.kind)
    """
)


def test_a_symbol_read_from_the_checkpoint_counts_toward_the_text_limit(tmp_path):
    """A tuple of symbols is measured by the longest symbol name made so far (terms.py,
    `Sym.longest`), without reading each name: the symbols a reopen makes from the
    checkpoint count too, or a sentence past the text limit would pass in memory."""
    path = str(tmp_path / "kb.sqlite")
    long = "L" + "o" * (koinii.terms.MAX_TEXT // 2 - 8)
    with koinii.open_kb(path) as kb:
        kb.assert_(f"(likes {long} {long})", "CxA")
        kb.checkpoint()
    done = subprocess.run(
        [sys.executable, "-c", LONG_SYMBOLS, path, long],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "shape"


def test_search_clashes_and_watches_read_the_state_a_checkpoint_brought(tmp_path):
    """The parts the KB holds as objects of their own (search, clashes, watching: the
    engine's composed parts) are made once it is open: opened from a checkpoint, they read
    the index and the hierarchy it brought, not the empty ones a KB starts from."""
    path = str(tmp_path / "team.db")
    with koinii.open_kb(path) as kb:
        kb.assert_("(genlCx CxTeam CxShared)", "CxUniverse")
        kb.assert_("(ready Release)", "CxShared")
        kb.assert_("(not (ready Release))", "CxShared")
        kb.assert_("(cacheBackend Staging Redis7)", "CxShared")
        kb.checkpoint()
    with koinii.open_kb(path) as kb:
        assert kb.opened["from"] == "checkpoint"
        hits = kb.search("cache backend", "CxTeam", ranking="lexical")
        assert [hit.sentex.text for hit in hits] == ["(cacheBackend Staging Redis7)"]
        [dilemma] = kb.contradictions("CxTeam")
        assert {side["sentence"] for side in dilemma["sides"]} == {
            "(ready Release)",
            "(not (ready Release))",
        }
        events: list = []
        kb.watch(events.append, ctx="CxTeam")  # sees CxShared through the hierarchy
        kb.assert_("(owner Release Dana)", "CxShared")
        assert [c["sentence"] for e in events for c in e.added] == ["(owner Release Dana)"]


def test_reads_see_the_masks_and_rules_a_checkpoint_brought(tmp_path):
    """Reads, a composed part too, is made once the KB is open: opened from a checkpoint,
    a query, `why_not` and `stats` read the masks and rules it brought (taken whole, as
    the index and hierarchy are), not the empty ones a KB starts from."""
    path = str(tmp_path / "team.db")
    with koinii.open_kb(path) as kb:
        kb.assert_("(genlCx CxTeam CxShared)", "CxUniverse")
        hidden = kb.assert_("(cacheBackend Staging Redis6)", "CxShared")
        kb.assert_("(cacheBackend Staging Redis7)", "CxShared")
        kb.assert_(f"(except (sentexHandle {hidden}))", "CxTeam")
        kb.assert_("(implies (cacheBackend ?s ?b) (usesCache ?s))", "CxShared")
        before = kb.stats()
        kb.checkpoint()
    with koinii.open_kb(path) as kb:
        assert kb.opened["from"] == "checkpoint"
        assert kb.query("(cacheBackend Staging ?b)", "CxTeam") == [{"?b": koinii.Sym("Redis7")}]
        assert kb.why_not(hidden, "CxTeam") == "excepted"
        assert kb.why_not(hidden) == "excepted"
        assert kb.query("(cacheBackend Staging ?b)", "CxShared") == [
            {"?b": koinii.Sym("Redis6")},
            {"?b": koinii.Sym("Redis7")},
        ]
        assert kb.stats() == before and before["rules"] >= 2
