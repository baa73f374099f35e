"""The knowledge-base engine: contexts, sentexes, belief, rules, reads, feed, storage."""

from koinii.kb.engine import KB, Edited, Retracted, open_kb
from koinii.kb.feed import Event
from koinii.kb.sentex import Sentex

__all__ = ["KB", "Edited", "Event", "Retracted", "Sentex", "open_kb"]
