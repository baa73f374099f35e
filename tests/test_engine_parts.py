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
added to `KB` is checked without editing this test. Shared attributes declared on
`State` (`_index`, `_tx`, `_budget`, …) are not methods and are not checked here: state.py
says which part writes each.
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
