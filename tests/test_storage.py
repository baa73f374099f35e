"""Storage and durability (engine.md §3 handles, §10 storage).

The durable records are the truth: reopening a store yields the same handles, the same
believed set and the same seq; an acknowledged write survives kill -9; a batch is
atomic on disk; the change log is durable and can be tailed from a seq.
"""

from __future__ import annotations

import gc
import os
import random
import signal
import subprocess
import sys
import textwrap
from collections import Counter

import pytest

import koinii
from koinii import Refused

RULES = [
    ("(implies (parent ?x ?y) (ancestor ?x ?y))", "CxFamily"),
    ("(implies (and (ancestor ?x ?y) (parent ?y ?z)) (ancestor ?x ?z))", "CxFamily"),
]
LATE_RULE = ("(implies (parent ?x ?y) (kin ?y ?x))", "CxBranch")
OPTIONAL_EDGE = "(genlCx CxOther CxFamily)"
PEOPLE = ["Ann", "Bob", "Cat", "Dan", "Eve", "Fay"]
CONTEXTS = ["CxFamily", "CxBranch", "CxOther"]
PATTERNS = [
    "(parent ?x ?y)",
    "(not (parent ?x ?y))",
    "(ancestor ?x ?y)",
    "(not (ancestor ?x ?y))",
    "(kin ?x ?y)",
    "(genlCx ?a ?b)",
]


def handles_of(result) -> list[int]:
    """assert_ returns a handle, or a list of them for a rule; edit returns one per entry."""
    if isinstance(result, int):
        return [result]
    out = []
    for item in result:
        out.extend(handles_of(item))
    return out


def described(sentex) -> tuple | None:
    if sentex is None:
        return None
    return (
        sentex.handle,
        sentex.text,
        sentex.context,
        sentex.polarity,
        sentex.strength,
        sentex.believed,
        sentex.derived,
    )


def snapshot(kb, handles) -> dict:
    """Everything a reader can see that must survive a reopen (timestamps aside)."""
    return {
        "tracked": {h: described(kb.sentex(h)) for h in sorted(handles)},
        "stored": {
            p: sorted(described(s) for s in kb.sentexes_matching(p, "CxEverything"))
            for p in PATTERNS
        },
        "believed": {
            p: sorted((s.handle, s.text, s.context) for s in kb.sentexes_matching(p, "?ctx"))
            for p in PATTERNS
        },
        "queries": {(p, ctx): kb.query(p, ctx) for p in PATTERNS for ctx in [*CONTEXTS, "?where"]},
        "contradictions": kb.contradictions(),
        "conflicts": kb.conflicts(),
        "seq": kb.seq,
    }


def portable(snap: dict) -> dict:
    """`snap` without the handles of derived sentexes.

    Handles of premises follow assertion order, but which derived sentex of one write gets
    which handle is not meaning (engine.md §3), so two KBs fed the same history are
    compared by content.
    """
    return {
        **snap,
        "stored": {p: sorted(d[1:] for d in ds) for p, ds in snap["stored"].items()},
        "believed": {p: sorted(b[1:] for b in bs) for p, bs in snap["believed"].items()},
        "contradictions": [
            [{**s, "handle": None} for s in c["sides"]] for c in snap["contradictions"]
        ],
        "conflicts": [[{**s, "handle": None} for s in c["sides"]] for c in snap["conflicts"]],
    }


def portable_log(kb) -> list:
    """The change log without timestamps and handles, each diff in content order."""

    def changes(cs):
        return sorted((c["sentence"], c["context"], c.get("reason")) for c in cs)

    return [
        (e["seq"], e["op"], changes(e["added"]), changes(e["removed"]))
        for e in kb.changes(0, limit=10_000)["entries"]
    ]


def random_fact(rng: random.Random) -> str:
    a, b = rng.sample(PEOPLE, 2)
    fact = f"(parent {a} {b})"
    return fact if rng.random() < 0.8 else f"(not {fact})"


