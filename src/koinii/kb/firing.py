"""Forward chaining: rules fire, claims are carried, and nothing speaks for another.

One concept: forward chaining, the half of truth maintenance that derives — one object
with maintenance.py's `Maintenance`, which derives from `Firing` and holds the state
both halves work on; written apart because what fires is not how belief is labelled.

Invariants:
- Rules fire over every stored sentex whatever its belief, so the derivations are a
  function of the stored set (semi-naive: new rules against everything, new nodes
  against every rule that can use them). Each is held as a justification, but for a
  node derived again in the write that made it by a rule it holds one of: that one is
  elided, the node marked, and found again when needed (`_derive`).
- A carried claim is a derivation like a rule's: `(carriesClaim P N)` makes argument N
  of every P sentence, when it is `(quote S)`, a claim S in that sentence's own context,
  justified by the declaration and the sentence — so it lives and dies with the sentence
  (an answer and the claim it makes are one write and one retraction).
- Nothing speaks for another: where `(speechAct P)` is in force, a P sentence names its
  speaker as argument 1, and neither a rule nor a carried claim derives one whose speaker
  is not its own author (the rule's creator, the carrying sentence's speaker) — such a
  firing is not derived, and `violations()` lists it.
"""

from __future__ import annotations

import functools
from array import array
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from koinii.errors import Refused
from koinii.kb import checks
from koinii.kb.joins import Derivation, every_firing, scan_position
from koinii.kb.rules import (
    IMPLIES,
    NOT_DERIVABLE,
    Rule,
    refuse_underivable,
)
from koinii.kb.sentex import DEFAULT, MONOTONIC, NOT, Justification, Node, key_of
from koinii.terms import QUOTE, Sym, show

if TYPE_CHECKING:
    import threading

    from koinii.kb.budget import Budget
    from koinii.kb.contexts import Hierarchy
    from koinii.kb.index import Index
    from koinii.kb.joins import Triggers
    from koinii.kb.maintenance import Bounds
    from koinii.kb.writes import Transaction

SPEECH_ACT = Sym("speechAct")


