"""Documents and chunks: loading files as text and cutting them where their structure allows.

``load_document(path)`` reads text, Markdown, HTML (as Markdown), PDF (page by page) and source
files. ``chunk_document`` cuts a document into ``Chunk``s at headings, paragraphs and code
blocks (a code block or a paragraph is split only when it alone is too long), each up to
``max_chars`` with the last block of the previous chunk repeated as overlap when it is at most
``overlap_chars``. A chunk knows its source, its place (``lines 12-30`` or ``page 3``) and the
headings above it.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from agentica.errors import UsageError

__all__ = [
    "TEXT_SUFFIXES",
    "Chunk",
    "Document",
    "chunk_document",
    "document_from_bytes",
    "load_document",
]

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".rst", ".txt", ".csv", ".tsv", ""})
HTML_SUFFIXES = frozenset({".html", ".htm"})
CODE_SUFFIXES = frozenset({
    ".py", ".js", ".ts", ".tsx", ".jsx", ".java", ".c", ".h", ".cpp", ".hpp", ".cc", ".go",
    ".rs", ".rb", ".php", ".cs", ".kt", ".swift", ".scala", ".sh", ".sql", ".toml", ".yaml",
    ".yml", ".json", ".ini", ".cfg", ".css",
})  # fmt: skip
TEXT_SUFFIXES = MARKDOWN_SUFFIXES | HTML_SUFFIXES | CODE_SUFFIXES | {".pdf"}
MAX_FILE_BYTES = 20_000_000  # a larger file is refused, not read


@dataclass(frozen=True, slots=True)
class Document:
    """A file's text: ``pages`` holds one text per PDF page (else one entry), ``kind`` is
    ``markdown``, ``code`` or ``pdf``."""

    source: str
    kind: str
    pages: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of a document: its text, the headings above it (``Guide > Install``) and where
    it is (``lines 12-30``, ``page 3``); ``position`` counts the document's chunks from 0."""

    source: str
    position: int
    text: str
    location: str
    heading: str = ""

    def for_embedding(self) -> str:
        """What is embedded: the headings, then the text (a section's title is part of what
        it is about)."""
        return f"{self.heading}\n{self.text}" if self.heading else self.text


def load_document(path: str | Path, *, source: str | None = None) -> Document:
    """The text of the file at ``path`` (``source`` names it in results; default: the path).

    Raises ``UsageError`` for a kind of file not handled, one too large, or a PDF when
    ``pypdf`` is missing."""
    path = Path(path)
    _check_kind(path.name)
    if path.stat().st_size > MAX_FILE_BYTES:
        raise UsageError(f"{path} is larger than {MAX_FILE_BYTES // 1_000_000} MB; split it first")
    return document_from_bytes(path.name, path.read_bytes(), source=source or str(path))


def _check_kind(name: str) -> str:
    suffix = Path(name).suffix.lower()
    if suffix not in TEXT_SUFFIXES:
        raise UsageError(f"{name}: {suffix or 'extensionless'} files are not loaded (text, "
                         "Markdown, HTML, PDF, code)")  # fmt: skip
    return suffix


def document_from_bytes(name: str, data: bytes, *, source: str | None = None) -> Document:
    """A document from a file's bytes, its kind told by ``name``'s suffix (an upload)."""
    suffix = _check_kind(name)
    if len(data) > MAX_FILE_BYTES:
        raise UsageError(f"{name} is larger than {MAX_FILE_BYTES // 1_000_000} MB; split it first")
    source = source if source is not None else name
    if suffix == ".pdf":
        return Document(source, "pdf", tuple(_pdf_pages(data)))
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n")
    if suffix in HTML_SUFFIXES:
        text = _html_to_markdown(text)
    kind = "code" if suffix in CODE_SUFFIXES else "markdown"
    return Document(source, kind, (text,))


def _html_to_markdown(html: str) -> str:
    """An HTML page as Markdown (headings kept as ``#`` lines); scripts and styles dropped."""
    from bs4 import BeautifulSoup
    from markdownify import markdownify

    soup = BeautifulSoup(html, "html.parser")
    for hidden in soup(["script", "style", "noscript", "template", "head"]):
        hidden.decompose()
    text = markdownify(str(soup), heading_style="ATX")
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def _pdf_pages(data: bytes) -> list[str]:
    try:
        from pypdf import PdfReader
    except ImportError:
        raise UsageError("PDF files need pypdf: pip install 'agentica[knowledge]'") from None
    try:
        reader = PdfReader(io.BytesIO(data))
        return [(page.extract_text() or "").replace("\r\n", "\n") for page in reader.pages]
    except Exception as exc:  # (encrypted, malformed: pypdf raises many kinds)
        raise UsageError(f"this PDF cannot be read ({type(exc).__name__}: {exc})") from None


@dataclass
class _Block:
    text: str
    first: int  # line numbers, from 1
    last: int
    heading: str = ""
    starts_section: bool = False
    is_heading: bool = False