def premises(kb, handles) -> list[int]:
    return sorted(h for h in handles if (s := kb.sentex(h)) is not None and not s.derived)


def play(kb, seed: int, steps: int = 60) -> set[int]:
    """A seeded random history of writes; returns every handle any write returned.

    Facts come and go; the two ancestor rules stay; a late rule and a genlCx edge are
    asserted and retracted now and then (so rules and the hierarchy change mid-history).
    """
    rng = random.Random(seed)
    handles: set[int] = set()
    facts: set[int] = set()  # what the history may retract
    handles.update(handles_of(kb.edit(add=[("(genlCx CxBranch CxFamily)", "CxUniverse")]).handles))
    for rule in RULES:
        handles.update(handles_of(kb.assert_(*rule)))
    edge = None
    late_rule = None
    for step in range(steps):
        roll = rng.random()
        if roll < 0.40:
            strength = "monotonic" if rng.random() < 0.15 else "default"
            added = handles_of(
                kb.assert_(random_fact(rng), rng.choice(CONTEXTS), strength=strength)
            )
            facts.update(added)
        elif roll < 0.55:
            candidates = premises(kb, facts)
            if candidates:
                kb.retract(rng.choice(candidates))
        elif roll < 0.75:
            add = [(random_fact(rng), rng.choice(CONTEXTS)) for _ in range(rng.randint(1, 4))]
            candidates = premises(kb, facts)
            remove = rng.sample(candidates, min(len(candidates), rng.randint(0, 2)))
            facts.update(handles_of(kb.edit(add=add, remove=remove).handles))
        elif roll < 0.82:
            if edge is None:
                edge = kb.assert_(OPTIONAL_EDGE, "CxUniverse")
                handles.add(edge)
            else:
                kb.retract(edge)
                edge = None
        elif roll < 0.86 and step > steps // 3:
            if late_rule is None:
                (late_rule,) = handles_of(kb.assert_(*LATE_RULE))
                handles.add(late_rule)
            else:
                kb.retract(late_rule)
                late_rule = None
        elif roll < 0.92:
            with pytest.raises(Refused):
                kb.edit(add=[(random_fact(rng), "CxFamily"), ("(parent ?x Ann)", "CxFamily")])
        else:
            stored = [s for h in sorted(facts) if (s := kb.sentex(h)) is not None]
            if stored:
                again = rng.choice(stored)
                assert handles_of(kb.assert_(again.sentence, again.context)) == [again.handle]
    return handles | facts


# --- reopen -------------------------------------------------------------------------------


def test_a_kb_let_go_without_close_frees_its_store_at_once(tmp_path):
    """Nothing inside a KB holds the KB (its composed parts see it through a weak
    proxy), so one dropped without `close` — a command that forgot to — releases its
    store and its writer's lock with its last reference, not whenever the cyclic
    collector next runs: `koinii tail --db` twice in one process was refused
    `store-locked` the second time."""
    path = str(tmp_path / "dropped.db")
    gc.disable()
    try:
        kb = koinii.open_kb(path)
        kb.assert_("(ready Release)", "CxA")
        del kb
        with koinii.open_kb(path) as again:
            assert again.query("(ready ?x)", "CxA") == [{"?x": koinii.Sym("Release")}]
    finally:
        gc.enable()


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_reopening_yields_the_same_handles_belief_and_seq(tmp_path, seed):
    path = tmp_path / "kb.sqlite"
    with koinii.open_kb(path) as kb:
        handles = play(kb, seed)
        before = snapshot(kb, handles)
        stats = kb.stats()
        log = kb.changes(0, limit=10_000)
    with koinii.open_kb(path) as kb:
        after = snapshot(kb, handles)
        assert after["tracked"] == before["tracked"]
        assert after["stored"] == before["stored"]
        assert after["believed"] == before["believed"]
        assert after["queries"] == before["queries"]
        assert after["contradictions"] == before["contradictions"]
        assert after["conflicts"] == before["conflicts"]
        assert kb.seq == before["seq"]
        assert kb.changes(0, limit=10_000) == log
        assert kb.stats() == stats