class Firing:
    """Rules and carried claims (see the module docstring): the forward-chaining half of
    truth maintenance's one object (`maintenance.Maintenance`, which derives from this
    class and holds the state both halves work on — the index, the hierarchy, the rules
    and their triggers, the carriers —, the KB's `Bounds` and the budget). A call
    between the halves is a plain call on `self`: maintenance's `settle` calls `fire`,
    `fire_waiting`, `place_again` and `rederive_all`; these call its `justify`, `link`,
    `drop_justification`, `delete_cascading`, `triggers_of`, …"""

    __slots__ = ()  # (the object's slots are `Maintenance`'s)

    # The state this half works on, made and owned by `Maintenance` (declared, for mypy)
    _kb: Bounds
    _lock: threading.RLock
    _running: Callable[[], Budget | None]
    index: Index
    hierarchy: Hierarchy
    rules: dict[Node, Rule]
    masks: dict[int, list[Node]]
    _rules_by_literal: dict[tuple[Sym, bool], list[tuple[Node, int]]]
    _triggers: dict[tuple[Sym, bool], Triggers]
    _carriers: dict[Sym, list[Node]]
    _referrers: dict[int, set[Node]]

    def fire(self, tx: Transaction) -> None:
        """Semi-naive forward chaining from the new rules and the new nodes (and the
        claims the new nodes carry).

        Each firing is made once, by the last of its new parts to fire: a new rule is
        joined with every stored node but those still waiting to fire (`tx.fire`), and a
        new node, when its turn comes, with the stored nodes but those still waiting —
        so no firing is found twice, and none is looked for among the justifications a
        conclusion holds already.
        """
        budget = self._running()
        for rule_node in tx.new_rules:
            if self.index.by_handle.get(rule_node.handle) is not rule_node:
                continue
            rule = self.rules[rule_node]
            position = scan_position(rule.antecedents, self.index)
            mark = budget.ticks() if budget is not None else 0
            fitting = functools.partial(
                self.hierarchy.fitting, rule_node.context, authored=rule_node.creator is not None
            )
            try:
                firings = every_firing(
                    rule.joins,
                    rule.antecedents,
                    self.index,
                    tx.fire,
                    budget,
                    position,
                    fitting,
                )
                self._conclude(tx, rule_node, rule, firings)
            except Refused as refusal:
                raise _while_firing(refusal, tx, rule_node, rule, position, budget, mark) from None
        self.fire_waiting(tx)

    def fire_waiting(self, tx: Transaction) -> None:
        """Semi-naive forward chaining from the new nodes alone (`tx.fire`, an ordered set
        of the nodes waiting to fire), until no firing makes another."""
        waiting = tx.fire
        index = self.index
        by_handle = index.by_handle
        rules, by_literal, carriers = self.rules, self._rules_by_literal, self._carriers
        budget = self._running()
        fitting = self.hierarchy.fitting
        most = len(waiting)
        while waiting:
            node = waiting.popitem()[0]
            # A dict keeps its table as it empties: drained to an eighth of the most it
            # held, it is copied and the table let go (a closure's queue, a quarter of a
            # million nodes, kept 10 MB to the end of its firing, when memory peaks).
            left = len(waiting)
            if left > most:
                most = left
            elif left < most >> 3 and most > 4096:
                waiting = tx.fire = dict(waiting)
                most = left
            if by_handle.get(node.handle) is not node:
                continue
            functor = node.atom[0]
            if carriers and functor in carriers:
                for declaration in carriers[functor]:
                    self._carry(tx, declaration, node)
            literal = (functor, node.positive)
            if literal not in by_literal:
                continue
            triggers = self._triggers.get(literal)
            if triggers is None:  # (made once per literal until its rules change)
                triggers = self.triggers_of(literal)
            context = node.context
            for rule_node, i in triggers.of(node.atom):
                rule = rules[rule_node]
                mark = budget.ticks() if budget is not None else 0
                fits = fitting(rule_node.context, context, rule_node.creator is not None)
                try:
                    firings = rule.joins[i].firings(index, node, waiting, budget, False, fits)
                    if firings:
                        self._conclude(tx, rule_node, rule, firings)
                except Refused as refusal:
                    raise _while_firing(refusal, tx, rule_node, rule, i, budget, mark) from None

    def _conclude(
        self,
        tx: Transaction,
        rule_node: Node,
        rule: Rule,
        firings: list[Derivation],
        placed: set[tuple[tuple[Node, ...], str]] | None = None,
    ) -> None:
        """Derive the conclusions of the rule's `firings` (each: the conclusion's atom
        and the antecedents), each placed in the most general contexts that see the rule
        and every antecedent. `placed` is for a re-placement: the firings may have been
        made before, so a justification held already is not added again, and each
        firing's (antecedents, context) placed is added to it."""
        budget = self._running()
        fired = tx.fired
        fired[rule_node] = fired.get(rule_node, 0) + len(firings)
        home = rule_node.context
        positive, pattern = rule.consequent
        # Whether a conclusion speaks for another is asked only where its functor is a
        # speech act somewhere; what these firings make are all of that functor, and
        # declare it one only if it is `speechAct` itself: then each is asked.
        speech = self.index.by_functor.get(SPEECH_ACT)
        ask = pattern[0] is SPEECH_ACT or (
            speech is not None and bool(speech.args) and pattern[0] in speech.args[0]
        )
        # placements by the antecedents' contexts: one join's firings share a node, and
        # over SUMO's 69 contexts they ask about a few pairs a million times
        places: dict[Any, Collection[str] | None] = {}
        concluded = None if placed is not None else tx.concluded
        justify, limit = self.justify, self._kb.max_derivations
        elides = _elides(rule_node)
        made = tx.added
        at_home: Collection[str] | None = (home,)  # (the rule's context sees them all)
        for atom, antecedents in firings:
            if budget is not None:
                budget.tick()
            placements = at_home
            if len(antecedents) == 2:
                one, other = antecedents[0].context, antecedents[1].context
                if one is not home or other is not home:
                    pair = (one, other)
                    placements = places.get(pair, places)
                    if placements is places:
                        placements = places[pair] = self._placements(rule_node, antecedents)
            else:
                for a in antecedents:
                    if a.context is not home:
                        placements = self._placements(rule_node, antecedents)
                        break
            if not placements:
                continue  # not the rule's to make, or reported by violations()
            try:
                key = key_of(atom)
            except Refused as refusal:
                raise Refused(
                    "derivation-limit",
                    f"a rule derived a sentence past the limits: {refusal.message}",
                    {"rule": rule_node.handle},
                ) from None
            if ask and self._speaks_for_another(atom, rule_node.creator, placements, tx):
                continue  # reported by violations()
            for ctx in placements:
                node = concluded.get(key) if concluded is not None else None
                if node is not None and node.context is ctx and node.positive is positive:
                    # met before in this write (a conclusion of a deep, many-parent
                    # taxonomy is derived five times over): justified again, no lookup
                    tx.derivations += 1
                    if tx.derivations > limit:
                        self._refuse_derivations()
                    if elides and node.handle in made and _holds_firing_of(node, rule_node):
                        node.elided = True  # (see `_derive`)
                    else:
                        justify(tx, node, rule_node, antecedents)
                else:
                    self._derive(tx, rule_node, atom, positive, key, ctx, antecedents, placed)

    def _placements(self, rule_node: Node, antecedents: tuple[Node, ...]) -> Collection[str] | None:
        """Where a firing's conclusion is placed (engine.md §5, amended by the
        non-interference rule, docs/security.md).

        A rule with an author (a creator: every rule an agent writes has one) concludes in
        its own context alone, and only from what that context sees; a firing over
        anything else is not its to make (None, and no violation: the rule does not apply
        there). Placed by the spec's rule — the maximal common descendants of the rule's
        and the antecedents' contexts — such a conclusion landed in a context that holds
        no part of it: a channel both contexts are under, or another agent's context
        placed under the author's, and spoke there as that context's own (a derived mark
        in a channel took the channel over). A rule without an author — the vocabulary
        an operator loads, such as `contested` — keeps the spec's placement: it concludes
        in the contexts that speak it. An empty placement is a violation (`no-context`).
        """
        home = rule_node.context
        if rule_node.creator is not None:
            seen = self.hierarchy.up(home)
            return (home,) if all(a.context in seen for a in antecedents) else None
        return self.hierarchy.placement((home, *[a.context for a in antecedents]))

    def _speaks_for_another(
        self, atom: tuple, author: str | None, placements: Collection[str], tx: Transaction | None
    ) -> bool:
        """Would deriving `atom` put words in another's mouth: is it a speech act (where
        it would be placed) whose speaker is not `author`?"""
        declared = self.index.by_functor.get(SPEECH_ACT)
        if declared is None or not declared.args or atom[0] not in declared.args[0]:
            return False  # (an argument table's key for a symbol is the symbol)
        if len(atom) < 2:
            return False
        speaker = atom[1]
        if type(speaker) is Sym and author is not None and speaker.name == author:
            return False
        return any(self.declared(SPEECH_ACT, atom[0], ctx, tx) for ctx in placements)

    def _carry(self, tx: Transaction, declaration: Node, node: Node) -> None:
        """The claim `node` carries under `declaration` `(carriesClaim P N)`, if any:
        argument N quoted, derived in node's own context (where the declaration is seen).

        The claim is checked as if its author wrote it — a carried claim is no way
        around the write checks — and a bad one refuses the whole write.
        """
        self._kb.spend()
        position = declaration.atom[2]
        atom = node.atom
        if not node.positive or len(atom) <= position:
            return
        content = atom[position]
        if type(content) is not tuple or content[0] is not QUOTE or len(content) != 2:
            return
        if declaration.context not in self.hierarchy.up(node.context):
            return
        try:
            (entry,) = checks.prepare(content[1], node.context)
            if entry.atom[0] in NOT_DERIVABLE:
                raise Refused(
                    "not-well-formed",
                    f"`{entry.atom[0].name}` is not a claim",
                    {"sentence": entry.text},
                )
            refuse_underivable(entry.atom, "a carried claim", entry.text)
            for handle in entry.handles:
                if handle not in self.index.by_handle:
                    raise Refused(
                        "unknown-handle",
                        f"(sentexHandle {handle}) names no stored sentex",
                        {"handle": handle},
                    )
        except (Refused, ValueError) as refusal:
            why = refusal.message if isinstance(refusal, Refused) else "a rule is not a claim"
            kind = refusal.kind if isinstance(refusal, Refused) else "not-well-formed"
            raise Refused(
                kind,
                f"the claim {show(content)} carried by {node.full_text} is refused: {why}; "
                "quote a ground claim such as (quote (usesDatabase ProdCluster PostgreSQL16))",
                {"sentence": node.full_text, "claim": show(content[1])},
            ) from None
        # the author: a speech act's speaker (an answer's argument 1), else its writer —
        # argument 1 of any other carrier is no speaker (`(says AgentBoreas (quote …))`
        # written by Atlas carried Boreas's endorsement)
        speaker = atom[1] if len(atom) > 1 and type(atom[1]) is Sym else None
        speaks = speaker is not None and self.declared(SPEECH_ACT, atom[0], node.context, tx)
        author = speaker.name if speaks else node.creator
        if entry.positive and self._speaks_for_another(entry.atom, author, (node.context,), tx):
            raise Refused(
                "koinii/speaker-mismatch",
                f"{node.full_text} carries {show(content[1])}, which speaks as "
                f"{show(entry.atom[1])}: an answer's claim speaks only for its author",
                {"sentence": node.full_text, "claim": show(content[1])},
            )
        self._derive(tx, declaration, entry.atom, entry.positive, entry.key, node.context, (node,))

    def _derive(
        self,
        tx: Transaction,
        rule_node: Node,
        atom: tuple,
        positive: bool,
        key: tuple | str,
        ctx: str,
        antecedents: tuple[Node, ...],
        placed: set[tuple[tuple[Node, ...], str]] | None = None,
    ) -> None:
        """Justify `atom` (with `positive`) in `ctx` by `rule_node` from `antecedents`,
        making the derived node if none is stored yet (`placed`: see `_conclude`).

        Each conclusion this write derived or found stored is remembered by its key
        (`tx.concluded`), and asked first (by `_conclude`, before it calls this): a
        conclusion is derived five times over in a deep many-parent taxonomy, and the
        index finds it by a scan of a bucket — a class's instance with thirty ancestors
        has thirty `instance` sentences. A node the write unlinks empties the table
        (`Maintenance._unlink`), so what it holds is stored."""
        node = tx.concluded.get(key)
        found = True
        if node is None or node.context is not ctx or node.positive is not positive:
            node = self.index.find(atom, key, ctx, positive)
            found = False
        if node is None:
            node = tx.limbo.pop((key, ctx, positive), None) if tx.limbo else None
            if node is not None:
                self.link_quiet(node)
                if node.handle not in tx.added:  # (what the write made is not logged)
                    tx.undo.append((self.unlink_quiet, node))
                tx.fire[node] = None
            else:
                node = self._derived_node(tx, rule_node, atom, key, ctx, positive, antecedents)
            tx.concluded[key] = node
        elif not found:
            tx.concluded[key] = node
        if placed is not None and any(
            j.rule is rule_node and j.antecedents == antecedents for j in node.justs or ()
        ):
            placed.add((antecedents, ctx))
            return
        if placed is not None:
            placed.add((antecedents, ctx))
        tx.derivations += 1
        if tx.derivations > self._kb.max_derivations:
            self._refuse_derivations()
        if (
            node.justs  # (not a node just made: the commonest, asked first)
            and node.handle in tx.added
            and _holds_firing_of(node, rule_node)
            and _elides(rule_node)
        ):
            # Elided: a node this write made, derived again by a rule it holds a
            # justification of already. A conclusion of a deep, many-parent taxonomy is
            # derived five times over; keeping each derivation was most of the
            # inheritance axiom's memory over SUMO. The node is marked, and what it
            # elided is found again by a join back from it when its justifications are
            # asked for all (`Maintenance.rederive_elided`): when one of them is
            # dropped, and where labelling could need another. (Only a node this write
            # made: it is labelled by the write, where one stored before may not be,
            # and a derivation elided there could change its label unseen. Only a
            # rule's that can make nothing monotonic: one it elided could not make the
            # node so either, and a node a write labelled believed is labelled as it
            # would be with every derivation held — as a reopen from the rows, which
            # cannot tell what was elided, labels it.)
            node.elided = True
            return
        self.justify(tx, node, rule_node, antecedents)

    def _refuse_derivations(self) -> None:
        raise Refused(
            "derivation-limit",
            f"one write derived more than {self._kb.max_derivations} conclusions",
            {"limit": self._kb.max_derivations},
        )

    def _derived_node(
        self,
        tx: Transaction,
        rule_node: Node,
        atom: tuple,
        key: tuple | str,
        ctx: str,
        positive: bool,
        antecedents: tuple[Node, ...],
    ) -> Node:
        """A new derived node, one step deeper than its deepest antecedent made in this
        write (refused `derivation-limit` past `max_depth`)."""
        depths, made = tx.depth, tx.added
        if depths is None:
            depths = tx.depth = Depths()
        depth = 0
        for a in antecedents:
            d = depths.of(a.handle)
            if not d:
                d = 0 if a.premise or a.handle not in made else 1
            if d > depth:
                depth = d
        if depth >= self._kb.max_depth:
            raise Refused(
                "derivation-limit",
                f"derivations chained deeper than {self._kb.max_depth} in one write",
                {"limit": self._kb.max_depth, "rule": rule_node.handle},
            )
        node = Node(tx.next_handle, atom, key, ctx, positive, False, DEFAULT, None, tx.now, None)
        tx.next_handle += 1
        self.link(tx, node)
        if depth:
            depths.put(node.handle, depth + 1)
        return node

    def place_again(self, tx: Transaction) -> None:
        """After genlCx edges changed: re-place what the change can move, and only that.

        An edge (Sub, Super) changes what the contexts below Sub see (they see what Super
        sees now, or no longer), so it changes the common descendants only of context
        sets that include a context Super sees: a rule's firing is placed again only if
        the rule or one of its antecedents sits in such a context. A carried claim
        depends on its own context seeing the declaration: the carrying sentences below
        Sub are carried again. And belief depends on what sees what where a monotonic
        side defeats a default (the sentences stored with both polarities) and where a
        mask hides something: those are settled again. The cost follows what the edge
        can reach, not the size of the store.
        """
        hierarchy = self.hierarchy
        reached: set[str] = set()  # contexts whose down-set changed
        below: set[str] = set()  # contexts whose up-set changed
        for sub, sup in tx.edges:
            reached |= hierarchy.up(sup)
            below |= hierarchy.down(sub)
        for rule_node, rule in list(self.rules.items()):
            if self.index.by_handle.get(rule_node.handle) is rule_node and (
                rule_node.context in reached or self._touches(rule, reached)
            ):
                self._refire(tx, rule_node, rule)
        for functor, declarations in list(self._carriers.items()):
            for node in list(self.index.with_functor(functor)):
                if node.context in below:
                    for declaration in list(declarations):
                        self._recarry(tx, declaration, node)
        index = self.index
        for key, atom in index.two_sided.items():
            tx.seeds.update(index.same_atom(atom, key))
        for handle in self.masks:
            target = index.by_handle.get(handle)
            if target is not None:
                tx.seeds.add(target)

    def _touches(self, rule: Rule, reached: set[str]) -> bool:
        """Does some sentex an antecedent of `rule` could match sit in `reached`?"""
        for _positive, pattern in rule.antecedents:
            for node in self.index.with_functor(pattern[0]):
                if node.context in reached:
                    return True
        return False

    def _refire(self, tx: Transaction, rule_node: Node, rule: Rule) -> None:
        """Every firing of the rule placed anew; its justifications elsewhere dropped."""
        placed: set[tuple[tuple[Node, ...], str]] = set()
        # (what the re-placements before this one derived waits to fire, as new nodes do)
        firings = every_firing(rule.joins, rule.antecedents, self.index, tx.fire, self._running())
        self._conclude(tx, rule_node, rule, firings, placed)
        for j in self.firings_of(rule_node):
            if (j.antecedents, j.conclusion.context) not in placed:
                self._unjustify(tx, j)

    def _recarry(self, tx: Transaction, declaration: Node, node: Node) -> None:
        """Carry `node`'s claim again under `declaration`, or drop it where the
        declaration is no longer seen from node's context."""
        carried = [j for j in node.uses or () if j.rule is declaration]
        if declaration.context in self.hierarchy.up(node.context):
            if not carried:
                self._carry(tx, declaration, node)
        else:
            for j in carried:
                self._unjustify(tx, j)

    def _unjustify(self, tx: Transaction, j: Justification) -> None:
        """Drop `j`, and its conclusion with it when nothing else supports it (unless a
        deletion earlier in the same pass already took `j` along)."""
        if j not in (j.conclusion.justs or ()):
            return
        self.drop_justification(tx, j)
        conclusion = j.conclusion
        if not conclusion.premise:
            if conclusion.justs:
                tx.unfounded.append(conclusion)  # what is left may rest on itself
            else:
                self.delete_cascading(tx, conclusion, "unsupported")

    def rederive_all(self, tx: Transaction) -> None:
        """After a claim-carrying declaration changed: recompute every justification
        from the premises.

        Derived nodes that are derived again keep their handles (they wait in `limbo`);
        those that are not are deleted as unsupported.
        """
        for node in list(self.index.by_handle.values()):
            for j in list(node.justs or ()):
                self.drop_justification(tx, j)
        tx.concluded.clear()  # (it holds only stored nodes)
        for node in list(self.index.by_handle.values()):
            if not node.premise:
                self.unlink_quiet(node)
                if node.handle not in tx.added:  # (what the write made is not logged)
                    tx.undo.append((self.link_quiet, node))
                tx.limbo[(node.key, node.context, node.positive)] = node
        tx.fire = dict.fromkeys(n for n in self.index.by_handle.values() if n not in self.rules)
        tx.new_rules = list(self.rules)
        self.fire(tx)
        for node in tx.limbo.values():
            if node.handle in tx.added:
                del tx.added[node.handle]
            else:
                tx.deleted[node.handle] = (node, "unsupported")
            tx.removed_sentexes += 1
            for referrer in list(self._referrers.get(node.handle, ())):
                if self.follows_target(referrer, tx):
                    self.delete_cascading(tx, referrer, "retracted")
        tx.limbo.clear()

    def violations(self) -> list[dict[str, Any]]:
        """Rule firings that derived nothing: no context to place their conclusion in
        (`reason: no-context`), or a speech act whose speaker is not the rule's author
        (`speaks-for-another`)."""
        with self._lock:
            out = []
            for rule_node, rule in self.rules.items():
                for atom, antecedents in every_firing(
                    rule.joins, rule.antecedents, self.index, (), self._running()
                ):
                    self._kb.spend()
                    contexts = {rule_node.context, *(a.context for a in antecedents)}
                    placements = self._placements(rule_node, antecedents)
                    positive = rule.consequent[0]
                    if placements is None:
                        continue  # the rule does not apply there
                    if not placements:
                        reason = "no-context"
                    elif self._speaks_for_another(atom, rule_node.creator, placements, None):
                        reason = "speaks-for-another"
                    else:
                        continue
                    out.append(
                        {
                            "rule": rule_node.handle,
                            "antecedents": [a.handle for a in antecedents],
                            "conclusion": show(atom if positive else (NOT, atom)),
                            "contexts": sorted(contexts),
                            "reason": reason,
                        }
                    )
            out.sort(key=lambda v: (v["rule"], v["antecedents"]))
            return out


