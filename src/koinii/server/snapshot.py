"""Long reads on a snapshot, off the event loop: a forked child answers them (daemon.md,
bounded work).

The engine keeps the KB in memory and runs one operation at a time on the loop's thread,
so a read that needs more than a slice of the loop would hold every other client for as
long as it runs. `fork()` gives a consistent snapshot at the cost of copying page tables:
the child sees the KB exactly as it was between two operations (copy-on-write), runs the
read to the end of its budget on the other core, and sends the answer back through a
pipe, while the parent goes on serving everyone else — writes included, which the child
never sees: the read is linearized at the fork.

Invariants:
- A fork happens on the loop's thread, between two operations, with no group commit
  open (the caller commits it first), so a snapshot holds only durable writes, and no
  lock is held in it.
- The child touches nothing it shares with the parent — no store connection, socket,
  loop or signal wake-up fd — it computes, writes its answer to the pipe, and leaves with
  `os._exit`. It keeps no file of the parent's open but its pipe: the store's writer
  lock, held on, would keep a daemon killed meanwhile from starting again until the
  read's budget ran out. Its collector is off, so reading does not copy the heap by
  rescanning it.
- At most `CHILDREN` at once (more wait their turn, off the loop); a child that outlives
  its budget by `GRACE_S` is killed, and `close` kills any left at shutdown.
- The child renders the answer as the reply will carry it (`wire.render`; a web page's
  HTML for the view), and the parent splices those bytes into its reply as they are
  (`RawJSON`): a long read's answer — 200,000 rows are 15 MB — is never decoded and
  encoded again on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import signal
from collections.abc import Callable
from typing import Any

from koinii.errors import Refused
from koinii.wire import RawJSON, render

CHILDREN = 2
GRACE_S = 1.0


class Snapshots:
    """The forked readers of one daemon."""

    def __init__(self) -> None:
        self._slots = asyncio.Semaphore(CHILDREN)
        self._children: set[int] = set()

    async def run(
        self, read: Callable[[], Any], budget_s: float, encode: Callable[[Any], bytes] = render
    ) -> bytes:
        """`read()` (or a Refused) in a forked child; its answer as `encode` made it there:
        by default rendered as JSON (a `RawJSON`); a web page's, its HTML."""
        async with self._slots:
            answer = await self._fork(read, budget_s, encode)
        return RawJSON(answer) if encode is render else answer

    async def _fork(
        self, read: Callable[[], Any], budget_s: float, encode: Callable[[Any], bytes]
    ) -> bytes:
        loop = asyncio.get_running_loop()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: compute, answer, leave
            _child(read, encode, r, w)
        os.close(w)
        self._children.add(pid)
        chunks: list[bytes] = []
        done = loop.create_future()

        def readable() -> None:
            try:
                data = os.read(r, 1 << 16)
            except OSError:
                data = b""
            if data:
                chunks.append(data)
            elif not done.done():
                done.set_result(None)

        loop.add_reader(r, readable)
        try:
            async with asyncio.timeout(budget_s + GRACE_S):
                await done
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            raise Refused(
                "budget-exhausted",
                f"the read ran past its {budget_s:g} s budget and was stopped",
                {"budget_s": budget_s},
            ) from None
        finally:
            loop.remove_reader(r)
            os.close(r)
            await _reap(pid)
            self._children.discard(pid)
        payload = b"".join(chunks)
        if payload[:1] == _RESULT:
            return payload[1:]
        try:
            answer = json.loads(payload)
        except ValueError:
            raise RuntimeError("a snapshot reader died without an answer") from None
        if "refused" in answer:
            refusal = answer["refused"]
            raise Refused(refusal["kind"], refusal["message"], refusal["data"])
        if "error" in answer:
            raise RuntimeError(f"a snapshot reader failed: {answer['error']}")
        raise RuntimeError("a snapshot reader answered nothing it should")

    def close(self) -> None:
        for pid in list(self._children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _child(read: Callable[[], Any], encode: Callable[[Any], bytes], r: int, w: int) -> None:
    code = 0
    try:
        signal.set_wakeup_fd(-1)  # the parent's loop's: a signal here must not wake it
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        gc.disable()
        os.closerange(3, w)  # the pipe's read end, the store's lock, the sockets: all but w
        os.closerange(w + 1, os.sysconf("SC_OPEN_MAX"))
        try:
            payload = _RESULT + encode(read())
        except Refused as refusal:
            payload = render({"refused": refusal.to_dict()})
        except BaseException as exc:  # reported by the parent, logged there
            payload = render({"error": f"{type(exc).__name__}: {exc}"})
        view = memoryview(payload)
        while view:
            view = view[os.write(w, view) :]
    except BaseException:
        code = 1
    finally:
        os._exit(code)


_RESULT = b"="  # the first byte of an answer that is a result (else it is a JSON object)


async def _reap(pid: int) -> None:
    """Collect the exited child without blocking the loop."""
    for _ in range(200):
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done:
            return
        await asyncio.sleep(0.005)
    with contextlib.suppress(ProcessLookupError, ChildProcessError):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
