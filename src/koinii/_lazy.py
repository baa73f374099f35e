"""Lazy re-exports: a package names what it offers, and each name is imported from the
module that owns it on first use — so importing the package loads nothing above what its
caller asked for (`import koinii.kb` loads no transport, `import koinii.speech`
no agent). The root package, `koinii.channel` and `koinii.client` use it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def reexport(
    package: str, owners: dict[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`: `owners` maps each re-exported name to
    the module that owns it (a module re-exported as itself maps to its own name). A name is
    imported on first use and kept in `namespace` after, so the next use is a plain lookup."""

    def __getattr__(name: str) -> Any:
        owner = owners.get(name)
        if owner is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(owner)
        value = module if owner == f"{package}.{name}" else getattr(module, name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(owners))

    return __getattr__, __dir__
