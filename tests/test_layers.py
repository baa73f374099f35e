"""The root package is lazy and imported by no module: importing the engine loads nothing
above it (docs/architecture.md).

`kb/checkpoint.py` once imported the root package for `__version__`, and the root package
imported the channel and the HTTP client eagerly: a ten-module cycle, and `import koinii.kb`
loaded the transport. The version now lives in the leaf `koinii._version`, and the root
re-exports on first use.
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


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


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
            for alias in node.names:  # `from koinii import channel` imports koinii.channel
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
    engine = {"koinii", "koinii._version", "koinii.errors", "koinii.terms"}
    above = [m for m in loaded if m not in engine and not m.startswith("koinii.kb")]
    assert not above, f"import koinii.kb loaded: {above}"
    assert "koinii.kb.engine" in loaded  # (the probe ran)
