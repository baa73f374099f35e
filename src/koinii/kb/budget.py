"""One operation's time budget: a deadline, checked cheaply from the engine's hot loops.

The engine runs one operation at a time, so a budget is how long one operation may hold
it — in the daemon, how long it may hold the event loop every other client waits on.
Invariant: `tick()` is called once per unit of work whose count the input decides (a
candidate considered in a join — `index.solve` takes the budget —, a derivation, a node
relabelled or removed, a sentex read out); it reads the clock
once every `EVERY` ticks and raises `budget-exhausted` past the deadline. The refusal
comes before anything is durable, so a write is rolled back whole and a read answers
nothing; the clock is read often enough (a tick costs well under a microsecond, and
`EVERY` of them well under a millisecond) that the overrun past the deadline is small.
"""

from __future__ import annotations

import time

from koinii.errors import Refused


class Budget:
    """`seconds` of work, `spent` of them already (elsewhere), for `what` (named in the
    refusal)."""

    __slots__ = ("seconds", "deadline", "what", "_left", "_rounds")
    EVERY = 256

    def __init__(self, seconds: float, what: str = "the operation", spent: float = 0.0) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds - spent
        self.what = what
        self._left = self.EVERY
        self._rounds = 0  # times `_left` ran out

    def tick(self) -> None:
        self._left -= 1
        if self._left:
            return
        self._left = self.EVERY
        self._rounds += 1
        if time.monotonic() > self.deadline:
            raise self.exhausted()

    def ticks(self) -> int:
        """How many ticks so far: the work done, counted (a refusal says how much of it
        one join did: firing.py)."""
        return self._rounds * self.EVERY + self.EVERY - self._left

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def exhausted(self) -> Refused:
        return Refused(
            "budget-exhausted",
            f"{self.what} ran past its {self.seconds:g} s budget and was stopped (a write "
            "is rolled back whole); narrow it — bind more of a goal, split a batch, or "
            "give a rule fewer matches — or, as an operator, give it a larger budget_ms",
            {"budget_s": self.seconds},
        )
