"""`koinii why`, `why-not`, `contradictions` and `disputes`: why a store believes what it
does, and where its agents disagree. Each is one library call plus printing, on the
source every command shares (`core`).
"""

from __future__ import annotations

from typing import Any

import click

from koinii.cli.core import echo_json, json_option, open_source, runs, source_options
from koinii.cli.lazy import LazyChoice
from koinii.cli.terminal import echo
from koinii.errors import Refused


def invoker(store: Any) -> Any:
    """`operations.invoker`, imported when a command runs (it brings the engine)."""
    from koinii.operations import invoker as of

    return of(store)


@runs("why")
@click.command("why", short_help="Why a sentex is believed: its justification tree.")
@click.argument("handle", type=int)
@json_option
@source_options
def why_command(handle, as_json, url, token, db) -> None:
    """The justification tree of the sentex HANDLE: what it rests on, down to premises.

    A premise (said by someone) is a leaf; a derived sentex lists each rule that derives
    it and that rule's antecedents, each explained the same way.

    `why-not HANDLE` tells why a sentex is not believed.
    """
    with open_source(db, url, token) as store:
        tree = store.why(handle)
        if tree is None:
            reason = store.why_not(handle)  # "retracted" or "not-stored"
            raise Refused(
                "unknown-handle",
                f"#{handle} is {reason.replace('-', ' ')}: nothing to explain "
                "(`koinii tail --since 0` shows what was)",
                {"handle": handle, "issued": reason == "retracted"},
            )
    if as_json:
        return echo_json(tree)
    for depth, line in _tree_lines(tree):
        echo("  " * depth + line)


def _tree_lines(node: dict[str, Any], depth: int = 0):
    state = "believed" if node["believed"] else "not believed"
    kind = "premise" if node["premise"] else "derived"
    cycle = ", a cycle" if node.get("cycle") else ""
    yield (
        depth,
        f"#{node['handle']} {node['sentence']}  in {node['context']} ({kind}, {state}{cycle})",
    )
    for j in node.get("justifications", ()):
        yield depth + 1, f"by rule #{j['rule']} {j['rule_sentence']}"
        for antecedent in j["antecedents"]:
            yield from _tree_lines(antecedent, depth + 2)


@runs("belief.why_not")
@click.command("why-not", short_help="Why a sentex is not believed (at a context).")
@click.argument("handle", type=int)
@click.option("--context", "-c", default=None, help="Read at this context (visible, unmasked).")
@json_option
@source_options
def why_not_command(handle, context, as_json, url, token, db) -> None:
    """Why the sentex HANDLE is not believed: retracted, defeated (a stronger sentex says
    otherwise: it is named, with its author), unsupported (what it rested on is gone),
    excepted (masked), not-visible (at --context) or not-stored. Prints "believed" when
    it is (the read `belief.why_not`)."""
    with open_source(db, url, token) as store:
        found = invoker(store)("belief.why_not", handle=handle, context=context)
    if as_json:
        return echo_json(found)
    where = f" at {context}" if context else ""
    if found["believed"]:
        return echo(f"#{handle} is believed{where}")
    echo(f"#{handle}: {found['reason']}{where}")
    for by in found["defeated_by"]:
        author = f", by {by['author']}" if by["author"] else ""
        echo(
            f"  defeated by #{by['handle']} {by['sentence']}  in {by['context']} "
            f"({by['strength']}{author})"
        )


@click.command("contradictions", short_help="The clashes a context sees.")
@click.option("--context", "-c", default=None, help="Only the clashes this context can see.")
@click.option(
    "--conflicts",
    is_flag=True,
    help="The clashes between monotonic sentexes instead (they defeat nothing: an "
    "arbiter must rule).",
)
@json_option
@source_options
def contradictions_command(context, conflicts, as_json, url, token, db) -> None:
    """Pairs of believed sentexes that say opposite things (S and (not S)), each side with
    its handle and context: what agents disagree on, never silently overwritten."""
    with open_source(db, url, token) as store:
        clashes = store.conflicts(context) if conflicts else store.contradictions(context)
    if as_json:
        return echo_json(clashes)
    if not clashes:
        echo("no conflicts" if conflicts else "no contradictions")
        return
    for clash in clashes:
        echo(
            "  vs  ".join(
                f"#{s['handle']} {s['sentence']} in {s['context']}" for s in clash["sides"]
            )
        )


as_of_option = click.option(
    "--as-of",
    "as_of",
    type=int,
    default=None,
    metavar="SEQ",
    help="As the channel stood at this log seq (a move's reply and the feed give seqs).",
)


@runs("conversation.disputes")
@click.command("disputes", short_help="A channel's disputes: sides, state, tally, ruling.")
@click.option("--channel", "-c", required=True, help="The channel, e.g. CxTeam.")
@click.option(
    "--state",
    type=LazyChoice("koinii.channel.conversation", "DISPUTE_FILTERS"),
    default=None,
    help="Only these: a state, or how it ended (ruled, withdrawn, conceded, superseded).",
)
@as_of_option
@json_option
@source_options
def disputes_command(channel, state, as_of, as_json, url, token, db) -> None:
    """Every dispute on a channel: the claims that clash, who raised it, its state (open,
    notified, stale, resolved), the votes so far and the ruling (docs/disputes.md)."""
    with open_source(db, url, token) as store:
        found = invoker(store)("conversation.disputes", channel=channel, state=state, as_of=as_of)
    if as_json:
        return echo_json(found)
    if not found:
        return _none("disputes", channel, state)
    for dispute in found:
        tally = dispute["tally"]
        echo(
            f"{_dispute(dispute)}; votes {tally.get('for', 0)} for, "
            f"{tally.get('against', 0)} against"
        )
        for side in dispute["sides"]:
            who = side["speaker"] or side["context"]  # a sentex no agent wrote: its context
            echo(f"  #{side['handle']} {who}: {side['sentence']}")
        if dispute["ruling"] is not None:
            echo("  " + _ruling(dispute["ruling"], dispute["target"]))


