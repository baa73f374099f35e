"""The layers: no module imports up the layer order, no import cycle, and no module imports
the root package (docs/architecture.md).

Every module under src/koinii is parsed, and every import it makes — at the top or inside a
function, `import koinii.x` or `from koinii.x import y` or relative — is an edge from its
unit to the imported unit. A unit is a top-level module or package of `koinii`
(`koinii.kb.store.sql` is in `kb`).
`LAYERS` places every unit in a layer; an import may go to the unit's own layer or one
before it, never after. The server and the client share a rank, and neither may import the
other: what they share is the wire format, the layer below them.

There are no exceptions: an upward import fails the test (import from a lower layer
instead, or move the code down). The last two went in issue 36 (docs/architecture.md).

The root package re-exports lazily and nothing imports it: `kb/checkpoint.py` once imported
it for `__version__` while it imported the channel and the HTTP client eagerly, a
ten-module cycle through which `import koinii.kb` loaded the transport.
"""

from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PACKAGE = SRC / "koinii"

# Each layer, in order, with its units; a unit may import its own layer's units and those
# of the layers before it. Two layers of one rank may not import each other.
LAYERS: tuple[tuple[int, str, frozenset[str]], ...] = (
    (0, "foundation", frozenset({"errors", "_version", "_lazy", "_moved", "terms", "results"})),
    (1, "engine", frozenset({"kb"})),
    (2, "operations", frozenset({"operations"})),
    (
        3,
        "domain",
        frozenset(
            {
                "projects",
                "speech",
                "identity",
                "channel",
                "disputes",
                "backups",
                "wraps",
                "sessions",
            }
        ),
    ),
    (4, "wire format", frozenset({"wire"})),
    (5, "server", frozenset({"server"})),
    (5, "client", frozenset({"client"})),
    (6, "interfaces", frozenset({"cli", "mcp", "runtimes", "web", "__main__"})),
    # the root package re-exports (lazily) from every layer; nothing may import it back
    (7, "root", frozenset({""})),
)


def _layer_of() -> dict[str, tuple[int, str]]:
    return {unit: (rank, name) for rank, name, units in LAYERS for unit in units}


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit_of(module: str) -> str:
    """`koinii.kb.store.sql` -> `kb`; `koinii` -> `` (the root package)."""
    parts = module.split(".")[1:]
    return parts[0] if parts else ""


def imports_of(path: pathlib.Path, modules: set[str]) -> list[tuple[str, int]]:
    """Every koinii module `path` imports, anywhere in it, with the line."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "koinii"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != "koinii":
                continue
            for alias in node.names:  # `from koinii import channel` imports koinii.channel.agent
                submodule = f"{source}.{alias.name}"
                found.append((submodule if submodule in modules else source, node.lineno))
    return found


def all_imports() -> list[tuple[str, str, int]]:
    """(importing module, imported module, line) for every import in src/koinii."""
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(path) for path in paths}
    return [
        (module_name(path), imported, line)
        for path in paths
        for imported, line in imports_of(path, modules)
    ]


def test_every_unit_has_a_layer():
    layer = _layer_of()
    units = {unit_of(module_name(path)) for path in PACKAGE.rglob("*.py")}
    assert not units - set(layer), f"place these in LAYERS: {sorted(units - set(layer))}"
    assert not set(layer) - units, f"LAYERS names units that are gone: {set(layer) - units}"


def upward_imports() -> dict[tuple[str, str], list[str]]:
    """(importing module, imported unit) -> where, for every import that runs up the order."""
    layer = _layer_of()
    found: dict[tuple[str, str], list[str]] = {}
    for module, imported, line in all_imports():
        source, target = unit_of(module), unit_of(imported)
        if source == target:
            continue
        (rank, name), (target_rank, target_name) = layer[source], layer[target]
        if target_rank < rank or (target_rank == rank and target_name == name):
            continue
        found.setdefault((module, target), []).append(f"{module}:{line} imports {imported}")
    return found


def test_no_module_imports_up_the_layers():
    upward = upward_imports()
    assert not upward, (
        "imports up the layer order (import from a lower layer, or move the code down): "
        + "; ".join(w for where in upward.values() for w in where)
    )


def test_no_import_cycle_among_the_units():
    """Cycles are found by depth-first search over the units' graph: it must be a DAG."""
    graph: dict[str, set[str]] = {}
    for module, imported, _ in all_imports():
        source, target = unit_of(module), unit_of(imported)
        if source != target:
            graph.setdefault(source, set()).add(target)
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(unit: str) -> list[str] | None:
        state[unit] = "open"
        path.append(unit)
        for target in sorted(graph.get(unit, ())):
            if state.get(target) == "open":
                return path[path.index(target) :] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[unit] = "done"
        path.pop()
        return None

    for unit in sorted(graph):
        if unit not in state and (cycle := visit(unit)):
            raise AssertionError(f"an import cycle: {' -> '.join(cycle)}")


def test_no_module_imports_the_root_package():
    """The root package only re-exports (lazily); a module that imported it would load
    every layer the re-exports come from, and close a cycle through them."""
    importers = [
        f"{module}:{line}" for module, imported, line in all_imports() if imported == "koinii"
    ]
    assert not importers, f"import from the owning module instead: {importers}"


def test_importing_the_engine_loads_nothing_above_it():
    """`import koinii.kb` loads the engine and the foundation only (the root package is
    lazy): no domain, transport or interface module, and no httpx, Starlette or click."""
    probe = (
        "import sys, koinii.kb, koinii.kb.checkpoint, koinii.kb.store.dump\n"
        "print('\\n'.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('koinii', 'httpx', 'starlette', 'click', 'mcp'))))"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env
    ).stdout.split()
    engine = {"koinii", "koinii._version", "koinii._lazy", "koinii._moved"}
    engine |= {"koinii.errors", "koinii.terms", "koinii.results"}
    above = [m for m in loaded if m not in engine and not m.startswith("koinii.kb")]
    assert not above, f"import koinii.kb loaded: {above}"
    assert "koinii.kb.engine" in loaded  # (the probe ran)