def _elides(rule_node: Node) -> bool:
    """Does firing elide a derivation by `rule_node` that a node it made holds one of
    already (see `_derive`)? A rule sentence's, unless it can make a monotonic
    conclusion (a carried claim's derivations are all held)."""
    return rule_node.atom[0] is IMPLIES and not can_make_monotonic(rule_node)


def can_make_monotonic(rule_node: Node) -> bool:
    """Can a firing of `rule_node` make a monotonic conclusion: is the rule itself held
    monotonic, or asserted so?"""
    return rule_node.mono or (rule_node.premise and rule_node.strength == MONOTONIC)


def _holds_firing_of(node: Node, rule_node: Node) -> bool:
    """Does `node` hold a justification whose rule is `rule_node`? (The last attached is
    asked first: a write derives a node's firings of one rule one after another.)"""
    justs = node.justs
    if not justs:
        return False
    if justs[-1].rule is rule_node:
        return True
    return any(j.rule is rule_node for j in justs)


class Depths:
    """How deep in a write's chains of derivation each node it derived is, where that is
    past 1 (a node it derived from what was stored before it, or asserted in it, is 1):
    by handle, in an array from the first handle given a depth — the handles a write
    gives out only grow. Over SUMO the inheritance axiom's 147,000 nodes past 1 were 5 MB
    of its peak in a dict by node; here 4 bytes a handle."""

    __slots__ = ("first", "table")

    def __init__(self) -> None:
        self.first = 0
        self.table = array("I")

    def of(self, handle: int) -> int:
        """The depth of the node with this handle, or 0: not past 1."""
        at = handle - self.first
        return self.table[at] if 0 <= at < len(self.table) else 0

    def put(self, handle: int, depth: int) -> None:
        table = self.table
        if not table:
            self.first = handle
        at = handle - self.first
        if at >= len(table):
            table.frombytes(bytes(table.itemsize * (at + 1 - len(table))))
        table[at] = depth


