"""A module over 600 lines says, at its top, why it is one concept (a paragraph of its
docstring beginning "One concept:"), or is listed here as one to split, with the issue
that splits it. The list only shrinks: a listed module that has been split, or that has
said why it is one concept, fails the test until its entry goes."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "koinii"
LIMIT = 600

# module (relative to src/koinii) -> why it is long today, and what splits it
TO_SPLIT: dict[str, str] = {}


def long_modules() -> dict[str, str]:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > LIMIT:
            found[path.relative_to(SRC).as_posix()] = ast.get_docstring(ast.parse(text)) or ""
    return found


def test_every_long_module_says_why_it_is_one_concept_or_is_listed_to_split():
    unexplained = [
        name
        for name, doc in long_modules().items()
        if "\nOne concept:" not in "\n" + doc and name not in TO_SPLIT
    ]
    assert not unexplained, f"over {LIMIT} lines, with no 'One concept:' paragraph: {unexplained}"


def test_the_list_to_split_only_names_modules_still_to_split():
    long = long_modules()
    stale = [name for name in TO_SPLIT if name not in long or "\nOne concept:" in "\n" + long[name]]
    assert not stale, f"split, or explained: drop from TO_SPLIT: {stale}"