@pytest.mark.parametrize("seed", [7, 8])
def test_reopening_twice_changes_nothing(tmp_path, seed):
    path = tmp_path / "kb.sqlite"
    with koinii.open_kb(path) as kb:
        handles = play(kb, seed)
        before = snapshot(kb, handles)
    for _ in range(2):
        with koinii.open_kb(path) as kb:
            assert snapshot(kb, handles) == before


@pytest.mark.parametrize("seed", [9, 10])
def test_a_reopened_store_keeps_working_like_the_original(tmp_path, seed):
    """Writes after a reopen land exactly as they would have without the reopen."""
    with koinii.open_kb(tmp_path / "a.sqlite") as straight:
        handles = play(kb=straight, seed=seed)
        handles |= play(kb=straight, seed=seed + 100, steps=30)
        expected = portable(snapshot(straight, handles))
        expected_stats = straight.stats()
        expected_log = portable_log(straight)
    path = tmp_path / "b.sqlite"
    with koinii.open_kb(path) as kb:
        first = play(kb, seed)
    with koinii.open_kb(path) as kb:
        second = play(kb, seed + 100, steps=30)
        assert first | second == handles
        assert portable(snapshot(kb, handles)) == expected
        assert portable_log(kb) == expected_log
        assert kb.stats() == expected_stats


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_an_in_memory_kb_reads_the_same_as_a_file_kb(tmp_path, seed):
    with koinii.open_kb(None) as memory, koinii.open_kb(tmp_path / "kb.sqlite") as file:
        handles = play(memory, seed)
        assert play(file, seed) == handles
        assert portable(snapshot(memory, handles)) == portable(snapshot(file, handles))
        assert memory.stats() == file.stats()
        assert portable_log(memory) == portable_log(file)


def test_reopening_after_a_hierarchy_change_keeps_the_stats(tmp_path):
    path = tmp_path / "kb.sqlite"
    with koinii.open_kb(path) as kb:
        kb.assert_("(parent Ann Bob)", "CxFamily")
        edge = kb.assert_("(genlCx CxBranch CxFamily)", "CxUniverse")
        assert kb.sees("CxBranch", "CxFamily")
        kb.retract(edge)
        assert not kb.sees("CxBranch", "CxFamily")
        stats = kb.stats()
        seq = kb.seq
    with koinii.open_kb(path) as kb:
        assert not kb.sees("CxBranch", "CxFamily")
        assert kb.seq == seq
        assert kb.stats() == stats


def test_reopening_a_new_store_changes_nothing(tmp_path):
    path = tmp_path / "kb.sqlite"
    with koinii.open_kb(path) as kb:
        seq = kb.seq
        stats = kb.stats()
    with koinii.open_kb(path) as kb:  # loading the vocabulary again is idempotent
        assert kb.seq == seq
        assert kb.stats() == stats


# --- handles are never reused -----------------------------------------------------------------


def refused_batch(kb) -> None:
    """A batch of three good entries and one bad one (which comes last)."""
    with pytest.raises(Refused) as caught:
        kb.edit(
            add=[
                ("(likes Alice Bob)", "CxA"),
                ("(likes Carol Dave)", "CxA"),
                ("(likes Erin Frank)", "CxA"),
                ("(likes ?x Frank)", "CxA"),
            ]
        )
    assert caught.value.data["rolled_back"] is True


@pytest.mark.parametrize("location", ["memory", "sqlite"])
def test_handles_are_never_reused_after_a_refused_batch(tmp_path, location):
    with koinii.open_kb(None if location == "memory" else tmp_path / "kb.sqlite") as kb:
        first = kb.assert_("(likes Gina Hal)", "CxA")
        refused_batch(kb)
        second = kb.assert_("(likes Ida Jon)", "CxA")
        assert second > first + 3  # the refused batch's three good entries consumed handles
        assert kb.sentex(second).text == "(likes Ida Jon)"


