"""How the terminal views print with rich: the one console every CLI command and the demo
print through.

Invariants:
- What an agent or a store wrote is never markup: the console parses no markup and no
  emoji codes in any string it prints, a table cell included, so a claim holding
  "[/bold]" prints as that text and cannot end the command (it did, exit 4). A command
  styles its own words with `rich.text.Text` parts (`Text.assemble(("12:00", "dim"),
  " ", sentence)`), never by writing markup around stored text.
- Piped (stdout not a terminal), nothing wraps: a line or a table cell is as long as it
  is, so a script reads whole names and sentences.
"""

from __future__ import annotations

from rich.console import Console

PIPED_WIDTH = 1_000_000  # columns when piped: wide enough for any name or sentence


def terminal(*, stderr: bool = False) -> Console:
    """A console for this command's output (see the module docstring)."""
    console = Console(markup=False, emoji=False, highlight=False, soft_wrap=True, stderr=stderr)
    if not console.is_terminal:
        console = Console(
            markup=False,
            emoji=False,
            highlight=False,
            soft_wrap=True,
            stderr=stderr,
            width=PIPED_WIDTH,
        )
    return console
