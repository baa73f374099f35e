"""Any sequence of writes, retracts, masks and reopens keeps the KB whole (engine.md §5).

A hypothesis state machine drives one SQLite store through asserts of facts and rules
(some with a repeated antecedent, the shape that once crashed `retract`), masks
`(except (sentexHandle N))`, genlCx edges, retracts of any handle it has seen, and
reopens, with checkpoints taken between them. Invariants: nothing but `koinii.Refused`
is ever raised; reopening the store gives back exactly the KB that was in memory, and
opening it from its checkpoint plus the rows written since holds exactly what a rebuild
from the rows holds, structure for structure (kb/checkpoint.py); and the
KB equals one built afresh from its premises alone — edges first, then the rest in
order — which places every firing with the whole hierarchy in view: the incremental
re-placement a genlCx edge triggers (`Firing.place_again`) must end where it would.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import koinii
from koinii.kb.index import members

CONTEXTS = ["CxA", "CxB", "CxC"]
EDGES = ["(genlCx CxB CxA)", "(genlCx CxC CxB)", "(genlCx CxC CxA)", "(genlCx CxA CxC)"]
NAMES = ["Cat", "Dog"]
RULES = [
    "(implies (and (likes ?x ?y) (likes ?y ?x)) (trusts ?x ?y))",  # (likes Cat Cat) fills both
    "(implies (and (likes ?x ?x) (likes ?x ?x)) (vain ?x))",  # the same literal twice
    "(implies (likes ?x ?y) (knows ?x ?y))",
    "(implies (trusts ?x ?y) (likes ?y ?x))",  # concludes what another rule reads
    "(implies (and (knows ?x ?y) (not (trusts ?x ?y))) (wary ?x ?y))",
    # a conclusion derived over each ?y: one justification kept, the others elided
    "(implies (and (likes ?x ?y) (likes ?y ?z)) (knows ?x ?z))",
]
PREDICATES = {"likes": 2, "trusts": 2, "knows": 2, "wary": 2, "vain": 1}


def _snapshot(kb: koinii.KB, top: int) -> dict:
    """Everything a reader can tell about the KB: each handle's sentex, justifications
    and belief per context, and every query's answers per context."""
    sentexes = {}
    for handle in range(1, top + 1):
        sentex = kb.sentex(handle)
        if sentex is None:
            continue
        sentexes[handle] = (
            sentex.text,
            sentex.context,
            sentex.strength,
            sentex.believed,
            sentex.derived,
            repr(kb.why(handle)),
            tuple(kb.believed(handle, ctx) for ctx in CONTEXTS),
        )
    answers = {}
    for predicate, arity in PREDICATES.items():
        args = " ".join(f"?a{i}" for i in range(arity))
        for goal in (f"({predicate} {args})", f"(not ({predicate} {args}))"):
            for ctx in CONTEXTS:
                answers[(goal, ctx)] = repr(kb.query(goal, ctx))
    return {"sentexes": sentexes, "answers": answers, "seq": kb.seq}


def _reading(kb: koinii.KB) -> set:
    """What the KB holds and believes, by content (handles differ between two KBs)."""
    out = set()
    for node in kb._maintenance.index.by_handle.values():
        if node.atom[0] is koinii.Sym("except"):
            target = kb._maintenance.index.by_handle.get(node.atom[1][1])
            if target is not None and target.atom[0] is not node.atom[0]:
                # (a mask of nothing stored, or of a mask, is left out of the comparison)
                out.add(("except", node.context, target.full_text, target.context))
        else:
            out.add((node.full_text, node.context, node.premise, node.believed))
    return out


def _internals(kb: koinii.KB) -> dict:
    """Every structure the engine keeps, by handle: what a checkpoint restores and a
    rebuild builds, so the two can be compared part for part."""

    def handles(nodes) -> list:
        return sorted(n.handle for n in nodes)

    def ids(justifications) -> list:
        return sorted(j.id for j in justifications or ())

    index = kb._maintenance.index
    nodes = {
        h: (
            n.full_text,
            n.context,
            n.premise,
            n.strength,
            n.creator,
            n.created,
            n.extra,
            (n.believed, n.mono, n.defeated),
            ids(n.justs),
            ids(n.uses),
        )
        for h, n in index.by_handle.items()
    }
    justifications = {
        j.id: (j.conclusion.handle, j.rule.handle, tuple(a.handle for a in j.antecedents))
        for n in index.by_handle.values()
        for j in n.justs or ()
    }
    # (a functor's entry, and its argument tables, outlive its last node: left out)
    functors = {
        f.name: (
            handles(fi.every()),
            handles(members(fi.bare)),
            fi.negatives,
            [{repr(k): handles(members(b)) for k, b in args.items()} for args in fi.args if args],
        )
        for f, fi in index.by_functor.items()
        if fi.count
    }
    return {
        "nodes": nodes,
        "justifications": justifications,
        "functors": functors,
        "per_context": index.per_context,
        "two_sided": index.two_sided,
        "edges": kb._maintenance.hierarchy._parents,
        "rules": handles(kb._maintenance.rules),
        "by_literal": {
            k: sorted((n.handle, i) for n, i in v)
            for k, v in kb._maintenance.structures().rules_by_literal.items()
        },
        "masks": {h: handles(v) for h, v in kb._maintenance.masks.items()},
        "carriers": {f: handles(v) for f, v in kb._maintenance.structures().carriers.items()},
        "referrers": {h: handles(v) for h, v in kb._maintenance.structures().referrers.items()},
        "next_handle": kb._writes.ledger.next_handle,
        "seq": kb.seq,
    }