def test_handles_are_never_reused_after_a_refused_batch_across_a_reopen(tmp_path):
    path = tmp_path / "kb.sqlite"
    with koinii.open_kb(path) as kb:
        first = kb.assert_("(likes Gina Hal)", "CxA")
        seq = kb.seq
        refused_batch(kb)  # the last thing before close is the refused batch
    with koinii.open_kb(path) as kb:
        assert kb.seq == seq
        second = kb.assert_("(likes Ida Jon)", "CxA")
        assert second > first + 3


def test_handles_are_never_reused_after_retracting_the_newest(tmp_path):
    path = tmp_path / "kb.sqlite"
    with koinii.open_kb(path) as kb:
        newest = kb.assert_("(likes Gina Hal)", "CxA")
        kb.retract(newest)
    with koinii.open_kb(path) as kb:
        assert kb.sentex(newest) is None
        assert kb.assert_("(likes Gina Hal)", "CxA") > newest


def test_handles_are_never_reused_after_a_derived_sentex_is_removed(tmp_path):
    path = tmp_path / "kb.sqlite"
    with koinii.open_kb(path) as kb:
        kb.assert_(*RULES[0])
        fact = kb.assert_("(parent Ann Bob)", "CxFamily")
        (derived,) = kb.sentexes_matching("(ancestor Ann Bob)", "CxFamily")
        assert derived.handle > fact
        kb.retract(fact)
        assert kb.sentex(derived.handle) is None
    with koinii.open_kb(path) as kb:
        assert kb.assert_("(parent Cat Dan)", "CxFamily") > derived.handle


# --- the change log -------------------------------------------------------------------------


@pytest.mark.parametrize("location", ["memory", "sqlite"])
def test_changes_since_a_seq_lists_the_later_writes_with_their_belief_diff(tmp_path, location):
    with koinii.open_kb(None if location == "memory" else tmp_path / "kb.sqlite") as kb:
        start = kb.seq
        alice = kb.assert_("(likes Alice Bob)", "CxA")
        carol = kb.assert_("(likes Carol Dave)", "CxA")
        kb.assert_("(likes Alice Bob)", "CxA")  # idempotent: no write
        with pytest.raises(koinii.Refused):
            kb.retract(10**9)  # unknown: refused, no write
        kb.retract(alice)
        log = kb.changes(start)
        assert log["too_old"] is False
        assert [e["seq"] for e in log["entries"]] == [start + 1, start + 2, start + 3]
        assert start + 3 == kb.seq == log["seq"]
        first, second, third = log["entries"]
        assert [(c["handle"], c["sentence"], c["context"]) for c in first["added"]] == [
            (alice, "(likes Alice Bob)", "CxA")
        ]
        assert first["removed"] == []
        assert [c["handle"] for c in second["added"]] == [carol]
        assert third["added"] == []
        assert [(c["handle"], c["reason"]) for c in third["removed"]] == [(alice, "retracted")]
        assert [e["seq"] for e in kb.changes(start + 1)["entries"]] == [start + 2, start + 3]
        assert kb.changes(kb.seq)["entries"] == []


