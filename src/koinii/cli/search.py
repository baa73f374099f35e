"""`koinii search` and `koinii vocabulary`: finding what the team knows from a shell
(docs/search.md). Each is one library call (`search`, `vocabulary` on a KB or a Client,
through the shared source options) plus printing: a table, or `--json`.
"""

from __future__ import annotations

import click

from koinii.cli.core import echo_json, json_option, open_source, runs, source_options


@runs("search")
@click.command("search", short_help="Find what a context sees by words, best first.")
@click.argument("text")
@click.option("--context", "-c", required=True, help="Search what this context sees.")
@click.option(
    "--limit", type=int, default=10, show_default=True, help="At most this many hits (1-100)."
)
@click.option(
    "--ranking",
    type=click.Choice(["lexical", "hybrid"]),
    default=None,
    help="By words only, or by words and meaning (koinii[semantic]) "
    "[default: hybrid where installed].",
)
@json_option
@source_options
def search_command(text, context, limit, ranking, as_json, url, token, db) -> None:
    """What CONTEXT sees whose words (or meaning) match TEXT, best first: each sentence
    with its handle, context, author and the words that matched (in [ ])."""
    from rich.table import Table
    from rich.text import Text

    from koinii.cli.terminal import terminal
    from koinii.wire import encode_hit

    with open_source(db, url, token) as store:
        hits = store.search(text, context, limit=limit, ranking=ranking)
    if as_json:
        return echo_json([encode_hit(h) for h in hits])
    if not hits:
        terminal().print(Text(f"nothing {context} sees matches {text!r}", style="dim"))
        return
    table = Table("handle", "sentence", "context", "author", "matched")
    for column in table.columns:
        column.overflow = "fold"  # a long symbol is folded, never cut
    for hit in hits:
        matched = hit.snippet if hit.matched == "words" else f"{hit.snippet} ({hit.matched})"
        cells = (hit.sentex.text, hit.sentex.context, hit.author or "", matched)
        table.add_row(str(hit.sentex.handle), *cells)
    terminal().print(table)


@runs("vocabulary")
@click.command("vocabulary", short_help="The predicates in use where a context sees.")
@click.option("--context", "-c", required=True, help="The predicates this context sees.")
@json_option
@source_options
def vocabulary_command(context, as_json, url, token, db) -> None:
    """The predicates in use where CONTEXT sees, most used first, each with how many
    sentences use it and one of them as an example."""
    from rich.table import Table
    from rich.text import Text

    from koinii.cli.terminal import terminal

    with open_source(db, url, token) as store:
        found = store.vocabulary(context)
    if as_json:
        return echo_json(found)
    if not found:
        terminal().print(Text(f"{context} sees no sentences yet", style="dim"))
        return
    table = Table("predicate", "count", "example")
    for column in table.columns:
        column.overflow = "fold"
    for entry in found:
        table.add_row(entry["predicate"], str(entry["count"]), entry["example"]["sentence"])
    terminal().print(table)


COMMANDS = (search_command, vocabulary_command)