def _rebuilt(kb: koinii.KB) -> koinii.KB:
    """A fresh KB from `kb`'s premises: edges first, then everything else by handle,
    then the masks (their targets found again by content)."""
    fresh = koinii.open_kb()
    premises = sorted(
        (
            n
            for n in kb._maintenance.index.by_handle.values()
            if n.premise and n.context != "CxCore"
        ),
        key=lambda n: n.handle,
    )

    def strength(n):
        return "monotonic" if n.strength else "default"

    masks = []
    for node in premises:
        if node.atom[0] is koinii.Sym("genlCx"):
            fresh.assert_(node.full_text, node.context, strength=strength(node))
    for node in premises:
        if node.atom[0] is koinii.Sym("except"):
            masks.append(node)
        elif node.atom[0] is not koinii.Sym("genlCx"):
            fresh.assert_(node.full_text, node.context, strength=strength(node))
    for mask in masks:
        target = kb._maintenance.index.by_handle.get(mask.atom[1][1])
        if target is None or target.atom[0] is mask.atom[0]:
            continue
        found = fresh._maintenance.index.find(
            target.atom, target.key, target.context, target.positive
        )
        fresh.assert_(
            f"(except (sentexHandle {found.handle}))", mask.context, strength=strength(mask)
        )
    return fresh


class KBMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.folder = tempfile.mkdtemp(prefix="koinii-sm-")
        self.path = f"{self.folder}/store.db"
        self.kb = koinii.open_kb(self.path)
        self.handles: list[int] = []
        self.top = self.kb.stats()["sentexes"] + 64  # the shipped vocabulary, and room
        self.checkpointed = False

    def teardown(self) -> None:
        self.kb.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _write(self, call) -> None:
        try:
            result = call()
        except koinii.Refused:
            return
        handles = result if isinstance(result, list) else [result]
        for handle in handles:
            if isinstance(handle, int):
                self.handles.append(handle)
                self.top = max(self.top, handle + 64)

    @rule(
        a=st.sampled_from(NAMES),
        b=st.sampled_from(NAMES),
        positive=st.booleans(),
        ctx=st.sampled_from(CONTEXTS),
        strength=st.sampled_from(["default", "monotonic"]),
    )
    def assert_fact(self, a, b, positive, ctx, strength) -> None:
        atom = f"(likes {a} {b})"
        sentence = atom if positive else f"(not {atom})"
        self._write(lambda: self.kb.assert_(sentence, ctx, strength=strength))

    @rule(
        facts=st.lists(
            st.tuples(
                st.sampled_from(NAMES),
                st.sampled_from(NAMES),
                st.sampled_from(CONTEXTS),
                st.sampled_from([{}, {"strength": "monotonic"}]),
            ),
            min_size=2,
            max_size=4,
        )
    )
    def assert_facts_at_once(self, facts) -> None:
        # (one write deriving a conclusion over several of them: it keeps one
        # justification per rule, firing.py `_derive`, and the rest are found again)
        adds = [(f"(likes {a} {b})", ctx, fields) for a, b, ctx, fields in facts]
        self._write(lambda: self.kb.edit(add=adds).handles)

    @rule(
        text=st.sampled_from(RULES),
        ctx=st.sampled_from(CONTEXTS),
        strength=st.sampled_from(["default", "monotonic"]),
    )
    def assert_rule(self, text, ctx, strength) -> None:
        # (a monotonic rule makes monotonic conclusions of monotonic facts: a rule keeps
        # no `uses`, so labelling knows its flag without being told, maintenance.py)
        self._write(lambda: self.kb.assert_(text, ctx, strength=strength))

    @rule(a=st.sampled_from(NAMES), b=st.sampled_from(NAMES), ctx=st.sampled_from(CONTEXTS))
    def assert_trust(self, a, b, ctx) -> None:
        self._write(lambda: self.kb.assert_(f"(not (trusts {a} {b}))", ctx))

    @precondition(lambda self: self.handles)
    @rule(data=st.data(), ctx=st.sampled_from(CONTEXTS))
    def mask(self, data, ctx) -> None:
        target = data.draw(st.sampled_from(self.handles))
        self._write(lambda: self.kb.assert_(f"(except (sentexHandle {target}))", ctx))

    @rule(edge=st.sampled_from(EDGES))
    def edge(self, edge) -> None:
        self._write(lambda: self.kb.assert_(edge, "CxUniverse"))

    @rule(
        data=st.data(),
        ctx=st.sampled_from(CONTEXTS),
        extra=st.lists(
            st.one_of(
                st.sampled_from(RULES + EDGES),
                st.builds("(likes {} {})".format, st.sampled_from(NAMES), st.sampled_from(NAMES)),
            ),
            max_size=3,
        ),
    )
    def a_refused_write_changes_nothing(self, data, ctx, extra) -> None:
        # a chain that runs past the depth limit, with whatever else the write did:
        # derivations, deletions, edges, all undone
        # (not the chain's own fact: an edit that adds a sentence and removes the sentex
        # that holds it already removes it, and the chain would never start)
        removable = [
            h
            for h in self.handles
            if (s := self.kb.sentex(h)) is None or s.text != "(likes Cat Dog)"
        ]
        removes = data.draw(st.lists(st.sampled_from(removable), max_size=2)) if removable else []
        adds = [(s, "CxUniverse" if s.startswith("(genlCx") else ctx) for s in extra]
        adds += [
            ("(implies (likes ?x ?y) (likes ?y (GiftFn ?x)))", ctx),
            ("(likes Cat Dog)", ctx),
        ]
        before = _internals(self.kb)
        try:
            self.kb.edit(add=adds, remove=removes)
        except koinii.Refused as refusal:
            event(f"refused {refusal.kind}")
        else:
            raise AssertionError("a chain past the depth limit was not refused")
        after = _internals(self.kb)
        before.pop("next_handle"), after.pop("next_handle")  # (consumed handles stay so)
        assert after == before

    @rule()
    def compare_with_a_rebuild_from_premises(self) -> None:
        fresh = _rebuilt(self.kb)
        try:
            assert _reading(fresh) == _reading(self.kb)
        finally:
            fresh.close()

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def retract(self, data) -> None:
        handle = data.draw(st.sampled_from(self.handles))
        with contextlib.suppress(koinii.Refused):
            self.kb.retract(handle)

    @precondition(lambda self: len(self.handles) >= 2)
    @rule(data=st.data())
    def edit_remove(self, data) -> None:
        chosen = data.draw(st.lists(st.sampled_from(self.handles), min_size=1, max_size=3))
        with contextlib.suppress(koinii.Refused):
            self.kb.edit(remove=chosen)

    @rule()
    def checkpoint(self) -> None:
        self.checkpointed = self.kb.checkpoint() is not None or self.checkpointed

    @rule()
    def reopen(self) -> None:
        before = _snapshot(self.kb, self.top)
        self.kb.close()
        rebuilt = koinii.open_kb(self.path, checkpoints=False)
        try:
            from_rows = _internals(rebuilt)
        finally:
            rebuilt.close()
        self.kb = koinii.open_kb(self.path)
        opened = self.kb.opened
        if self.checkpointed:  # never a silent rebuild where a checkpoint serves
            assert opened["from"] == "checkpoint", opened
        event(
            f"reopened from {opened['from']}"
            + (", with a tail" if opened.get("tail_sentexes") else "")
        )
        assert _snapshot(self.kb, self.top) == before
        assert _internals(self.kb) == from_rows
        self.checkpointed = self.kb.checkpoint() is not None  # the next reopen's tail follows

    @invariant()
    def every_label_is_what_a_full_relabel_gives(self) -> None:
        # a write labels only the region it can reach, or none (`_labelled_as_grown`)
        nodes = list(self.kb._maintenance.index.by_handle.values())
        labels = [(n.believed, n.mono, n.defeated) for n in nodes]
        self.kb._maintenance.relabel(nodes, None)
        assert [(n.believed, n.mono, n.defeated) for n in nodes] == labels

    @invariant()
    def belief_is_consistent(self) -> None:
        # a derived sentex is believed only if one of its justifications is whole
        for handle in self.handles:
            sentex = self.kb.sentex(handle)
            if sentex is not None and sentex.derived and sentex.believed:
                assert self.kb.why(handle)["justifications"]


KBMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
test_the_kb_survives_any_sequence_of_writes_retracts_and_reopens = KBMachine.TestCase


def test_a_fact_filling_both_antecedents_of_a_rule_can_be_retracted(kb):
    kb.assert_("(implies (and (likes ?x ?y) (likes ?y ?x)) (trusts ?x ?y))", "CxA")
    handle = kb.assert_("(likes Cat Cat)", "CxA")
    assert kb.query("(trusts Cat ?y)", "CxA") == [{"?y": koinii.Sym("Cat")}]
    retracted = kb.retract(handle)
    assert retracted.removed_sentexes == 2  # the fact and what rested on it
    assert kb.sentex(handle) is None
    assert kb.query("(trusts ?x ?y)", "CxA") == []
