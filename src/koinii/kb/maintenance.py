"""Truth maintenance: nodes linked into every structure, justifications attached and
detached, deletion and its cascade, declarations in force, and belief.

One concept: truth maintenance, one algorithm over one state — an object of its own
that `KB` holds (issue 43), its forward chaining written in firing.py (`Firing`, the
base of `Maintenance`: one object, so a call between the two, per derivation, is a
plain call on `self`). That state is its own (state.OWNERS): the index and every
structure over the stored nodes, made in `fresh_state` or taken from a checkpoint
(`take_structures`), and each node's belief labels and `justs` / `uses` — the other
parts read the index, hierarchy, rules and masks, and change them only through its
methods.

Invariants:
- A node is in the index and in every structure that knows stored nodes exactly while
  it is stored (`link_quiet` / `unlink_quiet` are the only writers, and inverses).
- Belief is a function of what is stored, never of arrival order: belief is the
  two-stratum least fixed point computed in `relabel` (monotonic support first, then
  defeat by monotonic clashes, then default support), over a region closed under
  dependence (`closure`) — the same whether or not a node's derivations are all held:
  one a node `elided` (firing.py) is found again where it could change a label.
- Deleting a node deletes what rested only on it, and every meta-sentex whose predicate
  is target-following and that names it (`delete_cascading`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from koinii.errors import Refused
from koinii.kb.contexts import EVERYTHING, Hierarchy
from koinii.kb.firing import Firing, can_make_monotonic
from koinii.kb.index import Index, accept_all, match, members, solve
from koinii.kb.joins import Triggers
from koinii.kb.rules import (
    CARRIES_CLAIM,
    EXCEPT,
    GENL_CX,
    IMPLIES,
    SENTEX_HANDLE,
    compile_rule,
)
from koinii.kb.sentex import (
    MANY,
    MONOTONIC,
    Justification,
    ListSet,
    Node,
)
from koinii.terms import QUOTE, Sym

if TYPE_CHECKING:
    import threading

    from koinii.kb.budget import Budget
    from koinii.kb.rules import Rule
    from koinii.kb.writes import Transaction

ARITY = Sym("arity")
TARGET_FOLLOWING = Sym("target_following_predicate")


@dataclass(frozen=True, slots=True)
class Structures:
    """Every structure over the stored nodes (`Maintenance.structures`): what a
    checkpoint keeps of them, in this order (`tuple(structures)`), and gives back
    (`take_structures`)."""

    index: Index
    hierarchy: Hierarchy
    rules: dict[Node, Rule]
    rules_by_literal: dict[tuple[Sym, bool], list[tuple[Node, int]]]
    masks: dict[int, list[Node]]
    carriers: dict[Sym, list[Node]]
    referrers: dict[int, set[Node]]

    def __iter__(self) -> Iterator[Any]:
        """The structures in their order, as a checkpoint pickles them."""
        yield from (self.index, self.hierarchy, self.rules, self.rules_by_literal)
        yield from (self.masks, self.carriers, self.referrers)


class Bounds(Protocol):
    """What truth maintenance asks of the KB around it, at each use: a unit of the running
    operation's budget (`spend`), and the limits on what one write derives (`max_depth`,
    `max_derivations`: a caller may change them on an open KB)."""

    max_depth: int
    max_derivations: int

    def spend(self) -> None: ...

    def unstored_justification_id(self) -> int: ...


class Maintenance(Firing):
    """Truth maintenance, one object: linking, justifications, deletion and belief (see
    the module docstring), and forward chaining, its `Firing` half (firing.py) — two
    classes for two modules, one object, so that a call between them, once per
    derivation, is a plain call on `self`. `KB` makes it first and holds it
    (`_maintenance`); the engine, writes and the checkpoints call its public methods.

    Its state is its own: the index and every structure over the stored nodes — the
    index, the hierarchy, the rules and the masks public, for the others to read (and
    the composed parts made after the open are given them), never to change — and each
    node's labels and links. What it reads is given to it: the KB's lock (`violations`
    takes it), the running operation's budget (`running`, asked once per loop), and the
    KB only through `Bounds`."""

    __slots__ = (
        "_kb",
        "_lock",
        "_running",
        "index",
        "hierarchy",
        "rules",
        "masks",
        "_rules_by_literal",
        "_triggers",
        "_carriers",
        "_referrers",
        "_concluders",
    )

    def __init__(
        self, kb: Bounds, *, lock: threading.RLock, running: Callable[[], Budget | None]
    ) -> None:
        self._kb = kb
        self._lock = lock
        self._running = running  # the running operation's budget, or None
        self.fresh_state()

    def fresh_state(self) -> None:
        """Empty structures: what a new store starts from, and a rebuild starts again
        from (a checkpoint that could not be applied leaves its state half taken)."""
        self.index = Index()
        self.hierarchy = Hierarchy()
        self.rules: dict[Node, Rule] = {}
        self._rules_by_literal: dict[tuple[Sym, bool], list[tuple[Node, int]]] = {}
        self._triggers: dict[tuple[Sym, bool], Triggers] = {}  # made from the above
        self.masks: dict[int, list[Node]] = {}  # masked handle -> its mask nodes
        self._carriers: dict[Sym, list[Node]] = {}  # functor -> its carriesClaim declarations
        self._referrers: dict[int, set[Node]] = {}  # handle -> nodes naming it
        # (functor, polarity) -> the rules concluding it, made from `rules` when
        # `rederive_elided` first asks, dropped when a rule is linked or unlinked
        self._concluders: dict[tuple[Sym, bool], list[Node]] | None = None

    def structures(self) -> Structures:
        """The structures over the stored nodes as they are now, for a checkpoint to keep
        (checkpoint.py); the caller reads them and changes none of them."""
        return Structures(
            self.index,
            self.hierarchy,
            self.rules,
            self._rules_by_literal,
            self.masks,
            self._carriers,
            self._referrers,
        )

    def take_structures(self, structures: Structures, links: list[tuple[Node, Any, Any]]) -> None:
        """Take the structures a checkpoint kept (checkpoint.py), and give each node of
        `links` back its `justs` and `uses` — as they were when it was written, so the
        labels it kept still hold. (The rows written since are applied after.)"""
        for node, justs, uses in links:
            node.justs, node.uses = justs, uses
        self.index, self.hierarchy = structures.index, structures.hierarchy
        self.rules, self._rules_by_literal = structures.rules, structures.rules_by_literal
        self.masks, self._carriers = structures.masks, structures.carriers
        self._referrers, self._triggers = structures.referrers, {}
        self._concluders = None

    def delete_cascading(self, tx: Transaction, first: Node, reason: str) -> None:
        """Remove `first` and, transitively, what rested only on it or follows it."""
        queue = deque([(first, reason)])
        by_handle = self.index.by_handle
        while queue:
            node, why = queue.popleft()
            self._kb.spend()
            if by_handle.get(node.handle) is not node:
                continue
            for j in list(node.justs or ()):
                self.drop_justification(tx, j)
            resting = self.resting_on(node)  # (before unlinking: a rule's are found by it)
            self._unlink(tx, node)
            if node.handle in tx.added:
                del tx.added[node.handle]
            else:
                tx.deleted[node.handle] = (node, why)
            tx.removed_sentexes += 1
            tx.seeds.update(self.index.same_atom(node.atom, node.key))
            for j in resting:
                self.drop_justification(tx, j)
                concl = j.conclusion
                if not concl.premise:
                    if concl.elided and by_handle.get(concl.handle) is concl:
                        self.rederive_elided(concl, tx)
                    if concl.justs:
                        tx.unfounded.append(concl)  # what is left may rest on itself
                    else:
                        queue.append((concl, "unsupported"))
            for referrer in list(self._referrers.get(node.handle, ())):
                if self.follows_target(referrer, tx):
                    queue.append((referrer, "retracted"))

    def follows_target(self, node: Node, tx: Transaction) -> bool:
        """Is node's predicate marked target-following where node is stored?"""
        return self.declared(TARGET_FOLLOWING, node.atom[0], node.context, tx) is not None

    def link_quiet(self, node: Node) -> None:
        """Put a node in every structure that knows stored nodes (no undo, no checks).

        For the parts that load or restore what is stored (the rebuild, a checkpoint's
        tail, firing's undo of a node it unlinked): the caller owns the undo, if any, and
        settles belief after; a write's own node goes through `link`."""
        self.index.link(node)
        atom = node.atom
        functor = atom[0]
        for x in atom:  # (a flat atom, the commonest, names no handle: a loop, faster
            if type(x) is tuple:  # for so few than `tuple in map(type, atom)`)
                for handle in _handles_in(atom):
                    self._referrers.setdefault(handle, set()).add(node)
                break
        if functor is GENL_CX:
            self.hierarchy.add_edge(atom[1].name, atom[2].name)
        elif functor is EXCEPT:
            self.masks.setdefault(atom[1][1], []).append(node)
        elif functor is IMPLIES:
            rule = compile_rule(atom)
            self.rules[node] = rule
            self._concluders = None
            for i, (positive, pattern) in enumerate(rule.antecedents):
                self._rules_by_literal.setdefault((pattern[0], positive), []).append((node, i))
                self._triggers.pop((pattern[0], positive), None)
        elif functor is CARRIES_CLAIM and _carrier_shaped(node):
            self._carriers.setdefault(atom[1], []).append(node)

    def unlink_quiet(self, node: Node) -> None:
        """`link_quiet`'s inverse: take a node out of every structure (no undo, no
        checks). The caller owns the undo (`tx.undo.append((self.link_quiet, node))`)."""
        self.index.unlink(node)
        atom = node.atom
        functor = atom[0]
        for handle in _handles_in(atom):
            refs = self._referrers[handle]
            refs.discard(node)
            if not refs:
                del self._referrers[handle]
        if functor is GENL_CX:
            self.hierarchy.remove_edge(atom[1].name, atom[2].name)
        elif functor is EXCEPT:
            masks = self.masks[atom[1][1]]
            masks.remove(node)
            if not masks:
                del self.masks[atom[1][1]]
        elif node in self.rules:
            rule = self.rules.pop(node)
            self._concluders = None
            for i, (positive, pattern) in enumerate(rule.antecedents):
                entries = self._rules_by_literal[(pattern[0], positive)]
                entries.remove((node, i))
                self._triggers.pop((pattern[0], positive), None)
                if not entries:
                    del self._rules_by_literal[(pattern[0], positive)]
        elif functor is CARRIES_CLAIM and _carrier_shaped(node):
            carriers = self._carriers[atom[1]]
            carriers.remove(node)
            if not carriers:
                del self._carriers[atom[1]]

    # What a write made is not undo-logged node by node either: it is `tx.added`, and
    # undoing the write unlinks what is still there (writes.py, `_undo`).
    def link(self, tx: Transaction, node: Node) -> None:
        """Link a node this write made: undone with the write (it is in `tx.added`), and
        noted for `settle` (what it may fire, the edges, masks and rules it changes)."""
        self.link_quiet(node)
        tx.added[node.handle] = node  # (a seed: see `_seeds`)
        self._note_structure(tx, node, added=True)

    def _unlink(self, tx: Transaction, node: Node) -> None:
        self.unlink_quiet(node)
        if tx.concluded:  # (firing's table of stored conclusions: see `Firing._derive`)
            tx.concluded.clear()
        if node.handle not in tx.added:  # (one this write made is gone for good)
            tx.undo.append((self.link_quiet, node))
        self._note_structure(tx, node, added=False)

    def _note_structure(self, tx: Transaction, node: Node, added: bool) -> None:
        functor = node.atom[0]
        if functor is GENL_CX:
            tx.edges.append((node.atom[1].name, node.atom[2].name))
        elif functor is CARRIES_CLAIM and _carrier_shaped(node):
            tx.full = True
        elif functor is EXCEPT:
            tx.masks.append((node, added))
            target = self.index.by_handle.get(node.atom[1][1])
            if target is not None:
                tx.seeds.add(target)
        elif node in self.rules:
            if added:
                tx.new_rules.append(node)
        elif added and (
            (functor, node.positive) in self._rules_by_literal or functor in self._carriers
        ):
            # (a node no rule reads and no declaration carries makes nothing when it
            # fires; a rule this write adds later joins it as any stored node)
            tx.fire[node] = None

    def triggers_of(self, literal: tuple[Sym, bool]) -> Triggers:
        """The rule literals of `literal` (a functor and polarity some stored rule
        reads) by what a node must hold to fill each (joins.Triggers): made when firing
        first asks, kept until a rule of that literal is linked or unlinked."""
        triggers = self._triggers[literal] = Triggers(self._rules_by_literal[literal], self.rules)
        return triggers

    def attach(self, j: Justification) -> None:
        """Record `j` on its conclusion's `justs` and its supports' `uses` (no undo, no
        relabel): for loading stored justifications and undoing a drop; a write makes
        one through `justify`."""
        # (the commonest cases of `_joined` and `linked_supports` are written out here,
        # without the calls: a closure attaches a million, each to three nodes)
        concl = j.conclusion
        justs = concl.justs
        if justs is None:
            concl.justs = (j,)
        elif type(justs) is tuple and len(justs) < _SET_FROM:
            concl.justs = justs + (j,)
        else:
            concl.justs = _joined(justs, j)
        first, second = j.first, j.second
        if j.rule.atom[0] is IMPLIES:  # (a rule keeps no `uses`: see `firings_of`)
            if second is None:
                supports: tuple[Node, ...] = (first,)
            elif second is MANY or second is first:
                supports = linked_supports(j)
            else:
                supports = (first, second)
        else:
            supports = linked_supports(j)
        for support in supports:
            uses = support.uses
            if uses is None:
                support.uses = (j,)
            elif type(uses) is ListSet:
                if uses.places is None:  # (nothing removed from it yet: the commonest)
                    uses.append(j)
                else:
                    uses.add(j)
            elif len(uses) < _SET_FROM:
                support.uses = uses + (j,)
            else:
                support.uses = _joined(uses, j)

    def detach(self, j: Justification) -> None:
        """`attach`'s inverse (no undo, no relabel): a write drops one through
        `drop_justification`."""
        concl = j.conclusion
        concl.justs = _parted(concl.justs, j)
        for support in linked_supports(j):
            support.uses = _parted(support.uses, j)

    def firings_of(self, rule_node: Node) -> list[Justification]:
        """The justifications `rule_node` (a stored rule) is the rule of, found among its
        consequent's candidates.

        A rule keeps no `uses` of its own: it is always a premise (a rule is never
        derived, rules.NOT_DERIVABLE, nor negated), so labelling knows whether it holds
        without being told, and the inheritance axiom's table of its firings held 1.2
        million justifications over a SUMO-shaped ontology, 60 MB of a 408 MB traced
        peak. What asks for them — the rule retracted, re-placed after a `genlCx` edge,
        masked or strengthened — is rare, and walks what the rule could have concluded:
        the nodes its consequent can match, each node's justifications."""
        rule = self.rules[rule_node]
        positive, pattern = rule.consequent
        return [
            j
            for node in self.index.candidates(pattern, {})
            if node.positive is positive
            for j in node.justs or ()
            if j.rule is rule_node
        ]

    def rederive_elided(self, node: Node, tx: Transaction | None) -> None:
        """Hold every derivation of `node` (a stored derived node marked `elided`) as a
        justification again: those firing elided, found by a join back from it.

        Firing keeps one justification per rule for a node a write made, and marks the
        node when it elides another (firing.py, `_derive`): a deep, many-parent
        taxonomy derives each conclusion five times over. What is elided is a function
        of the stored nodes, so it is found again where it is needed: for each rule
        whose consequent `node` matches, the rule's antecedents joined under that match,
        each firing placed as firing places it (`_placements`, and no speech act for
        another) — and kept if it is placed at `node`'s context and not held. Asked
        where a deletion drops one of the node's justifications (what is left must be
        all there is before the node is called unsupported, `delete_cascading`, or
        unfounded, `_delete_unfounded`) and where labelling could need one it elided
        (`relabel`). (A re-placement after a `genlCx` edge needs no asking: it finds
        every firing of the rule again, and attaches those a node stored before the
        write does not hold, firing.py `_refire`.) In a write the justifications
        are the write's (`justify`: stored with it, undone with it); while the KB opens
        (`tx` None) they are held unstored, and whatever opens the store next from its
        rows marks the node again.
        """
        node.elided = False
        if tx is not None and node.handle not in tx.added:
            tx.undo.append((_mark_elided, node))
        concluders = self._concluders
        if concluders is None:
            concluders = self._concluders = {}
            for rule_node, rule in self.rules.items():
                positive, pattern = rule.consequent
                concluders.setdefault((pattern[0], positive), []).append(rule_node)
        waiting = tx.fire if tx is not None else None
        admit = (lambda n: n not in waiting) if waiting else None  # (they fire later)
        budget = self._running()
        for rule_node in concluders.get((node.atom[0], node.positive), ()):
            rule = self.rules[rule_node]
            binding = match(rule.consequent[1], node.atom, {})
            if binding is None:
                continue
            held = {j.antecedents for j in node.justs or () if j.rule is rule_node}
            # (the join reads the index, which attaching a justification does not change)
            for _, antecedents in solve(
                self.index, list(rule.antecedents), binding, accept_all, budget, admit
            ):
                if antecedents in held:
                    continue
                placements = self._placements(rule_node, antecedents)
                if not placements or node.context not in placements:
                    continue
                if self._speaks_for_another(node.atom, rule_node.creator, placements, tx):
                    continue
                held.add(antecedents)
                if tx is not None:
                    self.justify(tx, node, rule_node, antecedents)
                else:
                    issued = self._kb.unstored_justification_id()
                    self.attach(Justification(issued, node, rule_node, antecedents))

    def _rederive_for_stronger_rules(self, tx: Transaction) -> None:
        """A rule this write made monotonic (asserted again so) can now make monotonic
        what it derives: what its conclusions elided is held again. Firing elides no
        derivation of such a rule, so a node's elided derivations are all of rules that
        can make nothing monotonic, and labelling needs them only for a node left
        unbelieved (`relabel`) — as a reopen from the rows, which cannot tell what was
        elided, labels it."""
        for rule_node in tx.touched:
            if rule_node in self.rules and can_make_monotonic(rule_node):
                for j in self.firings_of(rule_node):
                    if j.conclusion.elided:
                        self.rederive_elided(j.conclusion, tx)

    def resting_on(self, node: Node) -> list[Justification]:
        """Every justification `node` is a support of: its `uses`, or a rule's firings."""
        if node in self.rules:
            return self.firings_of(node)
        return list(node.uses or ())

    # Nor are its justifications: what it attached is `tx.new_justs` (less those it
    # detached again, `tx.dropped`: a justification made by this write has an id from
    # `tx.first_just` on), what it detached of those stored before it is `tx.dead_justs`,
    # and undoing it detaches the one and attaches the other.
    def justify(
        self, tx: Transaction, conclusion: Node, rule_node: Node, antecedents: tuple[Node, ...]
    ) -> None:
        """`conclusion` justified by `rule_node` from `antecedents`, attached: the one way
        firing adds a justification (what one is, and where it is kept, is truth
        maintenance's alone)."""
        j = Justification(tx.next_just, conclusion, rule_node, antecedents)
        tx.next_just += 1
        self.attach(j)
        tx.new_justs.append(j)  # (its conclusion a seed: see `_seeds`)

    def drop_justification(self, tx: Transaction, j: Justification) -> None:
        self.detach(j)
        if j.id >= tx.first_just:
            tx.dropped.add(j.id)
        else:
            tx.dead_justs[j.id] = j
            tx.removed_justifications += 1
        tx.seeds.add(j.conclusion)

    def _in_force(self, node: Node, tx: Transaction | None) -> bool:
        # a declaration added earlier in the same write is in force for later entries
        return node.believed or (tx is not None and node.premise and node.handle in tx.added)

    def declared(
        self, functor: Sym, subject: Any, context: str, tx: Transaction | None
    ) -> Node | None:
        """A `(functor subject …)` declaration in force and visible at `context`."""
        findex = self.index.by_functor.get(functor)
        bucket = findex.args[0].get(subject) if findex is not None and findex.args else None
        if bucket is None:  # the common case on every write: nothing declared
            return None
        up = self.hierarchy.up(context)
        for node in members(bucket):
            if node.positive and node.context in up and self._in_force(node, tx):
                return node
        return None

    def declared_arity(self, functor: Sym, context: str, tx: Transaction | None) -> int | None:
        """The arity an `(arity functor n)` in force at `context` declares, else None."""
        node = self.declared(ARITY, functor, context, tx)
        if node is None or len(node.atom) != 3 or type(node.atom[2]) is not int:
            return None
        return node.atom[2]

    def check_goal_arity(self, literals: list[tuple[bool, tuple]], ctx: str | None) -> None:
        """A goal (of `query`, `watch`, `sentexes_matching`) read at a named context is
        held to the arity declared there for its predicates — the declaration a write
        there is held to (`declared_arity`, as `_check_state` uses it): a goal that could
        never match, `(answers ?who ?what)` where `answers` takes 3, is refused `arity`
        instead of answered with nothing, or watched forever. Not refused when a sentence
        of the goal's arity is in view after all (stored where the declaration is not
        seen), nor read from everywhere (a variable context, CxEverything, none): there
        a context that does not see the declaration may hold it."""
        if ctx is None or ctx.startswith("?") or ctx == EVERYTHING:
            return
        declarations = self.index.by_functor.get(ARITY)
        if declarations is None or not declarations.args:
            return
        declared_for = declarations.args[0]
        for _, atom in literals:
            functor = atom[0]
            if type(functor) is not Sym or functor not in declared_for:
                continue
            declared = self.declared_arity(functor, ctx, None)
            given = len(atom) - 1
            if declared is None or declared == given or self._in_view_with(atom, ctx):
                continue
            names = [
                f"?{chr(ord('a') + i)}" if declared <= 26 else f"?x{i}" for i in range(declared)
            ]
            example = f"({' '.join([functor.name, *names])})"
            raise Refused(
                "arity",
                f"{functor.name} takes {declared} argument(s) at {ctx}, not {given}: a goal "
                f"with {given} never matches there; give it {declared}, e.g. {example}",
                {
                    "predicate": functor.name,
                    "declared": declared,
                    "given": given,
                    "example": example,
                },
            )

    def _in_view_with(self, atom: tuple, ctx: str) -> bool:
        """Whether a believed sentence of `atom`'s functor and length is in view at `ctx`
        (the refusal's path only: a scan of the functor's sentences)."""
        up = self.hierarchy.up(ctx)
        for node in self.index.with_functor(atom[0]):
            if len(node.atom) == len(atom) and node.believed and node.context in up:
                return True
        return False

    def settle(self, tx: Transaction) -> None:
        """Bring derivation and belief up to date with what `tx` changed: fire the rules
        (firing's `fire`, `place_again`, `rederive_all`), delete what lost its support,
        relabel what can depend on the change. Writes calls it once per write, before the
        belief diff and the commit; if it raises `Refused` the write is undone whole."""
        derives = bool(self.rules) or bool(self._carriers)
        if tx.full:
            if derives:
                self.rederive_all(tx)
            self.relabel(list(self.index.by_handle.values()), tx)
        else:
            if derives and (tx.fire or tx.new_rules):
                self.fire(tx)
            if tx.edges:
                self.place_again(tx)
                if derives:  # what the re-placed firings derived may fire in turn
                    self.fire_waiting(tx)
            if tx.unfounded:
                self._delete_unfounded(tx)
            if tx.touched:
                self._rederive_for_stronger_rules(tx)
            if (tx.seeds or tx.added or tx.new_justs) and not self._labelled_as_grown(tx):
                self.relabel(self.closure(self._seeds(tx), tx.added), tx)
        # derivation's and labelling's own tables are spent: let them go before the diff
        # and the commit build theirs (a big write's peak memory is at its commit)
        tx.depth = None
        tx.concluded.clear()
        tx.fire.clear()
        tx.seeds.clear()

    @staticmethod
    def _seeds(tx: Transaction) -> set[Node]:
        """Where the write may have changed belief: `tx.seeds`, what it made, and the
        conclusions of the justifications it attached. The last two are not put in
        `tx.seeds` as they come: a big write that only adds (a rule's closure) is
        labelled without them (`_labelled_as_grown`), and a set of a quarter of a million
        nodes, made and dropped, was a tenth of its peak memory."""
        seeds = set(tx.seeds)
        seeds.update(tx.added.values())
        seeds.update([j.conclusion for j in tx.new_justs])
        return seeds

    def _labelled_as_grown(self, tx: Transaction) -> bool:
        """Label a write that only added, without the fixed point, where that is sure to
        give what `relabel` would; True if it did.

        The commonest big write only adds: facts loaded, a rule asserted and its
        conclusions derived. When it removed, detached, rewrote and masked nothing,
        changed no edge, and no premise it made is monotonic, nothing it made has a
        contrary stored, and no mask is stored: then every node it made is believed,
        and no node stored before it changes — provided every node stored before it
        that its justifications rest on or conclude is believed. By induction on the
        order the write made them: each node it made was made by a firing of nodes
        stored before it (believed) or made earlier in the write (believed, and not
        monotonic: a firing is new only with a new part, and a part that is not
        monotonic makes nothing monotonic); so no defeat changes either. Otherwise,
        False, and `relabel` decides.
        """
        if (
            self.masks
            or tx.deleted
            or tx.dead_justs
            or tx.dropped
            or tx.touched
            or tx.masks
            or tx.edges
            or tx.unfounded
        ):
            return False
        added = tx.added
        two_sided = self.index.two_sided
        budget = self._running()
        for node in added.values():
            if budget is not None:
                budget.tick()
            if (node.premise and node.strength == MONOTONIC) or (
                two_sided and node.key in two_sided
            ):
                return False
        checked = None  # (the last rule seen: a closure's justifications share a few)
        for j in tx.new_justs:  # (a million, in a closure: no call, no tuple, per one)
            if budget is not None:
                budget.tick()
            rule = j.rule
            if rule is not checked:
                if not rule.believed and rule.handle not in added:
                    return False
                checked = rule
            node = j.conclusion
            if not node.believed and node.handle not in added:
                return False
            first, second = j.first, j.second
            if second is MANY:
                for node in first:
                    if not node.believed and node.handle not in added:
                        return False
                continue
            if not first.believed and first.handle not in added:
                return False
            if second is not None and not second.believed and second.handle not in added:
                return False
        for node in added.values():
            node.believed, node.mono, node.defeated = True, False, False
        return True

    def _delete_unfounded(self, tx: Transaction) -> None:
        """Delete the derived nodes this write left with no well-founded support: every
        justification they have rests, through others, on themselves — the pair a
        symmetric rule derives, once the premise under them is retracted. They would
        never be believed again, yet would stay stored forever.

        A node is founded if it is a premise, or one of its justifications rests only on
        founded nodes (a least fixed point). Only what the lost supports reach can have
        become unfounded: the nodes outside that region were founded before this write
        and still are.
        """
        by_handle = self.index.by_handle
        region: set[Node] = set()
        stack = [n for n in tx.unfounded if by_handle.get(n.handle) is n]
        tx.unfounded = []
        while stack:
            node = stack.pop()
            if node not in region:
                region.add(node)
                stack.extend(j.conclusion for j in node.uses or ())
        for node in region:  # (founded by a derivation it elided, it stays)
            if node.elided and by_handle.get(node.handle) is node:
                self.rederive_elided(node, tx)
        missing: dict[Justification, int] = {}
        queue: deque[Node] = deque()
        for node in region:
            if node.premise:
                queue.append(node)
                continue
            for j in node.justs or ():
                # (a rule is a premise: founded, and not counted)
                missing[j] = count = sum(1 for s in linked_supports(j) if s in region)
                if count == 0:
                    queue.append(node)
        founded: set[Node] = set()
        while queue:
            node = queue.popleft()
            self._kb.spend()
            if node in founded:
                continue
            founded.add(node)
            for j in node.uses or ():
                left = missing.get(j)
                if left is not None:
                    missing[j] = left - 1
                    if left == 1:
                        queue.append(j.conclusion)
        for node in sorted(region - founded, key=lambda n: n.handle):
            if by_handle.get(node.handle) is node:
                self.delete_cascading(tx, node, "unsupported")
        tx.unfounded = []

    def closure(self, seeds: Collection[Node], made: Collection[int] = ()) -> set[Node]:
        """Seeds plus everything whose belief can depend on them. `made`: the handles of
        nodes a write made, whose dependents are seeds already (every justification
        resting on one is new, and a new justification's conclusion is a seed)."""
        by_handle = self.index.by_handle
        two_sided = self.index.two_sided
        if len(seeds) == 1:  # the common write: one new node nothing rests on yet
            (node,) = seeds
            if not node.uses and node.key not in two_sided and node.atom[0] is not IMPLIES:
                return {node} if by_handle.get(node.handle) is node else set()
        seen: set[Node] = set()
        stack = [n for n in seeds if by_handle.get(n.handle) is n]
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            if node.uses and node.handle not in made:
                stack.extend([j.conclusion for j in node.uses])
            elif node.atom[0] is IMPLIES and node.handle not in made and node in self.rules:
                stack.extend([j.conclusion for j in self.firings_of(node)])
            if two_sided and node.key in two_sided:
                stack.extend(self.index.same_atom(node.atom, node.key))
        return seen

    def restore_belief(self, old_belief: dict[Node, tuple[bool, bool, bool]]) -> None:
        """Put back the labels a write kept before it relabelled (`tx.old_belief`): its
        undo (writes.py), once what it changed is undone."""
        for node, (believed, mono, defeated) in old_belief.items():
            node.believed, node.mono, node.defeated = believed, mono, defeated

    def relabel(self, nodes: Collection[Node], tx: Transaction | None) -> None:
        """Recompute belief for `nodes` (a set closed under dependence).

        Stratum 1: monotonic support (premises held monotonic, rules and antecedents all
        monotonic). Then defeat: a node without monotonic support is defeated by a
        monotonic contrary that some common context sees unmasked. Stratum 2: support at
        any strength for the undefeated. Least fixed points, so arrival order is moot.
        A write keeps the old labels of the nodes that were stored before it (to undo it,
        and to tell what changed); a node it made had none.
        """
        if tx is not None:
            added, old_belief = tx.added, tx.old_belief
            for n in nodes:
                if n not in old_belief and n.handle not in added:
                    old_belief[n] = (n.believed, n.mono, n.defeated)
        region = nodes if type(nodes) is set else set(nodes)
        if len(region) == 1:
            (node,) = region
            if not node.justs and node.key not in self.index.two_sided:
                # the common write: one sentex nothing rests on, with no contrary: no
                # fixed point to find (a region of one has no consequents, or they
                # would be in it)
                node.believed = node.premise
                node.mono = node.premise and node.strength == MONOTONIC
                node.defeated = False
                return
        for n in nodes:
            n.believed = n.mono = n.defeated = False
        masks = self.masks

        def unmasked(j: Justification) -> bool:
            ctx = j.conclusion.context
            return not any(self.masked_at(s, ctx) for s in j.supports())

        valid = unmasked if masks else None
        # stratum 1: monotonic
        starts = [n for n in nodes if n.premise and n.strength == MONOTONIC]
        self._propagate(region, starts, True, valid)
        # defeat
        two_sided = self.index.two_sided
        for n in nodes if two_sided else ():  # (a key is hashed to be looked for)
            if not n.mono and n.key in two_sided:
                n.defeated = any(
                    other.mono
                    and other.positive is not n.positive
                    and self._clash_visible(n, other)
                    for other in self.index.same_atom(n.atom, n.key)
                )
        # stratum 2: any strength
        starts = []
        for n in nodes:
            if n.mono:
                n.believed = True
            elif n.premise and not n.defeated:
                starts.append(n)
        self._propagate(region, starts, False, valid)
        # A derivation a node elided (`rederive_elided`) adds support, and none can make
        # it monotonic (`_rederive_for_stronger_rules`): it changes nothing where the
        # node is believed. Where it is not, the region is labelled again with every
        # derivation held.
        unsettled = [n for n in region if n.elided and not n.believed]
        if unsettled:
            for n in unsettled:
                self.rederive_elided(n, tx)
            self.relabel(region, tx)

    def _propagate(
        self,
        region: set[Node],
        starts: list[Node],
        mono: bool,
        valid: Callable[[Justification], bool] | None,
    ) -> None:
        """One stratum's least fixed point over `region`, from `starts`: a node's flag
        (`mono`, else `believed`) is set once one of its valid justifications has every
        support holding it. Counting: each justification waits for as many supports as
        do not hold the flag yet, and the last of them to get it queues the conclusion.
        A defeated node gets no flag in stratum 2."""
        missing: dict[Justification, int] = {}
        # A rule sentence is not counted among a justification's supports (it keeps no
        # `uses` to be told by): it is a premise, so whether it holds the flag by the
        # end of this stratum is known now, and a justification whose rule will not is
        # not counted at all.
        if mono:
            # a justification whose rule can never be monotonic (the commonest case: a
            # default rule) can make nothing monotonic: it is not counted at all
            possible: dict[Node, bool] = {}
            for n in region:
                for j in n.justs or ():
                    rule = j.rule
                    can = possible.get(rule)
                    if can is None:
                        can = possible[rule] = rule.mono or (
                            rule in region
                            and (bool(rule.justs) or (rule.premise and rule.strength == MONOTONIC))
                        )
                    if not can:
                        continue
                    count = 0
                    for s in linked_supports(j):
                        if not s.mono:
                            count += 1
                    missing[j] = count
                    if not count and (valid is None or valid(j)):
                        starts.append(n)
        else:
            holds: dict[Node, bool] = {}
            for n in region:
                if n.believed or n.defeated:
                    continue
                for j in n.justs or ():
                    rule = j.rule
                    will = holds.get(rule)
                    if will is None:
                        will = holds[rule] = (
                            rule.atom[0] is not IMPLIES
                            or rule.believed
                            or (rule.premise and not rule.defeated)
                        )
                    if not will:
                        continue
                    count = 0
                    for s in linked_supports(j):
                        if not s.believed:
                            count += 1
                    missing[j] = count
                    if not count and (valid is None or valid(j)):
                        starts.append(n)
        queue = deque(starts)
        budget = self._running()
        tick = budget.tick if budget is not None else None
        while queue:
            n = queue.popleft()
            if tick is not None:
                tick()
            if mono:
                if n.mono:
                    continue
                n.mono = n.believed = True
            else:
                if n.believed or n.defeated:
                    continue
                n.believed = True
            for j in n.uses or ():
                left = missing.get(j)
                if left is None:  # not waiting: its conclusion is outside, or settled
                    continue
                missing[j] = left - 1
                if left == 1 and (valid is None or valid(j)):
                    queue.append(j.conclusion)

    def masked_at(self, node: Node, ctx: str) -> bool:
        """Is `node` hidden at `ctx` by a mask stored in a context `ctx` sees?"""
        return masked(self.masks, self.hierarchy, node, ctx)

    def _clash_visible(self, a: Node, b: Node) -> bool:
        """Does some context see both `a` and `b`, with neither masked there?"""
        hierarchy = self.hierarchy
        plain = not (self.masks.get(a.handle) or self.masks.get(b.handle))
        if plain and (a.context in hierarchy.up(b.context) or b.context in hierarchy.up(a.context)):
            return True
        common = hierarchy.down(a.context) & hierarchy.down(b.context)
        if plain:
            return bool(common)
        return any(not self.masked_at(a, c) and not self.masked_at(b, c) for c in common)


