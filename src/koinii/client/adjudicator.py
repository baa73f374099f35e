"""The adjudication service: watches a channel's disputes and settles each by a policy.

`koinii adjudicate --channel CxTeam` runs one `Adjudicator`: on every change to the
store it reads the channel's disputes (`conversation.disputes`, one read), tells of each
new one once (`adjudication.notify_disputes`: the stored mark deduplicates), and counts
each dispute whose count is due under its `Policy` with `majority.resolve_by_majority`
— `AgentMajority` rules the side with strictly more ballots, a tie rules nothing, and a
changed count replaces the ruling. Ballots count on the dispute's target: the disputed
claim (or, for a clash nobody raised with a dispute move, its first-made side).

Invariants:
- Never rules twice: a count is idempotent (`resolve_by_majority` writes nothing when
  the ruling it would make stands), so a pass may run again after any crash; the
  durable cursor only saves re-reading, it is not what keeps rulings single.
- Tells each thing once: a dispute is told of when its mark is written, a ruling when
  it is written — both durable, so a restarted service does not repeat them.
- A dispute that cannot be counted (a side withdrawn meanwhile) is skipped and logged;
  it never stops the service.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from koinii.channel import follow
from koinii.channel.catchup import CursorStore, MemoryCursorStore
from koinii.disputes import adjudication, majority
from koinii.errors import Refused
from koinii.operations import invoker

__all__ = ["Adjudicator", "Policy"]

log = logging.getLogger("koinii.client.adjudicator")


@dataclass(frozen=True)
class Policy:
    """When a dispute's ballots are counted.

    By default, once every member of the channel (but the majority itself) has cast a
    counted ballot on its target. `quorum`: once that many members have. `deadline_s`:
    once the dispute is that old, whatever the ballots. Either one suffices.
    """

    quorum: int | None = None
    deadline_s: float | None = None

    def __post_init__(self) -> None:
        if self.quorum is not None and (type(self.quorum) is not int or self.quorum < 1):
            raise Refused(
                "bad-option",
                f"quorum is a positive number of voters, not {self.quorum!r}",
                {"option": "quorum"},
            )
        if self.deadline_s is not None and not (
            isinstance(self.deadline_s, (int, float)) and self.deadline_s > 0
        ):
            raise Refused(
                "bad-option",
                f"deadline is a positive number of seconds, not {self.deadline_s!r}",
                {"option": "deadline"},
            )

    def due(self, voters: int, members: int, age_s: float | None) -> bool:
        if self.deadline_s is not None and age_s is not None and age_s >= self.deadline_s:
            return True
        if self.quorum is not None:
            return voters >= self.quorum
        return members > 0 and voters >= members

    def describe(self) -> str:
        parts = [f"a quorum of {self.quorum}" if self.quorum else "every member has voted"]
        if self.deadline_s is not None:
            parts.append(f"or {self.deadline_s:g} s have passed")
        return " ".join(parts)


class Adjudicator:
    """Settles the disputes of one channel; `settle()` is one pass, `run()` the service."""

    def __init__(
        self,
        store: Any,
        channel: str,
        policy: Policy | None = None,
        *,
        cursor: CursorStore | None = None,
        say: Callable[[str], Any] | None = None,
        clock: adjudication.Clock = adjudication.now_ms,
    ) -> None:
        self.store = store
        self.channel = channel
        self.policy = policy or Policy()
        self.cursor = cursor or MemoryCursorStore()
        self.say = say or (lambda line: log.info("%s", line))
        self.clock = clock
        self._read = invoker(store)

    def settle(self) -> list[dict[str, Any]]:
        """One pass: tell of the new disputes, then count every dispute that is due.
        Returns the counts that changed something (a ruling made or withdrawn)."""
        for entry in adjudication.notify_disputes(self.store, self.channel, clock=self.clock):
            self.say(f"dispute {entry['dispute_id']} opened: {_sides(entry)}")
        members = [
            m
            for m in self._read("conversation.members", channel=self.channel)
            if m != majority.MAJORITY_ARBITER
        ]
        changed = []
        for dispute in self._read("conversation.disputes", channel=self.channel):
            outcome = self._count(dispute, members)
            if outcome is not None and outcome["changed"]:
                changed.append(outcome)
        return changed

    def _count(self, dispute: dict[str, Any], members: list[str]) -> dict[str, Any] | None:
        target = dispute["target"]
        ruling = dispute["ruling"]
        if target is None or dispute["state"] == "ended":
            return None  # differing values (no one target), or ended with its move
        if dispute["state"] == "resolved" and (
            ruling is None or ruling["arbiter"] != majority.MAJORITY_ARBITER
        ):
            return None  # settled otherwise: withdrawn, defeated, or an arbiter's ruling
        cast = majority.ballots(self.store, target["handle"])
        voters = len({b["voter"] for b in cast if b["counted"] and b["voter"] in members})
        age_s = None
        if self.policy.deadline_s is not None:
            opened = adjudication.opened_at(self.store, dispute["dispute_id"])
            age_s = None if opened is None else (self.clock() - opened) / 1000
        if not self.policy.due(voters, len(members), age_s):
            return None
        try:
            outcome = majority.resolve_by_majority(
                self.store, dispute["dispute_id"], target["handle"], self.channel, clock=self.clock
            )
        except Refused as refusal:
            log.warning("dispute %s not counted: %s", dispute["dispute_id"], refusal)
            return None
        if outcome["changed"]:
            self.say(_told(dispute, outcome))
        return {**outcome, "dispute_id": dispute["dispute_id"]}

    def run(self, stop: threading.Event | None = None, *, wait_ms: int = 20_000) -> None:
        """Settle, then wait for the next write (the durable change log, through the
        follower's `log` core, koinii.channel.follow), until `stop`.

        Resumes after the seq its cursor holds; writes the cursor after each pass. A
        daemon that cannot be reached while it waits for the next write is waited for
        (logged once per outage); a pass that fails ends the run, as it always did.
        """
        stop = stop or threading.Event()
        position = self.cursor.read_position()
        # no position yet: start now (the first pass reads every dispute anyway)
        since = position["seq"] if position and type(position.get("seq")) is int else self.store.seq
        self.say(f"adjudicating {self.channel}: counting once {self.policy.describe()}")
        wait = wait_ms
        if self.policy.deadline_s is not None:
            wait = min(wait, max(100, int(self.policy.deadline_s * 1000 / 4)))
        if stop.is_set():
            return
        self.settle()
        self.cursor.write_position({"seq": since})
        # a pass reads every dispute, so a read is only the signal for the next pass; a
        # log compacted past the cursor goes on from its last seq
        core = follow.Core(follow.log(since, wait_ms=min(wait, 30_000), too_old="head", pages=True))
        for read in follow.run(core, self.store, on_outage=_outage, stopped=stop.is_set):
            if type(read) is follow.Page:
                self.settle()
                self.cursor.write_position({"seq": read.cursor})


def _outage(exc: BaseException) -> None:
    log.warning("adjudicator: the daemon is unreachable (%s); waiting for it", exc)


def _sides(entry: dict[str, Any]) -> str:
    return " vs ".join(side["sentence"] for side in entry["sides"])


def _told(dispute: dict[str, Any], outcome: dict[str, Any]) -> str:
    count = f"{outcome['for']}-{outcome['against']}"
    claim = dispute["target"]["sentence"]
    if outcome["outcome"] == "tie":
        return f"dispute {dispute['dispute_id']}: tie {count} on {claim}; the ruling is withdrawn"
    verdict = "upholds" if outcome["outcome"] == "for" else "overrules"
    return (
        f"dispute {dispute['dispute_id']}: {majority.MAJORITY_ARBITER} {verdict} {claim} ({count})"
    )
