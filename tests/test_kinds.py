"""The refusal catalogue: every kind raised in src/ is in it once, and the daemon's status,
the MCP fix and the CLI exit code are read from it (koinii.errors, docs/refusals.md).

The raise sites are read, not run: every `Refused(...)` in src/ is parsed, and its kind is
either a literal or an expression this test can follow to the literals it may take (a
module constant, a conditional, a dict's `.get`, a helper's parameter given literals at
its call sites). A refusal re-raised with another refusal's own kind (`refusal.kind`,
`error["kind"]`) adds nothing: that kind was checked where it was first raised. An
expression the test cannot follow fails it, so a new way of naming kinds is met here first.
"""

from __future__ import annotations

import ast
import pathlib
import sys

import pytest
from click.testing import CliRunner

from koinii import errors
from koinii.errors import KINDS, Refused, exit_code_of, fix_of, status_of

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "koinii"
DOC = ROOT / "docs" / "refusals.md"

# Named in the catalogue, raised as no `Refused`: the transport failure's own name, which
# the MCP server and the CLI answer as a kind (`koinii.errors.Unavailable`).
NOT_RAISED = {"unavailable"}


# --- reading the raise sites ---------------------------------------------------------------


class Unfollowable(Exception):
    """A kind expression this test does not know how to enumerate."""


def _is_refused(call: ast.Call) -> bool:
    func = call.func
    return (isinstance(func, ast.Name) and func.id == "Refused") or (
        isinstance(func, ast.Attribute) and func.attr == "Refused"
    )


def _kind_argument(call: ast.Call) -> ast.expr | None:
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == "kind"), None)


class Module:
    """One parsed module, with what following a kind expression needs: each node's parent,
    and where each name is assigned."""

    def __init__(self, path: pathlib.Path):
        self.path = path
        self.tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        self.parent: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node

    def scope_of(self, node: ast.AST) -> ast.AST:
        while node in self.parent:
            node = self.parent[node]
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                return node
        return self.tree

    def assigned(self, name: str, scope: ast.AST) -> list[ast.expr]:
        """The values `name` is given in `scope` (not in functions nested inside it)."""
        found: list[ast.expr] = []
        body = scope.body if hasattr(scope, "body") else []
        stack = list(body)
        while stack:
            node = stack.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
            ) or (
                isinstance(node, ast.AnnAssign)
                and getattr(node.target, "id", None) == name
                and node.value is not None
            ):
                found.append(node.value)
            stack.extend(ast.iter_child_nodes(node))
        return found

    def call_site_arguments(self, function: ast.FunctionDef, position: int) -> list[ast.expr]:
        """What the calls of `function` in this module pass as its parameter at `position`."""
        parameter = function.args.args[position].arg
        given = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == function.name:
                if len(node.args) > position:
                    given.append(node.args[position])
                given.extend(k.value for k in node.keywords if k.arg == parameter)
        return given

    def kinds(self, expr: ast.expr, at: ast.AST) -> set[str]:
        """The kinds `expr` (at node `at`) can take; a re-raised kind adds none."""
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return {expr.value}
        if isinstance(expr, ast.IfExp):
            return self.kinds(expr.body, at) | self.kinds(expr.orelse, at)
        if isinstance(expr, ast.Attribute) and expr.attr == "kind":
            return set()  # another refusal's own kind, passed on
        if isinstance(expr, ast.Subscript) and getattr(expr.slice, "value", None) == "kind":
            return set()  # a refusal's kind as the wire carried it, passed on
        if (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and expr.func.attr == "get"
            and len(expr.args) == 2
        ):
            return self._dict_values(expr.func.value, at) | self.kinds(expr.args[1], at)
        if isinstance(expr, ast.Name):
            return self._name(expr.id, at)
        raise Unfollowable(f"{self.path}:{expr.lineno}: {ast.unparse(expr)}")

    def _name(self, name: str, at: ast.AST) -> set[str]:
        scope = self.scope_of(at)
        while True:
            if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
                parameters = [a.arg for a in scope.args.args]
                if name in parameters:
                    given = self.call_site_arguments(scope, parameters.index(name))
                    if not given:
                        raise Unfollowable(f"{self.path}: {scope.name}'s {name} is never given")
                    return set().union(*(self.kinds(value, value) for value in given))
            values = self.assigned(name, scope)
            if values:
                return set().union(*(self.kinds(value, value) for value in values))
            if scope is self.tree:
                raise Unfollowable(f"{self.path}: {name} is assigned nowhere it can be followed")
            scope = self.scope_of(scope)

    def _dict_values(self, expr: ast.expr, at: ast.AST) -> set[str]:
        if isinstance(expr, ast.Name):
            values = self.assigned(expr.id, self.tree)
            if len(values) == 1:
                expr = values[0]
        if not isinstance(expr, ast.Dict):
            raise Unfollowable(f"{self.path}:{expr.lineno}: {ast.unparse(expr)} is no dict")
        return set().union(*(self.kinds(value, at) for value in expr.values))


def raised_kinds() -> dict[str, set[str]]:
    """Every kind a `Refused` in src/ can carry -> the modules that raise it."""
    found: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        module = Module(path)
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Call) and _is_refused(node):
                argument = _kind_argument(node)
                assert argument is not None, f"{path}:{node.lineno}: a Refused with no kind"
                for kind in module.kinds(argument, node):
                    found.setdefault(kind, set()).add(str(path.relative_to(SRC)))
    return found


# --- the catalogue against the code ----------------------------------------------------------


