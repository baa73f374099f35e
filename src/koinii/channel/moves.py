"""The conversation's moves as operations on the single writer.

One concept: the moves and their rules, each an operation; its size is one function, one
declaration and the refusals that say what to do instead, per move.

A move — join, claim, ask, answer, endorse, justify, dispute, vote, withdraw, concede,
accept, close, reply_many and the two error acts — is ONE operation (`moves.<name>`): its reads,
its checks and its edit run together, in-process on the KB or on the daemon's loop, so
no other write comes between what a move saw and what it wrote, and every client in any
language keeps the same rules by calling it (`POST /v1/moves/<name>`, one exchange).
`channel.Agent`, `achannel.Agent`, the MCP tools and the CLI are thin callers.

Every move acts as `agent`, which over the daemon must be the caller's own id (an
operator may act for any agent); it writes only in the agent's own context, with the
agent as creator. The speech acts themselves (`speech.ACTS`) are the moves' alone: a
daemon refuses an agent's plain write or removal of one (`koinii/use-the-move`, naming
the move to call), `claim` refuses one written out as a claim, neither takes a rule
that concludes one (an agent's rule would make the move once per firing), no answer
carries one as its claim, no sentence quotes one (a `carriesClaim` declaration of the
agent's own would make it), and no mask hides one (the move made again would not see it)
— so one standing
answer per agent per question, one ballot per agent per target, only the asker accepts
or closes, and every dispute with its rebuttal hold for every entry, not only for
clients that behave.

Each move answers one JSON object: `handle` and `sentence` of what it wrote, plus what a
caller would otherwise read back (an answer's `claim`, a dispute's `rebuttal`, what a
withdrawal removed), so a tool needs no second exchange.

What a move takes back — a withdrawal, a concession, an answer its speaker replaced —
leaves a record in the same edit (koinii.channel.history): who, when, why, and what went with it.

Invariant: every check of a move runs before its one write (an `edit`), so a refused
move writes nothing; the checks run in channel.md's order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from koinii import speech
from koinii.channel import history
from koinii.channel.conversation import carried, replies_to, sentex_named
from koinii.disputes.adjudication import now_ms
from koinii.disputes.majority import stance_predicate
from koinii.disputes.rulings import TAG as RULING_TAG
from koinii.errors import Refused
from koinii.identity import (
    AGENT_CONTEXT,
    REGISTRY,
    check_channel_parent,
    check_creator,
    check_meaning,
    check_own_super,
    check_registry_write,
    check_speaker,
    context_for,
    place_agent_context,
    reserved_principals,
)
from koinii.identity.declarations import conclusions, quoted_sentences
from koinii.kb import KB, Sentex
from koinii.kb.checks import context_name
from koinii.kb.rules import EXCEPT, IMPLIES
from koinii.operations import Caller, operation
from koinii.speech import (
    ACCEPTS,
    ANSWERS,
    CLOSES,
    DISPUTES,
    ENDORSES,
    JUSTIFIES,
    NOT_UNDERSTOOD,
    QUERIES,
    REFUSE,
    STANCES,
    ref,
)
from koinii.terms import QUOTE, Sym, Term, Var, parse, show

__all__ = [
    "MOVE_OF_KIND",
    "check_not_a_move",
    "check_system_fields",
    "use_the_move",
]

# The move that writes each kind of speech act (speech.ACTS's kinds), as a call.
MOVE_OF_KIND = {
    "question": "ask(question=…)",
    "answer": "answer(question=…, content=…)",
    "endorsement": "endorse(target=…)",
    "justification": "justify(target=…, ground=…)",
    "dispute": "dispute(target=…)",
    "ballot": "vote(target=…, stance=…)",
    "acceptance": "accept(answer=…)",
    "closing": "close(question=…)",
    "error": "not_understood(target=…) or refuse(target=…)",
}


def use_the_move(kind: str, what: str = "written", handle: int | None = None) -> Refused:
    """The refusal of a speech act made outside its move: written, withdrawn, concluded
    by a rule, carried by an answer, quoted where a declaration would carry it, or hidden
    by a mask (`what`; `handle`: the move to withdraw instead, when one is known)."""
    withdraw = f"withdraw(handle={'…' if handle is None else handle})"
    call = withdraw if what in ("withdrawn", "masked") else MOVE_OF_KIND[kind]
    article = "an" if kind[0] in "aeiou" else "a"
    rules = (
        "which keeps its rules (one answer and one ballot per agent, only the asker accepts "
        "or closes, a dispute with its rebuttal)"
    )
    how = f"call {call} (POST /v1/moves/{call.split('(')[0]})"
    if what == "masked":
        said = (
            f"a mask cannot hide {article} {kind}: hidden, it would still stand where its "
            f"move no longer sees it, and the move made again would break its rules (one "
            f"answer and one ballot per agent, one acceptance per question); to take it "
            f"back, {how}"
        )
    elif what == "quoted":
        said = (
            f"a sentence cannot quote {article} {kind}: a (carriesClaim P N) declaration "
            f"makes a quoted sentence a claim, and so {article} {kind} made by no move, "
            f"{rules}; quote a claim, and {how} yourself"
        )
    elif what in ("concluded", "carried"):
        by = "a rule cannot conclude" if what == "concluded" else "an answer cannot carry"
        said = (
            f"{by} {article} {kind}: {article} {kind} is made only by its move, {rules}; "
            f"{how} yourself"
        )
    else:
        said = f"{article} {kind} is {what} only by its move, {rules}: {how}"
    data: dict[str, Any] = {"move": call.split("(")[0], "kind": kind}
    if handle is not None:
        data["handle"] = handle
    return Refused("koinii/use-the-move", said, data)


def check_not_a_move(
    sentence: Any, what: str = "written", kb: KB | None = None, agent: str | None = None
) -> None:
    """Refuse a speech act stated as a plain sentence (or carried by an answer: `what`),
    or concluded by a rule (see the module's docstring): a rule's firings would make the
    move without its rules — an agent's rule concluding its own answers gave it one per
    firing. With the store (`kb`) and the writer (`agent`), refuse too a mask over a move
    (`check_not_masking_a_move`)."""
    kind = speech.move_kind(sentence)
    if kind != "claim":
        raise use_the_move(kind, what)
    if kb is not None and agent is not None:
        check_not_masking_a_move(kb, agent, sentence)
    if type(sentence) is tuple and len(sentence) == 3 and sentence[0] is IMPLIES:
        for literal in conclusions(sentence[2]):
            kind = speech.move_kind(literal)
            if kind != "claim":
                raise use_the_move(kind, "concluded")
    # A move quoted as an argument, at any depth of quoting: an agent may declare
    # `(carriesClaim P N)` for a predicate of its own, and then `(P … (quote (answers A
    # …)))` carried an answer no `answer` made. Refused whether or not a declaration is
    # seen yet: one may come after.
    for quoted in quoted_sentences(sentence):
        kind = speech.move_kind(quoted)
        if kind != "claim":
            raise use_the_move(kind, "quoted")


def check_not_masking_a_move(kb: KB, agent: str, sentence: Any) -> None:
    """Refuse the agent's mask `(except (sentexHandle T))` over a move of its own, the
    claim its answer carries, the rebuttal its standing dispute rests on, or a claim
    other agents replied to: a mask hides T from the moves' reads too, so `answer` saw no
    standing answer and wrote a second (both stood once the mask went), `vote` a second
    ballot, `accept` a second acceptance, a dispute stood without its rebuttal, and a
    disputed claim left the channel with its clash and no record (`withdraw` keeps one).
    (A mask over another's sentex is refused before: `identity.check_meaning`.)"""
    if type(sentence) is not tuple or len(sentence) != 2 or sentence[0] is not EXCEPT:
        return
    target = sentence[1]
    if type(target) is not tuple or len(target) != 2 or type(target[1]) is not int:
        return
    masked = kb.sentex(target[1]) if target[1] > 0 else None
    if masked is None or masked.context != context_for(agent):
        return
    kind, move = speech.move_kind(masked.sentence), masked
    carrier = _carrier(kb, masked) if kind == "claim" else None
    if carrier is not None:  # the claim an answer carries (said before the answer, or not)
        kind, move = "answer", carrier
    if kind != "claim":
        raise use_the_move(kind, "masked", move.handle)
    resting = [d.handle for d in disputes_resting_on(kb, agent, masked)]
    if resting:
        raise rebuttal_stands(masked.handle, resting, "mask")
    replies = [
        r.handle for r in replies_to(kb, masked.handle) if speech.speaker(r.sentence) != agent
    ]
    if replies:
        raise Refused(
            "koinii/use-the-move",
            f"#{masked.handle} has replies from other agents (#{replies[0]}): a mask would "
            "hide it, and the disputes, ballots and endorsements on it, from the channel "
            f"with no record of what was taken back; withdraw(handle={masked.handle}) "
            "takes it back and keeps that record (POST /v1/moves/withdraw)",
            {"move": "withdraw", "kind": "claim", "handle": masked.handle, "replies": replies},
        )


def rebuttal_stands(handle: int, resting: list[int], verb: str) -> Refused:
    """The refusal to `verb` (remove, mask) the rebuttal #`handle` the agent's standing
    disputes `resting` rest on: a dispute never stands without its rebuttal."""
    return Refused(
        "koinii/use-the-move",
        f"#{handle} is the rebuttal your dispute #{resting[0]} stands on, and a dispute "
        f"never stands without its rebuttal, so you cannot {verb} it: withdraw(handle="
        f"{handle}) takes both (POST /v1/moves/withdraw)",
        {"move": "withdraw", "kind": "rebuttal", "disputes": resting},
    )


def check_system_fields(provenance: Any) -> None:
    """Refuse a ruling's tag (`adjudication`, `adjudication#2`, …: what makes a sentex a
    ruling) in a provenance no ruling wrote; the engine reserves the writer's own fields
    (`principal` and the like) itself."""
    if not isinstance(provenance, dict):
        return
    tags = sorted(k for k in provenance if str(k).split("#")[0] == RULING_TAG)
    if tags:
        raise Refused(
            "reserved-provenance",
            f"provenance field {tags[0]!r} is set by a ruling, not by a writer: leave it "
            "out (an arbiter's ruling, or a majority's, tags what it upholds)",
            {"field": tags[0]},
        )


# --- what the moves read -------------------------------------------------------------------


def _stored(kb: KB, sentence: Any, context: str) -> Sentex | None:
    """The sentex holding `sentence` in `context` itself (not what it sees), if any."""
    found = kb.sentexes_matching(sentence, context)
    return next((s for s in found if s.context == context), None)


def _check_unmasked(kb: KB, agent: str, sentence: Term, move: str) -> None:
    """Refuse `move` writing `sentence` (a dispute's rebuttal, an answer's claim) where
    the agent holds it already, hidden by a mask of its own: the move would stand on what
    its speaker hides (a dispute without its rebuttal) — the mask made before the move,
    which `check_not_masking_a_move` refuses after it."""
    own = context_for(agent)
    for held in kb.sentexes_matching(sentence, "CxEverything"):
        if held.context != own:
            continue
        masks = kb.sentexes_matching((EXCEPT, ref(held.handle)), own)
        if masks:
            mask = masks[0].handle
            raise Refused(
                "koinii/use-the-move",
                f"your mask #{mask} hides {held.text} (#{held.handle}), which this {move} "
                f"would stand on: a move never stands on what its own speaker hides. "
                f"withdraw(handle={mask}) first (POST /v1/moves/withdraw), then {move}",
                {"move": "withdraw", "kind": "mask", "mask": mask, "hidden": held.handle},
            )


def _carriers(kb: KB, claim: Sentex) -> list[Sentex]:
    """The answers in the claim's context that carry it (to one question or several)."""
    pattern = (ANSWERS, Var("who"), (QUOTE, claim.sentence), Var("q"))
    return [s for s in kb.sentexes_matching(pattern, claim.context) if s.context == claim.context]


def _carrier(kb: KB, claim: Sentex) -> Sentex | None:
    """The answer in the claim's context that carries it, if any."""
    return next(iter(_carriers(kb, claim)), None)


def _claim(kb: KB, handle: Any, action: str) -> Sentex:
    """What `action` (dispute, vote, endorse, justify) acts on for `handle`: a claim,
    or an answer's claim; any other move is refused by name with what to do."""
    moved = sentex_named(kb, handle)
    kind = speech.move_kind(moved.sentence)
    if kind == "claim":
        return moved
    if kind == "answer":
        claim = speech.carried_claim(moved.sentence)
        found = None if claim is None else _stored(kb, claim, moved.context)
        if found is not None:
            return found
        if action in ("endorse", "justify"):
            return moved  # a legacy answer without a claim is endorsed as it is
    if action in ("endorse", "justify") and kind == "question":
        return moved
    raise _not_a_claim(moved, kind, action)


def _answer(kb: KB, handle: Any) -> Sentex:
    """The answer `handle` names: an answer, or the claim an answer carries."""
    moved = sentex_named(kb, handle)
    kind = speech.move_kind(moved.sentence)
    if kind == "claim" and moved.derived:
        act = _carrier(kb, moved)
        if act is not None:
            return act
    if kind != "answer":
        raise Refused(
            "koinii/not-an-answer",
            f"#{handle} is not an answer ({kind}): accept takes the handle of an answer to "
            "your question (thread(question) lists them)",
            {"handle": handle, "kind": kind},
        )
    return moved


def _question(kb: KB, handle: Any, action: str) -> Sentex:
    question = sentex_named(kb, handle)
    if speech.move_kind(question.sentence) != "question":
        raise _not_a_question(question, action)
    return question


def _require_asker(question: Sentex, agent: str, what: str) -> None:
    asker = speech.speaker(question.sentence)
    if asker != agent:
        raise Refused(
            "koinii/not-the-asker",
            f"only {asker}, who asked #{question.handle}, can {what}; to back an answer, "
            "endorse it or vote for it",
            {"handle": question.handle, "asker": asker, "agent": agent},
        )


def _mine(sentex: Sentex, agent: str) -> bool:
    creator = sentex.provenance.get("creator")
    return sentex.context == context_for(agent) and creator in (None, agent)


def _checked(kb: KB, agent: str, sentence: Any, strength: str | None = None) -> Term:
    """The write checks every move's sentence passes, in channel.md's order."""
    own = context_for(agent)
    check_registry_write(agent, own)
    term = parse(sentence) if isinstance(sentence, str) else sentence
    check_speaker(agent, term)
    check_meaning(kb, agent, term, strength)
    return term


def _term(value: Any) -> Any:
    """Text names a symbol when it spells one (`"PostgreSQL14"`), else parses as a term."""
    return parse(value) if isinstance(value, str) else value


def _written(kb: KB, handle: int | list[int], **extra: Any) -> dict[str, Any]:
    """What a move wrote, as its reply: a rule split in several writes all its handles."""
    sentex = kb.sentex(handle) if type(handle) is int else None
    return {"handle": handle, "sentence": None if sentex is None else sentex.text, **extra}


def _opts(agent: str) -> dict[str, Any]:
    return {"creator": agent}


# --- the operations --------------------------------------------------------------------------

_AGENT = {
    "agent": (
        "string",
        True,
        "the agent making the move, e.g. AgentAtlas (over the daemon: the token's own id)",
    )
}
_TARGET = {"target": ("handle", True, "the handle of a claim, or of an answer (its claim)")}
_CALLER_AWARE = {"takes_caller": True}


def authorize(kb: KB, caller: Caller, body: dict[str, Any]) -> None:
    """Over the daemon a move is made by the caller itself: an agent (or arbiter) moves
    only as its own id; an operator may move for any agent; readers and admins make none."""
    if caller.id is None or caller.role == "operator":
        return
    if not caller.is_agent:
        raise Refused(
            "forbidden",
            f"a {caller.role} makes no moves: moves are an agent's (its token's role is "
            "agent or arbiter)",
            {"principal": caller.id, "role": caller.role},
        )
    agent = body.get("agent")
    if agent != caller.id:
        raise Refused(
            "koinii/speaker-mismatch",
            f"{caller.id} cannot move as {agent!r:.60}: agent is the token's own id — send "
            f"agent={caller.id!r}",
            {"agent": caller.id, "named": str(agent)[:60]},
        )


def _move(name: str, fields: dict[str, tuple[Any, bool, str]], summary: str, **options: Any):
    return operation(
        f"moves.{name}",
        fields={**_AGENT, **fields},
        summary=summary,
        authorize=authorize,
        writes=True,  # a reader is refused before its body is read
        **options,
    )


@_move(
    "join",
    {
        "channel": ("string", True, "the channel context, e.g. CxTeam"),
        "speaks": ("string", False, "the vocabulary context it speaks (CxSpeechActs)"),
    },
    "place the agent's own context under a channel (idempotent)",
)
def join(kb: KB, agent: str, channel: str, speaks: str = "CxSpeechActs") -> dict[str, Any]:
    """The agent's own context under `channel`, rooted in the vocabulary it speaks, and
    marked as the agent's own: ONE edit. Refused `koinii/registry-forbidden` (joining as
    the registry), `koinii/not-a-channel` (a channel that is the registry, the agent's
    own context or another agent's)."""
    channel = context_name(channel)
    own = context_for(agent)
    if own == REGISTRY:
        raise Refused(
            "koinii/registry-forbidden",
            f"{agent} would own {REGISTRY}, which no agent may write",
            {"agent": agent, "context": own},
        )
    reserved = reserved_principals(kb)
    check_channel_parent(kb, agent, channel, reserved)
    check_own_super(kb, agent, context_name(speaks), reserved)
    adds: list[tuple[Any, str, dict[str, Any]]] = []
    place_agent_context(lambda s, c, o: adds.append((s, c, o)), channel, agent, speaks)
    kb.edit(add=adds)
    return {"agent": agent, "context": own, "channel": channel}


@_move(
    "claim",
    {
        "sentence": ("term", True, "the claim, e.g. (usesDatabase ProdCluster PostgreSQL16)"),
        "strength": ("string", False, "default (an agent's claims); monotonic for arbiters"),
        "provenance": ("object", False, "extra provenance fields (e.g. source)"),
        "creator": ("string", False, "if given, the agent itself"),
    },
    "state a claim in the agent's own context",
    **_CALLER_AWARE,
)
def claim(
    kb: KB,
    agent: str,
    sentence: Any,
    strength: str | None = None,
    provenance: dict[str, Any] | None = None,
    creator: str | None = None,
    caller: Caller | None = None,
) -> dict[str, Any]:
    """A claim; refused `koinii/use-the-move` when it is a speech act written out by hand
    (its move keeps rules a claim would not)."""
    check_registry_write(agent, context_for(agent))
    check_creator(agent, creator)
    trusted = caller is not None and caller.role in ("arbiter", "operator") and caller.id
    term = _checked(kb, agent, sentence, None if trusted else strength)
    check_not_a_move(term, kb=kb, agent=agent)
    check_system_fields(provenance)
    opts: dict[str, Any] = _opts(agent)
    if strength is not None:
        opts["strength"] = strength
    if provenance:
        opts["provenance"] = provenance
    return _written(kb, kb.assert_(term, context_for(agent), **opts))


@_move(
    "ask",
    {"question": ("any", True, 'a pattern with ?variables, a yes/no sentence, or "free text"')},
    "ask the channel: (queries A Q)",
)
def ask(kb: KB, agent: str, question: Any) -> dict[str, Any]:
    """`(queries A Q)`: a sentence is quoted — with variables a pattern, ground a yes/no
    question; a string is free text; a symbol names the question."""
    form = speech.question_form(question)
    act = _checked(kb, agent, (QUERIES, Sym(agent), form))
    handle = kb.assert_(act, context_for(agent), **_opts(agent))
    return _written(kb, handle, kind=speech.question_kind(form))


@_move(
    "answer",
    {
        "question": ("handle", True, "the question's handle"),
        "content": (
            "any",
            True,
            'a binding map {"?db": "PostgreSQL16"}, an instance, a value, true/false, or text',
        ),
    },
    "answer a question; the answer carries its claim",
)
def answer(kb: KB, agent: str, question: Any, content: Any) -> dict[str, Any]:
    """One standing answer per agent per question: other content supersedes the agent's
    earlier answer in the same edit; the same content again returns the same handle.
    Refused `koinii/not-a-question`, `koinii/answer-mismatch`, `koinii/question-closed`."""
    asked = _question(kb, question, "answer")
    asker = speech.speaker(asked.sentence)
    closing = _stored(kb, (CLOSES, Sym(asker), ref(question)), asked.context)
    if closing is not None:
        raise Refused(
            "koinii/question-closed",
            f"question #{question} is closed: its asker {asker} closed it (#{closing.handle}) "
            f"and takes no more answers; to say it anyway, claim it, or ask {asker} to reopen "
            "the question (by withdrawing the closing)",
            {"question": question, "closing": closing.handle, "asker": asker},
        )
    claim_term = speech.answer_claim(asked.sentence[2], question, content)
    check_speaker(agent, claim_term)  # an answer's claim is the agent's own claim
    check_not_a_move(claim_term, "carried")  # (and a claim: never a move made by no move)
    act = _checked(kb, agent, (ANSWERS, Sym(agent), (QUOTE, claim_term), ref(question)))
    _check_unmasked(kb, agent, claim_term, "answer")
    own = context_for(agent)
    standing = [
        s
        for s in kb.sentexes_matching((ANSWERS, Sym(agent), Var("content"), ref(question)), own)
        if s.context == own
    ]
    text = show(act)
    same = next((s.handle for s in standing if s.text == text), None)
    replaced: list[int] = []
    if same is None:
        replaced = [s.handle for s in standing]
        records = _superseded(kb, agent, replaced)
        added = kb.edit(add=[(act, own, _opts(agent)), *records], remove=replaced)
        handle = added.handles[0]
    else:
        handle = same
    carried = _stored(kb, claim_term, own)
    return _written(
        kb,
        handle,
        claim=show(claim_term),
        claim_handle=None if carried is None else carried.handle,
        replaced=replaced,
    )


def _reply(kb: KB, agent: str, act: Term) -> dict[str, Any]:
    term = _checked(kb, agent, act)
    return _written(kb, kb.assert_(term, context_for(agent), **_opts(agent)))


@_move("endorse", _TARGET, "stand behind a claim (or an answer's claim)")
def endorse(kb: KB, agent: str, target: Any) -> dict[str, Any]:
    """`(endorses A (sentexHandle T))`."""
    on = _claim(kb, target, "endorse")
    return {**_reply(kb, agent, (ENDORSES, Sym(agent), ref(on.handle))), "target": on.handle}


@_move(
    "justify",
    {**_TARGET, "ground": ("any", True, 'a term naming the reason, or "free text"')},
    "give a reason for a claim (or an answer's claim)",
)
def justify(kb: KB, agent: str, target: Any, ground: Any) -> dict[str, Any]:
    """`(justifies A ground (sentexHandle T))`."""
    on = _claim(kb, target, "justify")
    act = (JUSTIFIES, Sym(agent), _term(ground), ref(on.handle))
    return {**_reply(kb, agent, act), "target": on.handle}


@_move(
    "dispute",
    _TARGET,
    "challenge another agent's claim: its rebuttal (not S) and the dispute, one edit",
)
def dispute(kb: KB, agent: str, target: Any) -> dict[str, Any]:
    """The rebuttal `(not S)` and `(disputes A (sentexHandle T))` in ONE edit, so a dispute
    never stands without its rebuttal. Refused `koinii/not-disputable` for moves that
    assert nothing and for the agent's own claim (withdraw it instead)."""
    on = _claim(kb, target, "dispute")
    if _mine(on, agent):
        raise Refused(
            "koinii/not-disputable",
            f"#{on.handle} is your own claim: to take it back, withdraw({target})",
            {"handle": target, "claim": on.handle, "kind": "own-claim"},
        )
    edge = _checked(kb, agent, (DISPUTES, Sym(agent), ref(on.handle)))
    rebuttal = speech.negation(on.sentence)
    _check_unmasked(kb, agent, rebuttal, "dispute")
    own, opts = context_for(agent), _opts(agent)
    handles = kb.edit(add=[(rebuttal, own, opts), (edge, own, opts)]).handles
    return _written(kb, handles[1], rebuttal=handles[0], target=on.handle)


@_move(
    "vote",
    {**_TARGET, "stance": ("string", True, "for | against")},
    "a ballot on a claim (one standing ballot per agent per target)",
)
def vote(kb: KB, agent: str, target: Any, stance: Any) -> dict[str, Any]:
    """The other stance replaces the agent's earlier ballot in the same edit, which keeps
    the replaced one's record (ending `superseded`); the same stance again returns the
    same handle."""
    predicate = stance_predicate(stance)
    on = _claim(kb, target, "vote")
    own = context_for(agent)
    mine = [
        s
        for other in STANCES.values()
        for s in kb.sentexes_matching((other, Sym(agent), ref(on.handle)), own)
        if s.context == own
    ]
    if len(mine) == 1 and mine[0].sentence[0] is predicate:
        return _written(kb, mine[0].handle, target=on.handle, replaced=[])
    ballot = _checked(kb, agent, (predicate, Sym(agent), ref(on.handle)))
    replaced = [s.handle for s in mine if s.sentence[0] is not predicate]
    keep = [s.handle for s in mine if s.sentence[0] is predicate]
    if keep:  # two ballots of one stance (written before this rule held): keep one
        replaced += keep[1:]
        kb.edit(add=_superseded(kb, agent, replaced), remove=replaced)
        return _written(kb, keep[0], target=on.handle, replaced=replaced)
    records = _superseded(kb, agent, replaced)
    handle = kb.edit(add=[(ballot, own, _opts(agent)), *records], remove=replaced).handles[0]
    return _written(kb, handle, target=on.handle, replaced=replaced)


def _superseded(kb: KB, agent: str, replaced: list[int]) -> list[tuple[Any, str, dict]]:
    """The records (koinii.channel.history) of the agent's moves its new one replaces."""
    return [_record(kb, agent, s, "superseded") for s in map(kb.sentex, replaced) if s]


REASON_CHARS = 2_000
_REASON = {"reason": ("string", False, "why, in words: shown in the thread and the feed")}


def _reasoned(agent: str, reason: Any) -> dict[str, Any]:
    """A decision's write options: its reason, kept in its provenance (`reason`) as one
    line — a newline in it printed a forged line of another agent's move under it in
    `koinii thread` and `koinii tail` (issue 37)."""
    if reason is None:
        return _opts(agent)
    if not isinstance(reason, str) or not reason.strip() or len(reason) > REASON_CHARS:
        raise Refused(
            "bad-option",
            f"a reason is text of 1 to {REASON_CHARS:,} characters: say why in a sentence "
            "or leave it out",
            {"option": "reason"},
        )
    return {**_opts(agent), "provenance": {"reason": " ".join(reason.split())}}


@_move(
    "accept",
    {"answer": ("handle", True, "the handle of an answer to the agent's question"), **_REASON},
    "as the asker: accept an answer, saying why; the question is settled",
)
def accept(kb: KB, agent: str, answer: Any, reason: Any = None) -> dict[str, Any]:
    """One accepted answer per question: accepting another (or the same with another
    reason) replaces the earlier acceptance, whose record the edit keeps (ending
    `superseded`). The reason, if given, is the acceptance's own (its provenance), shown
    with it. Refused `koinii/not-an-answer`, `koinii/not-the-asker`, `bad-option`."""
    opts = _reasoned(agent, reason)
    act = _answer(kb, answer)
    question = sentex_named(kb, speech.target_of(act.sentence))
    _require_asker(question, agent, "accept an answer to it")
    own = context_for(agent)
    earlier = []
    for acceptance in kb.sentexes_matching((ACCEPTS, Sym(agent), Var("a")), own):
        accepted = kb.sentex(speech.target_of(acceptance.sentence) or 0)
        if accepted is not None and speech.target_of(accepted.sentence) == question.handle:
            earlier.append(acceptance)
    move = _checked(kb, agent, (ACCEPTS, Sym(agent), ref(act.handle)))
    same = next((s for s in earlier if s.text == show(move)), None)
    if same is not None and same.provenance.get("reason") == opts.get("provenance", {}).get(
        "reason"
    ):
        return _written(kb, same.handle, question=question.handle, replaced=[])
    replaced = [s.handle for s in earlier]
    records = _superseded(kb, agent, replaced)
    handle = kb.edit(add=[(move, own, opts), *records], remove=replaced).handles[0]
    return _written(kb, handle, question=question.handle, replaced=replaced)


@_move(
    "close",
    {"question": ("handle", True, "the handle of the agent's own question"), **_REASON},
    "as the asker: close the question unanswered, saying why (withdraw it to reopen)",
)
def close(kb: KB, agent: str, question: Any, reason: Any = None) -> dict[str, Any]:
    """The reason, if given, is the closing's own (its provenance), shown with it.
    Refused `koinii/not-a-question`, `koinii/not-the-asker`, `bad-option`."""
    opts = _reasoned(agent, reason)
    asked = _question(kb, question, "close")
    _require_asker(asked, agent, "close it")
    act = _checked(kb, agent, (CLOSES, Sym(agent), ref(question)))
    return _written(kb, kb.assert_(act, context_for(agent), **opts))


@_move("not_understood", _TARGET, "an error act; it outlives its target on purpose")
def not_understood(kb: KB, agent: str, target: Any) -> dict[str, Any]:
    return _reply(kb, agent, (NOT_UNDERSTOOD, Sym(agent), ref(target)))


@_move("refuse", _TARGET, "an error act; it outlives its target on purpose")
def refuse(kb: KB, agent: str, target: Any) -> dict[str, Any]:
    return _reply(kb, agent, (REFUSE, Sym(agent), ref(target)))


@_move(
    "withdraw",
    {"handle": ("handle", True, "the handle of one of the agent's own moves or claims")},
    "take back one of the agent's own moves, with the replies on it",
)
def withdraw(kb: KB, agent: str, handle: Any) -> dict[str, Any]:
    """The move and its cascade: replies to it go with it (an answer takes its claim
    along; a dispute its rebuttal, unless another standing dispute of the agent rests on
    it; a rebuttal its disputes). Refused `koinii/foreign-sentex` for another agent's
    move, `koinii/not-a-move` for what no move wrote (a rule's conclusion, the join's
    own marks)."""
    moved = _own_move(kb, agent, handle, "withdraw")
    if moved.sentence[0] is AGENT_CONTEXT or moved.sentence[0] is Sym("genlCx"):
        raise Refused(
            "koinii/not-a-move",
            f"#{handle} marks your context as yours (written when you joined); it is not a "
            "move to withdraw",
            {"handle": handle},
        )
    return _take_back(kb, agent, moved, "withdrawn")


def _own_move(kb: KB, agent: str, handle: Any, verb: str) -> Sentex:
    """The agent's own move `handle` names, for `verb` to take back: a claim a rule
    carries (an answer's) is its move. Refused `koinii/foreign-sentex` (another agent's),
    `koinii/not-a-move` (a rule's conclusion no move carries)."""
    moved = sentex_named(kb, handle)
    if not _mine(moved, agent):
        raise _foreign(moved, agent)
    if not moved.derived:
        return moved
    act = _carrier(kb, moved)
    if act is None:
        raise Refused(
            "koinii/not-a-move",
            f"#{handle} was derived by a rule, not said by you: {verb} what it rests on "
            f"(why({handle}) shows it)",
            {"handle": handle},
        )
    return act


def _take_back(kb: KB, agent: str, moved: Sentex, ending: str, reason: str | None = None):
    """Withdraw `moved` with its cascade and leave its record, in ONE edit: a claim its
    speaker also answered with goes with those answers, and the record is the answer's
    (removed alone, the claim stood on, carried, while its record said it was withdrawn
    or conceded)."""
    remove = [moved.handle]
    if speech.move_kind(moved.sentence) == "dispute":
        remove += _rebuttal_left_alone(kb, agent, moved)
    else:
        remove += [d.handle for d in disputes_resting_on(kb, agent, moved)]
    if speech.move_kind(moved.sentence) == "claim":  # said, then answered with: the answer
        carriers = [a for a in _carriers(kb, moved) if _mine(a, agent)]  # is taken back
        if carriers:
            moved, remove = carriers[0], [a.handle for a in carriers] + remove
    record = _record(kb, agent, moved, ending, reason, also=remove[1:])
    edited = kb.edit(add=[record], remove=remove)
    return {
        "withdrawn": moved.handle,
        "sentence": moved.text,
        "removed": remove,
        "removed_sentexes": edited.removed_sentexes,
        "removed_justifications": edited.removed_justifications,
        "seq": edited.seq,
        "record": edited.handles[0],
        "ending": ending,
    }


def records_of_removal(kb: KB, agent: str, handles: Sequence[Any]) -> list[tuple]:
    """The records a plain removal (`retract`, an edit's `remove`) of the agent's own
    claims keeps, as `withdraw` does, of each claim other agents replied to: removing it
    takes their disputes, ballots and endorsements along (they follow their target), and
    unrecorded, the claim made again stood clean (issue 37). The daemon writes them in the
    removal's own edit (server/verbs.py), so the removal stays allowed and erases nothing."""
    records = []
    for handle in dict.fromkeys(h for h in handles if type(h) is int):  # (once each)
        sentex = kb.sentex(handle) if handle > 0 else None
        if sentex is None or speech.move_kind(sentex.sentence) != "claim":
            continue
        if _carrier(kb, sentex) is not None:
            continue  # an answer carries it on: removed, it still stands (no record to keep)
        if any(r.provenance.get("principal") != agent for r in replies_to(kb, handle)):
            records.append(_record(kb, agent, sentex, "withdrawn"))
    return records


def _record(
    kb: KB,
    agent: str,
    moved: Sentex,
    ending: str,
    reason: str | None = None,
    also: Sequence[int] = (),
) -> tuple[Any, str, dict[str, Any]]:
    """The record (koinii.channel.history) of `moved` taken back: what it carried, read now."""
    extra = [s for s in (kb.sentex(h) for h in also) if s is not None]
    gone, disputes, reader = carried(kb, [moved, *extra])
    question = None
    if speech.move_kind(moved.sentence) == "answer":
        question = speech.target_of(moved.sentence)
    items = [history.item(s, reader.author(s)) for s in gone]
    return history.retirement(
        kb,
        agent,
        moved,
        ending,
        speaker=reader.author(moved),
        items=items,
        disputes=disputes,
        question=question,
        reason=reason,
        at=now_ms(),
    )


@_move(
    "concede",
    {
        "target": ("handle", True, "your own claim, or your answer (its claim), to give up"),
        "reason": ("string", True, "why you concede, in words: kept in the record"),
    },
    "give up one's own claim or answer, saying why: it is withdrawn, its disputes end as "
    "conceded, and the record keeps them",
)
def concede(kb: KB, agent: str, target: Any, reason: Any = None) -> dict[str, Any]:
    """ONE move for what took four (endorse the winner, vote, justify, withdraw): the
    agent's own claim or answer is withdrawn with its cascade, and the record says it was
    conceded, why, and which disputes ended so. Refused `bad-option` (no reason),
    `koinii/foreign-sentex` (another agent's), `koinii/not-a-claim` (a move that is not a
    claim or an answer)."""
    if not isinstance(reason, str) or not reason.strip():
        raise Refused(
            "bad-option",
            "a concession says why: concede(target, reason='…') with a sentence",
            {"option": "reason"},
        )
    why = _reasoned(agent, reason)["provenance"]["reason"]
    moved = _own_move(kb, agent, target, "concede")
    kind = speech.move_kind(moved.sentence)
    if kind not in ("claim", "answer"):
        raise Refused(
            "koinii/not-a-claim",
            f"#{moved.handle} is {_a(kind)}: concede gives up a claim or an answer; to take "
            f"back any other move, withdraw({moved.handle})",
            {"handle": moved.handle, "kind": kind},
        )
    return _take_back(kb, agent, moved, "conceded", why)


def _rebuttal_left_alone(kb: KB, agent: str, edge: Sentex) -> list[int]:
    """The rebuttal a withdrawn dispute takes along — unless another of the agent's
    standing disputes rests on the same rebuttal."""
    target = kb.sentex(speech.target_of(edge.sentence) or 0)
    if target is None:
        return []
    own = context_for(agent)
    rebuttal = _stored(kb, speech.negation(target.sentence), own)
    if rebuttal is None or rebuttal.derived:
        return []
    for other in kb.sentexes_matching((DISPUTES, Sym(agent), Var("t")), own):
        if other.handle == edge.handle:
            continue
        disputed = kb.sentex(speech.target_of(other.sentence) or 0)
        if disputed is not None and disputed.text == target.text:
            return []
    return [rebuttal.handle]


def disputes_resting_on(kb: KB, agent: str, claim: Sentex) -> list[Sentex]:
    """The agent's standing disputes whose rebuttal `claim` is: withdrawn with it, since a
    dispute never stands without its rebuttal."""
    own = context_for(agent)
    if claim.context != own:
        return []
    found = []
    for edge in kb.sentexes_matching((DISPUTES, Sym(agent), Var("t")), own):
        disputed = kb.sentex(speech.target_of(edge.sentence) or 0)
        if disputed is not None and show(speech.negation(disputed.sentence)) == claim.text:
            found.append(edge)
    return found


@_move(
    "reply_many",
    {"sentences": (("array", {"type": "string"}), True, "linked claims, written as one reply")},
    "several linked claims as ONE reply: all or nothing",
)
def reply_many(kb: KB, agent: str, sentences: Sequence[Any]) -> dict[str, Any]:
    """Check every sentence, dry-run the batch, then commit it in one edit — never a
    half-reply. Refused `koinii/reply-inadmissible` with every problem found."""
    own, opts = context_for(agent), _opts(agent)
    entries = []
    for sentence in sentences:
        try:
            term = _checked(kb, agent, sentence)
        except Refused as refusal:
            if refusal.kind not in ("parse", "shape"):
                raise
            term = sentence  # not a sentence at all: the dry run names the problem
        else:
            check_not_a_move(term, kb=kb, agent=agent)
        entries.append((term, own, opts))
    problems = kb.check_edit(add=entries)
    if problems:
        raise Refused(
            "koinii/reply-inadmissible",
            f"the reply has {len(problems)} problem(s); nothing was written",
            {"problems": problems},
        )
    edited = kb.edit(add=entries)
    return {"handles": edited.handles, "seq": edited.seq}


# --- refusals that say what to do instead ------------------------------------------------------

_INSTEAD = {
    "endorsement": "dispute the claim it endorses, dispute({target}), or vote against it",
    "justification": "dispute the claim it justifies, dispute({target}), or state the "
    "opposite of its ground as a claim of your own",
    "dispute": "to side with the disputed claim, vote for it: vote(target={target}, stance='for')",
    "ballot": "vote the other way on the claim: vote(target={target}, stance='against' or 'for')",
    "acceptance": "only the asker accepts; to disagree with the accepted answer, dispute it",
    "closing": "only the asker closes a question",
    "error": "it asserts nothing; to challenge what it is about, dispute({target})",
    "question": "a question asserts nothing: answer question #{handle} instead",
    "answer": "this answer carries no claim (it predates claims); answer the question again",
}


def _not_a_claim(moved: Sentex, kind: str, action: str) -> Refused:
    target = speech.target_of(moved.sentence)
    instead = _INSTEAD.get(kind, "act on a claim").format(target=target, handle=moved.handle)
    refusal_kind = {"dispute": "koinii/not-disputable", "vote": "koinii/not-votable"}.get(
        action, "koinii/not-a-claim"
    )
    return Refused(
        refusal_kind,
        f"#{moved.handle} is {_a(kind)}, not a claim: you cannot {action} it; {instead}",
        {"handle": moved.handle, "kind": kind, "target": target},
    )


def _not_a_question(moved: Sentex, action: str) -> Refused:
    kind = speech.move_kind(moved.sentence)
    return Refused(
        "koinii/not-a-question",
        f"#{moved.handle} is {_a(kind)}, not a question: {action} takes a question's handle "
        "(questions() lists them); to agree with a claim endorse it, to disagree dispute it",
        {"handle": moved.handle, "kind": kind},
    )


def _foreign(moved: Sentex, agent: str) -> Refused:
    owner = moved.provenance.get("creator") or moved.context
    kind = speech.move_kind(moved.sentence)
    instead = (
        "vote the other way on its target"
        if kind == "ballot"
        else f"to challenge it, dispute({moved.handle})"
    )
    return Refused(
        "koinii/foreign-sentex",
        f"#{moved.handle} is {owner}'s, not {agent}'s: you withdraw only your own moves; {instead}",
        {"agent": agent, "handle": moved.handle, "owner": owner},
    )


def _a(kind: str) -> str:
    name = "error act" if kind == "error" else kind
    return ("an " if name[0] in "aeiou" else "a ") + name
