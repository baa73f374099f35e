"""The engine's parts meet at public methods: no part reaches into another's privates,
and each binds and changes only the state it owns (issue 43; docs/architecture.md, "The
engine's parts").

`KB` (kb/engine.py) is a facade over parts, each an object of its own that
`KB.__init__` makes and binds (`self._search = Search(…)`): `Maintenance` in
maintenance.py (with `Firing`, its base in firing.py: one object), `Writes` in
writes.py, `Checkpoints` in checkpoint.py, `Reads` in reads.py, `Search` in search.py,
`Clashes`, `Watching`. No part reaches into another's privates (`self._search._x`),
nor into what it was given (`self._kb._x`). The engine itself is checked as a part
too, and so would be a mixin, were one added to `KB`'s bases (all of the engine's
parts were once): Python lets a mixin call any other's `self._x`, so a `self._name` in
a mixin (a call or a reference) that names a method which another part's class
defines, and its own does not, is a reach into that part's privates. (Other classes in
a part's module — `Transaction` in writes.py — are not parts; their `self` is not the
KB.) The owner gives the method a public name (no underscore, a docstring saying what
the other parts may rely on), or the method moves to the part that is its only caller.

The parts are found from the objects `KB.__init__` makes (and their classes' bases in
kb/), `KB`'s own bases, and the imports that bring them, so a part added to `KB` is
checked without editing this test.

The state each part owns is held the same way. state.py's `OWNERS` names, for every
attribute declared on `State`, the engine (or mixin) that binds it. Its class that
binds (`self.x = …`, `+=`, `del`, a class-level default) an attribute it does not own —
or one no part owns —, sets or deletes an item of it (`self.x[k] = …`), sets an
attribute of it (`self.x.y = …`), or changes it in place (`self.x.append(…)`) fails,
and the owner gives it a public method to ask instead (as writes' ledger does for the
counters checkpoint.py and the engine set, and maintenance's `take_structures` for
what checkpoint.py sets).
A composed part's state is its own object's: `OWNERS` names it under the part's module,
among its `__slots__`; the rest of its slots are what its constructor is given (the
lock, the store, the index, …), bound there and only there, and never changed by it
(no item, attribute or in-place change of one); and no other part binds or changes
anything of it (`self._search.x = …`). And a node's belief labels (`believed`, `mono`,
`defeated`) and its `justs` / `uses` are maintenance's alone: anywhere else in kb/,
setting one fails, but on a node the function itself made (its constructor, a
checkpoint's unpickler); writes' undo puts a write's old labels back through
`restore_belief`.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pathlib

KB_PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "src" / "koinii" / "kb"


def _tree(module: str) -> ast.Module:
    path = KB_PACKAGE / f"{module}.py"
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)


def _imported_by_engine() -> dict[str, str]:
    """name -> the kb module engine.py imports it from."""
    return {
        alias.asname or alias.name: node.module.rpartition(".")[2]
        for node in _tree("engine").body
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("koinii.kb.")
        for alias in node.names
    }


def parts() -> dict[str, str]:
    """module -> the part's class in it: `KB` in engine.py, and each of `KB`'s bases in
    the kb module it is imported from (a mixin), but `State` (state.py: the engine's
    own attributes, declared)."""
    engine, imported = _tree("engine"), _imported_by_engine()
    found = {"engine": "KB"}
    for base in _class(engine, "KB").bases:
        assert isinstance(base, ast.Name), f"KB's base {ast.unparse(base)}: name it plainly"
        if base.id != "State":
            found[imported[base.id]] = base.id
    return found


def composed() -> dict[str, tuple[str, str]]:
    """module -> (its composed part's class, the KB's attribute holding it): each
    `self._x = Cls(…)` in `KB.__init__` whose class comes from a kb module."""
    engine, imported = _tree("engine"), _imported_by_engine()
    init = next(
        f
        for f in _class(engine, "KB").body
        if isinstance(f, ast.FunctionDef) and f.name == "__init__"
    )
    found = {}
    for node in ast.walk(init):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id in imported
        ):
            for target, _ in _bound(node.targets):
                found[imported[node.value.func.id]] = (node.value.func.id, target.attr)
    return found


def slots(cls: ast.ClassDef) -> set[str]:
    """The names a composed part's `__slots__` lists: its object's every attribute."""
    value = next(
        n.value
        for n in cls.body
        if isinstance(n, ast.Assign) and [ast.unparse(t) for t in n.targets] == ["__slots__"]
    )
    return set(ast.literal_eval(value))


def methods_by_part() -> dict[str, set[str]]:
    """module -> the names its part's class defines (methods, properties, static ones)."""
    return {
        module: {
            f.name
            for f in _class(_tree(module), cls).body
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        for module, cls in parts().items()
    }


def reaches() -> list[str]:
    """`module:line self._name (owner's)` for every reach into another part's privates."""
    defined = methods_by_part()
    owners: dict[str, list[str]] = {}
    for module, names in defined.items():
        for name in names:
            owners.setdefault(name, []).append(module)
    found = []
    for module, cls in sorted(parts().items()):
        for node in ast.walk(_class(_tree(module), cls)):
            if not (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                continue
            others = [m for m in owners.get(node.attr, ()) if m != module]
            if others and node.attr not in defined[module]:
                found.append(
                    f"{module}.py:{node.lineno} self.{node.attr} (defined in {others[0]}.py)"
                )
    return found


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def composed_classes() -> list[tuple[str, str, str]]:
    """(module, class, part) for each composed part's class and each of its bases that
    a kb module defines (`Firing` in firing.py, of maintenance's object): what one
    object's code is, wherever it is written. The part's own class holds the slots."""
    found = []
    for part, (cls, _) in sorted(composed().items()):
        module, name = part, cls
        while True:
            found.append((module, name, part))
            tree = _tree(module)
            imported = {
                alias.asname or alias.name: node.module.rpartition(".")[2]
                for node in tree.body
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("koinii.kb.")
                for alias in node.names
            }
            bases = [
                b.id
                for b in _class(tree, name).bases
                if isinstance(b, ast.Name) and b.id in imported
            ]
            if not bases:
                break
            assert len(bases) == 1, f"{module}.py's {name}: one base in kb/ at most"
            module, name = imported[bases[0]], bases[0]
    return found


def given(part: str) -> set[str]:
    """What a composed part's constructor is given: its slots but its own state."""
    cls, _ = composed()[part]
    return slots(_class(_tree(part), cls)) - set(owned_by(part))


def reaches_into_composed() -> list[str]:
    """`module:line self._x._name` for every reach into a composed part's privates: by a
    mixin (or the engine) through the attribute holding the part, and by a composed part
    through what it was given (`self._kb._x`, `self._index._x`: what it reads, it reads
    through public names)."""
    holders = {attribute for _, attribute in composed().values()}
    classes = [(m, c, holders) for m, c in parts().items()]
    classes += [(m, c, given(part)) for m, c, part in composed_classes()]
    found = []
    for module, cls, through in sorted(classes):
        for node in ast.walk(_class(_tree(module), cls)):
            if (
                isinstance(node, ast.Attribute)
                and _private(node.attr)
                and isinstance(node.value, ast.Attribute)
                and _is_self(node.value.value)
                and node.value.attr in through
            ):
                found.append(f"{module}.py:{node.lineno} {ast.unparse(node)}")
    return found


def test_the_parts_are_found():
    """(The checks below would pass vacuously if the parts were not found.)"""
    found = parts()
    assert "engine" in found
    assert all(methods_by_part().values()), "a part with no methods: is its class found?"
    assert set(composed()) == {
        "writes",
        "maintenance",
        "checkpoint",
        "reads",
        "search",
        "clashes",
        "watching",
    }
    assert ("firing", "Firing", "maintenance") in composed_classes()
    assert not set(found) & set(composed()), "a part both a mixin and composed"


def test_no_part_calls_another_parts_private_method():
    found = reaches()
    assert not found, (
        "a part reaches into another's private method; give it a public name on the part "
        "that owns it (with a docstring saying what callers may rely on), or move it to its "
        f"only caller: {'; '.join(found)}"
    )


def test_no_part_reaches_into_a_composed_parts_privates_nor_a_composed_part_into_what_it_reads():
    found = reaches_into_composed()
    assert not found, (
        "a reach into a private of a composed part (or, from one, of what it reads): give "
        "it a public name with a docstring saying what callers may rely on, or — for a "
        f"composed part — name what it needs in its Protocol: {'; '.join(found)}"
    )


# --- the state each part owns ---------------------------------------------------------


def _owners_table() -> dict[str, tuple[str, ...]]:
    table = next(
        node.value
        for node in _tree("state").body
        if isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "OWNERS"
    )
    return ast.literal_eval(table)


def owned_by(module: str) -> tuple[str, ...]:
    """What `OWNERS` says the part in `module` owns."""
    return _owners_table().get(module, ())


def owners() -> dict[str, str]:
    """attribute of the state -> the mixin part (its module) that owns it, from state.py's
    `OWNERS` (a composed part's own attributes are its object's: `owned_by`)."""
    mixins = parts()
    owned: dict[str, str] = {}
    for module, names in _owners_table().items():
        for name in names if module in mixins else ():
            assert name not in owned, f"{name} has two owners: {owned[name]} and {module}"
            owned[name] = module
    return owned


def declared() -> set[str]:
    """The attributes `State` declares."""
    return {
        node.target.id
        for node in _class(_tree("state"), "State").body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }


def _root(node: ast.expr, plainly: bool = True) -> tuple[ast.Attribute, bool] | None:
    """The `self.x` that `node` (a target, or what a call changes) is, or is part of —
    with whether it is `self.x` itself (plainly), not an item or attribute of it."""
    while isinstance(node, (ast.Subscript, ast.Attribute, ast.Starred)) and not (
        isinstance(node, ast.Attribute) and _is_self(node.value)
    ):
        plainly = plainly and isinstance(node, ast.Starred)
        node = node.value
    return (node, plainly) if isinstance(node, ast.Attribute) else None


def _bound(targets: list[ast.expr]) -> list[tuple[ast.Attribute, bool]]:
    """The `self.x` among assignment targets (unpacked), each with whether it is bound
    plainly: an item of it set or deleted (`self.x[k] = …`) or an attribute of it set
    (`self.x.y = …`) writes it as surely as a rebinding does, through it."""
    found = []
    for target in targets:
        if isinstance(target, (ast.Tuple, ast.List)):
            found += _bound(list(target.elts))
        elif (root := _root(target)) is not None:
            found.append(root)
    return found


# What changes a dict, list or set in place: called on a part's state (or on what it
# holds, `self.x[k].append(…)`, `self.x.setdefault(k, []).append(…)`), it changes it.
CHANGES_IN_PLACE = frozenset(
    {"append", "extend", "insert", "pop", "popitem", "remove", "discard", "clear", "add"}
    | {"update", "setdefault", "sort", "reverse"}
)


def _changed_in_place(node: ast.Call) -> ast.Attribute | None:
    """The `self.x` a call changes in place, if it is one of `CHANGES_IN_PLACE` on it, or
    on an item or attribute of it."""
    if not (isinstance(node.func, ast.Attribute) and node.func.attr in CHANGES_IN_PLACE):
        return None
    held = node.func.value
    while not (isinstance(held, ast.Attribute) and _is_self(held.value)):
        if isinstance(held, (ast.Subscript, ast.Attribute)):
            held = held.value
        elif (
            isinstance(held, ast.Call)
            and isinstance(held.func, ast.Attribute)
            and held.func.attr in CHANGES_IN_PLACE
        ):
            held = held.func.value
        else:
            return None
    return held


def bindings(cls: ast.ClassDef) -> list[tuple[int, str, bool, str | None]]:
    """(line, attribute, plainly, where) for every attribute of `self` a part's class
    binds or changes. Plainly: `self.x = …`, `+=`, `del self.x`, `setattr(self, "x", …)`,
    a class-level default; through it: an item set or deleted (`self.x[k] = …`), an
    attribute of it set (`self.x.y = …`), a container of it changed in place
    (`CHANGES_IN_PLACE`). `where`: the method doing it (None: the class body). (An
    object the state holds — the index, the ledger, the feed — keeps its invariants in
    its own methods, which are not counted.)"""
    found: list[tuple[int, str, bool, str | None]] = [
        (node.lineno, target.id, True, None)
        for node in cls.body
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name) and target.id != "__slots__"
    ]
    for function in cls.body:
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found += _bindings_in(function)
    return found


def _bindings_in(function: ast.FunctionDef | ast.AsyncFunctionDef):
    where = function.name
    found = []
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets = [node.optional_vars]
        elif isinstance(node, ast.Call) and (changed := _changed_in_place(node)) is not None:
            found.append((node.lineno, changed.attr, False, where))
            continue
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "setattr"
            and _is_self(node.args[0])
            and isinstance(node.args[1], ast.Constant)
        ):
            found.append((node.lineno, node.args[1].value, True, where))
            continue
        else:
            continue
        found += [
            (target.lineno, target.attr, plainly, where) for target, plainly in _bound(targets)
        ]
    return found


