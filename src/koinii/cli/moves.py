"""`koinii channels` and the moves from a shell: `join`, `claim`, `ask`, `answer`,
`endorse`, `justify`, `dispute`, `vote`, `accept`, `close` — so a person (an operator, or
an agent's own human) can take part in a conversation without writing a program.

Invariant: each command is ONE call of its operation (`conversation.channels`,
`moves.<name>`), on the source every command shares (`core`), plus printing. Its
arguments are the operation's required fields after the agent, in the operation's order;
its options are the operation's optional fields (`tests/test_parity.py` checks both). The
move's rules — one standing answer per agent, only the asker accepts, a dispute with its
rebuttal — run on the single writer, as for every other client.

The agent is `--agent` (or $KOINII_AGENT): with an agent's token it must be the token's
own id, with an operator's any agent (docs/channel.md, who may move).
"""

from __future__ import annotations

import json
from typing import Any

import click

from koinii.cli.core import echo_json, json_option, open_source, runs, source_options
from koinii.cli.terminal import echo


def agent_option(fn):
    """`--agent` (keyword argument agent): the agent making the move."""
    return click.option(
        "--agent",
        "agent",
        envvar="KOINII_AGENT",
        required=True,
        help="The agent making the move, e.g. AgentAtlas: a token's own id, or any agent "
        "for an operator's token [env: KOINII_AGENT].",
    )(fn)


def quiet_option(fn):
    """`--quiet`/`-q` (keyword argument quiet): print only the handle, for `H=$(…)`."""
    return click.option(
        "--quiet", "-q", is_flag=True, help="Print only the move's handle (for H=$(koinii …))."
    )(fn)


def move(name: str, agent: str, output: tuple[bool, bool], source: tuple[Any, Any, Any], **fields):
    """The move `moves.<name>` as `agent`, one call; prints its reply (`output`: as
    JSON, only the handle)."""
    from koinii.operations import invoker

    url, token, db = source
    with open_source(db, url, token, create=True) as store:
        reply = invoker(store)(f"moves.{name}", agent=agent, **fields)
    as_json, quiet = output
    if as_json:
        return echo_json(reply)
    handle = reply.get("handle", reply.get("withdrawn"))  # a concession names what it took back
    if quiet:
        return echo(handle)
    said = reply.get("sentence") or ""
    ending = f" ({reply['ending']})" if reply.get("ending") else ""
    echo(f"#{handle} {agent}{ending}: {said}".rstrip())
    if reply.get("claim") is not None:
        echo(f"  its claim #{reply.get('claim_handle')}: {reply['claim']}")
    if reply.get("rebuttal") is not None:
        echo(f"  its rebuttal #{reply['rebuttal']}")
    for earlier in reply.get("replaced") or ():
        echo(f"  replaces #{earlier}")


def _content(text: str) -> Any:
    """An answer's content from the shell: a JSON object is a binding map
    (`{"?db": "PostgreSQL16"}`); anything else is term text."""
    if text.lstrip().startswith("{"):
        try:
            found = json.loads(text)
        except json.JSONDecodeError:
            return text
        return found if isinstance(found, dict) else text
    return text


@runs("conversation.channels")
@click.command("channels", short_help="The channels and their members.")
@json_option
@source_options
def channels_command(as_json, url, token, db) -> None:
    """The channels — contexts agents joined — each with its members
    (`conversation.channels`)."""
    from koinii.operations import invoker

    with open_source(db, url, token) as store:
        found = invoker(store)("conversation.channels")
    if as_json:
        return echo_json(found)
    if not found:
        echo("no channels (an agent joins one with `koinii join CHANNEL --agent A`)")
    for entry in found:
        echo(f"{entry['name']}: {', '.join(entry['members'])}")


@runs("moves.join")
@click.command("join", short_help="Join an agent to a channel.")
@click.argument("channel")
@click.option("--speaks", default=None, help="The vocabulary context it speaks (CxSpeechActs).")
@agent_option
@json_option
@source_options
def join_command(channel, speaks, agent, as_json, url, token, db) -> None:
    """Place AGENT's own context under CHANNEL, so the channel sees its moves
    (`moves.join`; idempotent)."""
    from koinii.operations import invoker

    fields = {"speaks": speaks} if speaks else {}
    with open_source(db, url, token, create=True) as store:
        joined = invoker(store)("moves.join", agent=agent, channel=channel, **fields)
    if as_json:
        return echo_json(joined)
    echo(f"{agent} joined {joined['channel']} (its context {joined['context']})")


@runs("moves.claim")
@click.command("claim", short_help="State a claim in the agent's own context.")
@click.argument("sentence")
@click.option(
    "--strength", type=click.Choice(["default", "monotonic"]), default=None, help="(arbiters)"
)
@agent_option
@quiet_option
@json_option
@source_options
def claim_command(sentence, strength, agent, quiet, as_json, url, token, db) -> None:
    """State SENTENCE, e.g. "(usesDatabase ProdCluster PostgreSQL16)" (`moves.claim`)."""
    fields = {"strength": strength} if strength else {}
    move("claim", agent, (as_json, quiet), (url, token, db), sentence=sentence, **fields)


