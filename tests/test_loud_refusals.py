"""What used to succeed quietly, or crash, is refused by name (issue 17's "small lies").

- The shipped vocabulary is read-only: its retraction would be undone by the next open.
- The SQLite writer lock is taken on the resolved path: a symlink finds the same lock.
- An integer past the digit limit is refused `shape`, never a ValueError (a 500).
- A handle past a 64-bit column is refused `bad-handle`.
- Loud typos: a missing token table, a mistyped store for what only reads, a missing
  migrate source, a retract of a handle that names nothing.

Each refusal is checked in-process and over the wire, and leaves the store unchanged.
"""

from __future__ import annotations

import os
import subprocess

import pytest

import koinii
from koinii import Refused, Sym
from tests.conftest import forker, refused

HUGE = "9" * 4301  # one digit past terms.MAX_INT_DIGITS


def vocabulary_handle(store) -> int:
    return store.sentexes_matching("(arity arity ?n)", "CxCore")[0].handle


def unchanged(store, call) -> Refused:
    before = store.stats()
    refusal = refused(call)
    assert store.stats() == before
    return refusal


# --- the shipped vocabulary -------------------------------------------------------------------


def test_retracting_shipped_vocabulary_is_refused_by_name(kb):
    handle = vocabulary_handle(kb)
    refusal = unchanged(kb, lambda: kb.retract(handle))
    assert refusal.kind == "vocabulary-read-only"
    assert "(except (sentexHandle" in refusal.message  # says what to do instead
    assert unchanged(kb, lambda: kb.edit(remove=[handle])).kind == "vocabulary-read-only"
    assert [p["kind"] for p in kb.check_edit(remove=[handle])] == ["vocabulary-read-only"]
    assert kb.sentex(handle).believed


def test_the_vocabulary_edges_are_read_only_too(kb):
    edge = kb.sentexes_matching("(genlCx CxSpeechActs CxCore)", "CxUniverse")[0].handle
    assert unchanged(kb, lambda: kb.retract(edge)).kind == "vocabulary-read-only"


def test_a_context_sets_shipped_vocabulary_aside_with_a_mask(kb):
    handle = vocabulary_handle(kb)
    kb.assert_("(genlCx CxMine CxCore)", "CxUniverse")
    assert kb.believed(handle, "CxMine")
    kb.assert_(f"(except (sentexHandle {handle}))", "CxMine")
    assert not kb.believed(handle, "CxMine")
    assert kb.believed(handle, "CxCore")


def test_what_a_writer_stores_in_a_vocabulary_context_stays_retractable(kb):
    handle = kb.assert_("(note Mine)", "CxCore")
    assert kb.retract(handle).removed_sentexes == 1


def test_retracting_shipped_vocabulary_is_refused_over_the_wire(client):
    handle = vocabulary_handle(client)
    assert unchanged(client, lambda: client.retract(handle)).kind == "vocabulary-read-only"


# --- the writer lock on the resolved path -----------------------------------------------------


def test_a_symlink_to_a_held_store_is_store_locked(tmp_path):
    path = tmp_path / "team.db"
    link = tmp_path / "alias.db"
    with koinii.open_kb(path) as held:
        held.assert_("(likes Alice Bob)", "CxA")
        os.symlink(path, link)
        assert refused(lambda: koinii.open_kb(link)).kind == "store-locked"
        sub = tmp_path / "sub"
        sub.mkdir()
        assert refused(lambda: koinii.open_kb(sub / ".." / "team.db")).kind == "store-locked"
    with koinii.open_kb(link) as again:  # released: the link opens the same store
        assert again.sentexes_matching("(likes ?x ?y)", "CxA")[0].text == "(likes Alice Bob)"


def test_a_daemon_on_a_symlink_to_a_held_store_refuses_to_start(daemon, backend, tmp_path):
    if backend != "sqlite":
        pytest.skip("a symlink names an SQLite file")
    link = tmp_path / "alias.db"
    os.symlink(daemon.db, link)
    with pytest.raises(Refused) as caught:
        koinii.open_kb(link)
    assert caught.value.kind == "store-locked"


# --- integers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sentence", [f"(count Items {HUGE})", f"(count Items -{HUGE})", f"(note (f {HUGE}))"]
)
def test_an_integer_past_the_digit_limit_is_refused_shape(kb, sentence):
    refusal = unchanged(kb, lambda: kb.assert_(sentence, "CxA"))
    assert refusal.kind == "shape" and refusal.data["limit"] == 4300
    assert "string" in refusal.message  # how to write a bigger number
    assert refused(lambda: kb.query(sentence, "CxA")).kind == "shape"


