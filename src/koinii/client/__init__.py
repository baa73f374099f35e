"""The clients of the daemon: what a process that does not own the store talks through.

- `protocol` — the protocol without I/O: where a client connects, how an operation becomes
  a request and a reply a result or a refusal (shared by both clients);
- `sync` — `Client`, the `KB` surface over HTTP, blocking (`connect`);
- `aio` — `AsyncClient`, the same surface awaited, over httpx (`aconnect`);
- `asubscribe` — wire subscriptions as async iterators (`koinii.channel.follow`'s asyncio driver);
- `aio_agent` — the channel's `Agent` for asyncio, over an `AsyncClient`;
- `adjudicator` — the service that watches a channel's disputes and settles each by a
  policy.

The package re-exports `Client` and `connect` (lazily), as the module `koinii.client` did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from koinii._lazy import reexport

if TYPE_CHECKING:
    from koinii.client.sync import Client, connect

__all__ = ["Client", "connect"]

__getattr__, __dir__ = reexport(
    "koinii.client", dict.fromkeys(__all__, "koinii.client.sync"), globals()
)
