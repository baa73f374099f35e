"""The project of a working directory (koinii/projects.py, docs/wraps.md): the git
repository's name and the folders below it, `:`-separated; KOINII_PROJECT wins; outside
a repository, the directory's name."""

import pytest

from koinii.projects import ENVIRONMENT, project_of, project_of_recorded


@pytest.fixture
def repository(tmp_path):
    root = tmp_path / "shop"
    (root / ".git").mkdir(parents=True)
    (root / "services" / "checkout").mkdir(parents=True)
    return root


def test_a_directory_in_a_repository_is_the_repository_then_each_folder_below(repository):
    assert project_of(repository, environ={}) == "shop"
    assert project_of(repository / "services" / "checkout", environ={}) == (
        "shop:services:checkout"
    )


def test_a_worktree_is_a_repository_too_and_a_colon_in_a_name_stays_one_level(tmp_path):
    worktree = tmp_path / "shop-issue:19"
    (worktree / "src").mkdir(parents=True)
    (worktree / ".git").write_text("gitdir: /elsewhere/.git/worktrees/x\n")
    assert project_of(worktree / "src", environ={}) == "shop-issue-19:src"


def test_outside_a_repository_the_project_is_the_directorys_name(tmp_path):
    plain = tmp_path / "notes"
    plain.mkdir()
    assert project_of(plain, environ={}) == "notes"
    assert project_of(None, environ={}) is None and project_of("  ", environ={}) is None


def test_the_environment_names_the_project_outright(repository):
    assert project_of(repository, environ={ENVIRONMENT: "hive:api"}) == "hive:api"
    assert project_of(repository, environ={ENVIRONMENT: " "}) == "shop"


def test_a_recorded_directory_is_known_by_its_name_when_this_machine_lacks_it(repository):
    assert project_of_recorded("/home/someone/else/checkout") == "checkout"
    assert project_of_recorded(str(repository / "services")) == "shop:services"
    assert project_of_recorded(None) is None and project_of_recorded("") is None
