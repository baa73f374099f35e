"""What holds many: a node many justifications rest on, an index bucket of many nodes.

Past 64 entries a node's `justs` or `uses`, and past 16 an index bucket, is a `ListSet`
(sentex.py): a list, with a map from entry to place made at its first removal. It costs
a list's 8 bytes an entry, not a dict's 38 or a set's 58 (over SUMO the inheritance
axiom's 772,000 such justifications and 360,000 such nodes were 50 MB of its peak), and
removing entries one by one, in any order, still leaves exactly what a rebuild from the
rows builds, and what a checkpoint gives back.
"""

from __future__ import annotations

import random
import sys
import tracemalloc

import koinii
from koinii import Refused
from tests.test_kb_state_machine import _internals

INHERITANCE = "(implies (and (subclass ?x ?y) (instance ?z ?x)) (instance ?z ?y))"


def _uses_of(kb: koinii.KB, handle: int) -> list:
    return kb._maintenance.index.by_handle[handle].uses


def _fill(kb: koinii.KB, count: int) -> tuple[int, list[int]]:
    kb.assert_(INHERITANCE, "CxZoo")
    subclass = kb.assert_("(subclass Dog Animal)", "CxZoo")
    dogs = kb.edit(add=[(f"(instance Dog{i} Dog)", "CxZoo") for i in range(count)]).handles
    return subclass, dogs


def test_what_holds_hundreds_keeps_them_in_a_list_not_a_dict_or_a_set(kb):
    subclass, _ = _fill(kb, 500)
    uses = _uses_of(kb, subclass)
    assert len(uses) == 500
    assert sys.getsizeof(uses) < 10 * len(uses) + 200  # a dict: about 38 bytes an entry
    dogs = kb._maintenance.index.by_functor[koinii.Sym("instance")].args[1][koinii.Sym("Dog")]
    assert len(dogs) == 500
    assert sys.getsizeof(dogs) < 10 * len(dogs) + 200  # a set: about 58 bytes a member


def test_removing_them_one_by_one_in_any_order_leaves_what_a_rebuild_builds(tmp_path):
    path = tmp_path / "zoo.db"
    with koinii.open_kb(path) as kb:
        subclass, dogs = _fill(kb, 300)
        order = dogs[:]
        random.Random(41).shuffle(order)
        for handle in order[:150]:  # the first a removal from the middle: the map is made
            kb.retract(handle)
        try:  # a refused write that removed some is undone: they are put back
            kb.edit(remove=order[150:200], add=[("(bad ?variable)", "CxZoo")])
        except Refused as refusal:
            assert refusal.kind == "not-ground"
        kb.edit(remove=order[200:260])
        assert len(_uses_of(kb, subclass)) == 90
        assert len(kb.query("(instance ?d Animal)", "CxZoo")) == 90
        for handle in order[260:]:
            derived = kb.sentexes_matching(
                f"(instance {kb.sentex(handle).sentence[1].name} Animal)", "CxZoo"
            )
            assert [s.derived for s in derived] == [True]
            assert kb.why(derived[0].handle)["justifications"]
        kb.checkpoint()
        live = _internals(kb)
    with koinii.open_kb(path, checkpoints=False) as rebuilt:
        assert _internals(rebuilt) == live
    with koinii.open_kb(path) as reopened:
        assert reopened.opened["from"] == "checkpoint"
        assert _internals(reopened) == live
        reopened.retract(subclass)  # a bucket emptied one by one: a tuple again, then none
        assert reopened.query("(instance ?d Animal)", "CxZoo") == []
        assert len(reopened.query("(instance ?d Dog)", "CxZoo")) == 90
        live = _internals(reopened)
    with koinii.open_kb(path, checkpoints=False) as rebuilt:
        assert _internals(rebuilt) == live


def test_a_list_set_holds_what_a_set_would_through_any_adds_and_removals():
    import pickle

    from koinii.kb.sentex import ListSet

    rng = random.Random(41)
    items = [("item", i) for i in range(400)]
    for _ in range(20):
        held, model = ListSet(), set()
        for _ in range(600):
            if model and rng.random() < 0.45:
                # the last added (an undo's order) as often as any other
                item = held[-1] if rng.random() < 0.5 else rng.choice(sorted(model))
                held.discard(item)
                model.discard(item)
            else:
                item = rng.choice(items)
                if item not in model:
                    held.add(item)
                    model.add(item)
            assert len(held) == len(model) and set(held) == model
        again = pickle.loads(pickle.dumps(held))
        assert type(again) is ListSet and again == held and again.places is None


def test_a_write_of_many_justifications_streams_its_rows_into_the_store(kb):
    """A SQL store binds a big write's sentex, justification and full-text rows as they
    are made, never holding them all as tuples and JSON beside the nodes (over SUMO the
    inheritance axiom's rows were 130 MB of its peak on SQLite): what writing the rows
    allocates at its peak stays well under what the rows as lists take (about 150 bytes
    a justification), whatever the write's size. (Each pair is one conclusion with one
    justification: a conclusion derived again by the same rule keeps one, firing.py.)"""
    kb.assert_("(implies (and (left ?x) (right ?y)) (pair ?x ?y))", "CxPairs")
    sides = [(f"({side} N{i})", "CxPairs") for i in range(190) for side in ("left", "right")]
    store, peaks = kb._store, []
    write_rows = store._write_rows

    def measured(commits, log):
        tracemalloc.reset_peak()
        started = tracemalloc.get_traced_memory()[0]
        result = write_rows(commits, log)
        peaks.append(tracemalloc.get_traced_memory()[1] - started)
        return result

    store._write_rows = measured
    tracemalloc.start()
    try:
        kb.edit(add=sides)
    finally:
        tracemalloc.stop()
        del store._write_rows
    stats = kb.stats()
    assert stats["justifications"] > 30_000  # (a pair of every two: 190 x 190)
    rows = stats["justifications"] + stats["derived"]  # (and the change log's one row)
    assert peaks and peaks[-1] < 50 * rows