def _while_firing(
    refusal: Refused,
    tx: Transaction,
    rule_node: Node,
    rule: Rule,
    position: int,
    budget: Budget | None,
    mark: int,
) -> Refused:
    """A budget or a limit run out while `rule_node` fired, named in the refusal: over a
    real ontology one rule can spend a whole budget alone, and the write that carried a
    thousand rules must say which (data: `rule`, its handle, and `rule_text`) — and
    which of its joins ran out and how big it got (`join`: the antecedent it joined
    from, the literals it joined with, the candidates that join considered — counted by
    the budget's ticks since it began, when there is a budget — and every firing the
    rule made in this write)."""
    if refusal.kind not in ("budget-exhausted", "derivation-limit") or "rule_text" in refusal.data:
        return refusal
    text = rule_node.text
    literals = [show(p if positive else (NOT, p)) for positive, p in rule.antecedents]
    join: dict[str, Any] = {
        "from": literals[position],
        "with": literals[:position] + literals[position + 1 :],
        "firings": tx.fired.get(rule_node, 0),
    }
    if budget is not None:
        join["candidates"] = budget.ticks() - mark
    considered = (
        f" had considered {join['candidates']:,} candidates" if "candidates" in join else ""
    )
    others = " and ".join(join["with"]) or "nothing else"
    return Refused(
        refusal.kind,
        f"{refusal.message} (while firing the rule {text}, sentex {rule_node.handle}: its "
        f"join from {join['from']} with {others}{considered}; the rule had fired "
        f"{join['firings']:,} times in this write)",
        {**refusal.data, "rule": rule_node.handle, "rule_text": text, "join": join},
    )
