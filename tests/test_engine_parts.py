"""The engine's parts meet at public methods: no part reaches into another's privates
(issue 43; docs/architecture.md, "The engine's parts").

`KB` (kb/engine.py) is assembled from parts, one class per module — `Writes` in
writes.py, `Maintenance` in maintenance.py, `Firing` in firing.py, and so on — over the
shared `State`. Because they are mixins of one object, Python lets any of them call any
other's `self._x`; this test is what keeps the boundary. Each part's class is parsed; a
`self._name` in it (a call or a reference) that names a method which another part's
class defines, and its own does not, is a reach into that part's privates. (Other
classes in a part's module — `Transaction` in writes.py — are not parts; their `self`
is not the KB.) The owner
gives the method a public name (no underscore, a docstring saying what the other parts
may rely on), or the method moves to the part that is its only caller.

The parts are found from `KB`'s own bases and the imports that bring them, so a part
added to `KB` is checked without editing this test.

The state each part owns is held the same way. state.py's `OWNERS` names, for every
attribute declared on `State`, the one part that binds it. A part's class that binds
(`self.x = …`, `+=`, `del`, a class-level default) an attribute it does not own — or
one no part owns —, sets or deletes an item of it (`self.x[k] = …`), or changes it in
place (`self.x.append(…)`) fails, and the owner gives it a public method to ask
instead (as writes' ledger does for the counters firing, maintenance, checkpoint.py
and the engine once set, and maintenance's `take_structures` and `triggers_of` for
what checkpoint.py and firing set themselves). And a node's belief labels
(`believed`, `mono`, `defeated`) and its `justs` / `uses` are maintenance's alone:
anywhere else in kb/, setting one fails, but on a node the function itself made (its
constructor, a checkpoint's unpickler); writes' undo puts a write's old labels back
through `restore_belief`.
"""

from __future__ import annotations

import ast
import pathlib

KB_PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "src" / "koinii" / "kb"


def _tree(module: str) -> ast.Module:
    path = KB_PACKAGE / f"{module}.py"
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)


def parts() -> dict[str, str]:
    """module -> the part's class in it: `KB` in engine.py, and each of `KB`'s bases in
    the kb module it is imported from."""
    engine = _tree("engine")
    imported = {
        alias.asname or alias.name: node.module.rpartition(".")[2]
        for node in engine.body
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("koinii.kb.")
        for alias in node.names
    }
    found = {"engine": "KB"}
    for base in _class(engine, "KB").bases:
        assert isinstance(base, ast.Name), f"KB's base {ast.unparse(base)}: name it plainly"
        found[imported[base.id]] = base.id
    return found


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


def test_the_parts_are_found():
    """(The check below would pass vacuously if the parts were not found.)"""
    found = parts()
    assert {"engine", "writes", "maintenance", "firing", "reads", "checkpoint"} <= set(found)
    assert all(methods_by_part().values()), "a part with no methods: is its class found?"


def test_no_part_calls_another_parts_private_method():
    found = reaches()
    assert not found, (
        "a part reaches into another's private method; give it a public name on the part "
        "that owns it (with a docstring saying what callers may rely on), or move it to its "
        f"only caller: {'; '.join(found)}"
    )


# --- the state each part owns ---------------------------------------------------------


def owners() -> dict[str, str]:
    """attribute -> the part (its module) that owns it, from state.py's `OWNERS`."""
    table = next(
        node.value
        for node in _tree("state").body
        if isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "OWNERS"
    )
    owned: dict[str, str] = {}
    for module, names in ast.literal_eval(table).items():
        for name in names:
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


