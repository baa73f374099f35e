"""The channel: the conversation agents hold through the knowledge base.

One module per part, in the order a move passes through them (the speech acts' forms,
how each move is written and read back, are `koinii.speech`: identity and disputes speak
them too):

- `moves` — the moves as operations on the single writer (their rules, one edit each);
- `conversation` — the conversation as agents read it: threads, questions, disputes;
- `history` — what the conversation said and took back, kept as a record of its own;
- `belief` — what one agent holds, read from its own context;
- `narrator` — a change-log entry told as moves in words; `news` — an agent's share of it;
- `roster` — who is on the channel, in what role, and where to file a wrap;
- `follow` — the one follower of what changed (subscriptions, the change log), resumed
  after an outage; `catchup` — an agent that was away reaching the current view;
- `agent` — `Agent`, the moves and reads as methods over a `KB` (`local`) or a daemon
  (`wire`).

The package re-exports `agent`'s names, lazily, so `channel.join(...)` reads as it always
has and `import koinii.channel.moves` loads no agent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from koinii._lazy import reexport

if TYPE_CHECKING:
    from koinii.channel.agent import (
        STANCES,
        WRITER_ORDER,
        Agent,
        Subscription,
        answer_content,
        join,
        local,
        speaker_of,
        stance_predicate,
        unsubscribe,
        wire,
    )

__all__ = [
    "STANCES",
    "WRITER_ORDER",
    "Agent",
    "Subscription",
    "answer_content",
    "join",
    "local",
    "speaker_of",
    "stance_predicate",
    "unsubscribe",
    "wire",
]

__getattr__, __dir__ = reexport(
    "koinii.channel", dict.fromkeys(__all__, "koinii.channel.agent"), globals()
)