def test_every_kind_raised_in_src_is_in_the_catalogue():
    raised = raised_kinds()
    assert len(raised) > 90  # (the scan found the raise sites at all)
    missing = {kind: sorted(where) for kind, where in raised.items() if kind not in KINDS}
    assert not missing, f"kinds raised but not catalogued in koinii.errors.KINDS: {missing}"


def test_the_kinds_built_at_run_time_are_followed_to_their_literals():
    raised = raised_kinds()
    # a dict's .get (channel's not-votable), a helper's parameter (wraps.checks._refuse),
    # a module constant (kb.values.KIND, sessions.checks.KIND), a conditional (mcp)
    for kind in ("koinii/not-votable", "bad-coordinator", "bad-value", "bad-session"):
        assert kind in raised, kind
    assert "server/endpoints.py" in raised["bad-request"]  # (_TYPE_REFUSAL.get(name, default))


def test_every_catalogued_kind_is_raised_somewhere():
    """No orphans: a kind nothing raises any more leaves the catalogue (and the docs)."""
    orphans = set(KINDS) - set(raised_kinds()) - NOT_RAISED
    assert not orphans, f"catalogued but raised nowhere in src/: {sorted(orphans)}"


def test_each_kind_is_catalogued_once_with_a_status_a_fix_and_a_doc():
    names = [kind.name for kind in errors._CATALOGUE]
    assert len(names) == len(set(names)) == len(KINDS)
    for kind in KINDS.values():
        assert kind.status in {400, 401, 403, 404, 405, 408, 413, 500, 503}, kind
        assert kind.doc and kind.fix and kind.exit in {1, 3}, kind
        assert "|" not in kind.doc + kind.fix, kind  # (a cell of docs/refusals.md's table)


def test_authority_refusals_answer_403():
    """Whether the caller may act on what it named — another's context, move, question,
    speech, session or statement — is authority, answered 403 as `koinii/foreign-sentex`
    always was; before the catalogue five of these answered 400."""
    from koinii.server.endpoints import refusal_reply

    authority = [
        "koinii/speaker-mismatch",
        "koinii/creator-mismatch",
        "koinii/foreign-mask",
        "koinii/foreign-mark",
        "koinii/not-the-asker",
        "koinii/not-own-statement",
        "koinii/strength-forbidden",
        "koinii/not-your-session",
        "arbiter-is-party",
        "koinii/foreign-sentex",
        "koinii/foreign-context",
        "koinii/foreign-session",
        "koinii/registry-forbidden",
        "forbidden",
    ]
    for kind in authority:
        assert refusal_reply(Refused(kind, "no")).status_code == 403, kind
    assert refusal_reply(Refused("parse", "no")).status_code == 400


# --- the three surfaces read the catalogue -------------------------------------------------


@pytest.fixture
def recatalogued(monkeypatch):
    """`parse` given another status, fix and exit code in the catalogue alone: whatever
    reads the catalogue answers with them; a table kept by hand would not."""
    changed = errors.Kind("parse", 418, "a test's", "a test's fix", exit=7)
    monkeypatch.setitem(errors.KINDS, "parse", changed)
    return changed


def test_the_daemons_status_is_the_catalogues(recatalogued):
    from koinii.server.endpoints import refusal_reply

    assert status_of("parse") == 418
    assert refusal_reply(Refused("parse", "no")).status_code == 418
    for name, kind in KINDS.items():
        assert status_of(name) == kind.status
    assert status_of("some-kind-of-a-newer-daemon") == 400


def test_the_mcp_fix_is_the_catalogues():
    from koinii import mcp

    fixes = {name: kind.fix for name, kind in KINDS.items()}
    assert fixes == mcp.REFUSAL_FIXES
    _, text, _ = mcp.refusal_text(Refused("koinii/not-the-asker", "no"))
    assert text == f"koinii/not-the-asker: no. Fix: {fix_of('koinii/not-the-asker')}"
    _, text, _ = mcp.refusal_text(errors.Unavailable("connection refused"))
    assert text.endswith(f"Fix: {fix_of('unavailable')}")
    _, text, _ = mcp.refusal_text(Refused("some-kind-of-a-newer-daemon", "no"))
    assert text.endswith(f"Fix: {errors.DEFAULT_FIX}") and fix_of("x-y") == errors.DEFAULT_FIX


def test_the_cli_exit_code_is_the_catalogues(recatalogued):
    from koinii.cli import main

    def refuse(kind: str):
        @main.command(f"refuse-{kind}")
        def command() -> None:
            raise Refused(kind, "no")

        try:
            return CliRunner().invoke(main, [f"refuse-{kind}"])
        finally:
            del main.commands[f"refuse-{kind}"]

    ran = refuse("parse")
    assert ran.exit_code == 7 and "koinii: parse: no" in ran.output
    assert refuse("koinii/foreign-sentex").exit_code == exit_code_of("koinii/foreign-sentex") == 1
    assert exit_code_of("unavailable") == 3


# --- the docs -------------------------------------------------------------------------------


def test_docs_refusals_md_holds_the_catalogue():
    text = DOC.read_text(encoding="utf-8")
    assert errors.catalogue_markdown() in text, (
        "docs/refusals.md's table differs from koinii.errors.KINDS: rewrite it with "
        "`python tests/test_kinds.py`"
    )


if __name__ == "__main__":  # rewrite docs/refusals.md's table from the catalogue
    text = DOC.read_text(encoding="utf-8")
    start = text.find("| kind | status |")
    start = len(text) if start < 0 else start
    end = text.find("\n\n", start)
    end = len(text) if end < 0 else end + 1
    DOC.write_text(text[:start] + errors.catalogue_markdown() + text[end:], encoding="utf-8")
    sys.exit(0)