def trespasses() -> list[str]:
    """`module:line x (owner's)` for every attribute a part binds or changes and does not
    own: a mixin, state another part owns (or no part does), or anything of a composed
    part (`self._search.x = …`: the engine only makes it); a composed part, anything but
    its own state, and what it was given but plainly in its `__init__`."""
    owned = owners()
    holders = {attribute for _, attribute in composed().values()}
    found = []
    for module, cls in sorted(parts().items()):
        for line, name, plainly, _ in bindings(_class(_tree(module), cls)):
            owner = owned.get(name)
            if name in holders and not plainly:
                found.append(f"{module}.py:{line} changes {name}'s state (its own object's)")
            elif owner != module:
                whose = f"{owner}.py's" if owner else "declared on State by no part"
                found.append(f"{module}.py:{line} binds {name} ({whose})")
    for module, cls, part in composed_classes():
        found += composed_trespasses(part, _class(_tree(module), cls), module)
    return found


def composed_trespasses(part: str, cls: ast.ClassDef, module: str | None = None) -> list[str]:
    """What the composed part's class `cls` (or a base of it, written in `module`)
    binds or changes that is not the part's own state."""
    own = set(owned_by(part))
    module = module or part
    handed = slots(cls) - own if module == part else given(part)
    found = []
    for line, name, plainly, where in bindings(cls):
        if name in own:
            continue
        if name not in handed:
            found.append(f"{module}.py:{line} binds {name} (not its own, nor given it)")
        elif not (plainly and where == "__init__" and module == part):
            found.append(f"{module}.py:{line} changes {name} (given it to read)")
    return found


