"""The daemon's OpenAPI 3.1 document, made from the operation registry: every route, its
body's fields and their types, its summary, the refusals it may answer. Served at
`/openapi.json` and browsed at the web view's `/api`; generated, so it cannot drift."""

from __future__ import annotations

from typing import Any

from koinii._version import __version__
from koinii.server.verbs import served
from koinii.wire import API


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 description of every route, generated from the registry."""
    error = {
        "type": "object",
        "required": ["ok", "error"],
        "properties": {
            "ok": {"const": False},
            "error": {
                "type": "object",
                "required": ["kind", "message", "data"],
                "properties": {
                    "kind": {"type": "string"},
                    "message": {"type": "string"},
                    "data": {"type": "object"},
                },
            },
        },
    }
    ok = {
        "type": "object",
        "required": ["ok", "result"],
        "properties": {"ok": {"const": True}, "result": {}},
    }

    def schema_of(kind: Any) -> dict[str, Any]:
        if isinstance(kind, tuple):
            return {"type": "array", "items": kind[1]}
        if kind == "term":
            return {"type": "string"}
        if kind == "any":
            return {}
        if kind == "handle":
            return {"type": "integer", "minimum": 1}
        if kind == "goal":
            return {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
        return {"type": kind}

    def responses() -> dict[str, Any]:
        out = {"200": {"description": "done", "content": {"application/json": {"schema": ok}}}}
        for status, what in (
            ("400", "refused by a rule"),
            ("401", "missing, wrong or malformed token"),
            ("403", "outside the caller's scope, a foreign Origin, or a Host not served"),
            ("405", "a method other than POST"),
            ("408", "the body did not arrive in time"),
            ("413", "body too large"),
            ("500", "internal error"),
        ):
            out[status] = {"description": what, "content": {"application/json": {"schema": error}}}
        return out

    paths: dict[str, Any] = {
        "/health": {
            "get": {
                "summary": "liveness, version and seq (no token needed)",
                "security": [],
                "responses": {
                    "200": {
                        "description": "alive",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                },
            }
        }
    }
    for op in served():
        path, fields, summary = f"{API}/{op.route}", op.fields, op.summary
        properties = {
            name: {**schema_of(kind), "description": text}
            for name, (kind, _, text) in fields.items()
        }
        required = [name for name, (_, req, _) in fields.items() if req]
        body_schema: dict[str, Any] = {
            "type": "object",
            "properties": properties,
            "additionalProperties": False,
        }
        if required:
            body_schema["required"] = required
        answers = responses()
        if op.schedule == "stream":  # the one reply that stays open: a poll's reply per line
            answers["200"] = {
                "description": "a poll's reply per line, as the events come",
                "content": {"application/x-ndjson": {"schema": {"type": "object"}}},
            }
        paths[path] = {
            "post": {
                "operationId": op.name,
                "summary": summary,
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": body_schema}},
                },
                "responses": answers,
            }
        }
    return {
        "openapi": "3.1.0",
        "info": {"title": "Koinii daemon", "version": __version__},
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
        "paths": paths,
    }
