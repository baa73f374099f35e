"""Wrap notifications and coordinators (wraps.md): the queue, the flows, the registry.

A ling that finishes a session wraps it: its memory entries and a wrap notification
naming its coordinator's session land in the KB's own store in one write. The
coordinator permeates: it reads the unprocessed wraps that belong to it and marks each
processed, so every wrap is consumed once. The same calls run in-process on a `KB` and
over the daemon on a `Client`, where wraps.md §4 is enforced from the caller's token.

Modules: `queue` (WrapQueue), `coordinators` (Coordinators), `flows` (wrap_session,
permeate), `access` (who may change what), `checks` (what is well-formed), `store`
(the record tables).
"""

from koinii.wraps.coordinators import Coordinators
from koinii.wraps.flows import coordinate, permeate, wrap_session
from koinii.wraps.queue import WrapQueue

__all__ = ["Coordinators", "WrapQueue", "coordinate", "permeate", "wrap_session"]