LABELS = frozenset({"believed", "mono", "defeated", "justs", "uses"})


def _makes_node(value: ast.expr) -> bool:
    """`Node(…)`, or `_new(Node)` (a checkpoint's unpickler): a node made here."""
    return isinstance(value, ast.Call) and any(
        isinstance(n, ast.Name) and n.id == "Node" for n in [value.func, *value.args]
    )


class _LabelWrites(ast.NodeVisitor):
    """Where a module sets a node's labels or links (`LABELS`) on a node it did not make."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.found: list[str] = []
        self.classes: list[str] = []
        self.made: list[set[str]] = [set()]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.classes.append(node.name)
        self.generic_visit(node)
        self.classes.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        made = {
            target.id
            for n in ast.walk(node)
            if isinstance(n, ast.Assign) and _makes_node(n.value)
            for target in n.targets
            if isinstance(target, ast.Name)
        }
        if self.classes[-1:] == ["Node"]:
            made.add("self")  # the node's own constructor
        self.made.append(made)
        self.generic_visit(node)
        self.made.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def _check(self, targets: list[ast.expr]) -> None:
        for target in targets:
            if isinstance(target, (ast.Tuple, ast.List)):
                self._check(list(target.elts))
            elif isinstance(target, ast.Attribute) and target.attr in LABELS:
                made_here = isinstance(target.value, ast.Name) and target.value.id in self.made[-1]
                if not made_here:
                    self.found.append(f"{self.module}:{target.lineno} {ast.unparse(target)}")

    def visit_Assign(self, node: ast.Assign) -> None:
        self._check(node.targets)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check([node.target])
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        self._check(node.targets)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if (
            isinstance(node.func, ast.Name)
            and node.func.id == "setattr"
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in LABELS
        ):
            self.found.append(f"{self.module}:{node.lineno} setattr(…, {node.args[1].value!r})")
        self.generic_visit(node)


def label_writes() -> list[str]:
    """Every place outside maintenance.py in kb/ that sets a node's labels or links."""
    found = []
    for path in sorted(KB_PACKAGE.rglob("*.py")):
        module = path.relative_to(KB_PACKAGE).as_posix()
        if module == "maintenance.py":
            continue
        visitor = _LabelWrites(module)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        found += visitor.found
    return found


