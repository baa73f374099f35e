"""`koinii search` and `koinii vocabulary`: finding what the team knows from a shell
(docs/search.md). Each is one library call (`search`, `vocabulary` on a KB or a Client,
through the shared source options) plus printing: a table, or `--json`.
"""

from __future__ import annotations

import json

import click
from rich.table import Table
from rich.text import Text

from koinii.cli.core import console, open_source, source_options
from koinii.wire import encode_hit


@click.command("search")
@click.argument("text")
@click.option("--context", "-c", required=True, help="Search what this context sees.")
@click.option(
    "--limit", type=int, default=10, show_default=True, help="At most this many hits (1-100)."
)
@click.option("--json", "as_json", is_flag=True, help="The hits as one JSON list.")
@source_options
def command(text, context, limit, as_json, url, token, db) -> None:
    """What CONTEXT sees whose words match TEXT, best first: each sentence with its
    handle, context, author and the words that matched (in [ ])."""
    hits = open_source(db, url, token).search(text, context, limit=limit)
    if as_json:
        click.echo(json.dumps([encode_hit(h) for h in hits], ensure_ascii=False))
        return
    if not hits:
        console.print(f"[dim]nothing {context} sees matches {text!r}[/dim]")
        return
    table = Table("handle", "sentence", "context", "author", "matched")
    for column in table.columns:
        column.overflow = "fold"  # a long symbol is folded, never cut
    for hit in hits:
        cells = (hit.sentex.text, hit.sentex.context, hit.author or "", hit.snippet)
        table.add_row(str(hit.sentex.handle), *(Text(cell) for cell in cells))  # not markup
    console.print(table)


@click.command("vocabulary")
@click.option("--context", "-c", required=True, help="The predicates this context sees.")
@click.option("--json", "as_json", is_flag=True, help="The vocabulary as one JSON list.")
@source_options
def vocabulary_command(context, as_json, url, token, db) -> None:
    """The predicates in use where CONTEXT sees, most used first, each with how many
    sentences use it and one of them as an example."""
    found = open_source(db, url, token).vocabulary(context)
    if as_json:
        click.echo(json.dumps(found, ensure_ascii=False))
        return
    if not found:
        console.print(f"[dim]{context} sees no sentences yet[/dim]")
        return
    table = Table("predicate", "count", "example")
    for column in table.columns:
        column.overflow = "fold"
    for entry in found:
        table.add_row(entry["predicate"], str(entry["count"]), Text(entry["example"]["sentence"]))
    console.print(table)