@pytest.mark.parametrize("location", ["memory", "sqlite"])
def test_an_entry_reads_as_it_was_written_whatever_changes_after(tmp_path, location):
    """The memory store keeps an entry as the engine's changes and encodes it as it is
    read (store/memory.py): what changes after the write — the caller's summary, the
    sentex itself — must not show in it, as it does not in a SQL store's text."""
    with koinii.open_kb(None if location == "memory" else tmp_path / "kb.sqlite") as kb:
        summary = {"names": ["Alice"], "count": 1}
        _, edited = kb.transact(
            "test.write",
            lambda db, handles: None,
            add=[("(likes Alice Bob)", "CxA")],
            summary=summary,
        )
        written = kb.changes(edited.seq - 1)["entries"]
        summary["names"].append("Mallory")
        summary["count"] = 2
        kb.retract(edited.handles[0])
        (entry,) = kb.changes(edited.seq - 1, limit=1)["entries"]
        assert [entry] == written
        assert entry["records"] == {"names": ["Alice"], "count": 1}
        assert [(c["sentence"], c["context"]) for c in entry["added"]] == [
            ("(likes Alice Bob)", "CxA")
        ]


def test_a_sentence_of_symbols_given_as_terms_is_stored_with_its_text(tmp_path):
    """A tuple of symbols is not shown as it is written (checks.py, `Entry`): the row
    still gets its text, and one past the text limit is still refused whole."""
    from koinii import Sym

    path = tmp_path / "kb.sqlite"
    likes = Sym("likes")
    with koinii.open_kb(path) as kb:
        seq = kb.seq
        handles = kb.edit(
            add=[
                ((likes, Sym("Alice"), Sym("Bob")), "CxA"),
                ((Sym("not"), (likes, Sym("Bob"), Sym("Carl"))), "CxA"),
            ]
        ).handles
        near = "L" + "o" * (koinii.terms.MAX_TEXT // 2 - 8)  # two of them fit, three do not
        kb.assert_((likes, Sym(near), Sym(near)), "CxA")
        for sentence in [(likes, Sym(near), Sym(near), Sym(near)), f"(likes {near} {near} {near})"]:
            with pytest.raises(koinii.Refused) as refusal:
                kb.assert_(sentence, "CxA")
            assert refusal.value.kind == "shape"
            assert str(koinii.terms.MAX_TEXT) in refusal.value.message
        assert kb.seq == seq + 2
    with koinii.open_kb(path) as kb:
        assert [kb.sentex(h).text for h in handles] == [
            "(likes Alice Bob)",
            "(not (likes Bob Carl))",
        ]
        assert len(kb.sentexes_matching("(likes ?x ?y)", "CxA")) == 2


def test_every_durable_write_has_the_next_seq(tmp_path):
    with koinii.open_kb(tmp_path / "kb.sqlite") as kb:
        seqs = [kb.seq]
        kb.assert_("(likes Alice Bob)", "CxA")
        seqs.append(kb.seq)
        kb.edit(add=[("(likes Carol Dave)", "CxA"), ("(likes Erin Frank)", "CxB")])
        seqs.append(kb.seq)
        kb.retract(kb.sentexes_matching("(likes Alice Bob)", "CxA")[0].handle)
        seqs.append(kb.seq)
        assert seqs == list(range(seqs[0], seqs[0] + 4))
        entries = kb.changes(seqs[0])["entries"]
        assert [e["seq"] for e in entries] == seqs[1:]
        assert len(entries[1]["added"]) == 2  # an edit batch is one entry


def test_the_change_log_survives_a_reopen(tmp_path):
    path = tmp_path / "kb.sqlite"
    with koinii.open_kb(path) as kb:
        start = kb.seq
        kb.assert_("(likes Alice Bob)", "CxA")
        kb.assert_("(not (likes Alice Bob))", "CxB")
        log = kb.changes(start)
    with koinii.open_kb(path) as kb:
        assert kb.changes(start) == log
        kb.assert_("(likes Carol Dave)", "CxA")
        assert [e["seq"] for e in kb.changes(start)["entries"]] == [start + 1, start + 2, start + 3]


@pytest.mark.parametrize("location", ["memory", "sqlite"])
def test_a_since_below_the_compacted_floor_is_too_old(tmp_path, location):
    with koinii.open_kb(None if location == "memory" else tmp_path / "kb.sqlite") as kb:
        start = kb.seq
        for name in ["Alice", "Bob", "Carol", "Dave", "Erin"]:
            kb.assert_(f"(person {name})", "CxA")
        assert kb.compact_log(2) > 0
        assert kb.changes(start)["too_old"] is True
        assert kb.changes(kb.seq - 3)["too_old"] is True
        recent = kb.changes(kb.seq - 2)
        assert recent["too_old"] is False
        assert [e["seq"] for e in recent["entries"]] == [kb.seq - 1, kb.seq]


def test_an_in_memory_log_keeps_a_bounded_number_of_changes():
    from koinii.kb.engine import KB
    from koinii.kb.store.memory import MemoryStore

    def kept(since: int) -> list[int]:
        return [e["seq"] for e in kb.changes(since)["entries"]]

    kb = KB(MemoryStore(retain_changes=5))
    big = kb.edit(add=[(f"(person Z{i})", "CxA") for i in range(7)]).seq
    assert kept(0) == [big]  # the newest entry stays, whatever its size
    first = kb.edit(add=[(f"(person A{i})", "CxA") for i in range(3)]).seq
    assert kb.changes(0)["too_old"] is True and kept(big) == [first]
    second = kb.edit(add=[(f"(person B{i})", "CxA") for i in range(2)]).seq
    assert kept(big) == [first, second]  # 5 changes
    kb.assert_("(person C0)", "CxA")  # 6: the oldest entry goes
    assert kb.changes(big)["too_old"] is True and kept(first) == [second, second + 1]


def test_compaction_survives_a_reopen_and_keeps_the_seq(tmp_path):
    path = tmp_path / "kb.sqlite"
    with koinii.open_kb(path) as kb:
        start = kb.seq
        for name in ["Alice", "Bob", "Carol", "Dave", "Erin"]:
            kb.assert_(f"(person {name})", "CxA")
        kb.compact_log(1)
        seq = kb.seq
    with koinii.open_kb(path) as kb:
        assert kb.seq == seq
        assert kb.changes(start)["too_old"] is True
        assert [e["seq"] for e in kb.changes(seq - 1)["entries"]] == [seq]
        kb.assert_("(person Frank)", "CxA")
        assert kb.seq == seq + 1


def test_compacting_everything_keeps_the_seq_and_the_handles(tmp_path):
    path = tmp_path / "kb.sqlite"
    with koinii.open_kb(path) as kb:
        newest = kb.assert_("(person Alice)", "CxA")
        kb.retract(newest)
        seq = kb.seq
        kb.compact_log(0)
    with koinii.open_kb(path) as kb:
        assert kb.seq == seq
        assert kb.changes(seq) == {**kb.changes(seq), "entries": [], "too_old": False}
        assert kb.assert_("(person Bob)", "CxA") > newest
        assert kb.seq == seq + 1


# --- kill -9 ------------------------------------------------------------------------------

CHILD_TICKS = textwrap.dedent(
    """
    import sys
    import koinii
    kb = koinii.open_kb(sys.argv[1])
    kb.assert_("(implies (tick ?n) (seen ?n))", "CxCrash")
    handles = {}
    i = 0
    while True:
        handles[i] = kb.assert_(f"(tick {i})", "CxCrash")
        print("a", handles[i], i, flush=True)
        if i % 5 == 4:
            kb.retract(handles[i - 2])
            print("r", handles[i - 2], i - 2, flush=True)
        i += 1
    """
)

CHILD_BATCHES = textwrap.dedent(
    """
    import sys
    import koinii
    kb = koinii.open_kb(sys.argv[1])
    batch = 0
    while True:
        kb.edit(add=[(f"(batchItem {batch} {k})", "CxBatch") for k in range(50)])
        print(batch, flush=True)
        batch += 1
    """
)


def run_until(script: str, path, lines: int) -> list[str]:
    """Start `script` on `path`, read `lines` acknowledgements, then kill -9 it."""
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = []
    try:
        while len(seen) < lines:
            line = child.stdout.readline()
            if not line:
                raise AssertionError("the child stopped early: " + child.stderr.read())
            seen.append(line.split())
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    return seen


def test_an_acknowledged_write_survives_kill_9(tmp_path):
    path = tmp_path / "kb.sqlite"
    acks = run_until(CHILD_TICKS, path, 240)
    asserted = {int(i): int(h) for kind, h, i in acks if kind == "a"}
    retracted = {int(i) for kind, _, i in acks if kind == "r"}
    assert len(asserted) >= 200
    # the last retract may have landed without its acknowledgement being read
    newest = max(asserted)
    unsure = {i for i in asserted if i % 5 == 2 and i not in retracted and i + 2 >= newest}
    with koinii.open_kb(path) as kb:  # no store-locked: the dead writer's lock is gone
        for i, handle in asserted.items():
            if i in unsure:
                continue
            sentex = kb.sentex(handle)
            if i in retracted:
                assert sentex is None
                assert kb.query(f"(seen {i})", "CxCrash") == []
                continue
            assert sentex is not None, (i, handle)
            assert sentex.text == f"(tick {i})"
            assert sentex.context == "CxCrash"
            assert sentex.believed and not sentex.derived
            assert kb.query(f"(seen {i})", "CxCrash") == [{}]
        # belief is consistent: every stored tick is believed and has its one conclusion
        ticks = kb.sentexes_matching("(tick ?n)", "CxEverything")
        seen = kb.sentexes_matching("(seen ?n)", "CxEverything")
        assert all(s.believed for s in ticks + seen)
        assert sorted(s.sentence[1] for s in ticks) == sorted(s.sentence[1] for s in seen)
        stats = kb.stats()
        assert stats["sentexes"] == stats["premises"] + stats["derived"] == stats["believed"]
        assert stats["derived"] == len(seen)
        with koinii.open_kb() as fresh:  # the shipped vocabulary brings rules of its own
            assert stats["rules"] == fresh.stats()["rules"] + 1
        # the store is writable again, and handles continue past everything acknowledged
        handle = kb.assert_("(tick -1)", "CxCrash")
        assert handle > max(asserted.values())
        assert kb.query("(seen -1)", "CxCrash") == [{}]
        seq = kb.seq
    with koinii.open_kb(path) as kb:
        assert kb.seq == seq
        assert kb.sentex(handle).text == "(tick -1)"


def test_a_batch_is_atomic_on_disk(tmp_path):
    path = tmp_path / "kb.sqlite"
    acks = run_until(CHILD_BATCHES, path, 12)
    acknowledged = {int(b) for (b,) in acks}
    with koinii.open_kb(path) as kb:
        items = kb.sentexes_matching("(batchItem ?b ?k)", "CxBatch")
        assert len(items) % 50 == 0
        per_batch = Counter(s.sentence[1] for s in items)
        assert set(per_batch.values()) == {50}
        assert acknowledged <= set(per_batch)
        assert sorted(per_batch) == list(range(len(per_batch)))  # no gaps: writes in order
        assert kb.stats()["sentexes"] == kb.stats()["premises"]


@pytest.mark.parametrize("round_", range(3))
def test_repeated_kills_never_lose_an_acknowledged_batch(tmp_path, round_):
    path = tmp_path / "kb.sqlite"
    acknowledged: set[int] = set()
    for kills in range(1, 4):
        script = CHILD_BATCHES.replace("batch = 0", f"batch = {1000 * kills}")
        acknowledged |= {int(b) for (b,) in run_until(script, path, 3 + round_)}
        with koinii.open_kb(path) as kb:
            items = kb.sentexes_matching("(batchItem ?b ?k)", "CxBatch")
            per_batch = Counter(s.sentence[1] for s in items)
            assert set(per_batch.values()) == {50}
            assert acknowledged <= set(per_batch)
