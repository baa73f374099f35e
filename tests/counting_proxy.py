"""A reverse proxy on a thread that forwards every request to a daemon and records its
path: how a test counts the HTTP exchanges a client makes for one call, on real HTTP
between the client and a real daemon (nothing of either is replaced).

    with CountingProxy(daemon.url) as proxy:
        client = koinii.connect(proxy.url, token=...)
        proxy.paths.clear(); client.invoke(...); assert proxy.paths == ["/v1/..."]
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

UPSTREAM_TIMEOUT_S = 60  # above any long poll a test makes through it


class CountingProxy:
    def __init__(self, target: str) -> None:
        upstream = urlsplit(target)
        self.paths: list[str] = []
        paths, lock = self.paths, threading.Lock()

        class Forward(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the clients use it

            def _forward(self) -> None:
                with lock:
                    paths.append(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                payload = self.rfile.read(length) if length else None
                conn = http.client.HTTPConnection(
                    upstream.hostname, upstream.port, timeout=UPSTREAM_TIMEOUT_S
                )
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                    headers["Host"] = upstream.netloc
                    conn.request(self.command, self.path, body=payload, headers=headers)
                    reply = conn.getresponse()
                    body = reply.read()
                finally:
                    conn.close()
                self.send_response(reply.status)
                for name, value in reply.getheaders():
                    if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _forward

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> CountingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    def operations(self) -> list[str]:
        """The operations asked for since the last `paths.clear()` (`/v1/` stripped)."""
        return [p.removeprefix("/v1/") for p in self.paths]