def masked(masks: dict[int, list[Node]], hierarchy: Hierarchy, node: Node, ctx: str) -> bool:
    """Is `node` hidden at `ctx` by one of `masks` (masked handle -> its mask nodes)
    stored in a context `ctx` sees? `Maintenance.masked_at` over its own masks; reads,
    given them, asks this directly (a read checks it per node it looks at)."""
    found = masks.get(node.handle)
    if not found:
        return False
    up = hierarchy.up(ctx)
    return any(m.context in up for m in found)


def _mark_elided(node: Node) -> None:
    """Undo `rederive_elided`'s clearing of the mark."""
    node.elided = True


def linked_supports(j: Justification) -> tuple[Node, ...]:
    """The supports whose `uses` hold `j`, each node once: its antecedents, and its rule
    unless that is a rule sentence (`implies`: a rule keeps no `uses`, see
    `Maintenance.firings_of`; the other kind of rule, a `carriesClaim` declaration, may
    be derived, and does). A rule like (and (likes ?x ?y) (likes ?y ?x)) over (likes
    Cat Cat) has the node twice among its antecedents, but rests on it once: a node's
    `uses` holds each justification once, and counts it once. (The rule is never among
    the antecedents: no antecedent can match a rule sentence.)"""
    rule, first, second = j.rule, j.first, j.second
    if rule.atom[0] is IMPLIES:
        if second is None:
            return (first,)
        if second is not MANY and second is not first:
            return (first, second)
        return tuple(dict.fromkeys(j.antecedents))
    if second is None:
        return (rule, first)
    if second is not MANY and second is not first:
        return (rule, first, second)
    return tuple(dict.fromkeys((rule, *j.antecedents)))


