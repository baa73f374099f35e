"""A session operation's shape, written once: the signature of the function that runs it.

Each session write is a function `run(kb, <fields>)` whose parameters ARE the operation's
fields, in order, each annotated `Annotated[<type>, <description>]` (and, where its JSON
type is not the one its Python type says, a `Json(...)` before the description). From
that one signature come:

- the operation's declaration (`operations.operation`): each field's JSON type, whether
  it is required (a parameter without a default) and its description;
- the check every caller meets before the body runs — in one process, over the wire and
  inside a `record_batch` alike: an unknown field is refused by name (`bad-session`), a
  required one left out reaches the body as None, whose own check refuses it by name;
- the method of the client facade (`SessionStore`, store.py): the same parameters with
  the same defaults, sending the fields its caller gave.

So adding a field is one parameter, and no surface can drift from another.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any, Concatenate, ParamSpec, TypeVar

from koinii.kb import KB
from koinii.operations import REGISTRY, Caller, operation
from koinii.sessions import checks

P = ParamSpec("P")
R = TypeVar("R")
Authorize = Callable[[KB, Caller, dict[str, Any]], None]


class Json:
    """A field's JSON type where its Python type does not say it: `Json("any")` (checked by
    the body, so a bad value is refused by name), `Json(("array", ITEM_SCHEMA))`."""

    def __init__(self, kind: Any) -> None:
        self.kind = kind


_JSON_OF = {str: "string", int: "integer", bool: "boolean", dict: "object", list: "array"}
_VERBS: dict[Callable[..., Any], str] = {}  # each run function's verb (for its client method)


def fields_of(run: Callable[..., Any]) -> dict[str, tuple[Any, bool, str]]:
    """The declaration's fields, read from `run`'s signature (module docstring)."""
    hints = typing.get_type_hints(run, include_extras=True)
    fields = {}
    for name, parameter in list(inspect.signature(run).parameters.items())[1:]:
        hint = hints.get(name)
        if typing.get_origin(hint) is not typing.Annotated:
            raise TypeError(f"{run.__name__}({name}): annotate it Annotated[type, description]")
        python, *meta = typing.get_args(hint)
        given = [m.kind for m in meta if isinstance(m, Json)]
        described = [m for m in meta if isinstance(m, str)]
        kind = given[0] if given else _json_type(run, name, python)
        fields[name] = (kind, parameter.default is inspect.Parameter.empty, described[0])
    return fields


def _json_type(run: Callable[..., Any], name: str, python: Any) -> Any:
    options = [t for t in typing.get_args(python) if t is not type(None)]
    if typing.get_origin(python) in (typing.Union, types.UnionType) and len(options) == 1:
        python = options[0]
    origin = typing.get_origin(python) or python
    if origin is list:
        item = (typing.get_args(python) or (Any,))[0]
        item_origin = typing.get_origin(item) or item
        if item_origin is dict:
            return ("array", {"type": "object"})
    if origin in _JSON_OF:
        return _JSON_OF[origin]
    raise TypeError(f"{run.__name__}({name}): say its JSON type with Json(...)")


def session_operation(
    verb: str, summary: str, *, authorize: Authorize, **options: Any
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Declare `run` as the operation `sessions.<verb>`, its fields read from its signature;
    returns `run` itself (a Python caller calls it as written)."""

    def declare(run: Callable[P, R]) -> Callable[P, R]:
        fields = fields_of(run)
        required = [name for name, (_, needed, _) in fields.items() if needed]

        def checked(kb: KB, **given: Any) -> Any:
            checks.known("", given, fields)
            for name in required:  # left out: None, which the body refuses by name
                given.setdefault(name, None)
            return run(kb, **given)  # type: ignore[arg-type]

        checked.__module__, checked.__name__ = run.__module__, run.__name__
        checked.__qualname__, checked.__doc__ = run.__qualname__, run.__doc__

        operation(f"sessions.{verb}", fields, summary, authorize=authorize, **options)(checked)
        _VERBS[run] = verb
        return run

    return declare


def client_method(run: Callable[Concatenate[KB, P], R]) -> Callable[Concatenate[Any, P], R]:
    """The facade's method for the operation `run` runs: `run`'s parameters (the facade in
    place of the KB), sending the fields its caller gave through `self.call`."""
    verb = _VERBS[run]
    signature = inspect.signature(run)
    kb_name = next(iter(signature.parameters))

    def method(self: Any, *args: P.args, **kwargs: P.kwargs) -> R:
        given = signature.bind(None, *args, **kwargs).arguments
        given.pop(kb_name)
        return self.call(verb, **given)  # type: ignore[no-any-return]

    hints = typing.get_type_hints(run)  # (its Python types, without the descriptions)
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] + [
        p.replace(annotation=hints.get(p.name, p.empty))
        for p in list(signature.parameters.values())[1:]
    ]
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=parameters,
        return_annotation=None if hints.get("return") is type(None) else hints.get("return"),
    )
    method.__name__ = method.__qualname__ = verb
    method.__doc__ = run.__doc__ or REGISTRY[f"sessions.{verb}"].summary
    return method


def arguments(values: dict[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """The arguments `names` among a run function's `locals()`, for a check that takes
    them as one object (rows.py checks an iteration, a block, … the same for an import)."""
    return {name: values[name] for name in names}