@runs("moves.ask")
@click.command("ask", short_help="Ask the channel a question.")
@click.argument("question")
@agent_option
@quiet_option
@json_option
@source_options
def ask_command(question, agent, quiet, as_json, url, token, db) -> None:
    """Ask QUESTION: a pattern with ?variables ("(usesDatabase ProdCluster ?db)"), a
    yes/no sentence, or free text in double quotes ('"why is it slow?"') (`moves.ask`)."""
    move("ask", agent, (as_json, quiet), (url, token, db), question=question)


@runs("moves.answer")
@click.command("answer", short_help="Answer a question (the answer carries its claim).")
@click.argument("question", type=int)
@click.argument("content")
@agent_option
@quiet_option
@json_option
@source_options
def answer_command(question, content, agent, quiet, as_json, url, token, db) -> None:
    """Answer the question QUESTION (its handle) with CONTENT: a binding map as JSON
    ('{"?db": "PostgreSQL16"}'), an instance (PostgreSQL16), true/false, or text
    (`moves.answer`). Another answer by the same agent replaces its earlier one."""
    move(
        "answer",
        agent,
        (as_json, quiet),
        (url, token, db),
        question=question,
        content=_content(content),
    )


@runs("moves.endorse")
@click.command("endorse", short_help="Stand behind a claim (or an answer's claim).")
@click.argument("target", type=int)
@agent_option
@quiet_option
@json_option
@source_options
def endorse_command(target, agent, quiet, as_json, url, token, db) -> None:
    """Endorse the claim TARGET (`moves.endorse`)."""
    move("endorse", agent, (as_json, quiet), (url, token, db), target=target)


@runs("moves.justify")
@click.command("justify", short_help="Give a reason for a claim.")
@click.argument("target", type=int)
@click.argument("ground")
@agent_option
@quiet_option
@json_option
@source_options
def justify_command(target, ground, agent, quiet, as_json, url, token, db) -> None:
    """Give GROUND (a term, or free text in double quotes) as a reason for the claim
    TARGET (`moves.justify`)."""
    move("justify", agent, (as_json, quiet), (url, token, db), target=target, ground=ground)


@runs("moves.dispute")
@click.command("dispute", short_help="Challenge another agent's claim.")
@click.argument("target", type=int)
@agent_option
@quiet_option
@json_option
@source_options
def dispute_command(target, agent, quiet, as_json, url, token, db) -> None:
    """Dispute the claim TARGET: its rebuttal (not S) and the dispute, in one write
    (`moves.dispute`)."""
    move("dispute", agent, (as_json, quiet), (url, token, db), target=target)


@runs("moves.vote")
@click.command("vote", short_help="Vote for or against a claim.")
@click.argument("target", type=int)
@click.argument("stance", type=click.Choice(["for", "against"]))
@agent_option
@quiet_option
@json_option
@source_options
def vote_command(target, stance, agent, quiet, as_json, url, token, db) -> None:
    """A ballot on the claim TARGET; another stance replaces the agent's earlier one
    (`moves.vote`)."""
    move("vote", agent, (as_json, quiet), (url, token, db), target=target, stance=stance)


@runs("moves.accept")
@click.command("accept", short_help="As the asker: accept an answer.")
@click.argument("answer", type=int)
@click.option("--reason", default=None, help="Why, in words (shown with the acceptance).")
@agent_option
@quiet_option
@json_option
@source_options
def accept_command(answer, reason, agent, quiet, as_json, url, token, db) -> None:
    """Accept the answer ANSWER to the agent's own question; the question is settled
    (`moves.accept`)."""
    move("accept", agent, (as_json, quiet), (url, token, db), answer=answer, reason=reason)


@runs("moves.close")
@click.command("close", short_help="As the asker: close a question unanswered.")
@click.argument("question", type=int)
@click.option("--reason", default=None, help="Why, in words (shown with the closing).")
@agent_option
@quiet_option
@json_option
@source_options
def close_command(question, reason, agent, quiet, as_json, url, token, db) -> None:
    """Close the agent's own question QUESTION (withdraw the closing to reopen it)
    (`moves.close`)."""
    move("close", agent, (as_json, quiet), (url, token, db), question=question, reason=reason)


@runs("moves.concede")
@click.command("concede", short_help="Give up the agent's own claim, saying why.")
@click.argument("target", type=int)
@click.argument("reason")
@agent_option
@quiet_option
@json_option
@source_options
def concede_command(target, reason, agent, quiet, as_json, url, token, db) -> None:
    """Concede the agent's own claim or answer TARGET because REASON: it is withdrawn, the
    disputes on it end as conceded, and the record keeps it with the reason
    (`moves.concede`)."""
    move("concede", agent, (as_json, quiet), (url, token, db), target=target, reason=reason)


COMMANDS = (
    channels_command,
    join_command,
    claim_command,
    ask_command,
    answer_command,
    endorse_command,
    justify_command,
    dispute_command,
    vote_command,
    accept_command,
    close_command,
    concede_command,
)
