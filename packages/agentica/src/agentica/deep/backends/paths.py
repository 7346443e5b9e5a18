"""The rules every built-in backend shares: ``normalize_path``, glob and grep patterns, the
content and limit checks, and the errors for missing files and wrong kinds."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from agentica.tools.files import BackendError, GrepLine

__all__ = [
    "MAX_GREP_LINE_CHARS",
    "MAX_NAME_BYTES",
    "MAX_PATH_CHARS",
    "REFUSED_CATEGORIES",
    "SKIP_DIRS",
    "FileFilter",
    "NotFound",
    "check_content",
    "check_limit",
    "child_path",
    "compile_glob",
    "compile_regex",
    "dir_prefix",
    "glob_depth",
    "grep_many",
    "grep_text",
    "is_a_dir",
    "join_path",
    "missing",
    "no_dir",
    "no_file",
    "normalize_path",
    "not_a_dir",
    "parent_path",
    "sort_key",
    "split_path",
]

MAX_PATH_CHARS = 4096
MAX_NAME_BYTES = 255
MAX_GREP_LINE_CHARS = 2000  # a matching line longer than this is cut (minified files)
SKIP_DIRS = frozenset({".git"})  # never walked by glob and grep of a real directory (noise)
REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})

_SLASH_LOOKALIKES = frozenset("\u2044\u2215\u29f8\u2571\u27cb\u29f5\u29f9\u2216")
_DRIVE = re.compile(r"^[A-Za-z]:")


# ---------------------------------------------------------------------------------- paths


def join_path(prefix: str, path: str) -> str:
    """``path`` (from ``/``) seen under the directory ``prefix``."""
    if not prefix or prefix == "/":
        return path
    return prefix if path == "/" else prefix + path


def child_path(directory: str, name: str) -> str:
    return f"/{name}" if directory == "/" else f"{directory}/{name}"


def sort_key(path: str) -> tuple[str, ...]:
    """Order paths folder by folder (``/a/b`` before ``/a-b``), as a depth-first walk does."""
    return tuple(path.split("/"))


def split_path(path: str) -> tuple[str, ...]:
    """The parts of a normalised path (``()`` for ``/``)."""
    return tuple(part for part in path.split("/") if part)


def dir_prefix(path: str) -> str:
    return "/" if path == "/" else path + "/"


def parent_path(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def _char_name(ch: str) -> str:
    return f"U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed character')}"


def _check_characters(text: str, shown: str) -> None:
    """Refuse control and invisible characters, ``\\``, drive letters and ``~``."""
    for ch in text:
        if unicodedata.category(ch) in REFUSED_CATEGORIES:
            raise BackendError(
                f"path {shown} contains the control or invisible character {_char_name(ch)}; "
                "type the path with visible characters only"
            )
    if "\\" in text:
        raise BackendError(
            f"path {shown} contains '\\'; separate folders with '/', e.g. '/src/main.py'"
        )
    if _DRIVE.match(text):
        raise BackendError(
            f"path {shown} looks like a Windows drive path; paths here start at '/', "
            "e.g. '/notes.md'"
        )
    if text == "~" or text.startswith("~/"):
        raise BackendError(
            f"path {shown} uses '~', which is not expanded here; paths start at '/', "
            "e.g. '/notes.md'"
        )


def _check_lookalikes(text: str, shown: str) -> None:
    """Refuse slash look-alikes and characters that NFKC normalisation changes (the fullwidth
    solidus U+FF0F becomes '/'): two accepted paths never name the same file."""
    if unicodedata.normalize("NFKC", text) != text:
        for ch in text:
            folded = unicodedata.normalize("NFKC", ch)
            if ch in _SLASH_LOOKALIKES or (folded != ch and any(c in "/\\." for c in folded)):
                raise BackendError(
                    f"path {shown} contains {_char_name(ch)}, which looks like "
                    f"'{folded if folded != ch else '/'}' but is not; use the plain ASCII "
                    "character ('/' to separate folders, '.' in names)"
                )
        suggestion = unicodedata.normalize("NFKC", text)
        raise BackendError(
            f"path {shown} has characters that Unicode normalisation (NFKC) changes; "
            f"use {suggestion!r} instead"
        )
    for ch in text:
        if ch in _SLASH_LOOKALIKES:
            raise BackendError(
                f"path {shown} contains {_char_name(ch)}, which looks like '/' but is not; "
                "separate folders with the plain '/'"
            )


def _resolve_parts(text: str, shown: str) -> list[str]:
    """The names of ``text`` with ``.`` and ``..`` resolved, never above the root."""
    parts: list[str] = []
    for part in text.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise BackendError(
                    f"path {shown} goes above the root '/' with '..'; every path starts at '/': "
                    "call ls('/') to see what exists"
                )
            parts.pop()
            continue
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            raise BackendError(
                f"the name {part[:40]!r}... in the path is too long (at most {MAX_NAME_BYTES} "
                "bytes per name)"
            )
        parts.append(part)
    return parts


def normalize_path(path: str) -> str:
    """The canonical form of a virtual path (``/a/b``), or ``BackendError`` saying why not.

    ``a/./b/../c`` -> ``/a/c``; surrounding whitespace, repeated and trailing ``/`` are dropped;
    an empty path is ``/``. ``..`` may not go above ``/``; control or invisible characters,
    ``\\``, drive letters, ``~`` and Unicode look-alikes or characters that change under NFKC
    normalisation (such as the fullwidth solidus U+FF0F) are refused, so two different accepted
    paths never name the same file.
    """
    if not isinstance(path, str):
        raise BackendError(f"a path must be a string like '/notes.md', not {type(path).__name__}")
    text = path.strip()
    if not text:
        return "/"
    if len(text) > MAX_PATH_CHARS:
        raise BackendError(
            f"the path is too long ({len(text)} characters, at most {MAX_PATH_CHARS})"
        )
    shown = repr(text[:200])
    _check_characters(text, shown)
    _check_lookalikes(text, shown)
    return "/" + "/".join(_resolve_parts(text, shown))


# ---------------------------------------------------------------------------------- patterns


def _translate_class(part: str, i: int) -> tuple[str, int]:
    """The regex of the ``[...]`` starting at ``part[i]`` and the index of its ``]`` (the
    ``[`` itself, escaped, if it is not closed)."""
    n = len(part)
    end = part.find("]", i + 2 if i + 1 < n and part[i + 1] in "!^" else i + 1)
    if end < 0:
        return re.escape("["), i
    body = part[i + 1 : end]
    negate = body[:1] in ("!", "^")
    body = body[1:] if negate else body
    body = "".join(c if c == "-" else re.escape(c) for c in body)
    return f"[{'^/' if negate else ''}{body}]", end


def _translate_part(part: str) -> str:
    """A regex for one path part of a glob: ``*``, ``?``, ``[...]``, ``{a,b}``."""
    out: list[str] = []
    i, n = 0, len(part)
    while i < n:
        ch = part[i]
        if ch == "*":
            while i + 1 < n and part[i + 1] == "*":
                i += 1
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            text, i = _translate_class(part, i)
            out.append(text)
        elif ch == "{" and (end := part.find("}", i)) >= 0:
            options = part[i + 1 : end].split(",")
            out.append("(?:" + "|".join(_translate_part(o) for o in options) + ")")
            i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def compile_glob(pattern: str) -> re.Pattern[str]:
    """A regex matching relative paths (``a/b.py``) against a glob: ``*`` and ``?`` stay in one
    folder, ``**`` spans folders (``**/*.py`` also matches ``b.py``)."""
    if not isinstance(pattern, str) or not pattern.strip().strip("/"):
        raise BackendError("the glob pattern is empty; use e.g. '**/*.py' (all .py files)")
    if "\x00" in pattern or "\\" in pattern:
        raise BackendError(
            f"glob pattern {pattern[:100]!r} contains '\\' or NUL; use '/' between folders"
        )
    parts = pattern.strip().strip("/").split("/")
    out: list[str] = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
        else:
            out.append(_translate_part(part) + ("" if last else "/"))
    try:
        return re.compile("".join(out), re.S)
    except re.error as exc:
        raise BackendError(f"invalid glob pattern {pattern[:100]!r}: {exc}") from None


def glob_depth(pattern: str) -> int | None:
    """How many folders deep a glob can match (``None``: any depth, it has ``**``)."""
    if "**" in pattern:
        return None
    return len(pattern.strip().strip("/").split("/"))


class FileFilter:
    """The ``glob`` filter of ``grep``, as ripgrep's ``--glob``: a pattern without ``/`` matches
    a file's name at any depth, one with ``/`` the path relative to the searched directory; a
    leading ``!`` excludes."""

    def __init__(self, glob: str | None) -> None:
        self.text = glob.strip() if glob else ""
        self.negate = self.text.startswith("!")
        body = self.text[1:] if self.negate else self.text
        self.anchored = "/" in body.strip("/")
        self.regex = compile_glob(body) if self.text else None

    def __call__(self, relative: str) -> bool:
        if self.regex is None:
            return True
        subject = relative if self.anchored else relative.rsplit("/", 1)[-1]
        return bool(self.regex.fullmatch(subject)) != self.negate


def compile_regex(pattern: str) -> re.Pattern[str]:
    if not isinstance(pattern, str) or not pattern:
        raise BackendError("the search pattern is empty; give a regular expression like 'def \\w+'")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise BackendError(
            f"invalid regular expression {pattern[:200]!r}: {exc}. Put a backslash before "
            "special characters to match them literally, e.g. 'print\\(' for 'print('"
        ) from None
    except RecursionError:
        raise BackendError("the regular expression is nested too deeply") from None


def grep_text(path: str, text: str, regex: re.Pattern[str], context: int) -> list[GrepLine]:
    """The matching lines of ``text`` (split at ``\\n`` only) with ``context`` lines around."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    matched = [i for i, line in enumerate(lines) if regex.search(line)]
    if not matched:
        return []
    if context <= 0:
        wanted: Sequence[int] = matched
    else:
        keep: set[int] = set()
        for i in matched:
            keep.update(range(max(0, i - context), min(len(lines), i + context + 1)))
        wanted = sorted(keep)
    hits = set(matched)
    return [
        GrepLine(path, i + 1, lines[i].removesuffix("\r")[:MAX_GREP_LINE_CHARS], i in hits)
        for i in wanted
    ]


def grep_many(
    items: Sequence[tuple[str, str]], regex: re.Pattern[str], context: int, limit: int
) -> list[GrepLine]:
    """``grep_text`` over (path, text) pairs in order, skipping texts with NUL (binary)."""
    out: list[GrepLine] = []
    for path, text in items:
        if "\x00" in text:
            continue
        out.extend(grep_text(path, text, regex, context))
        if len(out) >= limit:
            return out[:limit]
    return out


# ---------------------------------------------------------------------------------- checks


def check_content(path: str, content: str, limit: int) -> int:
    """The UTF-8 size of ``content``, checked to be text of at most ``limit`` bytes."""
    if not isinstance(content, str):
        raise BackendError(
            f"the content for {{path}} must be text, not {type(content).__name__}", path=path
        )
    if "\x00" in content:
        raise BackendError(
            "the content for {path} contains NUL characters; only text files can be written",
            path=path,
        )
    try:
        size = len(content.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise BackendError(
            f"the content for {{path}} is not valid Unicode text ({exc.reason} at position "
            f"{exc.start}); remove that character",
            path=path,
        ) from None
    if size > limit:
        raise BackendError(
            f"the content for {{path}} is {size} bytes; the limit is {limit} bytes. Write a "
            "shorter file, or split the content into several files",
            path=path,
        )
    return size


def check_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise BackendError(f"limit must be a positive integer, got {limit!r}")
    return limit


# ---------------------------------------------------------------------------------- errors


class NotFound(BackendError):
    """Nothing is at the path (``stat`` answers ``None`` instead)."""


def no_file(path: str) -> BackendError:
    return NotFound(
        "no file {path}; call ls('{parent}') to see what exists",
        path=path,
        parent=parent_path(path),
    )


def no_dir(path: str) -> BackendError:
    return NotFound(
        "no directory {path}; call ls('{parent}') to see what exists",
        path=path,
        parent=parent_path(path),
    )


def missing(path: str) -> BackendError:
    return NotFound(
        "nothing is at {path}; call ls('{parent}') to see what exists",
        path=path,
        parent=parent_path(path),
    )


def is_a_dir(path: str) -> BackendError:
    return BackendError(
        "{path} is a directory, not a file; call ls('{path}') to see its files", path=path
    )


def not_a_dir(path: str) -> BackendError:
    return NotFound(
        "{path} is a file, not a directory; use read_file('{path}') to read it", path=path
    )