# A node's `justs` and `uses` are None, a tuple, or — past this many — a `ListSet`
# (sentex.py: a list, 8 bytes an entry, where a dict took 38; over SUMO the inheritance
# axiom's 1,716 of them held 772,000 justifications, 29 MB of its peak as dicts): most
# nodes have one or two (a tuple of two is 56 bytes, a list 104, a dict 232), but a
# popular conclusion's `justs` or a class's subclass statement's `uses` can hold many
# thousands. Up to 64 a tuple's search is short (over a SUMO-shaped ontology's
# inheritance axiom, 19,000 containers of 17-64 entries were 12 MB of its peak as dicts
# at 16). A tuple is also safe to iterate while the node's set changes.
_SET_FROM = 64


def _joined(items: tuple | ListSet | None, j: Justification) -> tuple | ListSet:
    if items is None:
        return (j,)
    if type(items) is tuple:
        return items + (j,) if len(items) < _SET_FROM else ListSet((*items, j))
    items.add(j)
    return items


def _parted(items: tuple | ListSet, j: Justification) -> tuple | ListSet | None:
    if type(items) is tuple:
        # an undo detaches in the reverse order of attaching
        items = items[:-1] if items[-1] is j else tuple(x for x in items if x is not j)
    else:
        items.discard(j)
    return items or None


def _handles_in(atom: tuple) -> list[int]:
    """The handles `atom` names (a quotation names none: its content is data)."""
    out = []
    for arg in atom[1:]:
        if type(arg) is tuple:
            if arg[0] is SENTEX_HANDLE and len(arg) == 2 and type(arg[1]) is int:
                out.append(arg[1])
            elif arg[0] is not QUOTE:
                out.extend(_handles_in(arg))
    return out


def _carrier_shaped(node: Node) -> bool:
    """`(carriesClaim P N)`: a predicate and a positive argument position."""
    atom = node.atom
    return (
        node.positive
        and len(atom) == 3
        and type(atom[1]) is Sym
        and type(atom[2]) is int
        and atom[2] >= 1
    )