def _bound(targets: list[ast.expr]) -> list[ast.Attribute]:
    """The `self.x` among assignment targets (unpacked), and those an item of is set or
    deleted (`self.x[k] = …`: the structure is written as surely as rebound)."""
    found = []
    for target in targets:
        if isinstance(target, (ast.Tuple, ast.List)):
            found += _bound(list(target.elts))
        elif isinstance(target, (ast.Starred, ast.Subscript)):
            found += _bound([target.value])
        elif (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            found.append(target)
    return found


# What changes a dict, list or set in place: called on a part's state (or on what it
# holds, `self.x[k].append(…)`, `self.x.setdefault(k, []).append(…)`), it changes it.
CHANGES_IN_PLACE = frozenset(
    {"append", "extend", "insert", "pop", "popitem", "remove", "discard", "clear", "add"}
    | {"update", "setdefault", "sort", "reverse"}
)


def _changed_in_place(node: ast.Call) -> ast.Attribute | None:
    """The `self.x` a call changes in place, if it is one of `CHANGES_IN_PLACE` on it."""
    if not (isinstance(node.func, ast.Attribute) and node.func.attr in CHANGES_IN_PLACE):
        return None
    held = node.func.value
    while isinstance(held, (ast.Subscript, ast.Call)):
        if isinstance(held, ast.Subscript):
            held = held.value
        elif isinstance(held.func, ast.Attribute) and held.func.attr in CHANGES_IN_PLACE:
            held = held.func.value
        else:
            return None
    if isinstance(held, ast.Attribute) and isinstance(held.value, ast.Name):
        return held if held.value.id == "self" else None
    return None


def bindings(cls: ast.ClassDef) -> list[tuple[int, str]]:
    """(line, attribute) for every attribute a part's class binds: `self.x = …`, `+=`,
    `del self.x`, `setattr(self, "x", …)`, its class-level defaults, an item set or
    deleted (`self.x[k] = …`), and a container of it changed in place (`CHANGES_IN_PLACE`).
    (An object of its own that the state holds — the index, the ledger, the feed — keeps
    its invariants in its own methods, which are not counted.)"""
    found = [
        (node.lineno, target.id)
        for node in cls.body
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    ]
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets = [node.optional_vars]
        elif isinstance(node, ast.Call) and _changed_in_place(node) is not None:
            changed = _changed_in_place(node)
            found.append((node.lineno, changed.attr))
            continue
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "setattr"
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == "self"
            and isinstance(node.args[1], ast.Constant)
        ):
            found.append((node.lineno, node.args[1].value))
            continue
        else:
            continue
        found += [(target.lineno, target.attr) for target in _bound(targets)]
    return found


def trespasses() -> list[str]:
    """`module:line x (owner's)` for every attribute a part binds and does not own."""
    owned = owners()
    found = []
    for module, cls in sorted(parts().items()):
        for line, name in bindings(_class(_tree(module), cls)):
            owner = owned.get(name)
            if owner != module:
                whose = f"{owner}.py's" if owner else "declared on State by no part"
                found.append(f"{module}.py:{line} binds {name} ({whose})")
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
    assert set(owned.values()) <= set(parts()), "an owner in OWNERS is not one of KB's parts"


def test_a_part_binds_only_the_state_it_owns():
    found = trespasses()
    assert not found, (
        "a part binds state it does not own (state.py, OWNERS): give the owner a public "
        "method that does it, and call that, or — for a new attribute — declare it on "
        f"State with its owner: {'; '.join(found)}"
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
    writes = bindings(_class(_tree("writes"), "Writes"))
    assert {"_ledger", "_shipped"} <= {name for _, name in writes}
    engine = bindings(_class(_tree("engine"), "KB"))  # `self._commit_listeners[token] = …`
    assert "_commit_listeners" in {name for _, name in engine}
    maintenance = {name for _, name in bindings(_class(_tree("maintenance"), "Maintenance"))}
    assert {"_referrers", "_masks", "_triggers"} <= maintenance  # setdefault(…).add, pop
    labels = _LabelWrites("maintenance.py")
    labels.visit(_tree("maintenance"))
    assert any("believed" in place for place in labels.found)
