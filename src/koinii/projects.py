"""Which project a working directory belongs to: the one rule that turns a directory into
a `project_id` (wraps, coordinators, sessions), so a wrap filed from a worker's directory
and a session imported from a transcript of it name the same project.

The rule (docs/wraps.md, "Projects from directories"):
- `KOINII_PROJECT`, when set, names the project outright (an explicit `project_id` or a
  `--project` option wins over both);
- else, inside a git repository (the nearest folder above holding `.git`, a directory or
  a worktree's file), the repository root's name, then one level per folder from the
  root down to the directory, joined by `:` — the hierarchy separator of wraps:
  `~/src/shop/services/checkout` in the repository `~/src/shop` is `shop:services:checkout`,
  so `permeate(project_id="shop")` with its children sees it;
- else the directory's own name. A directory recorded elsewhere (a transcript's cwd)
  that this machine does not have is known by its name only (`project_of_recorded`).
A `:` inside a folder's name becomes `-`, so levels stay levels. The filesystem root has
no name: no project.
"""

from __future__ import annotations

import os
from pathlib import PurePath, PurePosixPath
from typing import Any

ENVIRONMENT = "KOINII_PROJECT"
SEPARATOR = ":"  # a project's levels (wraps/queue.py: `project:child`)


def project_of(directory: str | os.PathLike[str] | None, *, environ: Any = None) -> str | None:
    """The project of `directory` by the module's rule (None when nothing names one)."""
    env = os.environ if environ is None else environ
    named = (env.get(ENVIRONMENT) or "").strip()
    if named:
        return named
    if directory is None or not str(directory).strip():
        return None
    path = PurePath(os.path.abspath(os.path.expanduser(os.fspath(directory))))
    root = _repository_root(path)
    levels = [root.name, *path.relative_to(root).parts] if root is not None else [path.name]
    levels = [level.replace(SEPARATOR, "-") for level in levels if level]
    return SEPARATOR.join(levels) or None


def project_of_recorded(directory: str | None) -> str | None:
    """The project of a directory recorded elsewhere (a transcript's cwd): the rule, on
    this machine's view of it — the repository rule where the directory is here, else
    its name. `KOINII_PROJECT` is not read: it names the project of this process, not of
    a transcript's."""
    if not directory or not directory.strip():
        return None
    if os.path.isdir(directory):
        return project_of(directory, environ={})
    name = PurePosixPath(directory.replace("\\", "/")).name
    return name.replace(SEPARATOR, "-") or None


def _repository_root(path: PurePath) -> PurePath | None:
    for folder in (path, *path.parents):
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
    return None
