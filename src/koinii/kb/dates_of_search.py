"""The dates a search names, and what matches them (docs/search.md: "A date is a word
of the search").

A search may name a month ("in april", "apr 2026", "may 2025"), a day ("april 9", "9th
april 2026") or a date as claims store it ("2026-04-09", "2026-04"). Such a date is one
typed word of the search, matched by a sentence that

- names it in words ("april", "apr"; for a day, "april 9" or "9 april"),
- holds a date that falls in it, written year first as claims store dates
  (`(incidentDate Incident17 "2026-04-09")` is in april 2026 and on its 9th), or
- was recorded in it (its `created` time, UTC), among the sentences its other words find.

Invariants:
- A month or day named without a year stands for it in the year of the KB's clock, the
  year before and the year after: a team searches what happened and what is planned, and
  a date of another year is rarer than the month's name itself.
- "may" is a month only where a day or a year is next to it, or "in", "since", "during",
  "until", "by", "before" or "after" comes right before it ("in may"): "may I deploy"
  names no date. "march" and the other names are always months.
- A year alone ("2026") is a number, as before: it names no span of time here.

A search may also *ask* for a time (`asked_in`): "when", "what time", "which day" ask for
a point in time, "how often" for a frequency, "how long" for a duration. The question
word is then one typed word of the search whose group is what such an answer holds — a
year around the clock's (as year-first dates hold it), a month's or a weekday's name,
"UTC"; "nightly", "daily", "every", …; a unit of time —, so among the sentences the
other words find alike, the one that answers the question ranks first: "when does the
deploy freeze start" finds `(deployFreezeStarts Ops "2026-12-18 18:00 UTC")` before a
thousand `deployFreezeStarts` claims about other services holding no time. The
question word alone matches nothing (search.py drops a hit holding only it).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime

DATES = True  # a switch for benchmarks/recall.py's "before" row
ASKED = True  # the time a question asks for (a switch for the same row)

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_SHORT = {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_SHORT["sept"] = 9
MONTHS = {**_MONTHS, **_SHORT}
_AMBIGUOUS = {"may", "mar", "jan", "dec"}  # also other words: a month only in a date's shape
_BEFORE = {"in", "since", "during", "until", "by", "before", "after"}
_DAY = re.compile(r"([0-9]{1,2})(?:st|nd|rd|th)?")
_YEAR = re.compile(r"(19|20|21)[0-9]{2}")
_MONTH_NUMBER = re.compile(r"[0-9]{1,2}")
# What a sentence answering "when", "how often" or "how long" holds (lower case words).
_WEEKDAYS = {name.lower() for name in calendar.day_name}
_POINT = {*(n for n in _MONTHS if n not in _AMBIGUOUS), *_WEEKDAYS, "utc"}
_FREQUENCY = {
    *("hourly", "nightly", "daily", "weekly", "monthly", "quarterly", "yearly", "annually"),
    *("every", "cron"),
}
_DURATION = {"seconds", "minutes", "hours", "days", "weeks", "months", "years"}
_POINT_NOUNS = {"time", "date", "day", "month", "year"}  # "what time", "which day"


@dataclass(frozen=True)
class Date:
    """A date a search names: the chunks it spans (`first` up to `past`), the terms a
    sentence holding it matches (words and year-first phrases), and the spans of epoch
    ms (each from, to) a sentence recorded in it falls in."""

    first: int
    past: int
    terms: frozenset[str]
    spans: tuple[tuple[int, int], ...]

    def holds(self, created: int) -> bool:
        """Was a sentence recorded at `created` (epoch ms) recorded in this date?"""
        return any(start <= created < end for start, end in self.spans)


def dates_in(chunks: list[str], now_ms: int) -> list[Date]:
    """The dates `chunks` (a search's runs of letters and digits, in order) name, in
    order, none overlapping."""
    if not DATES:
        return []
    lowered = [c.lower() for c in chunks]
    this_year = datetime.fromtimestamp(now_ms / 1000, UTC).year
    found: list[Date] = []
    i = 0
    while i < len(lowered):
        date = _iso(lowered, i) or _named(lowered, i, this_year)
        if date is None:
            i += 1
            continue
        found.append(date)
        i = date.past
    return found


def _iso(words: list[str], i: int) -> Date | None:
    """A year-first date: "2026-04-09" or "2026-04" (chunks 2026, 04[, 09])."""
    if not _YEAR.fullmatch(words[i]) or i + 1 >= len(words):
        return None
    if not _MONTH_NUMBER.fullmatch(words[i + 1]) or not 1 <= int(words[i + 1]) <= 12:
        return None
    year, month = int(words[i]), int(words[i + 1])
    day = _day(words, i + 2)
    if day is not None and _MONTH_NUMBER.fullmatch(words[i + 2]) and _fits(year, month, day):
        return _date(i, i + 3, month, (year,), day)
    return _date(i, i + 2, month, (year,), None)


def _named(words: list[str], i: int, this_year: int) -> Date | None:
    """A month by its name, with a day before or after it and a year after, if any."""
    month = MONTHS.get(words[i])
    if month is None:
        return None
    first, past = i, i + 1
    day = _day(words, i + 1)
    if day is not None:
        past += 1
    elif (before := _day(words, i - 1)) is not None:
        day, first = before, i - 1
    year = _year(words, past)
    if year is not None:
        past += 1
    in_shape = day is not None or year is not None or (i > 0 and words[i - 1] in _BEFORE)
    if words[i] in _AMBIGUOUS and not in_shape:
        return None
    years = (year,) if year is not None else (this_year - 1, this_year, this_year + 1)
    if day is not None:
        years = tuple(y for y in years if _fits(y, month, day))
        if not years:
            return None
    return _date(first, past, month, years, day)


def _day(words: list[str], i: int) -> int | None:
    if not 0 <= i < len(words) or not (m := _DAY.fullmatch(words[i])):
        return None
    day = int(m.group(1))
    return day if 1 <= day <= 31 else None


def _year(words: list[str], i: int) -> int | None:
    return int(words[i]) if i < len(words) and _YEAR.fullmatch(words[i]) else None


def _fits(year: int, month: int, day: int) -> bool:
    return day <= calendar.monthrange(year, month)[1]


def _date(first: int, past: int, month: int, years: tuple[int, ...], day: int | None) -> Date:
    name, short = calendar.month_name[month].lower(), calendar.month_abbr[month].lower()
    terms: set[str] = set()
    spans: list[tuple[int, int]] = []
    for year in years:
        if day is None:
            terms.add(f"{year} {month:02d}")
            start = datetime(year, month, 1, tzinfo=UTC)
            end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
        else:
            terms.add(f"{year} {month:02d} {day:02d}")
            start = datetime(year, month, day, tzinfo=UTC)
            end = datetime.fromtimestamp(start.timestamp() + 86_400, UTC)
        spans.append((int(start.timestamp() * 1000), int(end.timestamp() * 1000)))
    if day is None:
        terms.update({name, short})
    else:
        terms.update({f"{name} {day}", f"{day} {name}", f"{short} {day}", f"{day} {short}"})
    return Date(first, past, frozenset(terms), tuple(spans))


def asked_in(words: list[str], now_ms: int) -> dict[int, frozenset[str]]:
    """The time the search (its chunks, lower case, in order) asks for: the place of its
    question word ("when"; "often", "long" after "how"; "time", "day", … after "what" or
    "which") → the words a sentence answering it holds (module docstring); the years a
    point in time stands for are the clock's, the one before and the one after."""
    if not ASKED:
        return {}
    year = datetime.fromtimestamp(now_ms / 1000, UTC).year
    point = frozenset({*_POINT, *(str(y) for y in (year - 1, year, year + 1))})
    asked: dict[int, frozenset[str]] = {}
    for i, word in enumerate(words):
        before = words[i - 1] if i else ""
        if word == "when":
            asked[i] = point
        elif before == "how" and word in ("often", "frequently"):
            asked[i] = frozenset({word, *_FREQUENCY})
        elif before == "how" and word == "long":
            asked[i] = frozenset({word, *_DURATION})
        elif before in ("what", "which") and word in _POINT_NOUNS:
            asked[i] = frozenset({word} | point)
    return asked