def test_every_attribute_of_the_state_has_one_owning_part():
    owned = owners()
    assert set(owned) == declared(), (
        "state.py's OWNERS and State's declarations differ: "
        f"owned, not declared: {sorted(set(owned) - declared())}; "
        f"declared, not owned: {sorted(declared() - set(owned))}"
    )
    assert set(_owners_table()) <= set(parts()) | set(composed()), (
        "an owner in OWNERS is not one of KB's parts"
    )
    for module, (cls, _) in composed().items():
        stray = set(owned_by(module)) - slots(_class(_tree(module), cls))
        assert not stray, f"{module}.py's {cls} owns {sorted(stray)}, not in its __slots__"


def test_a_part_binds_only_the_state_it_owns():
    found = trespasses()
    assert not found, (
        "a part binds or changes state it does not own (state.py, OWNERS): give the owner "
        "a public method that does it, and call that, or — for a new attribute — declare "
        f"it on State (or in the composed part's __slots__) with its owner: {'; '.join(found)}"
    )


def test_only_maintenance_sets_a_nodes_belief_labels_and_links():
    found = label_writes()
    assert not found, (
        "a node's belief labels and its justs/uses are truth maintenance's: ask "
        "maintenance.py (a public method of Maintenance, e.g. restore_belief, attach, "
        f"take_structures) instead: {'; '.join(found)}"
    )


