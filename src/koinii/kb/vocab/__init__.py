"""The vocabularies that ship with Koinii, and their loading.

Each vocabulary is a text file of sentences loaded into its own context, placed under its
parents with genlCx edges in CxUniverse. `install` loads every vocabulary in one edit;
sentences already stored change nothing, so it is run on every open (a store written by
an older version picks up vocabulary added since). Because every open reinstalls it, the
shipped vocabulary is read-only: a retraction would be silently undone by the next open,
so the engine refuses it (`vocabulary-read-only`); a context that disagrees masks it.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import TYPE_CHECKING, Any

from koinii.terms import Sym, parse_all

if TYPE_CHECKING:
    from koinii.kb.engine import KB

# (context, parents) in load order; later issues append theirs.
VOCABULARIES: list[tuple[str, tuple[str, ...]]] = [
    ("CxCore", ()),
    ("CxSpeechActs", ("CxCore",)),
    ("CxRegistry", ("CxCore",)),
    ("CxDisputes", ("CxCore",)),
]


def text_of(context: str) -> str:
    return resources.files(__name__).joinpath(f"{context}.sx").read_text(encoding="utf-8")


@functools.cache
def terms_of(context: str) -> tuple[Any, ...]:
    """A vocabulary's sentences, parsed once per process (terms are immutable): every open
    of a store installs them, and a process may open many."""
    return tuple(parse_all(text_of(context)))


def install(kb: KB) -> None:
    monotonic = {"strength": "monotonic"}
    add = []
    for context, parents in VOCABULARIES:
        for parent in parents:
            add.append(((Sym("genlCx"), Sym(context), Sym(parent)), "CxUniverse", monotonic))
        add.extend((term, context, monotonic) for term in terms_of(context))
    handles = kb.edit(add=add).handles
    kb.mark_shipped(
        [h for entry in handles for h in (entry if isinstance(entry, list) else [entry])]
    )
