"""A node that many justifications rest on, or that many conclude (maintenance.py, `Many`).

Past 64 entries a node's `justs` or `uses` is a list, with a map from entry to place made
at its first removal: it costs a list's 8 bytes an entry, not a dict's 38 (over SUMO the
inheritance axiom's 772,000 such entries were 29 MB of its peak), and removing entries
one by one, in any order, still leaves exactly what a rebuild from the rows builds.
"""

from __future__ import annotations

import random
import sys

import koinii
from koinii import Refused
from tests.test_kb_state_machine import _internals

INHERITANCE = "(implies (and (subclass ?x ?y) (instance ?z ?x)) (instance ?z ?y))"


def _uses_of(kb: koinii.KB, handle: int) -> list:
    return kb._index.by_handle[handle].uses


def _fill(kb: koinii.KB, count: int) -> tuple[int, list[int]]:
    kb.assert_(INHERITANCE, "CxZoo")
    subclass = kb.assert_("(subclass Dog Animal)", "CxZoo")
    dogs = kb.edit(add=[(f"(instance Dog{i} Dog)", "CxZoo") for i in range(count)]).handles
    return subclass, dogs


def test_a_statement_hundreds_of_derivations_rest_on_keeps_them_in_a_list_not_a_dict(kb):
    subclass, _ = _fill(kb, 500)
    uses = _uses_of(kb, subclass)
    assert len(uses) == 500
    assert sys.getsizeof(uses) < 10 * len(uses) + 200  # a dict: about 38 bytes an entry


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
        reopened.retract(subclass)
        assert reopened.query("(instance ?d Animal)", "CxZoo") == []
        assert len(reopened.query("(instance ?d Dog)", "CxZoo")) == 90
