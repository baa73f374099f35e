"""The import paths that moved into packages (issue 43) still import for one release, as
the module at its new place, with a warning that names the new path; and nothing in the
repository uses an old path any more (docs/architecture.md, "Moved paths")."""

from __future__ import annotations

import importlib
import pathlib
import re
import subprocess
import sys

import pytest

from koinii._moved import MOVED

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_imports_the_module_at_its_new_place_and_says_where(old):
    """In a fresh interpreter, so the import really goes through the finder."""
    probe = (
        "import importlib, warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        f"    old = importlib.import_module({old!r})\n"
        f"new = importlib.import_module({MOVED[old]!r})\n"
        "assert old is new, (old, new)\n"
        "assert new.__spec__.name == new.__name__, new.__spec__  # still its own\n"
        "print([str(w.message) for w in caught if w.category is DeprecationWarning])\n"
    )
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": ""}
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert f"moved to {MOVED[old]}" in out.stdout


def test_a_module_inside_a_moved_package_is_the_one_at_its_new_place():
    """`koinii.server.web.routes` is `koinii.web.routes`, not a second copy of it loaded
    under the old name (a second copy would hold state of its own)."""
    probe = (
        "import importlib, warnings\n"
        "warnings.simplefilter('ignore')\n"
        "new = importlib.import_module('koinii.web.routes')\n"
        "old = importlib.import_module('koinii.server.web.routes')\n"
        "assert old is new and new.__spec__.name == 'koinii.web.routes', old\n"
    )
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": ""}
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr


def test_every_new_path_exists():
    for new in MOVED.values():
        importlib.import_module(new)


def test_nothing_in_the_repository_uses_an_old_path():
    """Code, tests, docs and examples import from the new places; only this test and the
    table itself name the old ones."""
    names = "|".join(re.escape(old.removeprefix("koinii.")) for old in MOVED)
    pattern = re.compile(
        rf"\bkoinii\.({names})\b(?!\.py)|\bfrom koinii import [^\n]*\b({names})\b(?!\.)"
    )
    files = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "*.py", "*.md"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    skip = {"src/koinii/_moved.py", "tests/test_moved_paths.py"}
    found = [
        f"{name}:{number}"
        for name in files
        if name not in skip and (ROOT / name).exists()
        for number, line in enumerate((ROOT / name).read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert not found, f"use the new paths (koinii/_moved.py): {found}"


@pytest.mark.parametrize(
    ("package", "module"),
    [("koinii.channel", "koinii.channel.agent"), ("koinii.client", "koinii.client.sync")],
)
def test_a_package_that_kept_a_modules_name_offers_what_the_module_offered(package, module):
    """`koinii.channel` re-exports `channel.agent`'s names (lazily, so it lists them
    itself): the two lists stay one."""
    offered = importlib.import_module(module).__all__
    assert sorted(importlib.import_module(package).__all__) == sorted(offered)
    for name in offered:
        assert getattr(importlib.import_module(package), name) is getattr(
            importlib.import_module(module), name
        )
