"""A streamed reply's next chunk, written by a plain call: the feed's one pass (wire.md §3).

An ASGI application sends each chunk of a reply by awaiting `send`, so a write that a
hundred streams are waiting for resumes a hundred tasks — each through the middleware's
wrappers of `send` — for what is one `transport.write` each: 7.5 ms of the daemon's CPU
for such a write on two cores, against 4.8 ms written in one pass. The daemon's
connections (uvicorn's httptools protocol, `with_write_now`) offer each request, as the
ASGI extension `WRITE_NOW`, a call that writes one chunk of its reply at once and says
whether it could. Invariants:
- A chunk is written only while the reply is open and chunked (its start sent, its end
  not), the client is connected, and the transport is not asking its writers to wait
  (its buffer past the high-water mark: a slow reader). Otherwise the call writes
  nothing and answers False, and the chunk goes by `send`, which waits for the drain.
- It is framed exactly as uvicorn frames a chunk given to `send`: a caller may use both,
  one chunk at a time, and the client reads one well-formed chunked body.
- A caller never writes while its own `send` is still waiting, so chunks keep their order
  (`Subscriptions.lines` calls one or the other, never both at once).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

WRITE_NOW = "koinii.write_now"  # the ASGI extension: scope["extensions"][WRITE_NOW]

WriteNow = Callable[[bytes], bool]


def with_write_now(protocol: type) -> type:
    """`protocol` (uvicorn's httptools protocol, or a subclass) offering each request's
    scope a `WriteNow` for its reply — where its request cycle has the fields that say
    what its `send` would do (`_FIELDS`); else none, and every chunk goes by `send`."""

    class Offering(protocol):  # type: ignore[misc, valid-type]
        def on_headers_complete(self) -> None:
            before = self.cycle
            super().on_headers_complete()
            cycle = self.cycle
            if cycle is not before and _fits(cycle):  # a request began (not an upgrade)
                cycle.scope.setdefault("extensions", {})[WRITE_NOW] = _writer(cycle)

    return Offering


# What `write_now` reads of uvicorn's RequestResponseCycle, as its `send` does.
_FIELDS = ("disconnected", "response_started", "response_complete", "chunked_encoding")
_FITTING: dict[type, bool] = {}  # cycle type -> has the fields (asked once per type)


def _fits(cycle: Any) -> bool:
    fits = _FITTING.get(type(cycle))
    if fits is None:
        fits = _FITTING[type(cycle)] = all(hasattr(cycle, name) for name in _FIELDS) and (
            hasattr(getattr(cycle, "flow", None), "write_paused")
            and hasattr(getattr(cycle, "transport", None), "is_closing")
        )
    return fits


def _writer(cycle: Any) -> WriteNow:
    """The `WriteNow` of one request's reply (`cycle`: uvicorn's RequestResponseCycle)."""

    def write_now(chunk: bytes) -> bool:
        if (
            cycle.disconnected
            or not cycle.response_started
            or cycle.response_complete
            or not cycle.chunked_encoding
            or cycle.flow.write_paused
            or cycle.transport.is_closing()  # (writing to a closed one raises)
            or not chunk
        ):
            return False
        cycle.transport.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        return True

    return write_now
