"""A `click.Choice` whose values live in a domain module, imported only when a command
uses the option or shows its help.

Why: every command's module is imported to build `koinii --help`, and a domain module
(`koinii.channel.conversation`, `koinii.sessions.search`) brings the engine with it — most of a
command's start-up. The values stay written once, where the domain checks them.
"""

from __future__ import annotations

import importlib
from typing import Any

import click


class LazyChoice(click.Choice):
    """`LazyChoice("koinii.channel.conversation", "DISPUTE_STATES", extra=("all",))`: the values
    of that module's tuple (then `extra`), read on first use."""

    def __init__(self, module: str, name: str, extra: tuple[str, ...] = ()) -> None:
        self._where = (module, name, extra)
        self._values: tuple[str, ...] | None = None
        self.case_sensitive = True

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        if self._values is None:
            module, name, extra = self._where
            self._values = (*getattr(importlib.import_module(module), name), *extra)
        return self._values

    @choices.setter
    def choices(self, values: Any) -> None:
        self._values = tuple(values)