@dataclass
class _Builder:
    source: str
    max_chars: int
    overlap_chars: int
    where: str  # "lines" or "page N"
    chunks: list[Chunk] = field(default_factory=list)
    blocks: list[_Block] = field(default_factory=list)

    def size(self) -> int:
        return sum(len(b.text) + 2 for b in self.blocks)

    def flush(self, *, keep_overlap: bool) -> None:
        if not self.blocks:
            return
        if any(b.text.strip() for b in self.blocks):
            text = "\n\n".join(b.text for b in self.blocks).strip("\n")
            first, last = self.blocks[0].first, self.blocks[-1].last
            location = (
                (f"line {first}" if first == last else f"lines {first}-{last}")
                if self.where == "lines"
                else self.where
            )
            self.chunks.append(Chunk(self.source, 0, text, location, self.blocks[-1].heading))
        tail = self.blocks[-1]
        keep = keep_overlap and len(self.blocks) > 1 and len(tail.text) <= self.overlap_chars
        self.blocks = [tail] if keep else []

    def add(self, block: _Block) -> None:
        if block.starts_section and not all(b.is_heading for b in self.blocks):
            self.flush(keep_overlap=False)  # (headings right above stay with what follows)
        if self.blocks and self.size() + len(block.text) > self.max_chars:
            self.flush(keep_overlap=True)
            if self.blocks and self.size() + len(block.text) > self.max_chars:
                self.blocks = []
        self.blocks.append(block)


_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _markdown_blocks(text: str, first_line: int = 1) -> list[_Block]:
    """Headings, fenced code blocks and paragraphs, with line numbers and heading paths."""
    blocks: list[_Block] = []
    path: list[tuple[int, str]] = []
    current: list[str] = []
    start = first_line
    fence: str | None = None

    def heading() -> str:
        return " > ".join(title for _, title in path)

    def close(at: int) -> None:
        nonlocal current
        if current and any(line.strip() for line in current):
            blocks.append(_Block("\n".join(current).strip("\n"), start, at - 1, heading()))
        current = []

    for number, line in enumerate(text.split("\n"), start=first_line):
        if fence is not None:
            current.append(line)
            if _FENCE.match(line) and line.strip().startswith(fence):
                fence = None
                close(number + 1)
                start = number + 1
            continue
        if match := _FENCE.match(line):
            close(number)
            start, fence = number, match.group(1)
            current = [line]
            continue
        if match := _HEADING.match(line):
            close(number)
            level = len(match.group(1))
            path = [(lvl, title) for lvl, title in path if lvl < level] + [(level, match.group(2))]
            blocks.append(_Block(line, number, number, heading(), True, is_heading=True))
            start = number + 1
            continue
        if not line.strip():
            close(number)
            start = number + 1
            continue
        if not current:
            start = number
        current.append(line)
    close(first_line + text.count("\n") + 1)
    return blocks


_TOP_LEVEL = re.compile(r"^(?:async\s+def|def|class|function|fn|func|pub\s+fn|export)\b")


def _code_blocks(text: str) -> list[_Block]:
    """Paragraphs of code, a top-level definition starting a new section."""
    blocks = _markdown_blocks_plain(text)
    for block in blocks:
        if _TOP_LEVEL.match(block.text):
            block.starts_section = True
            block.heading = block.text.split("\n", 1)[0].rstrip(":{ ")[:120]
    return blocks


def _markdown_blocks_plain(text: str) -> list[_Block]:
    """Blank-line separated paragraphs (no headings or fences: code)."""
    blocks: list[_Block] = []
    current: list[str] = []
    start = 1
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            if not current:
                start = number
            current.append(line)
        elif current:
            blocks.append(_Block("\n".join(current), start, number - 1))
            current = []
    if current:
        blocks.append(_Block("\n".join(current), start, start + len(current) - 1))
    return blocks


def _split_long(block: _Block, max_chars: int) -> list[_Block]:
    """A block longer than ``max_chars`` as pieces of whole lines, in order (a line longer than
    that is cut into pieces of its own)."""
    if len(block.text) <= max_chars:
        return [block]
    pieces: list[_Block] = []
    lines: list[str] = []
    first = block.first

    def flush(last: int) -> None:
        nonlocal lines
        if lines:
            pieces.append(_Block("\n".join(lines), first, last, block.heading))
            lines = []

    for offset, line in enumerate(block.text.split("\n")):
        number = block.first + offset
        if len(line) > max_chars:
            flush(number - 1)
            while len(line) > max_chars:
                pieces.append(_Block(line[:max_chars], number, number, block.heading))
                line = line[max_chars:]
        elif lines and sum(len(x) + 1 for x in lines) + len(line) > max_chars:
            flush(number - 1)
        if not lines:
            first = number
        lines.append(line)
    flush(block.last)
    if pieces:
        pieces[0].starts_section = block.starts_section
    return pieces


def chunk_document(
    document: Document, *, max_chars: int = 1200, overlap_chars: int = 200
) -> list[Chunk]:
    """The document's chunks, in order (see the module)."""
    if max_chars < 100:
        raise UsageError(f"max_chars must be at least 100, not {max_chars}")
    if not 0 <= overlap_chars < max_chars:
        raise UsageError(f"overlap_chars must be from 0 to below max_chars, not {overlap_chars}")
    chunks: list[Chunk] = []
    for page_number, page in enumerate(document.pages, start=1):
        where = f"page {page_number}" if document.kind == "pdf" else "lines"
        builder = _Builder(document.source, max_chars, overlap_chars, where)
        blocks = _code_blocks(page) if document.kind == "code" else _markdown_blocks(page)
        for block in blocks:
            for piece in _split_long(block, max_chars):
                builder.add(piece)
        builder.flush(keep_overlap=False)
        chunks.extend(builder.chunks)
    return [Chunk(c.source, n, c.text, c.location, c.heading) for n, c in enumerate(chunks)]
