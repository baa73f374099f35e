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


class MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path and loads it as the module at the new one."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        new = MOVED[spec.name]
        warnings.warn(
            f"{spec.name} moved to {new}: import it from there "
            "(the old path goes in the next release)",
            DeprecationWarning,
            stacklevel=2,
        )
        # the module at its new place; the import system keeps its own name and spec
        return importlib.import_module(new)

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the module ran when it was imported at its new place."""


def install() -> None:
    """Put the finder on the import path once (the root package calls it)."""
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedFinder())
