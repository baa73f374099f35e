"""The follower's core (koinii.channel.follow), driven by hand: no daemon, no thread, no
clock. Each test sends the core the replies a store would give and reads the actions it
asks for — the rules every follower keeps (a cursor by seq, an outage told once and
survived with backoff, lagged, filtering) checked where they are written. The drivers run
over real daemons in test_channel_subscribe.py, test_subscription_resume.py,
test_catchup.py, test_feed.py and the CLI's tail tests; one test here runs the blocking
driver over a real KB."""

from __future__ import annotations

import pytest

from koinii.channel import follow
from koinii.channel.follow import (
    BACKOFF_S,
    Changes,
    Deliver,
    Lagged,
    Outage,
    Page,
    Pause,
    Poll,
    View,
    Watch,
)
from koinii.errors import Refused, Unavailable
from koinii.kb import Event

pytestmark = pytest.mark.backends("sqlite")  # no store underneath but the last test's


class Reader:
    """What a subscription core keeps on its reader."""

    def __init__(self, goal="(item ?x)", ctx="CxA"):
        self.goal, self.ctx = goal, ctx
        self.token, self.last_seq, self.outages = None, 0, 0


def _event(seq: int) -> Event:
    return Event(seq, [{"handle": seq, "sentence": f"(item I{seq})", "context": "CxA"}])


def _delivered(core: follow.Core) -> list[int]:
    """Take every Deliver the core asks for now; their seqs."""
    seqs = []
    while type(core.action) is Deliver:
        seqs.append(core.action.item.seq)
        core.send()
    return seqs


def _opened(core: follow.Core, reader: Reader, token: str, seq: int) -> None:
    assert type(core.action) is Watch
    core.send({"token": token, "cursor": 0, "seq": seq})


def test_a_subscription_resumes_after_an_outage_from_the_last_seq_it_delivered():
    reader = Reader()
    core = follow.Core(follow.subscription(reader, wait_ms=500))
    assert core.action == Watch("(item ?x)", "CxA", None)
    _opened(core, reader, "T1", 5)
    assert core.action == Poll("T1", 0, 500) and reader.last_seq == 5
    core.send({"events": [_event(6), _event(7)], "cursor": 2, "lagged": 0})
    assert _delivered(core) == [6, 7] and reader.last_seq == 7
    assert core.action == Poll("T1", 2, 500)

    down = Unavailable("the daemon is down")
    core.fail(down)
    assert core.action == Outage(down) and reader.outages == 1
    core.send()
    pauses = []
    for _ in range(8):  # the daemon stays down: the outage is not told again
        assert type(core.action) is Pause
        pauses.append(core.action.seconds)
        core.send()
        assert core.action == Watch("(item ?x)", "CxA", 7)  # from the last seq delivered
        core.fail(Unavailable("still down"))
    assert reader.outages == 1
    assert pauses[0] <= BACKOFF_S[0] and max(pauses) <= BACKOFF_S[1]
    assert pauses[-1] >= BACKOFF_S[1] / 2  # it backed off (jitter takes at most half)
    core.send()  # the last pause
    _opened(core, reader, "T2", 9)  # a resumed watch replays from seq 7
    assert reader.token == "T2" and reader.last_seq == 7
    assert core.action == Poll("T2", 0, 500)
    core.send({"events": [_event(7), _event(8), _event(9)], "cursor": 3, "lagged": 0})
    assert _delivered(core) == [8, 9]  # 7 was delivered before the outage


def test_a_subscription_the_log_cannot_replay_to_says_lagged_and_goes_on_from_now():
    reader = Reader()
    core = follow.Core(follow.subscription(reader, wait_ms=0))
    _opened(core, reader, "T1", 3)
    core.fail(Refused("unknown-subscription", "reaped", {}))  # reaped: an outage
    assert type(core.action) is Outage
    core.send()
    core.send()  # the pause
    assert core.action == Watch("(item ?x)", "CxA", 3)
    core.fail(Refused("too-old", "compacted", {"floor": 20}))
    assert core.action == Watch("(item ?x)", "CxA", None)
    core.send({"token": "T2", "cursor": 4, "seq": 30})
    assert core.action == Lagged(17, 4)  # at least the writes between 3 and the floor
    core.send()
    assert reader.last_seq == 30 and core.action == Poll("T2", 4, 0)


def test_a_ring_that_dropped_events_says_lagged_before_the_events_it_kept():
    reader = Reader()
    core = follow.Core(follow.subscription(reader, wait_ms=0))
    _opened(core, reader, "T1", 0)
    core.send({"events": [_event(12)], "cursor": 9, "lagged": 4})
    assert core.action == Lagged(4, 9)
    core.send()
    assert _delivered(core) == [12]


def test_a_refusal_for_good_ends_the_subscription_by_raising_it():
    reader = Reader()
    core = follow.Core(follow.subscription(reader, wait_ms=0))
    _opened(core, reader, "T1", 0)
    revoked = Refused("koinii/forbidden", "the token was revoked", {})
    with pytest.raises(Refused) as raised:
        core.fail(revoked)
    assert raised.value is revoked and core.action is None


