"""The shapes of the public read results, as `TypedDict`s: what `why`, `thread`,
`questions` and `disputes` return (on a `KB`, a `Client` and the channel agents alike),
so a user's type checker catches a key typo (`thread["anwsers"]`) and knows each value's
type. They describe JSON values — the same in-process and over the wire — and add no
runtime cost: a result is still a plain `dict`.

A key a result has only sometimes (a question's thread has `answers`, a claim's has
`endorsements`) is `NotRequired`: read it with `.get`, or where you know the kind.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

__all__ = [
    "Answer",
    "Ballot",
    "ClaimThread",
    "Dispute",
    "Justification",
    "Move",
    "Question",
    "Ruling",
    "Side",
    "Tally",
    "Thread",
    "WhyStep",
    "WhyTree",
]


class WhyStep(TypedDict):
    """One way a derived sentex is derived: the rule and what it rested on."""

    rule: int
    rule_sentence: str
    antecedents: list[WhyTree]


class WhyTree(TypedDict):
    """`why(handle)`: a sentex and, unless it is a premise, each way it is derived."""

    handle: int
    sentence: str
    context: str
    believed: bool
    premise: bool
    justifications: list[WhyStep]
    cycle: NotRequired[bool]


class Move(TypedDict):
    """A move (or a claim) as the conversation reads show it."""

    handle: int
    kind: str  # question, answer, claim, endorsement, justification, dispute, ballot, …
    speaker: str | None
    sentence: str
    context: str
    believed: bool
    why_not: NotRequired[str]  # when not believed: retracted, defeated, …


class Side(Move):
    """A side of a dispute: a claim and its strength."""

    strength: str


class Justification(Move):
    ground: NotRequired[str]


Tally = TypedDict("Tally", {"for": int, "against": int})


class Ballot(TypedDict):
    handle: int
    voter: str
    stance: str  # for | against
    counted: bool  # cast by its voter (only those count)


class Ruling(TypedDict):
    handle: int
    sentence: str
    upholds: bool  # rules for the disputed claim (else its negation)
    arbiter: str  # AgentMajority for a majority's ruling
    dispute_ids: list[list[int]]
    at: int


class Ended(TypedDict):
    """How a move or a dispute was taken back: its ending, who, when, why."""

    ending: str  # withdrawn | conceded | superseded | ruled
    by: str | None
    seq: int | None
    at: int | None  # epoch ms
    reason: str | None


class SingleValued(TypedDict):
    """A declaration that a predicate takes one value in an argument (kb/clashes.py)."""

    predicate: str
    argument: int  # 1 for the first argument


class GivenValue(TypedDict):
    """One side of a dispute of class `values`: the value, and who gave it."""

    value: str
    speaker: str | None
    handle: int


Dispute = TypedDict(
    "Dispute",
    {
        "dispute_id": list[int],
        "class": str | None,
        "state": str,  # open | notified | stale | resolved
        "target": Move | None,
        "raised_by": list[Move],  # the dispute moves (a clash no one raised: none)
        "sides": list[Side],
        "tally": Tally,
        "ruling": Ruling | None,
        "question": int | None,
        # the history (docs/channel.md): how an ended dispute ended, and by whom
        "ending": NotRequired[str | None],  # ruled | withdrawn | conceded | superseded
        "ended": NotRequired[Ended],
        "carried": NotRequired[list[dict[str, Any]]],  # a withdrawn claim's, made again
        # class `values`: who gave which value, and the declaration that makes one
        "declared": NotRequired[SingleValued | None],
        "values": NotRequired[list[GivenValue] | None],
    },
)


class ClaimThread(Move):
    """A claim with what was said about it (also an answer's `claim`)."""

    endorsements: list[Move]
    justifications: list[Justification]
    disputes: list[Dispute]
    ballots: list[Ballot]
    tally: Tally
    rulings: list[Ruling]
    answer: NotRequired[int]  # the answer that carries it
    question: NotRequired[int]


class Answer(Move):
    content: str
    claim: ClaimThread | None
    accepted: bool
    bindings: NotRequired[dict[str, str]]


class Question(TypedDict):
    """An entry of `questions()`."""

    handle: int
    speaker: str
    sentence: str
    context: str
    question: str
    question_kind: str  # pattern | yes-no | free-text | symbol | term
    state: str  # open | answered | contested | settled | closed
    answer_count: int
    accepted: int | None
    answers: NotRequired[list[Answer]]


class Thread(Move):
    """`thread(handle)`: a question with its answers, or a claim (or reply) with what
    was said about it — the keys of the other kind are absent."""

    # a question's
    question: NotRequired[str | int]  # a question's text; for a claim, its question's handle
    question_kind: NotRequired[str]
    state: NotRequired[str]
    answers: NotRequired[list[Answer]]
    answer_count: NotRequired[int]
    accepted: NotRequired[int | None]
    acceptance: NotRequired[Move | None]
    acceptance_reason: NotRequired[str | None]
    closing: NotRequired[Move | None]
    closing_reason: NotRequired[str | None]
    ruling: NotRequired[Ruling | None]
    # a claim's
    endorsements: NotRequired[list[Move]]
    justifications: NotRequired[list[Justification]]
    disputes: NotRequired[list[Dispute]]
    ballots: NotRequired[list[Ballot]]
    tally: NotRequired[Tally]
    rulings: NotRequired[list[Ruling]]
    answer: NotRequired[int]
    # the history (docs/channel.md): what was taken back, from its records
    withdrawn_answers: NotRequired[list[dict[str, Any]]]
    withdrawn: NotRequired[Any]  # a claim's withdrawn replies; a withdrawn handle's ending
    earlier: NotRequired[list[dict[str, Any]]]
