"""``agentica._beneath.locate``: walking a path from a folder descriptor without leaving it.

Links inside the top are followed as paths inside it; a link leading out raises ``Escape``; a
missing or non-folder part, a link loop, each its own error; no descriptor leaks on any outcome.
(The races against a process swapping links are in tests/test_symlink_races.py.)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentica import _beneath

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="symbolic links and openat")


@pytest.fixture
def top(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """``tmp_path/top`` with ``a/b/file.txt``, ``outside/secret.txt`` beside it, and its open
    descriptor; at the end, no descriptor opened by the test is left open."""
    root = tmp_path / "top"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "file.txt").write_text("inside")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret")
    fd = os.open(root, _beneath.DIR_FLAGS)
    before = open_descriptors()
    try:
        yield root, fd
        assert open_descriptors() == before  # locate closed what it did not return
    finally:
        os.close(fd)


def open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else set()


def read_located(found: _beneath.Located) -> str:
    try:
        fd = os.open(found.name or ".", _beneath.READ_FLAGS, dir_fd=found.fd)
    finally:
        found.close()
    with os.fdopen(fd) as f:
        return f.read()


def test_a_plain_path_ends_at_the_folder_holding_the_last_name(top: tuple[Path, int]) -> None:
    _, fd = top
    found = _beneath.locate(fd, ["a", "b", "file.txt"])
    assert (found.name, found.parts) == ("file.txt", ("a", "b", "file.txt"))
    assert read_located(found) == "inside"
    missing = _beneath.locate(fd, ["a", "new.txt"])  # the last name need not exist
    assert (missing.name, missing.parts) == ("new.txt", ("a", "new.txt"))
    missing.close()
    whole = _beneath.locate(fd, [])
    assert (whole.name, whole.parts) == (None, ())
    whole.close()


def test_links_inside_the_top_are_followed_as_paths_inside_it(top: tuple[Path, int]) -> None:
    root, fd = top
    (root / "rel").symlink_to("a/b")  # relative: from the link's folder
    (root / "a" / "up").symlink_to("../a/b/file.txt")
    (root / "abs").symlink_to(root / "a")  # absolute: counts when it names the top (``tops``)
    found = _beneath.locate(fd, ["rel", "file.txt"])
    assert found.parts == ("a", "b", "file.txt")
    assert read_located(found) == "inside"
    last = _beneath.locate(fd, ["a", "up"])
    assert last.parts == ("a", "b", "file.txt")
    assert read_located(last) == "inside"
    kept = _beneath.locate(fd, ["a", "up"], follow_last=False)  # the caller opens it O_NOFOLLOW
    assert (kept.name, kept.parts) == ("up", ("a", "up"))
    kept.close()
    found = _beneath.locate(fd, ["abs", "b", "file.txt"], tops=(str(root),))
    assert read_located(found) == "inside"


def test_links_leading_out_of_the_top_raise_escape(top: tuple[Path, int]) -> None:
    root, fd = top
    (root / "a" / "out").symlink_to("../../outside")
    (root / "abs").symlink_to(root.parent / "outside")
    (root / "self").symlink_to(root)  # the top by its path, but no ``tops`` given
    for parts, at in (
        (["a", "out", "secret.txt"], ("a", "out")),
        (["abs", "secret.txt"], ("abs",)),
        (["self", "a"], ("self",)),
    ):
        with pytest.raises(_beneath.Escape) as escape:
            _beneath.locate(fd, parts)
        assert escape.value.parts == at
    assert escape.value.target == str(root)
    with pytest.raises(_beneath.Escape):  # a prefix of the top's path is not inside it
        _beneath.locate(fd, ["abs", "secret.txt"], tops=(str(root.parent / "out"),))


def test_missing_folders_are_missing_unless_made(top: tuple[Path, int]) -> None:
    root, fd = top
    with pytest.raises(_beneath.Missing) as missing:
        _beneath.locate(fd, ["a", "x", "y", "f.txt"])
    assert missing.value.parts == ("a", "x")
    made = _beneath.locate(fd, ["a", "x", "y", "f.txt"], make_parents=True)
    assert made.parts == ("a", "x", "y", "f.txt")
    made.close()
    assert (root / "a" / "x" / "y").is_dir()
    assert not (root / "a" / "x" / "y" / "f.txt").exists()  # the last name is the caller's


def test_a_file_on_the_way_and_a_link_loop_are_refused(top: tuple[Path, int]) -> None:
    root, fd = top
    with pytest.raises(_beneath.NotADir) as not_a_dir:
        _beneath.locate(fd, ["a", "b", "file.txt", "more"])
    assert not_a_dir.value.parts == ("a", "b", "file.txt")
    (root / "loop1").symlink_to("loop2")
    (root / "loop2").symlink_to("loop1")
    with pytest.raises(_beneath.TooManyLinks):
        _beneath.locate(fd, ["loop1", "x"])