def test_a_python_integer_past_the_digit_limit_is_refused_shape(kb):
    term = (Sym("count"), Sym("Items"), 10**4300)
    assert unchanged(kb, lambda: kb.assert_(term, "CxA")).kind == "shape"
    kb.assert_((Sym("count"), Sym("Items"), 10**4300 - 1), "CxA")  # 4300 digits: fine


@pytest.mark.parametrize("handle", [2**63, 10**5000], ids=["2**63", "10**5000"])
def test_a_handle_past_64_bits_is_bad_handle(kb, handle):
    assert unchanged(kb, lambda: kb.retract(handle)).kind == "bad-handle"
    assert refused(lambda: kb.sentex(handle)).kind == "bad-handle"
    sentence = f"(about (sentexHandle {2**63}) Alice)"
    assert unchanged(kb, lambda: kb.assert_(sentence, "CxA")).kind == "bad-handle"


def test_an_integer_past_the_digit_limit_is_refused_over_the_wire(client):
    sentence = f"(count Items {HUGE})"
    assert unchanged(client, lambda: client.assert_(sentence, "CxA")).kind == "shape"
    assert refused(lambda: client.query(sentence, "CxA")).kind == "shape"


# --- loud typos ---------------------------------------------------------------------------------


def koinii_cli(*args: str, cwd=None, timeout: float = 60) -> subprocess.CompletedProcess:
    return forker().run(list(args), timeout=timeout, cwd=None if cwd is None else str(cwd))


def one_refusal_line(result: subprocess.CompletedProcess, kind: str) -> str:
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and kind in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_serve_with_a_missing_token_table_refuses_to_start(tmp_path):
    missing = tmp_path / "teem.tokens"
    result = koinii_cli("serve", "--db", str(tmp_path / "kb.db"), "--port", "0",
                        "--tokens", str(missing))  # fmt: skip
    line = one_refusal_line(result, "no-token-table")
    assert f"koinii token add AgentAtlas --role agent --tokens {missing}" in line
    assert not missing.exists()


def test_a_store_that_is_not_there_is_refused_where_only_reading(new_location, backend, tmp_path):
    location = str(tmp_path / "teem.db") if backend == "sqlite" else new_location()
    refusal = refused(lambda: koinii.open_kb(location, create=False))
    assert refusal.kind == "no-such-store" and "koinii serve --db" in refusal.message
    if backend == "sqlite":
        assert not os.path.exists(location)
    with koinii.open_kb(location) as made:  # what writes makes the store
        made.assert_("(ready Release)", "CxA")
    with koinii.open_kb(location, create=False) as found:
        assert found.sentexes_matching("(ready ?x)", "CxA")


@pytest.mark.parametrize(
    "command",
    [
        ["query", "(ready ?x)", "-c", "CxA"],
        ["tail", "--no-follow"],
        ["wraps", "list"],
        ["sessions", "list"],
    ],
    ids=["query", "tail", "wraps", "sessions"],
)
def test_a_reading_command_on_a_mistyped_db_refuses_and_creates_nothing(tmp_path, command):
    typo = tmp_path / "teem.db"
    one_refusal_line(koinii_cli(*command, "--db", str(typo)), "no-such-store")
    assert sorted(os.listdir(tmp_path)) == []


def test_a_writing_command_makes_the_store(tmp_path):
    made = koinii_cli("assert", "(ready Release)", "-c", "CxA", "--db", str(tmp_path / "new.db"))
    assert made.returncode == 0, made.stderr
    found = koinii_cli("query", "(ready ?x)", "-c", "CxA", "--db", str(tmp_path / "new.db"))
    assert found.returncode == 0 and "Release" in found.stdout


def test_migrate_from_a_missing_store_refuses(tmp_path):
    target = tmp_path / "target.db"
    result = koinii_cli("migrate", "--from", str(tmp_path / "teem.db"), "--to", str(target))
    one_refusal_line(result, "no-such-store")
    assert not target.exists()


def test_retract_of_an_unknown_handle_is_refused_over_the_wire(client):
    refusal = unchanged(client, lambda: client.retract(10**9))
    assert refusal.kind == "unknown-handle" and refusal.data["issued"] is False
    handle = client.assert_("(ready Release)", "CxA")
    client.retract(handle)
    again = unchanged(client, lambda: client.retract(handle))
    assert again.kind == "unknown-handle" and again.data["issued"] is True
    edit = unchanged(client, lambda: client.edit(add=[("(ready Other)", "CxA")], remove=[10**9]))
    assert edit.kind == "unknown-handle" and edit.data["rolled_back"] is True
