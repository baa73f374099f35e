"""How the terminal views print with rich: the one console every CLI command and the demo
print through.

Invariants:
- What an agent or a store wrote is never markup: the console parses no markup and no
  emoji codes in any string it prints, a table cell included, so a claim holding
  "[/bold]" prints as that text and cannot end the command (it did, exit 4). A command
  styles its own words with `rich.text.Text` parts (`Text.assemble(("12:00", "dim"),
  " ", sentence)`), never by writing markup around stored text.
- What an agent or a store wrote never drives the terminal: a control character in it (an
  ESC starting a sequence that clears the screen, sets the window's title or recolours
  everything after it; a C1 control; a DEL) prints as its escape, `\u001b`, in the
  form the canonical text writes it. A session's title and a search's snippet carried
  them raw to every reader's terminal. Every view prints through `terminal()` (or
  `echo`), so the rule holds in one place.
- Piped (stdout not a terminal), nothing wraps: a line or a table cell is as long as it
  is, so a script reads whole names and sentences.
- A row of a table is one line: stored text in a cell that is one line of its kind (a
  session's title) passes through `one_line`, its newlines and tabs written as escapes.
"""

from __future__ import annotations

import re
from typing import Any

import click

PIPED_WIDTH = 1_000_000  # columns when piped: wide enough for any name or sentence
# C0 controls but newline and tab, DEL, and the C1 controls (U+009B is a one-character CSI)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def inert(text: str) -> str:
    """`text` with every control character but newline and tab written as its escape."""
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_BREAKS = str.maketrans({"\n": "\\n", "\r": "\\r", "\t": "\\t"})


def one_line(text: str) -> str:
    """`text` for one line of a table: a newline, carriage return or tab written as its
    escape (`\\n`, `\\r`, `\\t`, as the canonical text writes them), every other control as
    `inert` writes it. A session title holding a newline printed the rest of it on a line
    of its own under its row, where it read as another row."""
    return inert(text.translate(_BREAKS))


def echo(text: Any = "", **kwargs: Any) -> None:
    """`click.echo` of text that may hold what an agent wrote (see `inert`)."""
    click.echo(inert(text) if isinstance(text, str) else text, **kwargs)


def terminal(*, stderr: bool = False) -> Any:
    """A rich console for this command's output (see the module docstring); its text
    segments pass through `inert`, its own styles (control segments) untouched. (rich is
    imported here, not with the module: `echo` alone must not load it.)"""
    from rich.console import Console
    from rich.segment import Segment

    class _Console(Console):
        def render(self, renderable: Any, options: Any = None) -> Any:
            for segment in super().render(renderable, options):
                if not segment.control and _CONTROL.search(segment.text):
                    yield Segment(inert(segment.text), segment.style, segment.control)
                else:
                    yield segment

    options: dict[str, Any] = {
        "markup": False,
        "emoji": False,
        "highlight": False,
        "soft_wrap": True,
        "stderr": stderr,
    }
    console = _Console(**options)
    return console if console.is_terminal else _Console(**options, width=PIPED_WIDTH)