def test_the_checks_see_what_they_look_for():
    """(The checks above would pass vacuously if they found nothing to check.)"""
    writes = bindings(_class(_tree("writes"), "Writes"))  # `self._commit_listeners[token] = …`
    assert {"ledger", "shipped", "_commit_listeners"} <= {name for _, name, _, _ in writes}
    engine = bindings(_class(_tree("engine"), "KB"))
    assert {"_reads", "_search", "_clashes", "_watching", "_maintenance", "_writes"} <= {
        name for _, name, _, _ in engine
    }
    maintenance = bindings(_class(_tree("maintenance"), "Maintenance"))
    assert {"_referrers", "masks", "_triggers"} <= {name for _, name, _, _ in maintenance}
    search = bindings(_class(_tree("search"), "Search"))
    assert {"last_examined", "_words_indexed", "_index"} <= {name for _, name, _, _ in search}
    labels = _LabelWrites("maintenance.py")
    labels.visit(_tree("maintenance"))
    assert any("believed" in place for place in labels.found)


def test_a_composed_part_that_changes_what_it_reads_is_a_trespass():
    """Each way a composed part could change what it was given to read is found (the
    search given maintenance's index and writes' ledger)."""
    part = ast.parse(
        """
class Search:
    __slots__ = ("_index", "_ledger", "last_examined")

    def __init__(self, index, ledger):
        self._index = index
        self._ledger = ledger
        self.last_examined = 0

    def search(self, other):
        self.last_examined += 1
        self._index.by_handle[1] = None
        self._ledger.seq = 7
        self._index.by_functor.pop(other)
        self._index = other
        self.mine = 1
"""
    )
    found = composed_trespasses("search", _class(part, "Search"))
    assert sorted(found, key=lambda place: int(place.split(":")[1].split(" ")[0])) == [
        "search.py:12 changes _index (given it to read)",  # an item of it set
        "search.py:13 changes _ledger (given it to read)",  # an attribute of it set
        "search.py:14 changes _index (given it to read)",  # changed in place
        "search.py:15 changes _index (given it to read)",  # bound again, past __init__
        "search.py:16 binds mine (not its own, nor given it)",
    ]


# --- the facade ------------------------------------------------------------------------


def delegations() -> list[tuple[str, str, str]]:
    """(KB's method, the attribute holding the part, the part's method) for each method
    of `KB` whose body, past its docstring, is one `return self._part.name(…)`."""
    found = []
    for function in _class(_tree("engine"), "KB").body:
        if not isinstance(function, ast.FunctionDef):
            continue
        body = [n for n in function.body if not isinstance(n, ast.Expr)]
        if not (len(body) == 1 and isinstance(body[0], ast.Return)):
            continue
        call = body[0].value
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Attribute)
            and _is_self(call.func.value.value)
        ):
            found.append((function.name, call.func.value.attr, call.func.attr))
    return found


def _parameters(method) -> list[tuple[str, object, object]]:
    return [
        (p.name, p.kind, p.default)
        for p in inspect.signature(method).parameters.values()
        if p.name != "self"
    ]


def test_the_kb_delegates_each_method_with_the_signature_of_the_part_that_answers_it():
    """The facade's methods keep the signatures callers know, and the part answering
    each takes the same parameters: a parameter added, renamed or given another default
    on one side only is a call that breaks (or silently changes) on the other."""
    from koinii.kb.engine import KB

    classes = {
        attribute: getattr(importlib.import_module(f"koinii.kb.{module}"), cls)
        for module, (cls, attribute) in composed().items()
    }
    found = delegations()
    assert len(found) > 40, "the delegating methods are not found"
    differ = [
        f"KB.{name} ~ {classes[held].__name__}.{called}"
        for name, held, called in found
        if held in classes
        and _parameters(getattr(KB, name)) != _parameters(getattr(classes[held], called))
    ]
    assert not differ, f"a delegating method's parameters differ from its part's: {differ}"
