"""The knowledge-base engine: contexts, sentexes, belief, rules, reads, feed, storage."""

from koinii.kb.engine import KB, open_kb
from koinii.kb.feed import Event
from koinii.kb.search import Hit
from koinii.kb.sentex import Sentex
from koinii.kb.writes import Edited, Retracted

__all__ = ["KB", "Edited", "Event", "Hit", "Retracted", "Sentex", "open_kb"]
