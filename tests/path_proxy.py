"""A tiny reverse proxy that serves a daemon under a path prefix, as nginx's
`location /koinii/ { proxy_pass http://daemon/; }` would: `python -m tests.path_proxy
PORT PREFIX TARGET`. A request outside the prefix gets a 404 that is not Koinii's.
It prints "ready PORT" once it listens (PORT 0: a port the system chooses)."""

from __future__ import annotations

import http.client
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


def serve(port: int, prefix: str, target: str) -> None:
    upstream = urlsplit(target)

    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a real proxy

        def _forward(self) -> None:
            if not self.path.startswith(prefix + "/"):
                body = b"not under the prefix"
                self.send_response(404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            length = int(self.headers.get("Content-Length") or 0)
            payload = self.rfile.read(length) if length else None
            conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=120)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
            conn.request(self.command, self.path[len(prefix) :], payload, headers)
            reply = conn.getresponse()
            body = reply.read()
            conn.close()
            self.send_response(reply.status)
            for name, value in reply.getheaders():
                if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                    self.send_header(name, value)
            self.send_header("X-Proxied-Path", self.path)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _forward

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Forward)
    print("ready", server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2].rstrip("/"), sys.argv[3])
