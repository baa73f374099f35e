"""The import paths that moved into packages (issue 43), kept for one release.

`import koinii.moves` still works: it warns (DeprecationWarning, with the new path) and
gives the module at its new place — the same module object, so what one caller sets on it
the other sees. The root package installs the finder. Remove this module, and its line in
`koinii/__init__.py`, in the release after 0.x that announced the move (docs/architecture.md).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings

# old path -> new path. `koinii.channel` and `koinii.client` kept their names: each is a
# package now, re-exporting what the module offered.
MOVED: dict[str, str] = {
    "koinii.moves": "koinii.channel.moves",
    "koinii.conversation": "koinii.channel.conversation",
    "koinii.belief": "koinii.channel.belief",
    "koinii.narrator": "koinii.channel.narrator",
    "koinii.history": "koinii.channel.history",
    "koinii.news": "koinii.channel.news",
    "koinii.roster": "koinii.channel.roster",
    "koinii.catchup": "koinii.channel.catchup",
    "koinii.resubscribe": "koinii.channel.follow",
    "koinii.adjudication": "koinii.disputes.adjudication",
    "koinii.quarantine": "koinii.disputes.quarantine",
    "koinii.names": "koinii.identity.names",
    "koinii.protocol": "koinii.client.protocol",
    "koinii.aclient": "koinii.client.aio",
    "koinii.achannel": "koinii.client.aio_agent",
    "koinii.asubscribe": "koinii.client.asubscribe",
    "koinii.adjudicator": "koinii.client.adjudicator",
    "koinii.demo": "koinii.cli.demo",
    "koinii.tail": "koinii.cli.tail",
    "koinii.terminal": "koinii.cli.terminal",
    "koinii.server.web": "koinii.web",
}


def new_name(old: str) -> str | None:
    """The new path of `old`: a moved module, or a module inside a moved package
    (`koinii.server.web.routes` -> `koinii.web.routes`); None if it did not move."""
    if old in MOVED:
        return MOVED[old]
    parent, _, leaf = old.rpartition(".")
    moved = new_name(parent) if parent.startswith("koinii.") else None
    return None if moved is None else f"{moved}.{leaf}"


class MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path and loads it as the module at the new one."""

    def __init__(self) -> None:
        self._specs: dict[int, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if new_name(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        new = new_name(spec.name)
        assert new is not None  # (find_spec found it)
        warnings.warn(
            f"{spec.name} moved to {new}: import it from there "
            "(the old path goes in the next release)",
            DeprecationWarning,
            stacklevel=2,
        )
        module = importlib.import_module(new)
        self._specs[id(module)] = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the module ran when it was imported at its new place. The
        import system has just set its `__spec__` to the old path's, though (it keeps a
        module's name and loader, not its spec): give it back its own."""
        module.__spec__ = self._specs.pop(id(module))


def install() -> None:
    """Put the finder on the import path once (the root package calls it), first: a
    moved package's old path would otherwise let the path finder load its modules a
    second time, under old names."""
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())
