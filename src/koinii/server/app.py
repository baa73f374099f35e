"""The daemon's HTTP application, assembled: one route per operation of the registry
(`server.verbs` and the domains'), `/health`, `/openapi.json`, the pages a caller mounts
(the web view), and the daemon's housekeeping (wire.md, docs/daemon.md).

Where each concern lives: the daemon's state and scheduling (`daemon`), an operation as an
endpoint (`endpoints`), the engine's verbs (`verbs`), the OpenAPI document (`openapi`),
the limits (`limits`), who may write where (`access`), tokens (`tokens`), transport
guards (`guards`), the feed (`subscriptions`), snapshots for long reads (`snapshot`).

Invariant: a daemon whose store is no longer its own (`writer-lost`) serves nothing from
then on — every operation and `/health` answer 503 with that refusal — and exits
non-zero. It is checked every `WRITER_CHECK_S`, after any refusal that may mean it, and
before any request when the last check is older than `WRITER_LEASE_S` (a daemon that was
frozen checks before it answers anything from memory). The daemon leaves the lease in the
store as it starts (`KB.hold_lease`): a writer that takes the store over while it may
still be answering writes nothing until the lease has run out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from koinii._version import __version__
from koinii.errors import Refused
from koinii.kb import KB, semantic
from koinii.server.daemon import Daemon
from koinii.server.endpoints import endpoint, read_headers, refusal_reply
from koinii.server.guards import Hosts
from koinii.server.limits import WRITER_CHECK_S, WRITER_LEASE_S, Limits
from koinii.server.openapi import openapi_document
from koinii.server.tokens import TokenTable
from koinii.server.verbs import served
from koinii.wire import API

__all__ = ["Daemon", "Limits", "Pages", "build_app", "openapi_document"]

log = logging.getLogger("koinii.server")

# What a caller mounts beside the API: routes made for the daemon (the web view's).
Pages = Callable[[Daemon], Sequence[BaseRoute]]


def build_app(
    kb: KB,
    tokens: TokenTable | None = None,
    limits: Limits | None = None,
    hosts: Hosts | None = None,
    pages: Pages | None = None,
) -> Starlette:
    """The ASGI application over `kb` (opened by the caller, closed at shutdown),
    answering to `hosts` (default: the loopback names), with the routes `pages` makes for
    the daemon beside the API (the web view's, docs/web.md: mounted by whoever starts the
    daemon, so the server never imports what is built on it)."""
    daemon = Daemon(kb, tokens, limits or Limits(), hosts)
    durability = kb.durability
    opened = kb.opened  # from a checkpoint or from the rows, and how long it took
    ranking = semantic.ranking_of(None)  # the searches' default (the model loads when used)

    def guarded(page: Callable[[], Response]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                daemon.guard(read_headers(request))
            except Refused as refusal:
                return refusal_reply(refusal)
            return page()

        return endpoint

    def health_page() -> Response:
        if daemon.loop is not None and daemon.loop.time() - daemon.checked_at > WRITER_LEASE_S:
            daemon.watch_writer()
        if daemon.lost is not None:
            return JSONResponse(
                {"ok": False, "error": daemon.lost.to_dict(), "seq": kb.seq}, status_code=503
            )
        return JSONResponse(
            {
                "ok": True,
                "version": __version__,
                "seq": kb.seq,
                "durability": durability,
                "ranking": ranking,
                "parked": daemon.subs.parked,
                "opened": opened,
            }
        )

    health = guarded(health_page)
    openapi = guarded(lambda: JSONResponse(openapi_document()))

    async def not_found(request: Request, exc: Exception) -> Response:
        return refusal_reply(Refused("not-found", f"no route {request.url.path}", {}))

    async def wrong_method(request: Request, exc: Exception) -> Response:
        """A route that exists, asked with a method it does not take: 405, naming the
        methods it does take (an unknown operation under /v1 is still 404)."""
        path = request.url.path
        if path.startswith(API + "/") and path[len(API) + 1 :] not in endpoints:
            return await not_found(request, exc)
        allowed = (getattr(exc, "headers", None) or {}).get("Allow", "")
        how = (
            f"an operation is POST {path} with a JSON body"
            if path.startswith(API + "/")
            else f"this route takes {allowed}"
        )
        refusal = Refused(
            "method-not-allowed",
            f"{request.method} {path}: {how} (GET /api lists every operation)",
            {"method": request.method, "allowed": [m for m in allowed.split(", ") if m]},
        )
        response = refusal_reply(refusal)
        response.headers["Allow"] = allowed
        return response

    async def housekeeping() -> None:
        while True:
            await asyncio.sleep(max(0.05, min(10.0, daemon.limits.idle_s / 10)))
            for token in daemon.subs.reap():
                log.info("reaped idle subscription %s", token)
            if daemon.limits.log_retention is not None:
                daemon.flush()
                kb.compact_log(daemon.limits.log_retention)
            try:  # when due, and no group open: a forked child writes it, the loop goes on
                kb.keep_checkpoint()
            except Exception:  # the rows are the truth: a restart rebuilds from them
                log.exception("could not write the checkpoint")

    async def watch_writer() -> None:
        while daemon.lost is None:
            await asyncio.sleep(WRITER_CHECK_S)
            daemon.watch_writer()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        daemon.loop = asyncio.get_running_loop()
        tasks = [
            asyncio.create_task(housekeeping()),
            asyncio.create_task(watch_writer()),
            asyncio.create_task(daemon.searches.index.keep()),  # in slices (searching.py)
        ]
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            daemon.flush()
            daemon.subs.close()
            daemon.snapshots.close()
            daemon.searches.close()
            kb.close()

    # Every operation is one entry in a dict, found in one lookup: a router matching the
    # path against each route's pattern in turn cost more than the engine's write.
    endpoints = {op.route: endpoint(daemon, op) for op in served()}

    async def operation(request: Request) -> Response:
        endpoint = endpoints.get(request.path_params["name"])
        if endpoint is None:
            return refusal_reply(Refused("not-found", f"no route {request.url.path}", {}))
        return await endpoint(request)

    routes = [  # the operations first: every write matches there, at the first try
        Route(API + "/{name:path}", operation, methods=["POST"]),
        Route("/health", health, methods=["GET"]),
        Route("/openapi.json", openapi),
        *(pages(daemon) if pages is not None else ()),
    ]
    app = Starlette(
        routes=routes, lifespan=lifespan, exception_handlers={404: not_found, 405: wrong_method}
    )
    app.state.daemon = daemon
    return app
