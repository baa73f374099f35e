"""The web view: a live, read-only window on a team, served by `koinii serve` at `/`
(docs/web.md).

Modules: `routes` (who may look, each page a GET), `reads` (what each page shows, from
the domain's reads), `moves` (a channel's moves as lines, windowed), `live` (ONE reader
of the change log for every open page, fanned out as server-sent events), `login` (the
view's session cookie), `graph` (the context hierarchy laid out), `render` (templates,
assets, security headers). The templates and static files are packaged beside them.
"""

from koinii.web.routes import routes

__all__ = ["routes"]