def _none(what: str, channel: str, state: str | None) -> None:
    echo(f"no {what} on {channel}" + (f" in state {state}" if state else ""))


def _dispute(dispute: dict) -> str:
    """`dispute #105 on #99: open, raised by AgentCiel` — named by its move's handle (a
    clash no one raised: `a clash of #99/#104, raised by no one`; differing values by
    the values: `differing values to question #98: 500 (AgentBoreas), 800 (AgentCyra)`)."""
    moves = dispute["raised_by"]
    raised = ", raised by " + (", ".join(m["speaker"] for m in moves) or "no one")
    target = dispute["target"]
    on = f" on #{target['handle']}" if target else ""
    if dispute["class"] == "values" and dispute.get("values"):
        given = ", ".join(f"{v['value']} ({v['speaker']})" for v in dispute["values"])
        asked = f" to question #{dispute['question']}" if dispute.get("question") else ""
        named = f"differing values{asked}: {given}"
        raised = raised if moves else ""
    elif moves:
        named = "dispute " + ", ".join(f"#{m['handle']}" for m in moves) + on
    else:
        named = "a clash of " + "/".join(f"#{h}" for h in dispute["dispute_id"])
    ended = dispute.get("ended") or {}
    ending = f" ({dispute['ending']} by {ended.get('by')})" if ended else ""
    why = f', because "{ended["reason"]}"' if ended.get("reason") else ""
    return f"{named}: {dispute['state']}{ending}{raised}{why}"


def _ended(gone: dict) -> str:
    """` (conceded by AgentBoreas at seq 14: "wrong cluster")`: how a move was taken back."""
    ended = gone["withdrawn"]
    why = f': "{ended["reason"]}"' if ended.get("reason") else ""
    return f" ({ended['ending']} by {ended['by']} at seq {ended['seq']}{why})"


def _ruling(ruling: dict, target: dict | None) -> str:
    """`ruled by AgentMajority for #102: (p A) (ruling #110)`, or `against`."""
    side = "for" if ruling["upholds"] else "against"
    on = f" {side} #{target['handle']}" if target else ""
    return f"ruled by {ruling['arbiter']}{on}: {ruling['sentence']} (ruling #{ruling['handle']})"


@runs("conversation.questions")
@click.command("questions", short_help="A channel's questions, each with its state.")
@click.option("--channel", "-c", required=True, help="The channel, e.g. CxTeam.")
@click.option(
    "--state",
    type=LazyChoice("koinii.channel.conversation", "QUESTION_STATES", ("unsettled", "all")),
    default=None,
    help="Only these (unsettled: open, answered or contested).",
)
@as_of_option
@json_option
@source_options
def questions_command(channel, state, as_of, as_json, url, token, db) -> None:
    """A channel's questions, oldest first: each with its handle, asker, state and how
    many answers it has (the conversation read `conversation.questions`)."""
    with open_source(db, url, token) as store:
        found = invoker(store)("conversation.questions", channel=channel, state=state, as_of=as_of)
    if as_json:
        return echo_json(found)
    if not found:
        return _none("questions", channel, state)
    for q in found:
        answers = q["answer_count"]
        echo(
            f"#{q['handle']} {q['state']}: {q['speaker']} asked {q['question']} "
            f"({answers} answer{'' if answers == 1 else 's'})"
        )


@runs("conversation.thread")
@click.command("thread", short_help="A question or claim with everything said about it.")
@click.argument("handle", type=int)
@click.option("--channel", "-c", required=True, help="The channel, e.g. CxTeam.")
@as_of_option
@json_option
@source_options
def thread_command(handle, channel, as_of, as_json, url, token, db) -> None:
    """A question with its state and answers — each answer's claim with its endorsements,
    disputes and rulings — or a claim with what was said about it, in one read
    (`conversation.thread`)."""
    with open_source(db, url, token) as store:
        found = invoker(store)("conversation.thread", handle=handle, channel=channel, as_of=as_of)
    if as_json:
        return echo_json(found)
    if "answers" in found:
        echo(f"#{found['handle']} {found['state']}: {found['speaker']} asked {found['question']}")
        for answer in found["answers"]:
            mark = " (accepted)" if answer["accepted"] else ""
            echo(f"  #{answer['handle']} {answer['speaker']}: {answer['content']}{mark}")
        for key, what in (("acceptance_reason", "accepted"), ("closing_reason", "closed")):
            if found.get(key):
                echo(f"  {what} because: {found[key]}")
        for gone in found.get("withdrawn_answers") or []:
            echo(f"  #{gone['handle']} {gone['speaker']}: {gone['content']}{_ended(gone)}")
        for gone in found.get("withdrawn_acceptances") or []:
            because = f' "{gone["reason"]}"' if gone.get("reason") else ""
            echo(f"  accepted #{gone['target']}{because}{_ended(gone)}")
        return
    echo(f"#{found['handle']} {found.get('speaker') or found['context']}: {found['sentence']}")
    for key in ("endorsements", "justifications"):
        for move in found.get(key) or []:
            echo(f"  {key[:-1]} #{move['handle']} by {move['speaker']}")
    for dispute in found.get("disputes") or []:
        echo(f"  {_dispute(dispute)}")


COMMANDS = (
    why_command,
    why_not_command,
    contradictions_command,
    disputes_command,
    questions_command,
    thread_command,
)
