"""The engine and Python's cyclic collector (kb/collector.py): what a big write made is
frozen, never rescanned by a full collection, and closing the KB gives it back; a big
answer is not rescanned while a query makes it."""

import gc

import pytest

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


def test_a_big_read_is_not_rescanned_by_the_collector_while_it_is_made(new_location):
    with koinii.open_kb(new_location()) as kb:
        a_big_write(kb)
        collections = []
        reading = False

        def count(phase, info):
            if reading and phase == "start":
                collections.append(info["generation"])

        gc.callbacks.append(count)
        try:
            reading = True
            rows = kb.query("(instance ?i ?c)", "CxA")
            reading = False
        finally:
            gc.callbacks.remove(count)
        assert len(rows) == FACTS
        assert len(collections) <= 2  # before its answer was big, or as it resumed (not 30)


def test_a_big_read_refused_midway_leaves_the_collector_running(new_location):
    with koinii.open_kb(new_location()) as kb:
        a_big_write(kb)
        with pytest.raises(koinii.Refused) as refusal, kb.budget(0.002):
            kb.query("(and (instance ?i ?c) (instance ?j ?c))", "CxA")
        assert refusal.value.kind == "budget-exhausted"
        assert gc.isenabled()
