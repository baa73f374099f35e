"""The daemon's connections offer a reply's next chunk as a plain call (server/chunks.py):
over real HTTP, through uvicorn with the daemon's own protocol, against a small ASGI
app that mixes chunks it writes by the call with chunks it sends."""

from __future__ import annotations

import http.client
import socket
import threading
import time

import uvicorn

from koinii.server.chunks import WRITE_NOW, with_write_now
from koinii.server.guards import guarded_protocol


def test_a_chunk_written_at_once_reaches_the_client_in_order_between_sent_ones():
    said: dict[str, object] = {}

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        write_now = scope["extensions"][WRITE_NOW]
        said["before the start"] = write_now(b"zero\n")
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"one\n", "more_body": True})
        said["while open"] = write_now(b"two\n")
        await send({"type": "http.response.body", "body": b"three\n", "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        said["after the end"] = write_now(b"four\n")

    listening = socket.socket()  # bound here, on a port the system chooses, as the daemon's
    listening.bind(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    config = uvicorn.Config(
        app,
        http=with_write_now(guarded_protocol(64, 10.0)),
        lifespan="off",
        log_level="warning",
    )
    server = uvicorn.Server(config)
    serving = threading.Thread(target=server.run, args=([listening],), daemon=True)
    serving.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/")
        reply = conn.getresponse()
        assert reply.getheader("transfer-encoding") == "chunked"
        assert reply.read() == b"one\ntwo\nthree\n"  # one well-formed chunked body
        conn.close()
    finally:
        server.should_exit = True
        serving.join(10)
        listening.close()
    assert said == {"before the start": False, "while open": True, "after the end": False}