def _entry(seq: int, *added: tuple[str, str]) -> dict:
    return {
        "seq": seq,
        "at": 0,
        "added": [{"handle": seq, "sentence": s, "context": c} for s, c in added],
        "removed": [],
    }


def test_the_log_filters_by_goal_and_rereads_the_view_when_the_hierarchy_moves():
    core = follow.Core(follow.log(10, goal="(item ?x)", ctx="CxTeam", wait_ms=100, pages=True))
    assert core.action == View("CxTeam")
    core.send(frozenset({"CxTeam"}))
    assert core.action == Changes(10, follow.PAGE, 100)
    core.send(
        {
            "seq": 14,
            "too_old": False,
            "entries": [
                _entry(11, ("(item A)", "CxTeam"), ("(other B)", "CxTeam")),
                _entry(12, ("(item C)", "CxElsewhere")),  # not in view: skipped
                _entry(13, ("(genlCx CxTeam CxElsewhere)", "CxTeam")),
                _entry(14, ("(item D)", "CxElsewhere")),  # in view now
            ],
        }
    )
    first = core.action.item
    assert [c["sentence"] for c in first["added"]] == ["(item A)"]
    core.send()
    assert core.action == View("CxTeam")  # at the genlCx, before the entries after it
    core.send(frozenset({"CxTeam", "CxElsewhere"}))
    assert core.action.item["seq"] == 14
    core.send()
    assert core.action.item == Page(14, 14, 4, True)
    core.send()
    assert core.action == Changes(14, follow.PAGE, 100)


def test_the_log_waits_out_an_outage_and_reads_on_from_the_last_entry_delivered():
    core = follow.Core(follow.log(0, wait_ms=100))
    core.send({"seq": 1, "too_old": False, "entries": [_entry(1, ("(item A)", "CxA"))]})
    assert core.action.item["seq"] == 1
    core.send()
    for n in range(3):
        core.fail(Unavailable("down"))
        if n == 0:
            assert type(core.action) is Outage  # told once
            core.send()
        assert type(core.action) is Pause
        core.send()
    assert core.action == Changes(1, follow.PAGE, 100)


def test_the_log_compacted_past_the_cursor_refuses_or_goes_on_as_asked():
    compacted = {"seq": 50, "floor": 40, "too_old": True, "entries": []}
    refusing = follow.Core(follow.log(5))
    with pytest.raises(Refused) as raised:
        refusing.send(compacted)
    assert raised.value.kind == "too-old" and raised.value.data == {"since": 5, "floor": 40}
    for too_old, cursor in (("floor", 40), ("head", 50)):
        core = follow.Core(follow.log(5, too_old=too_old, wait_ms=0))
        core.send(compacted)
        assert core.action == Lagged(35, cursor)
        core.send()
        assert core.action == Changes(cursor, follow.PAGE, 0)


def test_the_log_not_following_ends_at_the_first_empty_read_and_raises_an_outage():
    core = follow.Core(follow.log(7, follow=False, wait_ms=0))
    core.send({"seq": 7, "too_old": False, "entries": []})
    assert core.action is None
    core = follow.Core(follow.log(7, follow=False, wait_ms=0))
    with pytest.raises(Unavailable):
        core.fail(Unavailable("down"))


def test_the_filter_is_the_engines_in_view_not_hidden_there_matching():
    view = frozenset({"CxA", "CxB"})
    change = {"sentence": "(item X)", "context": "CxA"}
    pattern = follow.literal("(item ?x)")
    assert follow.admits(change, pattern, view)
    assert not follow.admits({**change, "context": "CxC"}, pattern, view)
    assert not follow.admits({**change, "hidden_in": "CxC"}, pattern, view)
    assert follow.admits({**change, "hidden_in": "CxB"}, pattern, view)
    assert not follow.admits(change, follow.literal("(not (item ?x))"), view)
    negative = {"sentence": "(not (item X))", "context": "CxA"}
    assert follow.admits(negative, follow.literal("(not (item ?x))"), None)


def test_the_blocking_driver_replays_a_kb_log_by_goal(kb):
    first = kb.assert_("(item A)", "CxA")
    kb.assert_("(other B)", "CxA")
    kb.assert_("(item C)", "CxA")
    core = follow.Core(follow.log(0, goal="(item ?x)", follow=False, wait_ms=0))
    seen = [c["handle"] for entry in follow.run(core, kb) for c in entry["added"]]
    assert seen[0] == first and len(seen) == 2


def test_the_blocking_driver_stops_when_asked_even_while_following(kb):
    kb.assert_("(item A)", "CxA")
    kb.assert_("(item B)", "CxA")
    core = follow.Core(follow.log(0, goal="(item ?x)", wait_ms=100))  # following: no end
    seen: list = []
    for entry in follow.run(core, kb, stopped=lambda: len(seen) == 1):
        seen.append(entry)
        if len(seen) == 2:
            break  # (a driver that does not stop would wait for a third write forever)
    assert len(seen) == 1 and type(core.action) is Deliver  # the next entry, not taken
