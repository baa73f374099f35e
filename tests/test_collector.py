"""The engine and Python's cyclic collector (kb/collector.py): what a big write made is
frozen, never rescanned by a full collection, and closing the KB gives it back."""

import gc

import koinii
from koinii.terms import Sym

FACTS = 20_000  # past collector.SETTLE_FROM objects made in one write


def a_big_write(kb):
    kb.edit(add=[((Sym("instance"), Sym(f"I{i}"), Sym(f"C{i % 50}")), "CxA") for i in range(FACTS)])


def test_what_a_big_write_made_is_frozen_until_the_kb_closes(new_location):
    kb = koinii.open_kb(new_location())
    frozen = gc.get_freeze_count()
    a_big_write(kb)
    assert gc.get_freeze_count() >= frozen + FACTS  # a node each, at least
    kb.close()
    assert gc.get_freeze_count() == 0

